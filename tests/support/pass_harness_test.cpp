#include "support/pass_harness.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

namespace qforge::testing {
namespace {

const char* const kReluGraph = R"(
  graph g
  input %x: float32[2]
  %y: float32[2] = Relu(%x)  # act
  output %y: float32[2]
)";

void reluToAbs(Graph& g) {
  Node* relu = g.findNode("act");
  Node* abs = g.addNode("Abs", {relu->input(0)}, {"abs_out"}, "abs");
  abs->output(0)->type = relu->output(0)->type;
  g.replaceAllUsesWith(relu->output(0), abs->output(0));
  g.removeNode(relu);
  g.renameValue(abs->output(0), "y");
}

TEST(PassHarnessTest, PassesWhenTheRewriteMatchesWhateverTheSpacing) {
  const Graph g = expectPassRewrites(reluToAbs, kReluGraph,
                                     "graph g\n"
                                     "input %x: float32[2]\n"
                                     "%y: float32[2] =   Abs(%x)    # abs\n"
                                     "output %y: float32[2]\n");
  ASSERT_NE(g.findNode("abs"), nullptr);
  EXPECT_EQ(g.findNode("act"), nullptr);
}

TEST(PassHarnessTest, FailsWithALineDiffWhenTheRewriteDiffers) {
  EXPECT_NONFATAL_FAILURE(expectPassRewrites(reluToAbs, kReluGraph, kReluGraph),
                          "-   %y: float32[2] = Relu(%x)  # act\n"
                          "+   %y: float32[2] = Abs(%x)  # abs\n");
}

TEST(PassHarnessTest, FailsWhenTheRewrittenGraphDoesNotVerify) {
  // Two nodes named "act": the dumps agree, the verifier does not.
  auto twoNamedAct = [](Graph& g) { g.addNode("Neg", {g.value("y")}, {"n"}, "act"); };
  const std::string after = std::string(kReluGraph) + "  %n = Neg(%y)  # act\n";
  EXPECT_NONFATAL_FAILURE(expectPassRewrites(twoNamedAct, kReluGraph, after),
                          "the rewritten graph does not verify");
}

TEST(PassHarnessTest, ComparesSmallInitializersByValue) {
  const char* const before = "graph g\n  init %w: float32[2] = {1,2}\n  output %w\n";
  auto doubleIt = [](Graph& g) { g.value("w")->setInitializer(g.value("w")->initializer() * 2); };
  expectPassRewrites(doubleIt, before, "graph g\n  init %w: float32[2] = {2,4}\n  output %w\n");
  EXPECT_NONFATAL_FAILURE(expectPassRewrites(doubleIt, before, before),
                          "+   init %w: float32[2] = {2,4}");
  // With max_values 0 only the type and shape count.
  expectPassRewrites(doubleIt, before, "graph g\n  init %w: float32[2]\n  output %w\n", 0);
}

TEST(PassHarnessTest, InitLinesMayComeInAnyOrder) {
  expectPassRewrites([](Graph&) {},
                     "graph g\n  init %a: int64[] = {1}\n  init %b: int64[] = {2}\n"
                     "  output %a\n  output %b\n",
                     "graph g\n  init %b: int64[] = {2}\n  init %a: int64[] = {1}\n"
                     "  output %a\n  output %b\n");
}

TEST(PassHarnessTest, BadTextFailsTheTestWithTheParseError) {
  EXPECT_NONFATAL_FAILURE(expectPassRewrites([](Graph&) {}, "graph g\n  %y = Relu(\n", kReluGraph),
                          "graph text line 2");
  EXPECT_FATAL_FAILURE(
      {
        Graph g;
        expectPassRewrites([](Graph&) {}, g, "not a graph");
      },
      "the expected graph text does not parse");
}

TEST(LineDiffTest, MarksRemovedAddedAndCommonLines) {
  EXPECT_EQ(lineDiff("a\nb\nc\n", "a\nb\nc\n"), "");
  EXPECT_EQ(lineDiff("a\nb\nc\n", "a\nx\nc\nd\n"), "  a\n- b\n+ x\n  c\n+ d\n");
}

}  // namespace
}  // namespace qforge::testing
