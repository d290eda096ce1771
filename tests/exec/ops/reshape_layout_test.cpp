// Reshape's copies written channels-last (exec/ops/reshape_layout.h): the values are ATen's
// reshape of the same tensor (PyTorch's definition of a row-major reshape); the layout is what
// the copy promises, and views stay views.
#include "exec/ops/reshape_layout.h"

#include <gtest/gtest.h>

#include "exec/executor.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

// ShuffleNet's channel shuffle on a channels-last activation, up to the final Reshape: the
// [N, groups, C/groups, H, W] view with its two group dims swapped.
at::Tensor shuffledView(const at::Tensor& x, int64_t groups) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.reshape({n, groups, c / groups, h, w}).transpose(1, 2);
}

at::Tensor channelsLastRandom(std::vector<int64_t> sizes, at::ScalarType type = at::kFloat) {
  at::Tensor x = at::randn(sizes).to(type);
  return x.contiguous(at::MemoryFormat::ChannelsLast);
}

void expectChannelsLastReshape(const at::Tensor& view, at::IntArrayRef target) {
  const at::Tensor y = ops::reshapeKeepingLayout(view, target);
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast)) << y.strides();
  EXPECT_TRUE(at::equal(y, view.reshape(target)));
}

TEST(ReshapeLayoutTest, AShuffleOfTwoGroupsIsWrittenChannelsLast) {
  // 48 channels: the interleaving path (halves of 24, a multiple of 4), at batch 1 and 3.
  for (int64_t n : {1, 3}) {
    const at::Tensor x = channelsLastRandom({n, 48, 7, 5});
    expectChannelsLastReshape(shuffledView(x, 2), {n, 48, 7, 5});
  }
}

TEST(ReshapeLayoutTest, OtherGroupCountsAndOddHalvesTakeTheGeneralGather) {
  expectChannelsLastReshape(shuffledView(channelsLastRandom({2, 12, 4, 4}), 2), {2, 12, 4, 4});
  expectChannelsLastReshape(shuffledView(channelsLastRandom({1, 24, 3, 6}), 3), {1, 24, 3, 6});
  expectChannelsLastReshape(shuffledView(channelsLastRandom({2, 32, 5, 3}), 8), {2, 32, 5, 3});
  // A view that is not of the whole tensor: its storage offset counts.
  const at::Tensor big = channelsLastRandom({2, 16, 5, 5});
  expectChannelsLastReshape(shuffledView(big.slice(2, 1, 4), 4), {2, 16, 3, 5});
}

TEST(ReshapeLayoutTest, EveryElementSizeIsMovedAsIs) {
  for (at::ScalarType type : {at::kByte, at::kHalf, at::kInt, at::kLong, at::kDouble}) {
    const at::Tensor x = channelsLastRandom({1, 16, 3, 3}, type);
    expectChannelsLastReshape(shuffledView(x, 2), {1, 16, 3, 3});
  }
}

TEST(ReshapeLayoutTest, ViewsAndOtherCopiesAreLeftToATen) {
  // A reshape strides allow is a view of the same storage.
  const at::Tensor x = at::randn({2, 6, 4, 4});
  const at::Tensor view = ops::reshapeKeepingLayout(x, {2, 2, 3, 16});
  EXPECT_EQ(view.data_ptr(), x.data_ptr());
  // A copy to another rank, a target whose height merges two of the input's dims, and a copy
  // whose last dim is already the fastest are ATen's contiguous copies.
  const at::Tensor shuffled = shuffledView(channelsLastRandom({1, 8, 4, 4}), 2);
  for (const std::vector<int64_t>& target :
       std::vector<std::vector<int64_t>>{{1, 8, 16}, {1, 4, 8, 4}}) {
    const at::Tensor y = ops::reshapeKeepingLayout(shuffled, target);
    EXPECT_TRUE(y.is_contiguous()) << target.size();
    EXPECT_TRUE(at::equal(y, shuffled.reshape(target)));
  }
  const at::Tensor last_fastest = at::randn({2, 3, 4, 5}).transpose(1, 2);
  const at::Tensor u = ops::reshapeKeepingLayout(last_fastest, {2, 12, 5, 1});
  EXPECT_TRUE(u.is_contiguous());
  EXPECT_TRUE(at::equal(u, last_fastest.reshape({2, 12, 5, 1})));
}

TEST(ReshapeLayoutTest, TheReshapeNodeWritesAShuffleChannelsLast) {
  // The whole shuffle as ONNX writes it, run by the executor's Reshape lowering.
  const at::Tensor x = channelsLastRandom({1, 48, 6, 6});
  const at::Tensor view = shuffledView(x, 2);
  const at::Tensor y = testing::run1({"Reshape", 13, {view, testing::i64({1, 48, 6, 6})}});
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::equal(y, x.reshape({1, 2, 24, 6, 6}).transpose(1, 2).reshape({1, 48, 6, 6})));
}

}  // namespace
}  // namespace qforge
