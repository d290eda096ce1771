// Constant folding: nodes on constants only become initializers computed by the op's lowering;
// random ops, graph outputs, runtime-dependent nodes and huge results stay nodes.
#include "passes/fold_constants.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "exec/executor.h"
#include "ir/parse.h"
#include "support/checks.h"
#include "support/pass_harness.h"

namespace qforge::passes {
namespace {

// A weight transposed and reshaped, a Constant shape, arithmetic on two initializers, and a shape
// computation on the runtime input that must stay.
const char* const kFoldable = R"(
  graph g
  input %x: float32[N,6]
  init %a: float32[3] = {1, 2, 3}
  init %b: float32[3] = {0.5, 0.5, 0.5}
  init %w: float32[2,3] = {1, 2, 3, 4, 5, 6}
  %c = Add(%a, %b)  # add
  %shape = Constant[value=tensor<int64[2]>{-1, 3}]()  # shape_const
  %wt = Transpose[perm=[1,0]](%w)  # transpose
  %r = Reshape(%x, %shape)  # reshape
  %m = Mul(%r, %c)  # mul
  %y = MatMul(%m, %wt)  # matmul
  %n = Shape(%x)  # shape_of_x
  output %y
  output %n
)";

TEST(FoldConstants, NodesOnConstantsBecomeInitializersOfTheSameName) {
  testing::expectPassRewrites([](Graph& g) { EXPECT_EQ(foldConstants(g), 3u); }, kFoldable, R"(
    graph g
    input %x: float32[N,6]
    init %c: float32[3] = {1.5, 2.5, 3.5}
    init %shape: int64[2] = {-1, 3}
    init %wt: float32[3,2] = {1, 4, 2, 5, 3, 6}
    %r = Reshape(%x, %shape)  # reshape
    %m = Mul(%r, %c)  # mul
    %y = MatMul(%m, %wt)  # matmul
    %n = Shape(%x)  # shape_of_x
    output %y
    output %n
  )");
}

TEST(FoldConstants, TheFoldedGraphComputesWhatTheOriginalDid) {
  Graph original = parseGraph(kFoldable);
  Graph folded = parseGraph(kFoldable);
  foldConstants(folded);
  // Fixed values, not randn: an unseeded draw can put an output next to zero, where the
  // closed form's summation order differs from the executor's by more than an absolute 1e-8.
  const at::Tensor x = at::linspace(-2.3, 2.9, 24, at::kFloat).reshape({4, 6});
  // Closed form: rows of 3, times (a + b), times w^T.
  const at::Tensor w = at::arange(1, 7, at::kFloat).reshape({2, 3});
  const at::Tensor want = at::matmul(x.reshape({-1, 3}) * at::tensor({1.5f, 2.5f, 3.5f}), w.t());
  EXPECT_TRUE(at::allclose(Executor(folded).run({{"x", x}}).at("y"), want, 1e-5, 1e-5));
  EXPECT_TRUE(at::equal(Executor(folded).run({{"x", x}}).at("y"),
                        Executor(original).run({{"x", x}}).at("y")));
}

TEST(FoldConstants, ChainsFoldWholeAndTheirInputsGo) {
  Graph g = parseGraph(R"(
    graph g
    input %x: float32[2]
    init %a: float32[2] = {1, 4}
    %s = Sqrt(%a)
    %t = Neg(%s)
    %y = Add(%x, %t)
    output %y
  )");
  EXPECT_EQ(foldConstants(g), 2u);
  EXPECT_EQ(g.findValue("a"), nullptr);
  EXPECT_EQ(g.findValue("s"), nullptr);
  ASSERT_TRUE(g.value("t")->isInitializer());
  EXPECT_TRUE(at::equal(g.value("t")->initializer(), at::tensor({-1.0f, -2.0f})));
}

TEST(FoldConstants, RandomOpsGraphOutputsAndRuntimeValuesStay) {
  Graph g = parseGraph(R"(
    graph g
    input %x: float32[2,2]
    init %a: float32[2,2]
    %noise = RandomNormalLike(%a)  # random
    %z = Add(%x, %noise)
    %k = Neg(%a)  # output_node
    %s = Shape(%x)  # shape_of_input
    output %z
    output %k
    output %s
  )");
  // The built-in table has no random ops; a table with one shows it is left alone all the same.
  OpRegistry registry = OpRegistry::builtin();
  OpInfo random;
  random.op_type = "RandomNormalLike";
  random.run = [](const OpContext& c) {
    return std::vector<at::Tensor>{at::randn_like(c.input(0))};
  };
  registry.add(random);
  EXPECT_EQ(foldConstants(g, kMaxFoldedBytes, registry), 0u);
  EXPECT_EQ(testing::countOps(g, "RandomNormalLike"), 1u);
  EXPECT_EQ(testing::countOps(g, "Neg"), 1u);
  EXPECT_EQ(testing::countOps(g, "Shape"), 1u);
}

TEST(FoldConstants, ResultsOverTheLimitStayNodes) {
  const char* const text = R"(
    graph g
    input %x: float32[1]
    init %dims: int64[1] = {1024}
    init %w: float32[1024]
    %fill = ConstantOfShape(%dims)
    %t = Neg(%w)
    %a = Add(%x, %fill)
    %y = Add(%a, %t)
    output %y
  )";
  Graph small_limit = parseGraph(text);
  // 1024 floats are 4 KiB: a 1 KiB limit keeps both; the default folds both.
  EXPECT_EQ(foldConstants(small_limit, 1024), 0u);
  EXPECT_EQ(testing::countOps(small_limit, "ConstantOfShape"), 1u);
  EXPECT_EQ(testing::countOps(small_limit, "Neg"), 1u);
  Graph default_limit = parseGraph(text);
  EXPECT_EQ(foldConstants(default_limit), 2u);
  EXPECT_TRUE(at::equal(default_limit.value("fill")->initializer(), at::zeros({1024})));
}

TEST(FoldConstants, AFailingLoweringIsLeftForTheExecutorToReport) {
  Graph g = parseGraph(R"(
    graph g
    input %x: float32[6]
    init %w: float32[6]
    init %shape: int64[2] = {4, 4}
    %r = Reshape(%w, %shape)  # bad_reshape
    %y = Add(%x, %r)
    output %y
  )");
  EXPECT_EQ(foldConstants(g), 0u);
  EXPECT_EQ(testing::countOps(g, "Reshape"), 1u);
}

}  // namespace
}  // namespace qforge::passes
