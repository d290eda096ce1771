// The emulation's float MatMul adds the K products in order with fused multiply-adds, as MLAS's
// SGEMM does: on float inputs whose sums round differently in different orders, it matches ONNX
// Runtime bit for bit, and a closed-form sequential FMA loop; ATen's BLAS need not.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

std::string ortDir() {
  const char* dir = std::getenv("QFORGE_ORT_DIR");
  return dir && *dir ? dir : std::string(QFORGE_BINARY_DIR) + "/ort";
}

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
  options.ort_dir = ortDir();
  const at::Tensor ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(emulated, sequentialFma(x, w)));
  EXPECT_TRUE(at::equal(emulated, ort)) << (emulated - ort).abs().max();
  // ATen's own order differs somewhere on these inputs (why the emulation needs its own kernel).
  const at::Tensor aten = Executor(g).run({{"x", x}}).at("y");
  EXPECT_FALSE(at::equal(aten, ort));
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
  options.ort_dir = ortDir();
  const at::Tensor ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(emulated, ort)) << (emulated - ort).abs().max();
  EXPECT_FALSE(at::equal(Executor(g).run({{"x", x}}).at("y"), ort));  // ATen's order differs
}

}  // namespace
}  // namespace qforge::testing
