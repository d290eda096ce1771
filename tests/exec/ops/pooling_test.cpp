// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool against hand-computed results.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/op_info.h"
#include "support/op_test_helpers.h"
#include "support/single_op.h"

namespace qforge {
namespace {

using namespace testing;

// 1..16 as a 4x4 image.
at::Tensor image4x4() {
  return f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
}

// --- MaxPool ------------------------------------------------------------------------------------

TEST(MaxPoolTest, CeilModeKeepsPartialWindows) {
  // Kernel 3, stride 2 over 4: floor mode fits one window, ceil mode two (the second one hangs
  // over the edge but starts inside the input).
  std::vector<Attribute> attrs = {ints("kernel_shape", {3, 3}), ints("strides", {2, 2})};
  expectValuesNear(run1({"MaxPool", 12, {image4x4()}, attrs}), {1, 1, 1, 1}, {11});
  attrs.push_back(Attribute::makeInt("ceil_mode", 1));
  expectValuesNear(run1({"MaxPool", 12, {image4x4()}, attrs}), {1, 1, 2, 2}, {11, 12, 15, 16});
}

TEST(MaxPoolTest, PadsAreMinusInfinity) {
  // Negative inputs: a zero pad would win every window, -inf never does.
  const at::Tensor x = f32({-3, -1, -2}, {1, 1, 3});
  expectValuesNear(run1({"MaxPool", 12, {x}, {ints("kernel_shape", {2}), ints("pads", {1, 1})}}),
                   {1, 1, 4}, {-3, -1, -1, -2});
}

TEST(MaxPoolTest, AsymmetricPadsAndSameLower) {
  const at::Tensor x = f32({4, 1, 3, 2}, {1, 1, 4});
  // Pads (1, 0): windows [-inf 4], [1 3].
  expectValuesNear(run1({"MaxPool",
                         12,
                         {x},
                         {ints("kernel_shape", {2}), ints("strides", {2}), ints("pads", {1, 0})}}),
                   {1, 1, 2}, {4, 3});
  // SAME_LOWER, kernel 2, stride 1: one pad at the start: [-inf 4], [4 1], [1 3], [3 2].
  expectValuesNear(
      run1({"MaxPool",
            12,
            {x},
            {ints("kernel_shape", {2}), Attribute::makeString("auto_pad", "SAME_LOWER")}}),
      {1, 1, 4}, {4, 4, 3, 3});
  // SAME_UPPER: the pad goes to the end: [4 1], [1 3], [3 2], [2 -inf].
  expectValuesNear(
      run1({"MaxPool",
            12,
            {x},
            {ints("kernel_shape", {2}), Attribute::makeString("auto_pad", "SAME_UPPER")}}),
      {1, 1, 4}, {4, 3, 3, 2});
}

TEST(MaxPoolTest, Dilations) {
  // Kernel 2 with dilation 2 compares x[i] and x[i + 2].
  const at::Tensor x = f32({1, 5, 2, 0, 3}, {1, 1, 5});
  expectValuesNear(run1({"MaxPool", 12, {x}, {ints("kernel_shape", {2}), ints("dilations", {2})}}),
                   {1, 1, 3}, {2, 5, 3});
}

// A channels-last activation (what a convolution leaves) takes oneDNN's kernel: its result is
// channels-last, and its values are PyTorch's max_pool2d of the same values stored NCHW, with
// pads as -infinity (constant_pad_nd) where ATen cannot pad by itself.
at::Tensor channelsLastActivation(int64_t n, int64_t c, int64_t h, int64_t w) {
  return at::randn({n, c, h, w}).contiguous(at::MemoryFormat::ChannelsLast);
}

TEST(MaxPoolTest, ChannelsLastStemMatchesPyTorch) {
  // ShuffleNet's and ResNet's stem pooling: kernel 3, stride 2, pads 1.
  for (int64_t n : {1, 3}) {
    const at::Tensor x = channelsLastActivation(n, 24, 17, 16);
    const at::Tensor y =
        run1({"MaxPool",
              12,
              {x},
              {ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}});
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(at::equal(y, at::max_pool2d(x.contiguous(), {3, 3}, {2, 2}, {1, 1})));
  }
}

TEST(MaxPoolTest, ChannelsLastCeilModeAndAsymmetricPadsMatchPyTorch) {
  const at::Tensor x = channelsLastActivation(2, 16, 5, 7);
  const at::Tensor nchw = x.contiguous();
  // Ceil mode keeps a window hanging over the end, and drops one that would start in the end
  // pad (height 5, kernel 2, stride 2, pads 1: three rows, not four).
  for (int64_t ceil : {0, 1}) {
    const at::Tensor y =
        run1({"MaxPool",
              12,
              {x},
              {ints("kernel_shape", {2, 3}), ints("strides", {2, 2}), ints("pads", {1, 0, 1, 0}),
               Attribute::makeInt("ceil_mode", ceil)}});
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(at::equal(y, at::max_pool2d(nchw, {2, 3}, {2, 2}, {1, 0}, {1, 1}, ceil != 0)))
        << "ceil_mode " << ceil;
  }
  // Pads (top 1, left 0, bottom 0, right 2): ATen pads both sides alike, so the reference pads
  // explicitly with -infinity and pools without.
  const at::Tensor y =
      run1({"MaxPool", 12, {x}, {ints("kernel_shape", {3, 3}), ints("pads", {1, 0, 0, 2})}});
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const at::Tensor padded = at::constant_pad_nd(nchw, {0, 2, 1, 0}, minus_inf);
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::equal(y, at::max_pool2d(padded, {3, 3}, {1, 1})));
}

TEST(MaxPoolTest, ChannelsLastDilationsAndWidePadsMatchPyTorch) {
  const at::Tensor x = channelsLastActivation(1, 8, 6, 6);
  // Dilations go to ATen's kernel, pads of half the kernel to oneDNN's: both give PyTorch's
  // values.
  const at::Tensor dilated =
      run1({"MaxPool", 12, {x}, {ints("kernel_shape", {2, 2}), ints("dilations", {2, 2})}});
  EXPECT_TRUE(at::equal(dilated, at::max_pool2d(x.contiguous(), {2, 2}, {1, 1}, {0, 0}, {2, 2})));
  const at::Tensor wide_pads =
      run1({"MaxPool", 12, {x}, {ints("kernel_shape", {4, 4}), ints("pads", {2, 2, 2, 2})}});
  EXPECT_TRUE(at::equal(wide_pads, at::max_pool2d(x.contiguous(), {4, 4}, {1, 1}, {2, 2})));
}

TEST(MaxPoolTest, IndicesAreFlatInWholeTensorInBothStorageOrders) {
  // Two channels of 2x3; 2x2 windows at columns 0 and 1.
  const at::Tensor x = f32({1, 6, 3, 4, 5, 2,  //
                            9, 0, 0, 0, 0, 8},
                           {1, 2, 2, 3});
  std::vector<Attribute> attrs = {ints("kernel_shape", {2, 2})};
  auto row_major = runSingleOp({"MaxPool", 12, {x}, attrs, 2});
  expectValuesNear(row_major[0], {1, 2, 1, 2}, {6, 6, 9, 8});
  // Channel 0: 6 at (0, 1) twice. Channel 1 (offset 6): 9 at (0, 0), 8 at (1, 2).
  ASSERT_EQ(row_major[1].scalar_type(), at::kLong);
  expectValuesNear(row_major[1], {1, 2, 1, 2}, {1, 1, 6 + 0, 6 + 5});
  attrs.push_back(Attribute::makeInt("storage_order", 1));
  // Column major inside each plane: h + 2 * w.
  auto column_major = runSingleOp({"MaxPool", 12, {x}, attrs, 2});
  expectValuesNear(column_major[1], {1, 2, 1, 2}, {2, 2, 6 + 0, 6 + 1 + 2 * 2});
}

TEST(MaxPoolTest, IndicesPointIntoTheUnpaddedInput) {
  // Explicit asymmetric padding must not shift the indices: [-inf 3] -> 0, [1 2] -> 2.
  const at::Tensor x = f32({3, 1, 2}, {1, 1, 3});
  auto out = runSingleOp({"MaxPool",
                          12,
                          {x},
                          {ints("kernel_shape", {2}), ints("strides", {2}), ints("pads", {1, 0})},
                          2});
  expectValuesNear(out[0], {1, 1, 2}, {3, 2});
  expectValuesNear(out[1], {1, 1, 2}, {0, 2});
}

TEST(MaxPoolTest, Uint8KeepsItsType) {
  at::Tensor x = at::tensor(std::vector<uint8_t>{200, 7, 255, 1}, at::kByte).reshape({1, 1, 2, 2});
  at::Tensor y = run1({"MaxPool", 12, {x}, {ints("kernel_shape", {1, 2})}});
  EXPECT_EQ(y.scalar_type(), at::kByte);
  expectValuesNear(y, {1, 1, 2, 1}, {200, 255});
}

TEST(MaxPoolTest, ThreeDimensional) {
  at::Tensor x = f32({1, 8, 3, 4, 5, 6, 7, 2}, {1, 1, 2, 2, 2});
  expectValuesNear(run1({"MaxPool", 12, {x}, {ints("kernel_shape", {2, 2, 1})}}), {1, 1, 1, 1, 2},
                   {7, 8});
}

TEST(MaxPoolTest, OpInfoMovesDataOnly) {
  for (const char* name : {"MaxPool", "GlobalMaxPool"}) {
    const OpInfo* info = OpRegistry::builtin().find("", name, 13);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_TRUE(info->moves_data_only) << name;
  }
  EXPECT_FALSE(OpRegistry::builtin().find("", "AveragePool", 13)->moves_data_only);
}

TEST(MaxPoolTest, BadAttributesNameNode) {
  expectNodeError({"MaxPool", 12, {image4x4()}}, "'kernel_shape' is missing");
  expectNodeError({"MaxPool",
                   12,
                   {image4x4()},
                   {ints("kernel_shape", {2, 2}), Attribute::makeString("auto_pad", "same")}},
                  "auto_pad 'same'");
  expectNodeError({"MaxPool",
                   12,
                   {image4x4()},
                   {ints("kernel_shape", {2, 2}), Attribute::makeInt("storage_order", 2)}},
                  "storage_order");
  expectNodeError({"MaxPool", 12, {image4x4()}, {ints("kernel_shape", {2})}}, "spatial dims");
  expectNodeError({"MaxPool", 12, {f32({1, 2, 3, 4}, {2, 2})}, {ints("kernel_shape", {2})}},
                  "rank 2");
}

// --- AveragePool --------------------------------------------------------------------------------

TEST(AveragePoolTest, CountIncludePadWithAsymmetricPads1d) {
  // Kernel 3, stride 2, pads (2, 1) over [1 2 3 4]: windows {p p 1}, {1 2 3}, {3 4 p}.
  const at::Tensor x = f32({1, 2, 3, 4}, {1, 1, 4});
  std::vector<Attribute> attrs = {ints("kernel_shape", {3}), ints("strides", {2}),
                                  ints("pads", {2, 1})};
  expectValuesNear(run1({"AveragePool", 11, {x}, attrs}), {1, 1, 3}, {1.0, 2.0, 3.5});
  attrs.push_back(Attribute::makeInt("count_include_pad", 1));
  expectValuesNear(run1({"AveragePool", 11, {x}, attrs}), {1, 1, 3}, {1.0 / 3, 2.0, 7.0 / 3});
}

TEST(AveragePoolTest, CountIncludePadWithAsymmetricPads2d) {
  // Pads top 1, left 0, bottom 0, right 1 around [[1 2] [3 4]], 2x2 windows, stride 1.
  const at::Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  std::vector<Attribute> attrs = {ints("kernel_shape", {2, 2}), ints("pads", {1, 0, 0, 1})};
  // Windows hold {1 2}, {2}, {1 2 3 4}, {2 4} of the input.
  expectValuesNear(run1({"AveragePool", 11, {x}, attrs}), {1, 1, 2, 2}, {1.5, 2, 2.5, 3});
  attrs.push_back(Attribute::makeInt("count_include_pad", 1));
  expectValuesNear(run1({"AveragePool", 11, {x}, attrs}), {1, 1, 2, 2},
                   {3.0 / 4, 2.0 / 4, 10.0 / 4, 6.0 / 4});
}

TEST(AveragePoolTest, CeilModeOverhangIsNeverCounted) {
  // Kernel 3, stride 2, pads (1, 0), ceil over [1 2 3 4 5]: {p 1 2}, {2 3 4}, {4 5 overhang}.
  const at::Tensor x = f32({1, 2, 3, 4, 5}, {1, 1, 5});
  std::vector<Attribute> attrs = {ints("kernel_shape", {3}), ints("strides", {2}),
                                  ints("pads", {1, 0}), Attribute::makeInt("ceil_mode", 1)};
  expectValuesNear(run1({"AveragePool", 11, {x}, attrs}), {1, 1, 3}, {1.5, 3, 4.5});
  attrs.push_back(Attribute::makeInt("count_include_pad", 1));
  expectValuesNear(run1({"AveragePool", 11, {x}, attrs}), {1, 1, 3}, {1, 3, 4.5});
}

TEST(AveragePoolTest, SymmetricPadsCeilMode2d) {
  // 2x2 windows, stride 2, pad 1 on each side of 1..16, ceil mode: 3x3 outputs.
  std::vector<Attribute> attrs = {ints("kernel_shape", {2, 2}), ints("strides", {2, 2}),
                                  ints("pads", {1, 1, 1, 1}), Attribute::makeInt("ceil_mode", 1)};
  expectValuesNear(run1({"AveragePool", 11, {image4x4()}, attrs}), {1, 1, 3, 3},
                   {1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16});
}

TEST(AveragePoolTest, DefaultsWithoutPads) {
  expectValuesNear(run1({"AveragePool",
                         7,
                         {image4x4()},
                         {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})}}),
                   {1, 1, 2, 2}, {3.5, 5.5, 11.5, 13.5});
}

