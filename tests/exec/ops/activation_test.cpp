// Activation lowerings: opset-dependent semantics (Softmax's 2-D coercion before opset 13, Clip's
// attributes before opset 11), integer Clip, PRelu broadcasting, autograd, and bad input.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// [2,2,2] input whose exponentials are 1,2,3,4 / 1,1,1,1, so softmax values are simple fractions.
at::Tensor softmaxInput() {
  return at::log(at::tensor({1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0})).reshape({2, 2, 2});
}

TEST(ActivationOpsTest, EveryOpIsRegisteredForOpsets11To17) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* name : {"Relu", "LeakyRelu", "PRelu", "Elu", "Clip", "Sigmoid", "Tanh",
                           "HardSigmoid", "Softmax", "LogSoftmax"}) {
    for (int64_t opset = 11; opset <= 17; ++opset) {
      EXPECT_NE(registry.find("", name, opset), nullptr) << name << " opset " << opset;
    }
  }
  EXPECT_EQ(registry.find("", "HardSwish", 13), nullptr);  // introduced in opset 14
  EXPECT_NE(registry.find("", "HardSwish", 14), nullptr);
  ASSERT_NE(registry.find("", "PRelu", 16), nullptr);
  EXPECT_EQ(registry.find("", "PRelu", 16)->weight_inputs, std::vector<int>{1});
}

TEST(ActivationOpsTest, SoftmaxOpset11NormalizesTheFlattenedTail) {
  // Default axis 1: each batch row [2,2] is one distribution of 4 values.
  at::Tensor expected = at::tensor({0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.25, 0.25}).reshape({2, 2, 2});
  expectTensorNear(run1({"Softmax", 11, {softmaxInput()}}), expected);
}

TEST(ActivationOpsTest, SoftmaxOpset13NormalizesTheLastAxis) {
  at::Tensor expected =
      at::tensor({1.0 / 3, 2.0 / 3, 3.0 / 7, 4.0 / 7, 0.5, 0.5, 0.5, 0.5}).reshape({2, 2, 2});
  expectTensorNear(run1({"Softmax", 13, {softmaxInput()}}), expected);
}

TEST(ActivationOpsTest, SoftmaxOpset13WithAxis1NormalizesOnlyThatAxis) {
  // Pairs along axis 1: (1,3), (2,4), (1,1), (1,1). Opset 11 would mix all four values.
  at::Tensor expected =
      at::tensor({0.25, 1.0 / 3, 0.75, 2.0 / 3, 0.5, 0.5, 0.5, 0.5}).reshape({2, 2, 2});
  expectTensorNear(run1({"Softmax", 13, {softmaxInput()}, {Attribute::makeInt("axis", 1)}}),
                   expected);
}

TEST(ActivationOpsTest, SoftmaxOfAFloat32ScalarIsOneAtEveryOpset) {
  // A scalar has no axis to take rows along: the float32 kernel leaves it to ATen (a distribution
  // over one value).
  for (int64_t opset : {11, 13}) {
    const at::Tensor y =
        run1({"Softmax", opset, {at::scalar_tensor(3.5f)}, {Attribute::makeInt("axis", 0)}});
    EXPECT_EQ(y.dim(), 0) << "opset " << opset;
    EXPECT_EQ(y.item<float>(), 1.0f) << "opset " << opset;
  }
}

TEST(ActivationOpsTest, LogSoftmaxOpset11AxisZeroUsesAllValues) {
  // axis 0: the whole tensor is one row; the exponentials sum to 14.
  at::Tensor expected =
      at::log(at::tensor({1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0}) / 14.0).reshape({2, 2, 2});
  expectTensorNear(run1({"LogSoftmax", 11, {softmaxInput()}, {Attribute::makeInt("axis", 0)}}),
                   expected);
}

TEST(ActivationOpsTest, LogSoftmaxOpset13NegativeAxis) {
  at::Tensor expected =
      at::log(at::tensor({1.0 / 3, 2.0 / 3, 3.0 / 7, 4.0 / 7, 0.5, 0.5, 0.5, 0.5}))
          .reshape({2, 2, 2});
  expectTensorNear(run1({"LogSoftmax", 13, {softmaxInput()}, {Attribute::makeInt("axis", -1)}}),
                   expected);
}

TEST(ActivationOpsTest, SoftmaxAxisOutOfRangeNamesTheNode) {
  expectNodeError({"Softmax", 13, {softmaxInput()}, {Attribute::makeInt("axis", 3)}},
                  "axis 3 is out of range");
  expectNodeError({"LogSoftmax", 11, {softmaxInput()}, {Attribute::makeInt("axis", -4)}},
                  "axis -4 is out of range");
}

