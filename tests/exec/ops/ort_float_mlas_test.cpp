// The emulation's float Conv, FusedConv, Gemm, GlobalAveragePool and BiasGelu against ONNX Runtime,
// bit for bit, in each form MLAS computes them: a convolution sliced by output positions and K,
// one unfolded whole (more filters than output positions), a pointwise one, a batch of one split
// over two threads, FusedConv's Sum and activation, Gemm with its B packed at load time or not.
// Inputs of mixed magnitudes make where K is cut show in the last bits; each test also shows a
// kernel that cuts it elsewhere (ATen's, or one sum over the whole of K) differs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "exec/executor.h"
#include "exec/ops/mlas_conv.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

at::Tensor mixed(std::vector<int64_t> shape, double spread) {
  return at::randn(shape) * at::exp(at::randn(shape) * spread);
}

struct Compared {
  at::Tensor ort, emulated, builtin;
};

// Runs `b` (inputs named as `feeds`, output "y") in ORT with `threads`, the emulation (told the
// same thread count) and, for ONNX ops, the built-in table.
Compared runAll(OnnxBuilder& b, const std::string& tag, const TensorMap& feeds, int threads = 2,
                verify::OrtOptimization optimization = verify::OrtOptimization::All,
                bool builtin = true) {
  const std::string model = makeTempDir(tag) + "/model.onnx";
  b.save(model);
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  options.threads = threads;
  options.optimization = optimization;
  Compared out;
  out.ort = verify::OrtRunner(options).run(model, feeds).at("y");
  setOrtIntraOpThreads(threads);
  Graph g = importOnnxFile(model);
  out.emulated = Executor(g, {}, ortEmulationRegistry()).run(feeds).at("y");
  if (builtin) out.builtin = Executor(g).run(feeds).at("y");
  setOrtIntraOpThreads(0);
  return out;
}

// A grouped Conv with X, W and B as inputs.
Compared runGroupedConv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                        int64_t groups, std::vector<int64_t> pads, int64_t stride,
                        const std::string& tag, int threads = 2) {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, x.size(1), x.size(2), x.size(3)})
      .input("w", kFloat, {w.size(0), w.size(1), w.size(2), w.size(3)})
      .input("b", kFloat, {w.size(0)})
      .output("y", kFloat, {});
  onnx::NodeProto& conv = b.node("Conv", {"x", "w", "b"}, {"y"});
  addIntsAttribute(conv, "pads", pads);
  addIntsAttribute(conv, "strides", {stride, stride});
  addIntAttribute(conv, "group", groups);
  return runAll(b, tag, {{"x", x}, {"w", w}, {"b", bias}}, threads);
}

Compared runGroupedConv(const at::Tensor& x, const at::Tensor& w, int64_t groups,
                        std::vector<int64_t> pads, int64_t stride, const std::string& tag,
                        int threads = 2) {
  return runGroupedConv(x, w, at::randn({w.size(0)}), groups, std::move(pads), stride, tag,
                        threads);
}

// Conv with X, W and B as inputs: a weight ORT cannot see at load time stays in MLAS's NCHW
// convolution (a constant one could move to its NCHWc kernels), as behind a DequantizeLinear.
Compared runConv(const at::Tensor& x, const at::Tensor& w, int64_t pad, const std::string& tag,
                 int threads = 2) {
  return runGroupedConv(x, w, 1, {pad, pad, pad, pad}, 1, tag, threads);
}

void expectBitForBit(const Compared& r, const std::string& what, bool builtin_differs = true) {
  EXPECT_TRUE(at::equal(r.emulated, r.ort))
      << what << ": " << (r.emulated != r.ort).sum().item<int64_t>() << " of " << r.ort.numel()
      << " differ, by up to " << (r.emulated - r.ort).abs().max().item<double>();
  if (builtin_differs) {
    EXPECT_FALSE(at::equal(r.builtin, r.ort)) << what << ": ATen's kernel rounds alike here";
  }
}

TEST(OrtFloatMlas, ConvSlicedByOutputPositionsAndKMatchesOnnxRuntime) {
  at::manual_seed(21);
  // 196 output positions >= 16 filters: slices of 128 positions and 128 of K = 288.
  expectBitForBit(
      runConv(mixed({3, 32, 14, 14}, 2), mixed({16, 32, 3, 3}, 2), 1, "ort-conv-sliced"), "sliced");
}

