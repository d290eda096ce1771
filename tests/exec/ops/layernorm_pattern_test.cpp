// LayerNorm written out as torch.onnx exports it before opset 17, run by the executor with the
// built-in lowerings. The matched pattern gives, bit for bit, the nodes' own elementwise float32
// steps around means taken as the float32 rounding of float64 sums (computed here with ATen in
// float64), is close to the exact float64 LayerNorm, and runs none of its Sub, Pow or Sqrt as
// nodes. Near misses run node by node and give the same values to float32 rounding.
#include "exec/ops/layernorm_pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/ops/vector_kernels.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using ops::layerNormRows;
using testing::expectTensorNear;
using testing::ints;

constexpr int64_t kFeatures = 24;

struct LayerNormForm {
  int64_t opset = 13;
  int64_t axis = -1;           // of both ReduceMeans
  double exponent = 2.0;       // of the Pow
  bool square_by_mul = false;  // Mul(d, d) instead of the Pow
  bool gamma_first = false;    // Mul(gamma, .) rather than Mul(., gamma)
  bool with_beta = true;       // false: the graph ends at the Mul
  bool row_gamma = false;      // gamma of shape [rows, 1]: not per feature
};

at::Tensor gammaOf() {
  return at::linspace(0.5, 2.0, kFeatures);
}
at::Tensor betaOf() {
  return at::linspace(-1.0, 1.0, kFeatures);
}
constexpr float kEpsilon = 1e-5f;

// x[4, 6, kFeatures] -> ReduceMean -> Sub -> Pow -> ReduceMean -> Add eps -> Sqrt -> Div -> Mul
// gamma -> Add beta -> y
Graph layerNormGraph(const LayerNormForm& f) {
  Graph g;
  g.model.opset_imports = {{"", f.opset}};
  Value* x = g.addValue("x");
  g.addInput(x);
  auto reduceMean = [&](Value* in, const std::string& out) {
    if (f.opset >= 18) {
      return g.addNode("ReduceMean", {in, g.addInitializer(out + "_axes", at::tensor({f.axis}))},
                       {out}, out);
    }
    Node* node = g.addNode("ReduceMean", {in}, {out}, out);
    node->attributes.set(ints("axes", {f.axis}));
    return node;
  };
  Node* mean = reduceMean(x, "mean");
  Node* sub = g.addNode("Sub", {x, mean->output(0)}, {"d"}, "sub");
  Node* pow =
      g.addNode("Pow", {sub->output(0), g.addInitializer("two", at::scalar_tensor(f.exponent))},
                {"p"}, "pow");
  Node* var = reduceMean(pow->output(0), "var");
  Node* add = g.addNode(
      "Add", {var->output(0), g.addInitializer("eps", at::scalar_tensor(kEpsilon))}, {"ve"}, "add");
  Node* sqrt = g.addNode("Sqrt", {add->output(0)}, {"s"}, "sqrt");
  Node* div = g.addNode("Div", {sub->output(0), sqrt->output(0)}, {"n"}, "div");
  Value* gamma = g.addInitializer(
      "gamma", f.row_gamma ? at::linspace(0.5, 2.0, 6).reshape({6, 1}) : gammaOf());
  Node* mul = g.addNode("Mul",
                        f.gamma_first ? std::vector<Value*>{gamma, div->output(0)}
                                      : std::vector<Value*>{div->output(0), gamma},
                        {f.with_beta ? "ng" : "y"}, "mul");
  if (!f.with_beta) {
    g.addOutput(mul->output(0));
    return g;
  }
  g.addOutput(g.addNode("Add", {mul->output(0), g.addInitializer("beta", betaOf())}, {"y"}, "bias")
                  ->output(0));
  return g;
}

// The nodes' float32 steps with both means rounded once from float64 sums.
at::Tensor roundedOnce(const at::Tensor& x, const LayerNormForm& f) {
  const int64_t n = x.size(-1);
  const at::Tensor mean = (x.to(at::kDouble).sum(-1, true) / n).to(at::kFloat);
  const at::Tensor d = x - mean;
  const at::Tensor var = ((d * d).to(at::kDouble).sum(-1, true) / n).to(at::kFloat);
  at::Tensor y = d / at::sqrt(var + kEpsilon);
  y = y * (f.row_gamma ? at::linspace(0.5, 2.0, 6).reshape({6, 1}) : gammaOf());
  return f.with_beta ? y + betaOf() : y;
}

