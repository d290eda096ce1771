// Conv, ConvTranspose, Gemm, MatMul and Einsum against hand-computed results on tiny inputs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// --- Conv ---------------------------------------------------------------------------------------

TEST(ConvTest, ValidWindowSumsWithBias) {
  // Each output is the sum of a 2x2 window of 1..9, plus the bias.
  SingleOp op(
      "Conv", 13,
      {f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}), at::ones({1, 1, 2, 2}), f32({1}, {1})});
  expectValuesNear(run1(op), {1, 1, 2, 2}, {13, 17, 25, 29});
}

TEST(ConvTest, SameUpperAndSameLowerWithStride2) {
  // Width 4, kernel 3, stride 2: 2 outputs need 1 pad, at the end (UPPER) or start (LOWER).
  // Height 2, kernel 1, stride 2: 1 output, no pad. Distinct weights make the offset visible.
  const at::Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4});
  const at::Tensor w = f32({1, 10, 100}, {1, 1, 1, 3});
  SingleOp upper =
      SingleOp("Conv", 11, {x, w},
               {Attribute::makeString("auto_pad", "SAME_UPPER"), ints("strides", {2, 2})});
  // [1 2 3 | 4 0]: 1 + 20 + 300, 3 + 40 + 0.
  expectValuesNear(run1(upper), {1, 1, 1, 2}, {321, 43});
  SingleOp lower = upper;
  lower.attributes[0] = Attribute::makeString("auto_pad", "SAME_LOWER");
  // [0 1 2 | 3 4]: 0 + 10 + 200, 2 + 30 + 400.
  expectValuesNear(run1(lower), {1, 1, 1, 2}, {210, 432});
}

TEST(ConvTest, ValidAutoPadIgnoresPads) {
  SingleOp op("Conv", 11, {f32({1, 2, 3, 4}, {1, 1, 4}), f32({1, 1}, {1, 1, 2})},
              {Attribute::makeString("auto_pad", "VALID"), ints("pads", {1, 1})});
  expectValuesNear(run1(op), {1, 1, 3}, {3, 5, 7});
}

TEST(ConvTest, DilationWithAsymmetricPads1d) {
  // Taps x[i] and x[i+2]; pads 1 at the start and 2 at the end.
  SingleOp op("Conv", 11, {f32({1, 2, 3, 4, 5}, {1, 1, 5}), f32({1, 10}, {1, 1, 2})},
              {ints("dilations", {2}), ints("pads", {1, 2})});
  // Padded [0 1 2 3 4 5 0 0].
  expectValuesNear(run1(op), {1, 1, 6}, {20, 31, 42, 53, 4, 5});
}

TEST(ConvTest, StridedSymmetricPads2d) {
  // 3x3 ones kernel over 1..9 padded by 1, stride 2: the four corner neighbourhoods.
  SingleOp op("Conv", 11, {f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}), at::ones({1, 1, 3, 3})},
              {ints("pads", {1, 1, 1, 1}), ints("strides", {2, 2}), ints("kernel_shape", {3, 3})});
  expectValuesNear(run1(op), {1, 1, 2, 2},
                   {1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9});
}

TEST(ConvTest, ThreeDimensional) {
  SingleOp op(
      "Conv", 11,
      {f32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 2, 2}), at::ones({1, 1, 2, 2, 2}), f32({0.5}, {1})});
  expectValuesNear(run1(op), {1, 1, 1, 1, 1}, {36.5});
}

TEST(ConvTest, GroupedConvolution) {
  // Group 0 sees channels 0-1 with weights (1, 10); group 1 sees channels 2-3 with (100, 1000).
  SingleOp op("Conv", 11, {f32({1, 2, 3, 4}, {1, 4, 1, 1}), f32({1, 10, 100, 1000}, {2, 2, 1, 1})},
              {Attribute::makeInt("group", 2)});
  expectValuesNear(run1(op), {1, 2, 1, 1}, {1 + 20, 300 + 4000});
}

TEST(ConvTest, DepthwiseConvolution) {
  SingleOp op("Conv", 11, {f32({1, 2, 3, 4, 5, 6}, {1, 2, 1, 3}), f32({1, 1, 1, -1}, {2, 1, 1, 2})},
              {Attribute::makeInt("group", 2)});
  expectValuesNear(run1(op), {1, 2, 1, 2}, {3, 5, -1, -1});
}

