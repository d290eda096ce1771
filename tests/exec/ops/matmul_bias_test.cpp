// A Linear layer as exporters write it, MatMul then Add of a per-column bias, run by the executor:
// in float32 inference the bias is added in oneDNN's matmul kernel and the Add does not run as a
// node. Values against the product and sum in float64 (an independent closed form), and bit for
// bit against the two nodes run apart (the sum is rounded once either way, as ONNX Runtime's
// fused Gemm rounds it); near misses (a bias that is not per column, a product read elsewhere, a
// batched right operand, gradients recorded) run the Add as a node with the same values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/executor.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using testing::expectTensorNear;

struct Linear {
  std::vector<int64_t> x_shape = {2, 5, 16};
  at::Tensor weight = at::randn({16, 12});
  at::Tensor bias = at::randn({12});
  bool bias_first = false;         // Add(bias, product) rather than Add(product, bias)
  bool product_is_output = false;  // the MatMul's value is also a graph output
};

// x -> MatMul(weight) -> Add(bias) -> y
Graph linearGraph(const Linear& l) {
  Graph g;
  g.model.opset_imports = {{"", 13}};
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* mm = g.addNode("MatMul", {x, g.addInitializer("w", l.weight)}, {"p"}, "matmul");
  Value* bias = g.addInitializer("b", l.bias);
  Node* add = g.addNode("Add",
                        l.bias_first ? std::vector<Value*>{bias, mm->output(0)}
                                     : std::vector<Value*>{mm->output(0), bias},
                        {"y"}, "add");
  g.addOutput(add->output(0));
  if (l.product_is_output) g.addOutput(mm->output(0));
  return g;
}

at::Tensor exactLinear(const at::Tensor& x, const Linear& l) {
  return (at::matmul(x.to(at::kDouble), l.weight.to(at::kDouble)) + l.bias.to(at::kDouble))
      .to(at::kFloat);
}

int64_t addCalls(const Executor& ex) {
  int64_t calls = 0;
  for (const NodeTiming& t : ex.profile())
    calls += t.node->opType() == "Add" ? t.calls : 0;
  return calls;
}

// The same graph with the product hooked (as an observer would): the Add must run on its own.
at::Tensor runApart(const Graph& g, const at::Tensor& x) {
  Executor apart(g, ExecutorOptions{false, /*profile=*/true});
  apart.addHook("p", [](const Value&, const at::Tensor& t) { return t; });
  const at::Tensor y = apart.run({{"x", x}}).at("y");
  EXPECT_EQ(addCalls(apart), 1);
  return y;
}

TEST(MatMulBiasTest, TheBiasIsAddedInTheProductsKernelWithTheSameBits) {
  at::manual_seed(7);
  for (bool bias_first : {false, true}) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{7, 16}, {2, 5, 16}, {2, 3, 4, 16}}) {
      SCOPED_TRACE(std::string(bias_first ? "Add(bias, p)" : "Add(p, bias)") + ", rank " +
                   std::to_string(shape.size()));
      Linear l;
      l.x_shape = shape;
      l.bias_first = bias_first;
      if (shape.size() == 2) l.bias = at::randn({1, 12});  // (1, N) is a column bias too
      const Graph g = linearGraph(l);
      const at::Tensor x = at::randn(shape);
      Executor ex(g, ExecutorOptions{false, /*profile=*/true});
      for (int run = 0; run < 3; ++run) {  // the weight is packed from the second run
        const at::Tensor y = ex.run({{"x", x}}).at("y");
        expectTensorNear(y, exactLinear(x, l), 1e-5, 5e-5);
        EXPECT_TRUE(at::equal(y, runApart(g, x)));
      }
      EXPECT_EQ(addCalls(ex), 0);
    }
  }
}

TEST(MatMulBiasTest, AddsThatAreNotAPerColumnBiasRunAsNodes) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({2, 5, 16});
  struct Case {
    const char* what;
    at::Tensor bias;
  };
  const std::vector<Case> cases = {
      {"a bias per row", at::randn({5, 1})},
      {"a full addend", at::randn({2, 5, 12})},
      {"a scalar", at::scalar_tensor(0.5, at::kFloat)},
      {"a bias that adds a dim", at::randn({1, 1, 1, 12})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Linear l;
    l.bias = c.bias;
    const Graph g = linearGraph(l);  // the executor keeps a reference
    Executor ex(g, ExecutorOptions{false, /*profile=*/true});
    const at::Tensor y = ex.run({{"x", x}}).at("y");
    expectTensorNear(y, exactLinear(x, l), 1e-5, 5e-5);
    EXPECT_EQ(addCalls(ex), 1);
  }
}

TEST(MatMulBiasTest, AProductReadElsewhereOrRecordedForGradientsIsKept) {
  at::manual_seed(9);
  const at::Tensor x = at::randn({3, 16});
  Linear seen;
  seen.product_is_output = true;
  const Graph seen_graph = linearGraph(seen);
  Executor ex(seen_graph, ExecutorOptions{false, /*profile=*/true});
  const TensorMap out = ex.run({{"x", x}});
  expectTensorNear(out.at("p"),
                   at::matmul(x.to(at::kDouble), seen.weight.to(at::kDouble)).to(at::kFloat), 1e-5,
                   5e-5);
  expectTensorNear(out.at("y"), exactLinear(x, seen), 1e-5, 5e-5);
  EXPECT_EQ(addCalls(ex), 1);

  Linear trained;
  const Graph trained_graph = linearGraph(trained);
  Executor training(trained_graph, ExecutorOptions{true, /*profile=*/true});
  const at::Tensor leaf = x.clone().requires_grad_(true);
  const at::Tensor y = training.run({{"x", leaf}}).at("y");
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(addCalls(training), 1);
}

// Attention's P @ V: both operands computed, the right one batched. oneDNN takes a bias only for
// a 2-D weight, so the Add runs as a node.
TEST(MatMulBiasTest, ABatchedRightOperandKeepsItsAdd) {
  at::manual_seed(10);
  Graph g;
  g.model.opset_imports = {{"", 13}};
  Value* a = g.addValue("a");
  Value* b = g.addValue("b");
  g.addInput(a);
  g.addInput(b);
  Node* mm = g.addNode("MatMul", {a, b}, {"p"}, "matmul");
  const at::Tensor bias = at::randn({6});
  Node* add = g.addNode("Add", {mm->output(0), g.addInitializer("bias", bias)}, {"y"}, "add");
  g.addOutput(add->output(0));
  const at::Tensor av = at::randn({3, 4, 5});
  const at::Tensor bv = at::randn({3, 5, 6});
  Executor ex(g, ExecutorOptions{false, /*profile=*/true});
  const at::Tensor y = ex.run({{"a", av}, {"b", bv}}).at("y");
  expectTensorNear(
      y, (at::matmul(av.to(at::kDouble), bv.to(at::kDouble)) + bias.to(at::kDouble)).to(at::kFloat),
      1e-5, 5e-5);
  EXPECT_EQ(addCalls(ex), 1);
}

}  // namespace
}  // namespace qforge
