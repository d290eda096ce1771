// Dense tensors read in memory order: channels-last views without copies, anything else copied.
#include "core/memory_order.h"

#include <gtest/gtest.h>

namespace qforge {
namespace {

// An NCHW-shaped tensor stored NHWC, built by hand: element (n, c, h, w) holds the number of its
// position in NHWC memory.
at::Tensor channelsLastCounting(int64_t n, int64_t c, int64_t h, int64_t w) {
  const at::Tensor nhwc = at::arange(n * h * w * c, at::kFloat).view({n, h, w, c});
  return nhwc.permute({0, 3, 1, 2});
}

TEST(MemoryOrder, ChannelsLastIsReadAsNhwcWithoutACopy) {
  const at::Tensor x = channelsLastCounting(2, 3, 4, 5);
  ASSERT_TRUE(x.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(memoryOrder(x), (std::vector<int64_t>{0, 2, 3, 1}));
  const at::Tensor flat = inMemoryOrder(x);
  EXPECT_TRUE(flat.is_contiguous());
  EXPECT_EQ(flat.data_ptr(), x.data_ptr());  // a view
  EXPECT_EQ(flat.sizes(), (std::vector<int64_t>{2, 4, 5, 3}));
  EXPECT_TRUE(at::equal(flat.reshape({-1}), at::arange(120, at::kFloat)));
}

TEST(MemoryOrder, AnElementwiseResultGoesBackToTheOriginalShapeAndLayout) {
  const at::Tensor x = channelsLastCounting(1, 2, 3, 3);
  const at::Tensor y = inMemoryOrder(x) * 2 + 1;  // contiguous, NHWC-shaped
  const at::Tensor back = fromMemoryOrder(y, x);
  EXPECT_EQ(back.sizes(), x.sizes());
  EXPECT_TRUE(back.is_contiguous(at::MemoryFormat::ChannelsLast));
  // Element (n, c, h, w) of the result is 2 x + 1 at the same logical position.
  EXPECT_TRUE(at::equal(back.contiguous(), x.contiguous() * 2 + 1));
}

TEST(MemoryOrder, ContiguousTensorsPassThrough) {
  const at::Tensor x = at::arange(24, at::kFloat).view({2, 3, 4});
  EXPECT_TRUE(inMemoryOrder(x).is_same(x));
  EXPECT_TRUE(at::equal(fromMemoryOrder(x * 3, x), x * 3));
}

TEST(MemoryOrder, SizeOneDimsKeepTheirPlace) {
  // [1, C, 1, 1] channels-last has the same memory as NCHW: no dims move past each other.
  const at::Tensor x =
      at::arange(6, at::kFloat).view({1, 6, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(at::equal(inMemoryOrder(x).reshape({-1}), at::arange(6, at::kFloat)));
}

TEST(MemoryOrder, NonDenseTensorsAreCopied) {
  // Every other column: not dense in any order, so the view would skip memory. A copy in the
  // logical order is returned, and the way back is a plain reshape.
  const at::Tensor base = at::arange(24, at::kFloat).view({4, 6});
  const at::Tensor x = base.slice(1, 0, 6, 2);
  const at::Tensor flat = inMemoryOrder(x);
  EXPECT_TRUE(flat.is_contiguous());
  EXPECT_NE(flat.data_ptr(), x.data_ptr());
  EXPECT_TRUE(at::equal(flat, x));
  EXPECT_TRUE(at::equal(fromMemoryOrder(flat - 1, x), x - 1));
}

TEST(MemoryOrder, DenseInOwnLayoutCopiesAChannelsLastSliceChannelsLast) {
  const at::Tensor x = channelsLastCounting(2, 6, 3, 4).slice(1, 2, 5);
  ASSERT_FALSE(x.is_non_overlapping_and_dense());
  const at::Tensor dense = denseInOwnLayout(x);
  EXPECT_TRUE(dense.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::equal(dense, x));
  // Dense tensors, in any layout, are returned as they are.
  const at::Tensor whole = channelsLastCounting(1, 3, 2, 2);
  EXPECT_TRUE(denseInOwnLayout(whole).is_same(whole));
  // A slice of an NCHW tensor along its last dim has no channels-last suggestion: contiguous.
  const at::Tensor columns = at::arange(48, at::kFloat).view({1, 3, 4, 4}).slice(3, 0, 2);
  EXPECT_TRUE(denseInOwnLayout(columns).is_contiguous());
  EXPECT_TRUE(at::equal(denseInOwnLayout(columns), columns));
}

}  // namespace
}  // namespace qforge