// Direct summation in double: out[n, o, y, x] = b[o] + sum over the group's input channels and
// the kernel of in[n, i, y * s - pad_top + ky, x * s - pad_left + kx] * w[o, i', ky, kx].
at::Tensor directConv2d(const at::Tensor& in, const at::Tensor& w, const at::Tensor& b,
                        int64_t stride, std::vector<int64_t> pads /* top, left, bottom, right */,
                        int64_t group) {
  const at::Tensor x = in.to(at::kDouble).contiguous();
  const at::Tensor k = w.to(at::kDouble).contiguous();
  const int64_t n = x.size(0), h = x.size(2), wd = x.size(3);
  const int64_t m = k.size(0), cg = k.size(1), kh = k.size(2), kw = k.size(3);
  const int64_t oh = (h + pads[0] + pads[2] - kh) / stride + 1;
  const int64_t ow = (wd + pads[1] + pads[3] - kw) / stride + 1;
  at::Tensor out = at::zeros({n, m, oh, ow}, at::kDouble);
  auto X = x.accessor<double, 4>();
  auto K = k.accessor<double, 4>();
  auto Y = out.accessor<double, 4>();
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double sum = b.defined() ? b[o].item<double>() : 0.0;
          for (int64_t i = 0; i < cg; ++i)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t r = y * stride - pads[0] + ky, c = xx * stride - pads[1] + kx;
                if (r < 0 || r >= h || c < 0 || c >= wd) continue;
                sum += X[b0][(o / (m / group)) * cg + i][r][c] * K[o][i][ky][kx];
              }
          Y[b0][o][y][xx] = sum;
        }
  return out.to(at::kFloat);
}

