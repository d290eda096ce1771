// float16-to-float32: a model converted to float16 is widened inside and keeps its interface;
// float16 weights behind a Cast (how converters keep a float32 interface) lose the Cast.
#include "passes/float16_to_float32.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "exec/executor.h"
#include "ir/parse.h"
#include "support/checks.h"
#include "support/pass_harness.h"

namespace qforge::passes {
namespace {

// A whole-float16 model: float16 input, weight, Constant and output.
const char* const kHalfModel = R"(
  graph g
  input %x: float16[N,3]
  init %w: float16[3,2] = {1, 2, 3, 4, 5, 6}
  %half = Constant[value=tensor<float16[]>{0.5}]()  # half
  %m = MatMul(%x, %w)  # matmul
  %y = Mul(%m, %half)  # scale
  output %y: float16[N,2]
)";

TEST(Float16ToFloat32, AHalfModelRunsInFloat32InsideAndKeepsItsFloat16Interface) {
  Float16Widening widened;
  testing::expectPassRewrites([&](Graph& g) { widened = float16ToFloat32(g); }, kHalfModel, R"(
    graph g
    input %x: float16[N,3]
    init %w: float32[3,2] = {1, 2, 3, 4, 5, 6}
    %half = Constant[value=tensor<float32[]>{0.5}]()  # half
    %x/to_float32_out: float32[N,3] = Cast[to=1](%x)  # x/to_float32
    %m = MatMul(%x/to_float32_out, %w)  # matmul
    %y_float32: float32[N,2] = Mul(%m, %half)  # scale
    %y: float16[N,2] = Cast[to=10](%y_float32)  # y/to_float16
    output %y: float16[N,2]
  )");
  EXPECT_EQ(widened.initializers, 1u);
  EXPECT_EQ(widened.nodes_retyped, 1u);  // the Constant
  EXPECT_EQ(widened.interface_casts, 2u);
}

TEST(Float16ToFloat32, TheWidenedModelComputesTheClosedFormAndReturnsFloat16) {
  Graph g = parseGraph(kHalfModel);
  float16ToFloat32(g);
  const at::Tensor x = at::tensor({1.0f, -2.0f, 0.25f, 3.0f, 0.5f, -1.0f}).reshape({2, 3});
  const at::Tensor w = at::arange(1, 7, at::kFloat).reshape({3, 2});
  const at::Tensor y = Executor(g).run({{"x", x.to(at::kHalf)}}).at("y");
  EXPECT_EQ(y.scalar_type(), at::kHalf);
  // Small whole-number products: exact in float16 as in float32.
  EXPECT_TRUE(at::equal(y.to(at::kFloat), at::matmul(x, w) * 0.5f)) << y;
}

// float16 weights behind Cast(to=float): what converters that keep a float32 interface write.
// The weight becomes float32 and the Cast, now float32 to float32, goes.
TEST(Float16ToFloat32, HalfWeightsBehindACastToFloatLoseTheCast) {
  Float16Widening widened;
  testing::expectPassRewrites([&](Graph& g) { widened = float16ToFloat32(g); }, R"(
    graph g
    input %x: float32[N,3]
    init %w16: float16[3,2] = {1, 2, 3, 4, 5, 6}
    %w = Cast[to=1](%w16)  # w_cast
    %y = MatMul(%x, %w)  # matmul
    output %y: float32[N,2]
  )",
                              R"(
    graph g
    input %x: float32[N,3]
    init %w16: float32[3,2] = {1, 2, 3, 4, 5, 6}
    %y = MatMul(%x, %w16)  # matmul
    output %y: float32[N,2]
  )");
  EXPECT_EQ(widened.casts_removed, 1u);
  EXPECT_EQ(widened.interface_casts, 0u);
}

// Negative cases: a float32 model is left as it is; a Cast to float of an integer stays (it
// converts), and so does a Cast writing a graph output (its name is the model's interface).
TEST(Float16ToFloat32, LeavesFloat32ModelsAndConvertingCastsAlone) {
  const char* const model = R"(
    graph g
    input %x: float32[N,3]
    input %ids: int64[N,3]
    %idsf = Cast[to=1](%ids)  # ids_to_float
    %s = Add(%x, %idsf)  # add
    %y = Cast[to=1](%s)  # output_cast
    output %y: float32[N,3]
  )";
  Float16Widening widened;
  testing::expectPassRewrites([&](Graph& g) { widened = float16ToFloat32(g); }, model, model);
  EXPECT_EQ(widened.total(), 0u);
}

}  // namespace
}  // namespace qforge::passes