TEST(OrtFloatMlas, ConvWithMoreFiltersThanOutputPositionsMatchesOnnxRuntime) {
  at::manual_seed(22);
  // 64 filters > 49 positions: unfolded whole; K = 576 in slices of 256 (N = 49 widens K).
  expectBitForBit(runConv(mixed({3, 64, 7, 7}, 2), mixed({64, 64, 3, 3}, 2), 1, "ort-conv-whole"),
                  "unfolded whole");
}

TEST(OrtFloatMlas, PointwiseConvMatchesOnnxRuntime) {
  at::manual_seed(23);
  // 1 x 1, stride 1, no padding: the input is B as it lies; K = 300 cut at 256 (N = 64).
  expectBitForBit(runConv(mixed({3, 300, 8, 8}, 2), mixed({24, 300, 1, 1}, 2), 0, "ort-conv-1x1"),
                  "pointwise");
}

TEST(OrtFloatMlas, ABatchOfOneSplitOverTwoThreadsCutsKWhereOnnxRuntimeDoes) {
  at::manual_seed(24);
  // 100 positions over 2 threads: segments of 64 and 36 positions, each cutting K = 288 at 256
  // where the whole 100 would cut it at 128.
  const at::Tensor x = mixed({1, 32, 10, 10}, 2), w = mixed({16, 32, 3, 3}, 2);
  const Compared two = runConv(x, w, 1, "ort-conv-threads", 2);
  expectBitForBit(two, "two threads");
  const Compared one = runConv(x, w, 1, "ort-conv-thread", 1);
  expectBitForBit(one, "one thread");
  EXPECT_FALSE(at::equal(one.ort, two.ort));  // the thread count shows in ORT's own bits
}

TEST(OrtFloatMlas, FusedConvAddsItsSumBeforeTheBiasThenItsActivation) {
  at::manual_seed(25);
  const at::Tensor x = mixed({2, 32, 9, 9}, 2), w = mixed({16, 32, 3, 3}, 2);
  const at::Tensor bias = at::randn({16}) * 8, sum = mixed({2, 16, 9, 9}, 2);
  OnnxBuilder b;
  b.model().add_opset_import()->set_domain("com.microsoft");
  b.model().mutable_opset_import()->rbegin()->set_version(1);
  b.input("x", kFloat, {-1, 32, 9, 9})
      .input("w", kFloat, {16, 32, 3, 3})
      .input("b", kFloat, {16})
      .input("z", kFloat, {-1, 16, 9, 9})
      .output("y", kFloat, {});
  onnx::NodeProto& fused = b.node("FusedConv", {"x", "w", "b", "z"}, {"y"});
  fused.set_domain("com.microsoft");
  addIntsAttribute(fused, "pads", {1, 1, 1, 1});
  onnx::AttributeProto* activation = fused.add_attribute();
  activation->set_name("activation");
  activation->set_type(onnx::AttributeProto::STRING);
  activation->set_s("LeakyRelu");
  onnx::AttributeProto* params = fused.add_attribute();
  params->set_name("activation_params");
  params->set_type(onnx::AttributeProto::FLOATS);
  params->add_floats(0.125f);
  const Compared r = runAll(b, "ort-fusedconv", {{"x", x}, {"w", w}, {"b", bias}, {"z", sum}}, 2,
                            verify::OrtOptimization::All, false);
  EXPECT_TRUE(at::equal(r.emulated, r.ort)) << (r.emulated - r.ort).abs().max();
  // The same convolution with the Sum added after the bias (Conv, then Add) rounds otherwise.
  const at::Tensor unfused = at::leaky_relu(at::conv2d(x, w, bias, 1, 1) + sum, 0.125);
  EXPECT_FALSE(at::equal(unfused, r.ort));
}

// y = x @ w^T + c, w an initializer (ORT packs it at load: K cut at 256) or an input (not packed:
// N = 10 widens K to one slice of 1024).
Compared runGemm(bool w_constant, const at::Tensor& x, const at::Tensor& w, const at::Tensor& c) {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, x.size(1)}).output("y", kFloat, {});
  TensorMap feeds = {{"x", x}};
  if (w_constant) {
    b.initializer("w", w);
  } else {
    b.input("w", kFloat, {w.size(0), w.size(1)});
    feeds["w"] = w;
  }
  b.initializer("c", c);
  addIntAttribute(b.node("Gemm", {"x", "w", "c"}, {"y"}), "transB", 1);
  return runAll(b, w_constant ? "ort-gemm-packed" : "ort-gemm", feeds);
}