// Inference convolutions run in oneDNN's channels-last layout: the shapes ATen's own heuristics
// would send elsewhere (a 1x1 at batch 1, depthwise, asymmetric pads) give the direct sums, in
// the logical NCHW shape, with channels-last strides for the ops after them.
TEST(ConvTest, InferenceConvolutionsAreChannelsLastAndEqualDirectSums) {
  struct Case {
    const char* what;
    std::vector<int64_t> x_shape, w_shape;
    int64_t stride, group;
    std::vector<int64_t> pads;
  };
  const std::vector<Case> cases = {
      {"1x1 at batch 1", {1, 16, 5, 5}, {24, 16, 1, 1}, 1, 1, {0, 0, 0, 0}},
      {"depthwise 3x3 stride 2", {2, 8, 9, 9}, {8, 1, 3, 3}, 2, 8, {1, 1, 1, 1}},
      {"grouped 3x3", {2, 6, 6, 6}, {4, 3, 3, 3}, 1, 2, {1, 1, 1, 1}},
      {"asymmetric pads", {1, 3, 7, 6}, {5, 3, 3, 2}, 1, 1, {0, 1, 2, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    at::manual_seed(7);
    const at::Tensor x = at::randn(c.x_shape), w = at::randn(c.w_shape),
                     b = at::randn({c.w_shape[0]});
    SingleOp op("Conv", 13, {x, w, b},
                {ints("strides", {c.stride, c.stride}), ints("pads", c.pads),
                 Attribute::makeInt("group", c.group)});
    const at::Tensor y = run1(op);
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
    expectTensorNear(y, directConv2d(x, w, b, c.stride, c.pads, c.group), 1e-4, 1e-4);
  }
}

// With gradients on, the convolution stays on ATen's autograd path (NCHW) and the weight's
// gradient is the closed form: d(sum y)/dw[o, i, ky, kx] = sum of the input window it touches.
TEST(ConvTest, TrainingConvolutionKeepsNchwAndItsGradient) {
  const at::Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  SingleOp op("Conv", 13, {x, at::ones({1, 1, 2, 2})});
  op.initializer_slots = {1};
  Graph g = buildSingleOpGraph(op);
  g.findValue("in1")->setInitializer(at::ones({1, 1, 2, 2}).requires_grad_());
  Executor ex(g, ExecutorOptions{true});
  const at::Tensor y = ex.run({{"in0", x}}).at("out0");
  EXPECT_TRUE(y.is_contiguous());
  y.sum().backward();
  // Windows: top-left 1+2+4+5 ... the weight tap (0,0) touches 1,2,4,5; (0,1) 2,3,5,6; ...
  expectValuesNear(g.findValue("in1")->initializer().grad(), {1, 1, 2, 2}, {12, 16, 24, 28});
}

// The executor keeps a 3x3 weight initializer in channels-last layout between runs; an update in
// place (a new version) or a new initializer must be seen on the next run, as without the copy.
TEST(ConvTest, AWeightChangedBetweenRunsIsSeen) {
  at::manual_seed(9);
  const at::Tensor x = at::randn({1, 4, 6, 6});
  at::Tensor w = at::randn({3, 4, 3, 3});
  SingleOp op("Conv", 13, {x, w}, {ints("pads", {1, 1, 1, 1})});
  op.initializer_slots = {1};
  Graph g = buildSingleOpGraph(op);
  g.findValue("in1")->setInitializer(w);
  Executor ex(g);
  const std::vector<int64_t> pads = {1, 1, 1, 1};
  expectTensorNear(ex.run({{"in0", x}}).at("out0"), directConv2d(x, w, {}, 1, pads, 1), 1e-4, 1e-4);
  w.mul_(-2.0f);
  expectTensorNear(ex.run({{"in0", x}}).at("out0"), directConv2d(x, w, {}, 1, pads, 1), 1e-4, 1e-4);
  const at::Tensor other = at::randn({3, 4, 3, 3});
  g.findValue("in1")->setInitializer(other);
  expectTensorNear(ex.run({{"in0", x}}).at("out0"), directConv2d(x, other, {}, 1, pads, 1), 1e-4,
                   1e-4);
}

TEST(ConvTest, OpInfoFacts) {
  const OpInfo* info = OpRegistry::builtin().find("", "Conv", 13);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->weight_inputs, std::vector<int>{1});
  EXPECT_EQ(info->bias_input, 2);
  EXPECT_EQ(info->weight_layout, WeightLayout::OutputFirst);
  EXPECT_TRUE(info->absorbs_batchnorm);
  EXPECT_FALSE(info->moves_data_only);
}

TEST(ConvTest, WeightRankMismatchNamesNode) {
  expectNodeError({"Conv", 13, {at::ones({1, 1, 4, 4}), at::ones({1, 1, 2})}}, "rank");
}

TEST(ConvTest, ChannelsNotDivisibleByGroupNamesNode) {
  expectNodeError({"Conv",
                   13,
                   {at::ones({1, 3, 4, 4}), at::ones({2, 1, 1, 1})},
                   {Attribute::makeInt("group", 2)}},
                  "not divisible by group");
}

TEST(ConvTest, BadAutoPadNamesNode) {
  expectNodeError({"Conv",
                   13,
                   {at::ones({1, 1, 4, 4}), at::ones({1, 1, 2, 2})},
                   {Attribute::makeString("auto_pad", "SAME")}},
                  "auto_pad 'SAME'");
}

TEST(ConvTest, WeightChannelMismatchAndBadBiasNameNode) {
  expectNodeError({"Conv", 13, {at::ones({1, 3, 4, 4}), at::ones({1, 2, 2, 2})}},
                  "input channels per group");
  expectNodeError({"Conv", 13, {at::ones({1, 1, 4, 4}), at::ones({2, 1, 2, 2}), at::ones({3})}},
                  "bias B must be 1-D of size 2");
  expectNodeError({"Conv",
                   13,
                   {at::ones({1, 1, 4, 4}), at::ones({1, 1, 2, 2})},
                   {ints("kernel_shape", {3, 3})}},
                  "kernel_shape");
}

// --- ConvTranspose ------------------------------------------------------------------------------

// x = [1, 2], w = [1, 10, 100], stride 2: the full result is
// [1, 10, 100, 0, 0] + [0, 0, 2, 20, 200] = [1, 10, 102, 20, 200].
SingleOp transpose1d(std::vector<Attribute> extra) {
  std::vector<Attribute> attrs = {ints("strides", {2})};
  for (auto& a : extra)
    attrs.push_back(a);
  return SingleOp("ConvTranspose", 11, {f32({1, 2}, {1, 1, 2}), f32({1, 10, 100}, {1, 1, 3})},
                  attrs);
}

TEST(ConvTransposeTest, FullResultWithoutPads) {
  expectValuesNear(run1(transpose1d({})), {1, 1, 5}, {1, 10, 102, 20, 200});
}

TEST(ConvTransposeTest, OutputShapePutsOddPadAtStartUnlessSameUpper) {
  // output_shape 4 needs 1 pad: NOTSET crops it from the start, SAME_UPPER from the end.
  expectValuesNear(run1(transpose1d({ints("output_shape", {4})})), {1, 1, 4}, {10, 102, 20, 200});
  expectValuesNear(run1(transpose1d({ints("output_shape", {4}),
                                     Attribute::makeString("auto_pad", "SAME_UPPER")})),
                   {1, 1, 4}, {1, 10, 102, 20});
}

TEST(ConvTransposeTest, SameLowerWithoutOutputShapeGivesInputTimesStride) {
  // Output 2 * 2 = 4 from the full 5: the odd pad goes to the start.
  expectValuesNear(run1(transpose1d({Attribute::makeString("auto_pad", "SAME_LOWER")})), {1, 1, 4},
                   {10, 102, 20, 200});
}

TEST(ConvTransposeTest, OutputPaddingAppendsBiasOnlyPositions) {
  SingleOp op = transpose1d({ints("output_padding", {1})});
  op.inputs.push_back(f32({0.5}, {1}));
  expectValuesNear(run1(op), {1, 1, 6}, {1.5, 10.5, 102.5, 20.5, 200.5, 0.5});
}

TEST(ConvTransposeTest, AsymmetricPadsCrop) {
  expectValuesNear(run1(transpose1d({ints("pads", {2, 0})})), {1, 1, 3}, {102, 20, 200});
  expectValuesNear(run1(transpose1d({ints("pads", {0, 2})})), {1, 1, 3}, {1, 10, 102});
}

TEST(ConvTransposeTest, OutputShape2d) {
  // Stride 2 with a 2x2 ones kernel copies each input into a 2x2 block of the 4x4 result;
  // output_shape 3x3 crops the first row and column.
  SingleOp op =
      SingleOp("ConvTranspose", 11, {f32({1, 2, 3, 4}, {1, 1, 2, 2}), at::ones({1, 1, 2, 2})},
               {ints("strides", {2, 2}), ints("output_shape", {3, 3})});
  expectValuesNear(run1(op), {1, 1, 3, 3}, {1, 2, 2, 3, 4, 4, 3, 4, 4});
}

TEST(ConvTransposeTest, Dilations) {
  // Kernel taps at 0 and 2: [1, 0, 10] + [0, 2, 0, 20] = [1, 2, 10, 20].
  SingleOp op("ConvTranspose", 11, {f32({1, 2}, {1, 1, 2}), f32({1, 10}, {1, 1, 2})},
              {ints("dilations", {2})});
  expectValuesNear(run1(op), {1, 1, 4}, {1, 2, 10, 20});
}

TEST(ConvTransposeTest, GroupsKeepChannelsApart) {
  const at::Tensor x = f32({1, 2}, {1, 2, 1});
  const at::Tensor w = f32({3, 5}, {2, 1, 1});  // (C_in, C_out / group, k)
  expectValuesNear(run1({"ConvTranspose", 11, {x, w}, {Attribute::makeInt("group", 2)}}), {1, 2, 1},
                   {3, 10});
  expectValuesNear(run1({"ConvTranspose", 11, {x, w}}), {1, 1, 1}, {13});
}

TEST(ConvTransposeTest, OpInfoHasGroupedOutputChannelsOnAxis1) {
  const OpInfo* info = OpRegistry::builtin().find("", "ConvTranspose", 17);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->weight_inputs, std::vector<int>{1});
  EXPECT_EQ(info->bias_input, 2);
  EXPECT_EQ(info->weight_layout, WeightLayout::GroupedOutputSecond);
  EXPECT_TRUE(info->absorbs_batchnorm);
}

