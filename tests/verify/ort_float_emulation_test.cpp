// The emulation's float kernels against ONNX Runtime itself, bit for bit, on inputs where the
// order and the polynomial of each computation show in the last bits: MatMul (sequential FMA, also
// checked against the closed form), ReduceMean (Eigen's lanes), Softmax and Erf (MLAS's
// polynomials and lanes, which the built-in table runs too), Sigmoid (MLAS's logistic kernel,
// also the built-in table's). Each test also shows ATen's own
// kernel differs there, which is why the emulation needs its own.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// y[B, M, N] = x[B, M, K] @ w[K, N]
std::string matmulModel(const at::Tensor& w) {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 5, w.size(0)}).output("y", kFloat, {-1, 5, w.size(1)});
  b.initializer("w", w);
  b.node("MatMul", {"x", "w"}, {"y"});
  const std::string path = makeTempDir("ort-matmul") + "/model.onnx";
  b.save(path);
  return path;
}

// The closed form: one float accumulator per output, products added in k order with fmaf.
at::Tensor sequentialFma(const at::Tensor& x, const at::Tensor& w) {
  at::Tensor y = at::zeros({x.size(0), x.size(1), w.size(1)});
  auto xa = x.accessor<float, 3>();
  auto wa = w.accessor<float, 2>();
  auto ya = y.accessor<float, 3>();
  for (int64_t b = 0; b < x.size(0); ++b) {
    for (int64_t m = 0; m < x.size(1); ++m) {
      for (int64_t n = 0; n < w.size(1); ++n) {
        float acc = 0;
        for (int64_t k = 0; k < x.size(2); ++k)
          acc = std::fmaf(xa[b][m][k], wa[k][n], acc);
        ya[b][m][n] = acc;
      }
    }
  }
  return y;
}

TEST(OrtFloatEmulation, MatMulMatchesOnnxRuntimeAndTheSequentialFmaBitForBit) {
  at::manual_seed(11);
  // Mixed magnitudes make the order of the additions visible in the last bits.
  const at::Tensor x = at::randn({16, 5, 48}) * at::exp(at::randn({16, 5, 48}) * 3);
  const at::Tensor w = at::randn({48, 24}) * at::exp(at::randn({48, 24}) * 3);
  const std::string model = matmulModel(w);
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  const at::Tensor ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(emulated, sequentialFma(x, w)));
  EXPECT_TRUE(at::equal(emulated, ort)) << (emulated - ort).abs().max();
  // ATen's own order differs somewhere on these inputs (why the emulation needs its own kernel;
  // the built-in table's oneDNN matmul has no documented order either).
  EXPECT_FALSE(at::equal(at::matmul(x, w), ort));
}

TEST(OrtFloatEmulation, ReduceMeanOverTheInnermostAxisMatchesOnnxRuntimeBitForBit) {
  at::manual_seed(12);
  const at::Tensor x = at::randn({32, 49, 48}) * at::exp(at::randn({32, 49, 48}) * 2);
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 49, 48}).output("y", kFloat, {-1, 49, 1});
  addIntsAttribute(b.node("ReduceMean", {"x"}, {"y"}), "axes", {-1});
  const std::string model = makeTempDir("ort-reducemean") + "/model.onnx";
  b.save(model);
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  const at::Tensor ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(emulated, ort)) << (emulated - ort).abs().max();
  EXPECT_FALSE(at::equal(Executor(g).run({{"x", x}}).at("y"), ort));  // ATen's order differs
}

// Over one axis that is not the innermost: a middle one (a ViT's mean over its tokens) is summed
// by MLAS's GEMM of a row of ones, four rows at a time; the leading one row after row.
TEST(OrtFloatEmulation, ReduceMeanOverAnOuterAxisMatchesOnnxRuntimeBitForBit) {
  at::manual_seed(13);
  const at::Tensor x = at::randn({16, 49, 48}) * at::exp(at::randn({16, 49, 48}) * 2);
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  for (const int64_t axis : {1, -2, 0}) {
    for (const int64_t keepdims : {1, 0}) {
      OnnxBuilder b;
      b.input("x", kFloat, {16, 49, 48}).output("y", kFloat, {});
      onnx::NodeProto& node = b.node("ReduceMean", {"x"}, {"y"});
      addIntsAttribute(node, "axes", {axis});
      addIntAttribute(node, "keepdims", keepdims);
      const std::string model = makeTempDir("ort-reducemean-outer") + "/model.onnx";
      b.save(model);
      const at::Tensor ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
      Graph g = importOnnxFile(model);
      const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
      const std::string what =
          "axis " + std::to_string(axis) + ", keepdims " + std::to_string(keepdims);
      EXPECT_TRUE(at::equal(emulated, ort)) << what << ": " << (emulated - ort).abs().max();
      EXPECT_FALSE(at::equal(Executor(g).run({{"x", x}}).at("y"), ort)) << what;
    }
  }
}

// Runs a one-node model in ORT, the emulation and the built-in table.
struct ThreeWay {
  at::Tensor ort, emulated, builtin;
};

ThreeWay runOneNode(OnnxBuilder& b, const std::string& tag, const at::Tensor& x) {
  const std::string model = makeTempDir(tag) + "/model.onnx";
  b.save(model);
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  ThreeWay out;
  out.ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  out.emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  out.builtin = Executor(g).run({{"x", x}}).at("y");
  return out;
}