// LayerNorm in float64 throughout.
at::Tensor exact(const at::Tensor& x) {
  const at::Tensor x64 = x.to(at::kDouble);
  const at::Tensor d = x64 - x64.mean(-1, true);
  const at::Tensor y = d / at::sqrt((d * d).mean(-1, true) + kEpsilon);
  return y * gammaOf().to(at::kDouble) + betaOf().to(at::kDouble);
}

int64_t callsOf(const Executor& ex, const std::string& op) {
  int64_t calls = 0;
  for (const NodeTiming& t : ex.profile())
    calls += t.node->opType() == op ? t.calls : 0;
  return calls;
}

// Mixed magnitudes and an offset make the order of the sums show in the last bits.
at::Tensor sampleInput() {
  at::manual_seed(5);
  return at::randn({4, 6, kFeatures}) * at::exp(at::randn({4, 6, kFeatures})) + 3.f;
}

TEST(LayerNormPatternTest, TheWrittenOutPatternRunsAsOneKernel) {
  const at::Tensor x = sampleInput();
  for (int64_t opset : {11, 13, 18}) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE("opset " + std::to_string(opset) + ", variant " + std::to_string(variant));
      LayerNormForm f;
      f.opset = opset;
      f.gamma_first = variant == 1;
      f.square_by_mul = variant == 2;
      Graph g = layerNormGraph(f);
      Executor ex(g, ExecutorOptions{false, /*profile=*/true});
      const at::Tensor y = ex.run({{"x", x}}).at("y");
      EXPECT_TRUE(at::equal(y, roundedOnce(x, f))) << (y - roundedOnce(x, f)).abs().max();
      expectTensorNear(y.to(at::kDouble), exact(x), 1e-5, 1e-5);
      EXPECT_EQ(callsOf(ex, "Sub") + callsOf(ex, "Pow") + callsOf(ex, "Sqrt") + callsOf(ex, "Mul"),
                0);
    }
  }
}

// Without an Add of beta, or with a gamma that is not per feature, the kernel stops before
// them: they run as nodes on its output.
TEST(LayerNormPatternTest, AMissingOrOtherAffineStepRunsAsItsOwnNode) {
  const at::Tensor x = sampleInput();
  LayerNormForm no_beta;
  no_beta.with_beta = false;
  LayerNormForm row_gamma;
  row_gamma.row_gamma = true;
  for (const LayerNormForm& f : {no_beta, row_gamma}) {
    Graph g = layerNormGraph(f);
    Executor ex(g, ExecutorOptions{false, true});
    const at::Tensor y = ex.run({{"x", x}}).at("y");
    EXPECT_TRUE(at::equal(y, roundedOnce(x, f))) << (y - roundedOnce(x, f)).abs().max();
    EXPECT_EQ(callsOf(ex, "Sqrt"), 0);
    EXPECT_EQ(callsOf(ex, "Mul"), f.row_gamma ? 1 : 0);
  }
}

