// A quantized weight that is a MatMul's only DequantizeLinear input: ONNX Runtime at its default
// optimization level runs DequantizeLinear -> MatMul as MatMulNBits, which quantizes the float
// activation to int8, so its product is not the graph's. Stored as the float values its
// DequantizeLinear gives, the weight is multiplied as the graph says; every other form keeps its
// integers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "deploy/ort_matmul_nbits_guard.h"
#include "exec/executor.h"
#include "ir/onnx_export.h"
#include "ir/parse.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"

namespace qforge::testing {
namespace {

// x [N, 64] times a uint8 per-tensor weight [64, 16], per `product` (a line producing %y).
std::string weightOnlyGraph(const std::string& product, const std::string& more_outputs = "") {
  return R"(
    graph weight_only
    opset "" 13
    input %x: float32[N,64]
    init %w: float32[64,16]
    init %s: float32[] = {0.004}
    init %zp: uint8[] = {131}
    init %sa: float32[] = {0.05}
    init %za: uint8[] = {128}
    %wq = QuantizeLinear(%w, %s, %zp)  # wq
    %wd = DequantizeLinear(%wq, %s, %zp)  # wd
    )" + product +
         R"(
    output %y: float32[N,16]
    )" + more_outputs;
}

const char* const kPlainMatMul = "%y = MatMul(%x, %wd)  # matmul";

Graph withWeights(const std::string& text) {
  Graph g = parseGraph(text);
  at::manual_seed(11);
  g.findValue("w")->setInitializer(at::randn({64, 16}) * 0.25);
  return g;
}

TEST(OrtMatMulNBitsGuard, AWeightOnlyMatMulGetsItsDequantizedWeightInFloat) {
  Graph g = withWeights(weightOnlyGraph(kPlainMatMul));
  // The reference: the executor's own QuantizeLinear/DequantizeLinear kernels on the original.
  const at::Tensor dequantized = Executor(g).run({{"x", at::zeros({1, 64})}}, {"wd"}).at("wd");

  EXPECT_EQ(deploy::storeWeightOnlyMatMulWeightsInFloat(g), std::vector<std::string>{"matmul"});
  g.eliminateDeadCode();
  auto counts = opCounts(g);
  EXPECT_EQ(counts["QuantizeLinear"], 0);
  EXPECT_EQ(counts["DequantizeLinear"], 0);
  const Value* weight = g.findNode("matmul")->input(1);
  ASSERT_TRUE(weight->isInitializer());
  EXPECT_EQ(weight->initializer().scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(weight->initializer(), dequantized));
  // Values on the uint8 grid: 256 levels of 0.004 around zero point 131, and the tails clipped.
  const at::Tensor levels = weight->initializer() / 0.004 + 131;
  EXPECT_LT((levels - levels.round()).abs().max().item<double>(), 1e-3);
  EXPECT_NEAR(levels.min().item<double>(), 0, 1e-3);
  EXPECT_NEAR(levels.max().item<double>(), 255, 1e-3);
}

TEST(OrtMatMulNBitsGuard, OnnxRuntimeMultipliesTheStoredWeightAsTheGraphSays) {
  if (!ortAvailable("the MatMulNBits guard test")) GTEST_SKIP();
  const std::string dir = makeTempDir("matmul_nbits");
  Graph original = withWeights(weightOnlyGraph(kPlainMatMul));
  exportOnnxFile(original, dir + "/original.onnx");
  Graph guarded = original.clone();
  deploy::storeWeightOnlyMatMulWeightsInFloat(guarded);
  guarded.eliminateDeadCode();
  exportOnnxFile(guarded, dir + "/guarded.onnx");

  at::manual_seed(12);
  const TensorMap feeds{{"x", at::randn({8, 64})}};
  // What the graph says: ORT with its optimizations off runs DequantizeLinear, then MatMul.
  const at::Tensor said = runInOrt(dir + "/original.onnx", feeds).at("y");
  const at::Tensor fused =
      runInOrt(dir + "/original.onnx", feeds, verify::OrtOptimization::All).at("y");
  // Int8 activations in blocks of 32: far beyond float rounding, which is ~1e-6 here.
  EXPECT_GT((fused - said).abs().max().item<double>(), 1e-3)
      << "ONNX Runtime computed the DequantizeLinear -> MatMul as the graph says: the guard is "
         "no longer needed for this version";
  const at::Tensor stored =
      runInOrt(dir + "/guarded.onnx", feeds, verify::OrtOptimization::All).at("y");
  EXPECT_LT((stored - said).abs().max().item<double>(), 1e-5);
}

TEST(OrtMatMulNBitsGuard, WeightsOnlyOnnxRuntimeWouldNotFuseKeepTheirIntegers) {
  const struct {
    const char* what;
    std::string text;
  } cases[] = {
      {"the activation is dequantized too (a QDQ MatMul)",
       weightOnlyGraph("%xq = QuantizeLinear(%x, %sa, %za)  # xq\n"
                       "%xd = DequantizeLinear(%xq, %sa, %za)  # xd\n"
                       "%y = MatMul(%xd, %wd)  # matmul")},
      {"a QuantizeLinear reads the product",
       weightOnlyGraph("%m = MatMul(%x, %wd)  # matmul\n"
                       "%mq = QuantizeLinear(%m, %sa, %za)  # mq\n"
                       "%y = DequantizeLinear(%mq, %sa, %za)  # md")},
      {"a Gemm that transposes its weight",
       weightOnlyGraph("%wt = Transpose[perm=[1,0]](%wd)  # wt\n"
                       "%y = Gemm[transB=1](%x, %wt)  # gemm")},
      {"the dequantized weight has two readers",
       weightOnlyGraph(kPlainMatMul, "%z = MatMul(%x, %wd)  # second\noutput %z: float32[N,16]")},
      {"the weight is not a constant",
       R"(
         graph not_constant
         opset "" 13
         input %x: float32[N,64]
         input %wq: uint8[64,16]
         init %s: float32[] = {0.004}
         init %zp: uint8[] = {131}
         %wd = DequantizeLinear(%wq, %s, %zp)  # wd
         %y = MatMul(%x, %wd)  # matmul
         output %y: float32[N,16]
       )"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g = parseGraph(c.text);
    const auto before = opCounts(g);
    EXPECT_TRUE(deploy::storeWeightOnlyMatMulWeightsInFloat(g).empty());
    g.eliminateDeadCode();
    EXPECT_EQ(opCounts(g), before);
  }
}

TEST(OrtMatMulNBitsGuard, AGemmWithoutTransposesIsGuardedLikeAMatMul) {
  Graph g = withWeights(weightOnlyGraph("%y = Gemm(%x, %wd)  # gemm"));
  EXPECT_EQ(deploy::storeWeightOnlyMatMulWeightsInFloat(g), std::vector<std::string>{"gemm"});
  EXPECT_TRUE(g.findNode("gemm")->input(1)->isInitializer());
}

}  // namespace
}  // namespace qforge::testing