TEST(OrtFloatMlas, GemmMatchesOnnxRuntimeWithItsWeightPackedAtLoadOrNot) {
  at::manual_seed(26);
  const at::Tensor x = mixed({64, 300}, 2), w = mixed({10, 300}, 2), c = at::randn({10}) * 4;
  const Compared packed = runGemm(true, x, w, c);
  const Compared unpacked = runGemm(false, x, w, c);
  expectBitForBit(packed, "packed");
  // One sum over the whole of K, as BLAS happens to compute this product too.
  expectBitForBit(unpacked, "not packed", false);
  EXPECT_FALSE(at::equal(packed.ort, unpacked.ort));  // ORT's own two paths cut K differently
}

// The pooling op as ORT runs it when it stays one (between a QDQ model's quantizers; with its
// optimizations 'all' a float model's moves to the NCHWc kernels, which sum positions in order).
TEST(OrtFloatMlas, GlobalAveragePoolSumsInFourLanesAsOnnxRuntime) {
  at::manual_seed(27);
  const at::Tensor x = mixed({8, 16, 7, 7}, 3);
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 16, 7, 7}).output("y", kFloat, {});
  b.node("GlobalAveragePool", {"x"}, {"y"});
  expectBitForBit(runAll(b, "ort-gap", {{"x", x}}, 2, verify::OrtOptimization::Disabled),
                  "GlobalAveragePool");
}

// What the restatement leaves to the built-in kernels, said by its return value.
TEST(OrtFloatMlas, ThreeDimensionalConvolutionsAreLeftToTheBuiltInKernel) {
  mlas::ConvShape s;
  s.in_channels = 4;
  s.filters = 2;
  s.input = {5, 5, 5};
  s.kernel = {3, 3, 3};
  s.dilation = {1, 1, 1};
  s.stride = {1, 1, 1};
  s.output = {3, 3, 3};
  s.pads = {0, 0, 0, 0, 0, 0};
  std::vector<float> x(4 * 125, 1.0f), w(2 * 4 * 27, 1.0f), y(2 * 27, -1.0f);
  EXPECT_FALSE(mlas::conv(s, x.data(), w.data(), nullptr, y.data(), false, {}, 1));
  EXPECT_EQ(y[0], -1.0f);  // untouched
}

// One filter per group is a product with one row (M = 1): MLAS's AVX kernel for it adds four
// products of K at a time, without fused multiply-adds, then adds each group's sum to the output.
TEST(OrtFloatMlas, DepthwiseConvSumsFourProductsAtATimeAsOnnxRuntime) {
  at::manual_seed(30);
  const at::Tensor x = mixed({2, 24, 15, 15}, 2), w = mixed({24, 1, 3, 3}, 2);
  const at::Tensor bias = at::randn({24});
  const at::Tensor padded = at::constant_pad_nd(x, {1, 1, 1, 1});
  for (int64_t stride : {1, 2}) {
    const std::string what = "depthwise, stride " + std::to_string(stride);
    const Compared r = runGroupedConv(x, w, bias, 24, {1, 1, 1, 1}, stride,
                                      "ort-dwconv-s" + std::to_string(stride));
    expectBitForBit(r, what);
    // The nine products summed one after another, rounding each product or fusing it.
    const int64_t out = r.ort.size(2);
    at::Tensor chained = at::empty_like(r.ort), fused = at::empty_like(r.ort);
    auto xa = padded.accessor<float, 4>();
    auto wa = w.accessor<float, 4>();
    auto ba = bias.accessor<float, 1>();
    auto ca = chained.accessor<float, 4>();
    auto fa = fused.accessor<float, 4>();
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 24; ++c)
        for (int64_t i = 0; i < out; ++i)
          for (int64_t j = 0; j < out; ++j) {
            float chain = 0, fma = 0;
            for (int64_t k = 0; k < 9; ++k) {
              const float xv = xa[n][c][i * stride + k / 3][j * stride + k % 3];
              const float wv = wa[c][0][k / 3][k % 3];
              chain = chain + xv * wv;
              fma = std::fmaf(xv, wv, fma);
            }
            ca[n][c][i][j] = chain + ba[c];
            fa[n][c][i][j] = fma + ba[c];
          }
    EXPECT_FALSE(at::equal(chained, r.ort)) << what << ": one chain of products rounds alike";
    EXPECT_FALSE(at::equal(fused, r.ort)) << what << ": one chain of fused products rounds alike";
  }
}