TEST(ActivationOpsTest, ClipOpset6TakesAttributes) {
  at::Tensor x = at::tensor({-3.f, -0.5f, 0.5f, 3.f});
  expectTensorEqual(
      run1({"Clip", 6, {x}, {Attribute::makeFloat("min", -1.0), Attribute::makeFloat("max", 1.0)}}),
      at::tensor({-1.f, -0.5f, 0.5f, 1.f}));
  // Defaults are the float range: nothing changes.
  expectTensorEqual(run1({"Clip", 6, {x}}), x);
  expectTensorEqual(run1({"Clip", 6, {x}, {Attribute::makeFloat("max", 0.0)}}),
                    at::tensor({-3.f, -0.5f, 0.f, 0.f}));
}

TEST(ActivationOpsTest, ClipOpset11TakesOptionalInputs) {
  at::Tensor x = at::tensor({-3.f, -0.5f, 0.5f, 3.f});
  // Attributes are not part of opset 11: only the inputs count.
  expectTensorEqual(run1({"Clip", 11, {x, at::scalar_tensor(-1.f), at::scalar_tensor(1.f)}}),
                    at::tensor({-1.f, -0.5f, 0.5f, 1.f}));
  // Only max given (min omitted).
  expectTensorEqual(run1({"Clip", 13, {x, at::Tensor(), at::scalar_tensor(0.f)}}),
                    at::tensor({-3.f, -0.5f, 0.f, 0.f}));
  // min > max: everything becomes max.
  expectTensorEqual(run1({"Clip", 13, {x, at::scalar_tensor(2.f), at::scalar_tensor(1.f)}}),
                    at::tensor({1.f, 1.f, 1.f, 1.f}));
}

TEST(ActivationOpsTest, ClipOnIntegers) {
  at::Tensor x = at::tensor({-100, -5, 5, 100}, at::kInt);
  at::Tensor low = at::scalar_tensor(-10, at::kInt), high = at::scalar_tensor(10, at::kInt);
  expectTensorEqual(run1({"Clip", 12, {x, low, high}}), at::tensor({-10, -5, 5, 10}, at::kInt));
}

TEST(ActivationOpsTest, ClipRejectsBadBounds) {
  at::Tensor x = at::ones({3});
  expectNodeError({"Clip", 13, {x, at::zeros({2})}}, "min must be a scalar");
  expectNodeError({"Clip", 13, {x, at::Tensor(), at::scalar_tensor(1.0, at::kDouble)}},
                  "max has element type");
}

TEST(ActivationOpsTest, PReluBroadcastsSlopePerChannel) {
  at::Tensor x = at::tensor({-1.f, 2.f, -3.f, 4.f, -5.f, 6.f}).reshape({1, 3, 2});
  at::Tensor slope = at::tensor({0.5f, 0.f, 2.f}).reshape({3, 1});
  expectTensorNear(run1({"PRelu", 16, {x, slope}}),
                   at::tensor({-0.5f, 2.f, 0.f, 4.f, -10.f, 6.f}).reshape({1, 3, 2}));
}

TEST(ActivationOpsTest, PReluSlopeMustNotGrowX) {
  expectNodeError({"PRelu", 16, {at::ones({3}), at::ones({2, 3})}}, "does not broadcast to X");
}

TEST(ActivationOpsTest, ReluFamilyMatchesClosedForms) {
  at::Tensor x = at::tensor({-2.0, -0.5, 0.0, 1.5});
  expectTensorEqual(run1({"Relu", 14, {at::tensor({-2, 3}, at::kInt)}}),
                    at::tensor({0, 3}, at::kInt));
  expectTensorNear(run1({"LeakyRelu", 16, {x}, {Attribute::makeFloat("alpha", 0.1)}}),
                   at::tensor({-0.2, -0.05, 0.0, 1.5}));
  expectTensorNear(run1({"LeakyRelu", 16, {x}}), at::tensor({-0.02, -0.005, 0.0, 1.5}));
  expectTensorNear(run1({"Elu", 6, {x}, {Attribute::makeFloat("alpha", 2.0)}}),
                   at::tensor({2.0 * (std::exp(-2.0) - 1), 2.0 * (std::exp(-0.5) - 1), 0.0, 1.5}));
}

TEST(ActivationOpsTest, SigmoidLikeOpsMatchClosedForms) {
  at::Tensor x = at::tensor({-4.0, -1.0, 0.0, 1.0, 4.0});
  expectTensorNear(run1({"Sigmoid", 13, {x}}),
                   at::tensor({1 / (1 + std::exp(4.0)), 1 / (1 + std::exp(1.0)), 0.5,
                               1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(-4.0))}));
  expectTensorNear(run1({"Tanh", 13, {x}}), at::tensor({std::tanh(-4.0), std::tanh(-1.0), 0.0,
                                                        std::tanh(1.0), std::tanh(4.0)}));
  // max(0, min(1, alpha * x + beta)).
  expectTensorNear(run1({"HardSigmoid",
                         6,
                         {x},
                         {Attribute::makeFloat("alpha", 0.25), Attribute::makeFloat("beta", 0.4)}}),
                   at::tensor({0.0, 0.15, 0.4, 0.65, 1.0}));
  expectTensorNear(run1({"HardSigmoid", 6, {x}}), at::tensor({0.0, 0.3, 0.5, 0.7, 1.0}));
  // x * HardSigmoid(x; 1/6, 1/2).
  expectTensorNear(run1({"HardSwish", 14, {x}}), at::tensor({0.0, -1.0 / 3, 0.0, 2.0 / 3, 4.0}));
}

