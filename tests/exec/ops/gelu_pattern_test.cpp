// GELU written out as torch.onnx exports it, run by the executor with the built-in lowerings:
// the matched chain gives x * 0.5 * (1 + erf(x / sqrt 2)) computed in double with libm's erf, and
// its Erf does not run as a node (in float32 inference, bit for bit as ONNX Runtime's fused Gelu
// kernel); near misses run node by node and give their own arithmetic.
#include "exec/ops/gelu_pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "exec/executor.h"
#include "exec/ops/mlas_kernels.h"
#include "exec/ops/vector_kernels.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using testing::expectTensorNear;

struct GeluChain {
  float divisor = static_cast<float>(std::sqrt(2.0));
  float one = 1.f;
  float half = 0.5f;
  bool mul_by_x = true;  // false: the second Mul multiplies by another tensor
  bool x_first = true;   // Mul(x, erf + 1) as torch writes it, or Mul(erf + 1, x)
};

// x -> Div(divisor) -> Erf -> Add(one) -> Mul(x or other) -> Mul(half) -> y
Graph geluGraph(const GeluChain& c) {
  Graph g;
  g.model.opset_imports = {{"", 13}};
  Value* x = g.addValue("x");
  g.addInput(x);
  Value* other = g.addInitializer("other", at::full({8}, 3.f));
  Node* div =
      g.addNode("Div", {x, g.addInitializer("d", at::scalar_tensor(c.divisor))}, {"q"}, "div");
  Node* erf = g.addNode("Erf", {div->output(0)}, {"e"}, "erf");
  Node* add = g.addNode("Add", {erf->output(0), g.addInitializer("one", at::scalar_tensor(c.one))},
                        {"a"}, "add");
  Value* factor = c.mul_by_x ? x : other;
  Node* mul = g.addNode("Mul",
                        c.x_first ? std::vector<Value*>{factor, add->output(0)}
                                  : std::vector<Value*>{add->output(0), factor},
                        {"m"}, "mul");
  Node* half = g.addNode("Mul", {mul->output(0), g.addInitializer("h", at::scalar_tensor(c.half))},
                         {"y"}, "half");
  g.addOutput(half->output(0));
  return g;
}

// The chain's own arithmetic in double: factor * half * (one + erf(x / divisor)).
at::Tensor expected(const at::Tensor& x, const GeluChain& c) {
  at::Tensor out = at::empty_like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x[i].item<double>();
    const double factor = c.mul_by_x ? v : 3.0;
    out[i] = factor * c.half * (c.one + std::erf(v / c.divisor));
  }
  return out;
}

int64_t erfCalls(const Executor& ex) {
  int64_t calls = 0;
  for (const NodeTiming& t : ex.profile())
    calls += t.node->opType() == "Erf" ? t.calls : 0;
  return calls;
}

const at::Tensor kX = at::tensor({-4.f, -1.5f, -0.3f, -1e-4f, 0.f, 0.2f, 1.f, 3.5f});

TEST(GeluPatternTest, TheWrittenOutChainRunsAsOneGelu) {
  for (bool x_first : {true, false}) {
    SCOPED_TRACE(x_first ? "Mul(x, erf + 1)" : "Mul(erf + 1, x)");
    GeluChain c;
    c.x_first = x_first;
    Graph g = geluGraph(c);
    Executor ex(g, ExecutorOptions{false, /*profile=*/true});
    expectTensorNear(ex.run({{"x", kX}}).at("y"), expected(kX, c), 1e-6, 1e-6);
    EXPECT_EQ(erfCalls(ex), 0);
  }
}

// ONNX Runtime fuses the chain (GeluFusion, BiasGeluFusion) and its kernel computes
// (x * 0.5f) * (erf(x * (float)M_SQRT1_2) + 1.0f) with MLAS's erf: restated here in float from
// onnxruntime's bias_gelu_fusion.cc, on MLAS's scalar erf (tests/exec/ops/mlas_kernels_test.cpp).
TEST(GeluPatternTest, TheFusedChainComputesAsOnnxRuntimesGeluKernel) {
  const at::Tensor x = at::cat({at::randn({1000}) * 3, kX});
  const at::Tensor expected_bits = at::empty_like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x[i].item<float>();
    const float e = mlas::erf(v * static_cast<float>(M_SQRT1_2));
    expected_bits[i] = (v * 0.5f) * (e + 1.0f);
  }
  GeluChain c;
  Graph g = geluGraph(c);
  for (ops::VectorKernels kernels :
       {ops::VectorKernels::kAvx512, ops::VectorKernels::kAvx2, ops::VectorKernels::kScalar}) {
    SCOPED_TRACE(static_cast<int>(kernels));
    const ops::VectorKernels before = ops::setWidestVectorKernels(kernels);
    Executor ex(g, ExecutorOptions{false, /*profile=*/true});
    const at::Tensor y = ex.run({{"x", x}}).at("y");
    ops::setWidestVectorKernels(before);
    EXPECT_TRUE(at::equal(y, expected_bits));
    EXPECT_EQ(erfCalls(ex), 0);
  }
  // With gradients recorded the chain is not fused at all, and stays differentiable.
  Executor training(g, ExecutorOptions{true, true});
  const at::Tensor leaf = x.clone().requires_grad_(true);
  const at::Tensor y = training.run({{"x", leaf}}).at("y");
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(erfCalls(training), 1);
}

TEST(GeluPatternTest, NearMissesRunNodeByNode) {
  GeluChain other_divisor;
  other_divisor.divisor = 2.f;
  GeluChain other_one;
  other_one.one = 2.f;
  GeluChain other_half;
  other_half.half = 0.25f;
  GeluChain other_factor;
  other_factor.mul_by_x = false;
  for (const GeluChain& c : {other_divisor, other_one, other_half, other_factor}) {
    Graph g = geluGraph(c);
    Executor ex(g, ExecutorOptions{false, true});
    expectTensorNear(ex.run({{"x", kX}}).at("y"), expected(kX, c), 1e-6, 1e-6);
    EXPECT_EQ(erfCalls(ex), 1);
  }
  // A hook on the Erf's output sees it, so the chain is not computed at once.
  Graph g = geluGraph({});
  Executor ex(g, ExecutorOptions{false, true});
  int64_t seen = 0;
  ex.addHook("e", [&](const Value&, const at::Tensor& t) {
    seen += t.numel();
    return t;
  });
  expectTensorNear(ex.run({{"x", kX}}).at("y"), expected(kX, {}), 1e-6, 1e-6);
  EXPECT_EQ(seen, kX.numel());
  EXPECT_EQ(erfCalls(ex), 1);
}

}  // namespace
}  // namespace qforge