// Two input channels per group: K = 18, four groups of four and a remainder of two.
TEST(OrtFloatMlas, GroupedConvWithOneFilterPerGroupAddsTheRemainderOfKLast) {
  at::manual_seed(31);
  expectBitForBit(runGroupedConv(mixed({2, 16, 9, 9}, 2), mixed({8, 2, 3, 3}, 2), 8, {1, 1, 1, 1},
                                 1, "ort-gconv-k18"),
                  "K = 18");
  // K = 15 (5 x 3 kernel): three groups of four, then a remainder of two and one of one.
  expectBitForBit(runGroupedConv(mixed({2, 6, 9, 9}, 2), mixed({6, 1, 5, 3}, 2), 6, {2, 1, 2, 1}, 1,
                                 "ort-gconv-k15"),
                  "K = 15");
}

// A single output position (N = 1): MLAS's kernel for one column sums K in eight lanes and reduces
// them in an order that depends on the row's block of 4, 2 or 1 filters, counted from where each
// thread's filters start: 14 filters are 4 + 4 + 4 + 2 on one thread, and 7 = 4 + 2 + 1 twice on
// two (K = 6400 earns the second thread).
TEST(OrtFloatMlas, ConvWithOneOutputPositionReducesEightLanesAsOnnxRuntime) {
  at::manual_seed(32);
  const at::Tensor x = mixed({1, 256, 5, 5}, 2), w = mixed({14, 256, 5, 5}, 2);
  const Compared two = runGroupedConv(x, w, 1, {0, 0, 0, 0}, 1, "ort-conv-n1-t2", 2);
  expectBitForBit(two, "two threads");
  const Compared one = runGroupedConv(x, w, 1, {0, 0, 0, 0}, 1, "ort-conv-n1-t1", 1);
  expectBitForBit(one, "one thread");
  EXPECT_FALSE(at::equal(one.ort, two.ort));  // the blocks moved with the threads
}

// One input channel and a kernel as wide as the input: MLAS multiplies the input as it lies, read
// as B transposed with a stride of one input row; a kernel as tall as the input and one wide
// reads it untransposed.
TEST(OrtFloatMlas, ConvWhoseKernelSpansWholeInputRowsMatchesOnnxRuntime) {
  at::manual_seed(33);
  expectBitForBit(runGroupedConv(mixed({1, 1, 40, 6}, 2), mixed({20, 1, 3, 6}, 2), 1, {0, 0, 0, 0},
                                 1, "ort-conv-rows"),
                  "whole rows", false);
  expectBitForBit(runGroupedConv(mixed({2, 1, 5, 300}, 2), mixed({8, 1, 5, 1}, 2), 1, {0, 0, 0, 0},
                                 1, "ort-conv-columns"),
                  "whole columns", false);
}

// Gemm of one row with B an input (not packed) and transposed: the single-row kernel for a
// transposed B, the eight-lane sums (10 outputs: blocks of 4, 4 and 2).
TEST(OrtFloatMlas, GemmOfOneRowMatchesOnnxRuntime) {
  at::manual_seed(34);
  const at::Tensor x = mixed({1, 300}, 2), w = mixed({10, 300}, 2), c = at::randn({10}) * 4;
  expectBitForBit(runGemm(false, x, w, c), "one row", false);
}

// ConvTranspose with W an input (MLAS's GEMM with A transposed: K never widened) or a constant
// (ORT transposes it at load and multiplies it as it lies), the columns added into the output
// tap by tap (Col2im), then the bias.
Compared runConvTranspose(const at::Tensor& x, const at::Tensor& w, bool w_constant, int64_t groups,
                          std::vector<int64_t> pads, int64_t stride, int64_t dilation,
                          int64_t output_padding, const std::string& tag) {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, x.size(1), x.size(2), x.size(3)}).output("y", kFloat, {});
  TensorMap feeds = {{"x", x}};
  if (w_constant) {
    b.initializer("w", w);
  } else {
    b.input("w", kFloat, {w.size(0), w.size(1), w.size(2), w.size(3)});
    feeds["w"] = w;
  }
  b.initializer("b", at::randn({w.size(1) * groups}));
  onnx::NodeProto& node = b.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  addIntsAttribute(node, "pads", pads);
  addIntsAttribute(node, "strides", {stride, stride});
  addIntsAttribute(node, "dilations", {dilation, dilation});
  addIntsAttribute(node, "output_padding", {output_padding, output_padding});
  addIntAttribute(node, "group", groups);
  return runAll(b, tag, feeds);
}