TEST(AveragePoolTest, BadAttributesNameNode) {
  expectNodeError(
      {"AveragePool", 11, {image4x4()}, {ints("kernel_shape", {2, 2}), ints("pads", {1, 1})}},
      "pads must have 2 x 2 entries");
  expectNodeError({"AveragePool",
                   11,
                   {image4x4()},
                   {ints("kernel_shape", {2, 2}), Attribute::makeString("auto_pad", "BOTH")}},
                  "auto_pad 'BOTH'");
}

// --- Global pools -------------------------------------------------------------------------------

TEST(GlobalPoolTest, AverageAndMaxPerChannel) {
  const at::Tensor x = f32({1, 2, 3, 6, -1, -5, -2, -4}, {1, 2, 2, 2});
  expectValuesNear(run1({"GlobalAveragePool", 1, {x}}), {1, 2, 1, 1}, {3, -3});
  expectValuesNear(run1({"GlobalMaxPool", 1, {x}}), {1, 2, 1, 1}, {6, -1});
  const at::Tensor x1d = f32({1, 2, 6, 0, 0, 3}, {2, 1, 3});
  expectValuesNear(run1({"GlobalAveragePool", 1, {x1d}}), {2, 1, 1}, {3, 1});
}

// ONNX Runtime's blocked pooling kernel (MLAS's NCHWc average pool, restated): each channel's
// pixels added one by one in row order from 0, the sum divided by the pixel count.
at::Tensor ortBlockedMean(const at::Tensor& x_nchw) {
  const at::Tensor x = x_nchw.contiguous();
  const int64_t rows = x.size(0) * x.size(1), pixels = x.size(2) * x.size(3);
  at::Tensor y = at::empty({x.size(0), x.size(1), 1, 1});
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = x.data_ptr<float>() + r * pixels;
    float sum = 0.0f;
    for (int64_t p = 0; p < pixels; ++p)
      sum += v[p];
    y.data_ptr<float>()[r] = sum / static_cast<float>(pixels);
  }
  return y;
}