TEST(ConvTransposeTest, BadInputsNameNode) {
  expectNodeError({"ConvTranspose", 11, {at::ones({1, 2, 3}), at::ones({3, 1, 2})}},
                  "input channels");
  expectNodeError({"ConvTranspose", 11, {at::ones({1, 1, 3}), at::ones({1, 1, 2, 2})}}, "rank");
  expectNodeError({"ConvTranspose",
                   11,
                   {at::ones({1, 1, 3}), at::ones({1, 1, 2})},
                   {Attribute::makeString("auto_pad", "FULL")}},
                  "auto_pad 'FULL'");
}

// --- Gemm ---------------------------------------------------------------------------------------

// A = [[1 2 3] [4 5 6]], B = [[1 0] [0 1] [1 1]]: A B = [[4 5] [10 11]].
at::Tensor matA() {
  return f32({1, 2, 3, 4, 5, 6}, {2, 3});
}
at::Tensor matB() {
  return f32({1, 0, 0, 1, 1, 1}, {3, 2});
}

TEST(GemmTest, PlainProductWithoutC) {
  expectValuesNear(run1({"Gemm", 13, {matA(), matB()}}), {2, 2}, {4, 5, 10, 11});
}

TEST(GemmTest, TransposedOperands) {
  expectValuesNear(
      run1({"Gemm", 13, {matA().t().contiguous(), matB()}, {Attribute::makeInt("transA", 1)}}),
      {2, 2}, {4, 5, 10, 11});
  expectValuesNear(
      run1({"Gemm", 13, {matA(), matB().t().contiguous()}, {Attribute::makeInt("transB", 1)}}),
      {2, 2}, {4, 5, 10, 11});
  expectValuesNear(run1({"Gemm",
                         13,
                         {matA().t().contiguous(), matB().t().contiguous()},
                         {Attribute::makeInt("transA", 1), Attribute::makeInt("transB", 1)}}),
                   {2, 2}, {4, 5, 10, 11});
}