// Float32 runs qforge's one-pass kernel: bit-equal to ATen's mul, add and clamp (each rounded),
// over several parallel chunks, in a channels-last layout that it keeps, NaN passed through.
TEST(ActivationOpsTest, Float32HardSigmoidEqualsItsThreeRoundedStepsInAnyLayout) {
  at::manual_seed(7);
  at::Tensor x = (at::randn({2, 24, 40, 40}) * 4).contiguous(at::MemoryFormat::ChannelsLast);
  x.index_put_({0, 3, 7, 11}, std::numeric_limits<float>::quiet_NaN());
  const float alpha = 1.f / 6.f, beta = 0.5f;
  const at::Tensor y =
      run1({"HardSigmoid",
            6,
            {x},
            {Attribute::makeFloat("alpha", alpha), Attribute::makeFloat("beta", beta)}});
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  const at::Tensor expected = (x * alpha + beta).clamp(0, 1);
  EXPECT_TRUE(at::equal(y.isnan(), expected.isnan()));
  EXPECT_TRUE(at::equal(y.nan_to_num(-1), expected.nan_to_num(-1)));
  EXPECT_EQ(y.isnan().sum().item<int64_t>(), 1);
  // A strided (non-dense) view goes through ATen's ops.
  const at::Tensor every_other = x.slice(3, 0, 40, 2);
  const at::Tensor z = run1({"HardSigmoid", 6, {every_other}});
  EXPECT_TRUE(at::equal(z.nan_to_num(-1), (every_other * 0.2f + 0.5f).clamp(0, 1).nan_to_num(-1)));
}

TEST(ActivationOpsTest, Float16InputsGiveFloat16Results) {
  at::Tensor x = at::tensor({-1.f, 0.f, 2.f}).to(at::kHalf);
  const auto near = [](const at::Tensor& actual, std::vector<double> expected) {
    ASSERT_EQ(actual.scalar_type(), at::kHalf);
    // float16 keeps about 3 decimal digits.
    EXPECT_TRUE(at::allclose(actual.to(at::kDouble), at::tensor(expected), 1e-3, 1e-3)) << actual;
  };
  near(run1({"Sigmoid", 13, {x}}), {1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))});
  const double total = std::exp(-1.0) + 1 + std::exp(2.0);
  near(run1({"Softmax", 13, {x}}), {std::exp(-1.0) / total, 1 / total, std::exp(2.0) / total});
  near(
      run1({"Clip", 6, {x}, {Attribute::makeFloat("min", -0.5), Attribute::makeFloat("max", 1.0)}}),
      {-0.5, 0.0, 1.0});
  near(run1({"Relu", 14, {x}}), {0.0, 0.0, 2.0});
}

TEST(ActivationOpsTest, FloatOnlyActivationsRejectIntegers) {
  expectNodeError({"Sigmoid", 13, {at::tensor({1}, at::kInt)}}, "floating-point");
}

TEST(ActivationOpsTest, SigmoidLoweringKeepsAutograd) {
  Graph graph = buildSingleOpGraph({"Sigmoid", 13, {at::zeros({3}, at::kDouble)}});
  Executor executor(graph, ExecutorOptions{true});
  at::Tensor x = at::tensor({-1.0, 0.0, 2.0}).requires_grad_();
  at::Tensor y = executor({x}).at(0);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  // d/dx sigmoid(x) = s (1 - s).
  at::Tensor s = 1 / (1 + at::exp(-at::tensor({-1.0, 0.0, 2.0})));
  expectTensorNear(x.grad(), s * (1 - s));
}

TEST(ActivationOpsTest, PReluSlopeGetsAGradient) {
  Graph graph = buildSingleOpGraph(
      {"PRelu", 16, {at::zeros({2, 2}, at::kDouble), at::zeros({2}, at::kDouble)}});
  Executor executor(graph, ExecutorOptions{true});
  at::Tensor x = at::tensor({-1.0, 3.0, -2.0, -4.0}).reshape({2, 2});
  at::Tensor slope = at::tensor({0.5, 0.5}).requires_grad_();
  executor({x, slope}).at(0).sum().backward();
  // d/dslope_j = sum of the negative x in column j.
  expectTensorNear(slope.grad(), at::tensor({-3.0, -4.0}));
}

TEST(ActivationOpsTest, DefaultExecutorRecordsNoGradient) {
  Graph graph = buildSingleOpGraph({"Sigmoid", 13, {at::zeros({3})}});
  Executor executor(graph);
  EXPECT_FALSE(executor({at::zeros({3}).requires_grad_()}).at(0).requires_grad());
}

}  // namespace
}  // namespace qforge