TEST(LayerNormPatternTest, NearMissesRunNodeByNode) {
  const at::Tensor x = sampleInput();
  LayerNormForm middle_axis;
  middle_axis.axis = 1;
  LayerNormForm cube;
  cube.exponent = 3.0;
  for (const LayerNormForm& f : {middle_axis, cube}) {
    Graph g = layerNormGraph(f);
    Executor ex(g, ExecutorOptions{false, true});
    const at::Tensor y = ex.run({{"x", x}}).at("y");
    EXPECT_EQ(callsOf(ex, "Sqrt"), 1);
    // Node by node: a normalization over f.axis with the f.exponent-th central moment.
    const int64_t axis = f.axis;
    const at::Tensor x64 = x.to(at::kDouble);
    const at::Tensor d = x64 - x64.mean(axis, true);
    const at::Tensor want =
        d / at::sqrt(d.pow(f.exponent).mean(axis, true) + kEpsilon) * gammaOf().to(at::kDouble) +
        betaOf().to(at::kDouble);
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), want, 1e-3, 1e-3, /*equal_nan=*/true));
  }
  // A value inside that something sees (here the Sub's, requested as an output) keeps every node.
  Graph g = layerNormGraph({});
  Executor ex(g, ExecutorOptions{false, true});
  const TensorMap out = ex.run({{"x", x}}, {"d", "y"});
  EXPECT_EQ(callsOf(ex, "Sqrt"), 1);
  expectTensorNear(out.at("y").to(at::kDouble), exact(x), 1e-5, 1e-5);
  // The Sub's value read by another node: nothing is computed at once either.
  Graph shared = layerNormGraph({});
  shared.addOutput(shared.addNode("Neg", {shared.value("d")}, {"minus_d"}, "neg")->output(0));
  Executor shared_ex(shared, ExecutorOptions{false, true});
  expectTensorNear(shared_ex.run({{"x", x}}).at("y").to(at::kDouble), exact(x), 1e-5, 1e-5);
  EXPECT_EQ(callsOf(shared_ex, "Sqrt"), 1);
}

// The AVX512F rows against the scalar rows, bit for bit, on every length around the vector
// widths (8 doubles in the sums, 16 floats elsewhere), with and without gamma and beta.
TEST(LayerNormPatternTest, TheVectorRowsGiveTheScalarRowsBitsForEveryLength) {
  if (!ops::vectorKernelsUsable(ops::VectorKernels::kAvx512)) {
    GTEST_SKIP() << "this CPU has no AVX512F";
  }
  at::manual_seed(6);
  for (int64_t n = 1; n <= 70; ++n) {
    const at::Tensor x = at::randn({3, n}) * at::exp(at::randn({3, n})) + 3.f;
    const at::Tensor gamma = at::randn({n});
    const at::Tensor beta = at::randn({n});
    for (bool affine : {false, true}) {
      SCOPED_TRACE("length " + std::to_string(n) + (affine ? ", gamma and beta" : ""));
      const at::Tensor g = affine ? gamma : at::Tensor();
      const at::Tensor b = affine ? beta : at::Tensor();
      const ops::VectorKernels before = ops::setWidestVectorKernels(ops::VectorKernels::kScalar);
      const at::Tensor scalar = layerNormRows(x, kEpsilon, g, b);
      ops::setWidestVectorKernels(ops::VectorKernels::kAvx512);
      const at::Tensor vector = layerNormRows(x, kEpsilon, g, b);
      ops::setWidestVectorKernels(before);
      EXPECT_TRUE(at::equal(scalar, vector)) << (scalar - vector).abs().max();
      // Both against the rows' own float32 steps around float64 means, as above.
      const at::Tensor mean = (x.to(at::kDouble).sum(-1, true) / n).to(at::kFloat);
      const at::Tensor d = x - mean;
      const at::Tensor var = ((d * d).to(at::kDouble).sum(-1, true) / n).to(at::kFloat);
      at::Tensor want = d / at::sqrt(var + kEpsilon);
      if (affine) want = want * gamma + beta;
      expectTensorNear(vector, want, 1e-6, 1e-6);
    }
  }
}

TEST(LayerNormPatternTest, TheKernelKeepsEmptyAndNonFiniteRowsAsTheNodesWould) {
  EXPECT_EQ(layerNormRows(at::empty({0, 8}), kEpsilon, {}, {}).sizes(), at::IntArrayRef({0, 8}));
  const at::Tensor rows = at::tensor({1.f, 2.f, NAN, 4.f, 5.f, 5.f, 5.f, 5.f}).reshape({2, 4});
  const at::Tensor y = layerNormRows(rows, kEpsilon, {}, {});
  EXPECT_TRUE(at::isnan(y[0]).all().item<bool>());
  // A constant row: d = 0 everywhere, so 0 / sqrt(eps).
  EXPECT_TRUE(at::equal(y[1], at::zeros({4})));
}

}  // namespace
}  // namespace qforge