TEST(GemmTest, AlphaBetaWithRowBias) {
  // 2 * [[4 5] [10 11]] + 0.5 * [1 2] broadcast over rows.
  SingleOp op("Gemm", 13, {matA(), matB().t().contiguous(), f32({1, 2}, {2})},
              {Attribute::makeFloat("alpha", 2.0), Attribute::makeFloat("beta", 0.5),
               Attribute::makeInt("transB", 1)});
  expectValuesNear(run1(op), {2, 2}, {8.5, 11, 20.5, 23});
}

TEST(GemmTest, PerColumnBiasVectorOrRow) {
  // [[4 5] [10 11]] + [10 20] on every row, C given as (N) and as (1, N): oneDNN adds it as its
  // bias (exec/ops/dnnl_matmul.h); a weight passed twice is packed the second time.
  for (const at::Tensor& c : {f32({10, 20}, {2}), f32({10, 20}, {1, 2})}) {
    SingleOp op("Gemm", 13, {matA(), matB(), c});
    expectValuesNear(run1(op), {2, 2}, {14, 25, 20, 31});
    expectValuesNear(run1(op), {2, 2}, {14, 25, 20, 31});
  }
}

TEST(GemmTest, ColumnMatrixAndScalarC) {
  expectValuesNear(run1({"Gemm", 13, {matA(), matB(), f32({10, 20}, {2, 1})}}), {2, 2},
                   {14, 15, 30, 31});
  expectValuesNear(run1({"Gemm", 11, {matA(), matB(), at::scalar_tensor(1.0, at::kFloat)}}), {2, 2},
                   {5, 6, 11, 12});
}

TEST(GemmTest, AlphaWithoutC) {
  expectValuesNear(run1({"Gemm", 13, {matA(), matB()}, {Attribute::makeFloat("alpha", 3.0)}}),
                   {2, 2}, {12, 15, 30, 33});
}

TEST(GemmTest, OlderOpsetWithRequiredC) {
  expectValuesNear(run1({"Gemm",
                         6,
                         {matA(), matB(), f32({1, 1, 1, 1}, {2, 2})},
                         {Attribute::makeInt("broadcast", 0)}}),
                   {2, 2}, {5, 6, 11, 12});
}

TEST(GemmTest, IntegerOperandsTakeWholeAlphaAndBeta) {
  const at::Tensor a = matA().to(at::kLong), b = matB().to(at::kLong);
  at::Tensor y = run1({"Gemm",
                       13,
                       {a, b, at::ones({2}, at::kLong)},
                       {Attribute::makeFloat("alpha", 2.0), Attribute::makeFloat("beta", 3.0)}});
  EXPECT_EQ(y.scalar_type(), at::kLong);
  expectValuesNear(y, {2, 2}, {11, 13, 23, 25});
  expectNodeError({"Gemm", 13, {a, b}, {Attribute::makeFloat("alpha", 0.5)}}, "not a whole number");
}

// A classifier at batch 1 (transB, row bias), run again and again by one executor: its weight is
// kept packed between runs and must follow an in-place update. Against float64 products.
TEST(GemmTest, AFloatLayerRunAgainFollowsItsWeight) {
  at::manual_seed(5);
  SingleOp op("Gemm", 13, {at::randn({1, 64}), at::randn({30, 64}), at::randn({30})},
              {Attribute::makeInt("transB", 1)});
  op.initializer_slots = {1, 2};
  Graph g = buildSingleOpGraph(op);
  Executor ex(g);
  const at::Tensor x = op.inputs[0];
  auto expected = [&]() {
    const at::Tensor w = g.value("in1")->initializer().to(at::kDouble);
    const at::Tensor c = g.value("in2")->initializer().to(at::kDouble);
    return (at::matmul(x.to(at::kDouble), w.t()) + c).to(at::kFloat);
  };
  for (int run = 0; run < 3; ++run)
    expectTensorNear(ex.run({{"in0", x}}).at("out0"), expected(), 1e-5, 5e-5);
  g.value("in1")->initializer().mul_(-2);
  for (int run = 0; run < 2; ++run)
    expectTensorNear(ex.run({{"in0", x}}).at("out0"), expected(), 1e-5, 5e-5);
}