// A convolution's channels-last output (MobileNet's last 7x7 map; odd channel counts for the
// vector tails) is averaged in ONNX Runtime's order, bit for bit, and within float rounding of
// the exact mean.
TEST(GlobalPoolTest, ChannelsLastAverageAddsAsOnnxRuntime) {
  for (auto [n, c, h, w] : {std::array<int64_t, 4>{1, 192, 7, 7}, {3, 13, 5, 9}, {2, 1001, 2, 1}}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
                 std::to_string(w));
    at::manual_seed(c);
    const at::Tensor x = channelsLastActivation(n, c, h, w) * 4 + 1;
    const at::Tensor y = run1({"GlobalAveragePool", 1, {x}});
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{n, c, 1, 1}));
    EXPECT_TRUE(at::equal(y.contiguous(), ortBlockedMean(x)));
    const at::Tensor exact = x.to(at::kDouble).mean({2, 3}, /*keepdim=*/true);
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), exact, 1e-6, 1e-6));
  }
}

// With gradients on, the pool stays ATen's and passes its gradient back: 1 / pixels each.
TEST(GlobalPoolTest, ChannelsLastAverageKeepsItsGradient) {
  const at::Tensor x = channelsLastActivation(1, 8, 3, 4).requires_grad_(true);
  const Graph graph = buildSingleOpGraph({"GlobalAveragePool", 1, {x}});
  Executor training(graph, ExecutorOptions{/*enable_grad=*/true});
  const at::Tensor y = training.run({{"in0", x}}).at("out0");
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), at::full({1, 8, 3, 4}, 1.0f / 12)));
}

TEST(GlobalPoolTest, RankTooSmallNamesNode) {
  expectNodeError({"GlobalAveragePool", 1, {f32({1, 2, 3, 4}, {2, 2})}}, "rank >= 3");
  expectNodeError({"GlobalMaxPool", 1, {f32({1, 2, 3, 4}, {2, 2})}}, "rank >= 3");
}

}  // namespace
}  // namespace qforge
