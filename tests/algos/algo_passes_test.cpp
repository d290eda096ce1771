// Cross-layer equalization as a named pass: in a text pipeline, through prepare().
#include "algos/algo_passes.h"

#include <gtest/gtest.h>

#include "algos/equalization.h"
#include "core/error.h"
#include "exec/executor.h"
#include "passes/prepare.h"
#include "support/quant_graphs.h"

namespace qforge {
namespace {

// conv1's output channels span ranges 100x apart, so equalization has work to do.
Graph unevenConvReluConv() {
  Graph g = testing::convReluConv(5);
  at::Tensor w1 = g.value("w1")->initializer();
  w1.select(0, 0).mul_(10);
  w1.select(0, 2).mul_(0.1);
  return g;
}

at::Tensor runFloat(const Graph& g, const at::Tensor& x) {
  Executor executor(g);
  return executor.run({{"x", x}}).at("y");
}

// Per channel i: max |W1[i, ...]| and max |W2[:, i, ...]|.
at::Tensor outputRanges(const at::Tensor& w) {
  return w.abs().flatten(1).amax(1);
}
at::Tensor inputRanges(const at::Tensor& w) {
  return w.abs().transpose(0, 1).flatten(1).amax(1);
}

TEST(AlgoPasses, CleEqualizesPairRangesAndKeepsTheFunction) {
  Graph g = unevenConvReluConv();
  const at::Tensor x = at::randn({2, 2, 5, 5});
  const at::Tensor before = runFloat(g, x);
  passes::PassContext context;
  auto records = passes::PassPipeline::parse("cle", algos::builtinPasses()).run(g, context);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].result.changes, 1);
  const auto& report = std::any_cast<const algos::EqualizationReport&>(records[0].result.details);
  ASSERT_EQ(report.pairs.size(), 1u);
  EXPECT_EQ(report.pairs[0].conv1, "conv1");
  // The optimum of the paper's objective: both layers' per-channel ranges equal.
  EXPECT_TRUE(at::allclose(outputRanges(g.value("w1")->initializer()),
                           inputRanges(g.value("w2")->initializer()), 1e-4, 1e-6));
  // Relu(s x) = s Relu(x) for s > 0: the float function does not change.
  EXPECT_TRUE(at::allclose(runFloat(g, x), before, 1e-4, 1e-5));
}

TEST(AlgoPasses, PrepareRunsCleFromAPassListBeforeThePlacementPasses) {
  passes::PrepareOptions options;
  options.passes = "cle";
  options.pass_registry = &algos::builtinPasses();
  auto m = passes::prepare(unevenConvReluConv(), testing::tinyBackend(), options);
  ASSERT_FALSE(m->passRecords().empty());
  EXPECT_EQ(m->passRecords().front().name, "cle");
  EXPECT_EQ(m->passRecords().back().name, "insert-fake-quant");
  EXPECT_TRUE(at::allclose(outputRanges(m->graph().value("w1")->initializer()),
                           inputRanges(m->graph().value("w2")->initializer()), 1e-4, 1e-6));
  // The built-in registry alone does not know cle.
  options.pass_registry = nullptr;
  EXPECT_THROW(passes::prepare(unevenConvReluConv(), testing::tinyBackend(), options), Error);
}

}  // namespace
}  // namespace qforge