TEST(OrtFloatMlas, ConvTransposeMatchesOnnxRuntimeWithItsWeightAnInputOrAConstant) {
  at::manual_seed(35);
  // A U-Net's upsampling: 2 x 2 taps, stride 2; K = 300 input channels cut into slices.
  const at::Tensor x = mixed({2, 300, 6, 6}, 2), w = mixed({300, 16, 2, 2}, 2);
  expectBitForBit(runConvTranspose(x, w, false, 1, {0, 0, 0, 0}, 2, 1, 0, "ort-convt-input"),
                  "weight an input");
  expectBitForBit(runConvTranspose(x, w, true, 1, {0, 0, 0, 0}, 2, 1, 0, "ort-convt-constant"),
                  "weight a constant");
  // Overlapping taps, cropped and padded output, groups and dilation.
  const at::Tensor x2 = mixed({2, 8, 7, 7}, 2), w2 = mixed({8, 3, 3, 3}, 2);
  expectBitForBit(runConvTranspose(x2, w2, false, 2, {1, 0, 1, 2}, 2, 2, 1, "ort-convt-overlap"),
                  "overlapping taps, groups 2, dilation 2", false);
  expectBitForBit(
      runConvTranspose(x2, w2, true, 2, {1, 0, 1, 2}, 2, 2, 1, "ort-convt-overlap-constant"),
      "overlapping taps, constant weight", false);
}

// com.microsoft BiasGelu, which ORT's graphs hold where a bias Add feeds a written-out GELU.
TEST(OrtFloatMlas, BiasGeluMatchesOnnxRuntimeBitForBit) {
  at::manual_seed(28);
  const at::Tensor x = at::randn({16, 49, 96}) * 3, bias = at::randn({96});
  OnnxBuilder b;
  b.model().add_opset_import()->set_domain("com.microsoft");
  b.model().mutable_opset_import()->rbegin()->set_version(1);
  b.input("x", kFloat, {-1, 49, 96}).output("y", kFloat, {});
  b.initializer("bias", bias);
  b.node("BiasGelu", {"x", "bias"}, {"y"}).set_domain("com.microsoft");
  const Compared r = runAll(b, "ort-biasgelu", {{"x", x}}, 2, verify::OrtOptimization::All, false);
  EXPECT_TRUE(at::equal(r.emulated, r.ort)) << (r.emulated - r.ort).abs().max();
  EXPECT_FALSE(at::equal(at::gelu(x + bias), r.ort));  // ATen's erf differs in the last bits
}

// com.microsoft QuickGelu, which ORT's graphs hold for x * Sigmoid(alpha * x) (SiLU at alpha 1).
TEST(OrtFloatMlas, QuickGeluMatchesOnnxRuntimeBitForBit) {
  at::manual_seed(29);
  const at::Tensor x = at::randn({16, 40, 50}) * 6;
  for (float alpha : {1.0f, 1.702f}) {
    OnnxBuilder b;
    b.model().add_opset_import()->set_domain("com.microsoft");
    b.model().mutable_opset_import()->rbegin()->set_version(1);
    b.input("x", kFloat, {-1, 40, 50}).output("y", kFloat, {});
    onnx::NodeProto& node = b.node("QuickGelu", {"x"}, {"y"});
    node.set_domain("com.microsoft");
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name("alpha");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(alpha);
    const Compared r =
        runAll(b, "ort-quickgelu", {{"x", x}}, 2, verify::OrtOptimization::All, false);
    EXPECT_TRUE(at::equal(r.emulated, r.ort))
        << "alpha " << alpha << ": " << (r.emulated != r.ort).sum().item<int64_t>() << " differ";
    EXPECT_FALSE(at::equal(x * at::sigmoid(x * alpha), r.ort)) << "alpha " << alpha;
  }
}

}  // namespace
}  // namespace qforge::testing