// Rows of attention-like logits; widths that are and are not multiples of MLAS's 16 and 48.
TEST(OrtFloatEmulation, SoftmaxMatchesOnnxRuntimeBitForBitOnEveryRowWidth) {
  at::manual_seed(13);
  for (int64_t width : {5, 16, 50, 65, 197}) {
    const at::Tensor x = at::randn({8, 3, 7, width}) * 4;
    OnnxBuilder b;
    b.input("x", kFloat, {-1, 3, 7, width}).output("y", kFloat, {-1, 3, 7, width});
    addIntAttribute(b.node("Softmax", {"x"}, {"y"}), "axis", -1);
    const ThreeWay r = runOneNode(b, "ort-softmax", x);
    EXPECT_TRUE(at::equal(r.emulated, r.ort))
        << "width " << width << ": " << (r.emulated - r.ort).ne(0).sum().item<int64_t>()
        << " elements differ";
    // The built-in table computes Softmax with the same kernel (exec/ops/mlas_ops.h).
    EXPECT_TRUE(at::equal(r.builtin, r.ort)) << "width " << width;
    if (width >= 50) {
      EXPECT_FALSE(at::equal(at::softmax(x, -1), r.ort)) << "width " << width;  // ATen's differs
    }
  }
}

// Opset 13 with the axis in the middle (ORT transposes it last) and opset 11's flattening.
TEST(OrtFloatEmulation, SoftmaxOverAnInnerAxisAndOpset11FlatteningMatchOnnxRuntime) {
  at::manual_seed(14);
  const at::Tensor x = at::randn({4, 40, 6}) * 5;
  {
    OnnxBuilder b;
    b.input("x", kFloat, {-1, 40, 6}).output("y", kFloat, {-1, 40, 6});
    addIntAttribute(b.node("Softmax", {"x"}, {"y"}), "axis", 1);
    const ThreeWay r = runOneNode(b, "ort-softmax-axis", x);
    EXPECT_TRUE(at::equal(r.emulated, r.ort)) << (r.emulated - r.ort).abs().max();
  }
  {
    OnnxBuilder b(11);
    b.input("x", kFloat, {-1, 40, 6}).output("y", kFloat, {-1, 40, 6});
    addIntAttribute(b.node("Softmax", {"x"}, {"y"}), "axis", 1);
    const ThreeWay r = runOneNode(b, "ort-softmax-11", x);
    EXPECT_TRUE(at::equal(r.emulated, r.ort)) << (r.emulated - r.ort).abs().max();
    // Opset 11 normalizes over the flattened 240 values, not along the 40.
    EXPECT_NEAR(r.emulated[0].sum().item<float>(), 1.0f, 1e-5);
  }
}

// Both of MLAS's branches (|x| below and above 0.921875), the clamp at 3.925 and signed zeros.
TEST(OrtFloatEmulation, ErfMatchesOnnxRuntimeBitForBitAcrossBothBranches) {
  at::manual_seed(15);
  const at::Tensor x = at::cat({at::linspace(-5, 5, 20001), at::randn({20000}) * 1.5,
                                at::tensor({0.0f, -0.0f, 0.921875f, -0.921875f, 3.925f, 9.0f})})
                           .reshape({1, -1});
  OnnxBuilder b;
  b.input("x", kFloat, {1, x.size(1)}).output("y", kFloat, {1, x.size(1)});
  b.node("Erf", {"x"}, {"y"});
  const ThreeWay r = runOneNode(b, "ort-erf", x);
  EXPECT_TRUE(at::equal(r.emulated, r.ort))
      << (r.emulated - r.ort).ne(0).sum().item<int64_t>() << " elements differ";
  EXPECT_TRUE(at::equal(r.builtin, r.ort));  // the built-in table runs the same kernel
  // ATen's libm-based erf differs there, which is why both use MLAS's.
  EXPECT_FALSE(at::equal(at::erf(x), r.ort));
  // And it is erf: within a few float32 ulps of the float64 closed form.
  const at::Tensor exact = at::erf(x.to(at::kDouble));
  EXPECT_LT((r.emulated.to(at::kDouble) - exact).abs().max().item<double>(), 4e-7);
}

TEST(OrtFloatEmulation, SigmoidMatchesOnnxRuntimeBitForBitIncludingTheClampAndTails) {
  at::manual_seed(16);
  // Lengths that leave partial vectors, values through the polynomial's whole range, past the
  // +-18 clamp, and the saturated tails where neighbours round to one float.
  const at::Tensor x = at::cat({at::linspace(-25, 25, 50001), at::randn({20003}) * 6,
                                at::tensor({0.0f, -0.0f, 18.0f, -18.0f, 1e-30f, 88.0f, -88.0f})})
                           .reshape({1, -1});
  OnnxBuilder b;
  b.input("x", kFloat, {1, x.size(1)}).output("y", kFloat, {1, x.size(1)});
  b.node("Sigmoid", {"x"}, {"y"});
  const ThreeWay r = runOneNode(b, "ort-sigmoid", x);
  EXPECT_TRUE(at::equal(r.builtin, r.ort))
      << (r.builtin - r.ort).ne(0).sum().item<int64_t>() << " elements differ";
  EXPECT_TRUE(at::equal(r.emulated, r.ort));
  // ATen's exp-based sigmoid differs there, which is why the built-in table uses MLAS's.
  EXPECT_FALSE(at::equal(at::sigmoid(x), r.ort));
  // And it is the logistic function: within 1e-6 of the float64 closed form, never below 0.
  const at::Tensor exact = at::sigmoid(x.to(at::kDouble));
  EXPECT_LT((r.builtin.to(at::kDouble) - exact).abs().max().item<double>(), 1e-6);
  EXPECT_GE(r.builtin.min().item<float>(), 0.0f);
}

}  // namespace
}  // namespace qforge::testing