TEST(GemmTest, OpInfoFacts) {
  const OpInfo* info = OpRegistry::builtin().find("", "Gemm", 13);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->weight_inputs, std::vector<int>{1});
  EXPECT_EQ(info->bias_input, 2);
  EXPECT_EQ(info->weight_layout, WeightLayout::GemmB);
  EXPECT_TRUE(info->absorbs_batchnorm);
}

TEST(GemmTest, BadShapesNameNode) {
  expectNodeError({"Gemm", 13, {matA(), matA()}}, "inner dimensions differ");
  expectNodeError({"Gemm", 13, {matA(), matB(), f32({1, 2, 3}, {3})}}, "does not broadcast");
  expectNodeError({"Gemm", 13, {f32({1, 2, 3}, {3}), matB()}}, "must be 2-D");
}

// --- MatMul -------------------------------------------------------------------------------------

TEST(MatMulTest, TwoDimensional) {
  expectValuesNear(run1({"MatMul", 13, {matA(), matB()}}), {2, 2}, {4, 5, 10, 11});
}

TEST(MatMulTest, OneDimensionalOperands) {
  // A 1-D left operand is a row vector, a 1-D right operand a column; both dims drop afterwards.
  expectValuesNear(run1({"MatMul", 13, {f32({1, 2, 3}, {3}), matB()}}), {2}, {4, 5});
  expectValuesNear(run1({"MatMul", 13, {matA(), f32({1, 1, 1}, {3})}}), {2}, {6, 15});
  expectValuesNear(run1({"MatMul", 13, {f32({1, 2, 3}, {3}), f32({4, 5, 6}, {3})}}), {}, {32});
}

TEST(MatMulTest, BatchBroadcast) {
  const at::Tensor a = at::stack({matA(), matA() * 2});  // (2, 2, 3)
  expectValuesNear(run1({"MatMul", 9, {a, matB()}}), {2, 2, 2}, {4, 5, 10, 11, 8, 10, 20, 22});
}

TEST(MatMulTest, OpInfoFacts) {
  const OpInfo* info = OpRegistry::builtin().find("", "MatMul", 13);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->weight_inputs, std::vector<int>{1});
  EXPECT_EQ(info->bias_input, -1);
  EXPECT_EQ(info->weight_layout, WeightLayout::LastAxis);
  EXPECT_FALSE(info->absorbs_batchnorm);  // no bias slot to take BN's shift
  EXPECT_TRUE(info->combines_activations);
}

TEST(MatMulTest, MismatchNamesNode) {
  expectNodeError({"MatMul", 13, {matA(), matA()}}, "cannot be multiplied");
}

// --- Einsum -------------------------------------------------------------------------------------

TEST(EinsumTest, Transpose) {
  expectValuesNear(run1({"Einsum", 12, {matA()}, {Attribute::makeString("equation", "ij->ji")}}),
                   {3, 2}, {1, 4, 2, 5, 3, 6});
}

TEST(EinsumTest, BatchDiagonalWithSpaces) {
  // ONNX's own test writes the equation with a space.
  const at::Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  expectValuesNear(run1({"Einsum", 12, {x}, {Attribute::makeString("equation", "...ii ->...i")}}),
                   {2, 2}, {1, 4, 5, 8});
}

TEST(EinsumTest, ImplicitInnerProductAndBatchMatmul) {
  expectValuesNear(run1({"Einsum",
                         12,
                         {f32({1, 2, 3}, {3}), f32({4, 5, 6}, {3})},
                         {Attribute::makeString("equation", "i,i")}}),
                   {}, {32});
  expectValuesNear(run1({"Einsum",
                         12,
                         {matA().unsqueeze(0), matB().unsqueeze(0)},
                         {Attribute::makeString("equation", "bij,bjk->bik")}}),
                   {1, 2, 2}, {4, 5, 10, 11});
}

TEST(EinsumTest, OperandCountMismatchNamesNode) {
  expectNodeError({"Einsum", 12, {matA()}, {Attribute::makeString("equation", "ij,jk->ik")}},
                  "has 2 operand(s) but the node has 1 input(s)");
}

}  // namespace
}  // namespace qforge
