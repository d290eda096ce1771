// More activation lowerings (exec/ops/activation_more.cpp): table facts, the paths ONNX's node
// tests do not reach (float16, large inputs, integer Shrink, Hardmax before opset 13, ties)
// against closed-form values, and the errors for bad input.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

TEST(MoreActivationOpsTest, TableFacts) {
  for (const char* op :
       {"Selu", "Celu", "Softplus", "Softsign", "ThresholdedRelu", "Shrink", "Hardmax"}) {
    const NodeFacts f = factsOf(op, 13);
    EXPECT_TRUE(f.known) << op;
    EXPECT_TRUE(f.set.empty()) << op;
  }
  EXPECT_EQ(factsOf("Softplus", 13).sign, OutputSign::NonNegative);
  EXPECT_EQ(factsOf("Hardmax", 13).sign, OutputSign::NonNegative);
  for (const char* op : {"Selu", "Celu", "Softsign", "Shrink"})
    EXPECT_EQ(factsOf(op, 13).sign, OutputSign::Unknown) << op;
  // ThresholdedRelu keeps x above alpha and writes 0 elsewhere: >= 0 when alpha is.
  EXPECT_EQ(factsOf("ThresholdedRelu", 10).sign, OutputSign::NonNegative);
  EXPECT_EQ(factsOf("ThresholdedRelu", 10, {Attribute::makeFloat("alpha", 0.0)}).sign,
            OutputSign::NonNegative);
  EXPECT_EQ(factsOf("ThresholdedRelu", 10, {Attribute::makeFloat("alpha", -1.0)}).sign,
            OutputSign::Unknown);
  EXPECT_FALSE(factsOf("Celu", 11).known);
}

TEST(MoreActivationOpsTest, Float16MatchesClosedForm) {
  const std::vector<double> xs{-2.0, -0.5, 0.0, 1.5};
  const at::Tensor x = at::tensor(xs, at::kDouble).to(at::kHalf);
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  std::vector<double> selu, celu, softplus, softsign;
  for (double v : xs) {
    selu.push_back(v > 0 ? gamma * v : gamma * alpha * (std::exp(v) - 1));
    celu.push_back(std::max(0.0, v) + std::min(0.0, 2.0 * (std::exp(v / 2.0) - 1)));
    softplus.push_back(std::log(1 + std::exp(v)));
    softsign.push_back(v / (1 + std::fabs(v)));
  }
  expectValuesNear(run1({"Selu", 6, {x}}), {4}, selu, 3e-3);
  expectValuesNear(run1({"Celu", 12, {x}, {Attribute::makeFloat("alpha", 2.0)}}), {4}, celu, 3e-3);
  expectValuesNear(run1({"Softplus", 1, {x}}), {4}, softplus, 3e-3);
  expectValuesNear(run1({"Softsign", 1, {x}}), {4}, softsign, 3e-3);
  EXPECT_EQ(run1({"Softplus", 1, {x}}).scalar_type(), at::kHalf);
}

TEST(MoreActivationOpsTest, SoftplusDoesNotOverflow) {
  // log(1 + e^100) = 100 + log(1 + e^-100); log(1 + e^-100) = e^-100 to double precision.
  expectValuesNear(run1({"Softplus", 1, {f32({100.f, -100.f})}}), {2}, {100.0, std::exp(-100.0)},
                   1e-6);
}

TEST(MoreActivationOpsTest, ShrinkOnIntegers) {
  // lambd 1.5, bias 1: -3 -> -2, -1 -> 0, 1 -> 0, 4 -> 3.
  expectTensorEqual(run1({"Shrink",
                          9,
                          {i32({-3, -1, 1, 4}, {4})},
                          {Attribute::makeFloat("lambd", 1.5), Attribute::makeFloat("bias", 1.0)}}),
                    i32({-2, 0, 0, 3}, {4}));
  expectNodeError({"Shrink", 9, {at::ones({2}, at::kBool)}}, "must be numeric");
}

TEST(MoreActivationOpsTest, HardmaxBeforeOpset13WorksOnFlattenedRows) {
  // [2, 2, 2] with axis 1: rows of 4; the first of equal maxima wins.
  const at::Tensor x = f32({1, 5, 5, 2, 7, 0, 3, 7}, {2, 2, 2});
  expectTensorEqual(run1({"Hardmax", 11, {x}}), f32({0, 1, 0, 0, 1, 0, 0, 0}, {2, 2, 2}));
  // Opset 13: per axis (default -1).
  expectTensorEqual(run1({"Hardmax", 13, {x}}), f32({0, 1, 1, 0, 1, 0, 0, 1}, {2, 2, 2}));
  const at::Tensor y = f32({1, 5, 5, 2, 7, 0, 3, 1}, {2, 2, 2});
  expectTensorEqual(run1({"Hardmax", 13, {y}}), f32({0, 1, 1, 0, 1, 0, 1, 0}, {2, 2, 2}));
  expectTensorEqual(run1({"Hardmax", 13, {y}, {Attribute::makeInt("axis", 0)}}),
                    f32({0, 1, 1, 1, 1, 0, 0, 0}, {2, 2, 2}));
  expectNodeError({"Hardmax", 13, {x}, {Attribute::makeInt("axis", 3)}}, "axis 3 is out of range");
}

TEST(MoreActivationOpsTest, ErrorsNameTheProblem) {
  expectNodeError({"Selu", 6, {i64({1})}}, "must be a floating-point tensor");
  expectNodeError({"Celu", 12, {f32({1.f})}, {Attribute::makeFloat("alpha", 0.0)}},
                  "'alpha' must not be 0");
}

}  // namespace
}  // namespace qforge
