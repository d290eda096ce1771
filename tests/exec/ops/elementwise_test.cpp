// Elementwise lowerings: what the ONNX conformance data does not cover (legacy broadcasting,
// signed integer Div, mixed Pow types, Cast corner values) and the errors for bad input.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// at::tensor has no bool overload on this libtorch.
at::Tensor bools(std::vector<int> values) {
  return at::tensor(values, at::kInt).to(at::kBool);
}

TEST(ElementwiseOpsTest, EveryOpIsRegisteredForOpsets11To17) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* name :
       {"Add", "Sub",   "Mul",  "Div",     "Pow",         "Sqrt",           "Exp",   "Log",
        "Neg", "Abs",   "Sign", "Floor",   "Round",       "Reciprocal",     "Erf",   "Min",
        "Max", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where", "Cast"}) {
    const std::string op_type = name;
    // LessOrEqual and GreaterOrEqual were introduced in opset 12.
    const bool since12 = op_type == "LessOrEqual" || op_type == "GreaterOrEqual";
    for (int64_t opset = since12 ? 12 : 11; opset <= 17; ++opset) {
      EXPECT_NE(registry.find("", name, opset), nullptr) << name << " opset " << opset;
    }
  }
  EXPECT_EQ(registry.find("", "LessOrEqual", 11), nullptr);
  EXPECT_EQ(registry.find("", "GreaterOrEqual", 11), nullptr);
}

TEST(ElementwiseOpsTest, AddBroadcastsNumpyStyle) {
  at::Tensor a = at::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}).reshape({2, 3});
  at::Tensor b = at::tensor({10.f, 20.f, 30.f});
  expectTensorEqual(run1({"Add", 13, {a, b}}),
                    at::tensor({11.f, 22.f, 33.f, 14.f, 25.f, 36.f}).reshape({2, 3}));
}

TEST(ElementwiseOpsTest, LegacyBroadcastAlignsRhsAtAxis) {
  // Opset 6: B of shape [3] lines up with A's axis 1 of [2,3,2].
  at::Tensor a = at::zeros({2, 3, 2});
  at::Tensor b = at::tensor({10.f, 20.f, 30.f});
  at::Tensor expected =
      at::tensor({10.f, 10.f, 20.f, 20.f, 30.f, 30.f, 10.f, 10.f, 20.f, 20.f, 30.f, 30.f})
          .reshape({2, 3, 2});
  expectTensorEqual(
      run1({"Add", 6, {a, b}, {Attribute::makeInt("broadcast", 1), Attribute::makeInt("axis", 1)}}),
      expected);
  // Without axis, B matches A's trailing dims: [2] against [2,3,2].
  at::Tensor c = at::tensor({1.f, 2.f});
  at::Tensor sum = run1({"Sub", 6, {a, c}, {Attribute::makeInt("broadcast", 1)}});
  expectTensorEqual(sum, at::tensor({-1.f, -2.f}).repeat({6}).reshape({2, 3, 2}));
}

TEST(ElementwiseOpsTest, LegacyOpsetWithoutBroadcastNeedsEqualShapes) {
  expectNodeError({"Mul", 6, {at::ones({2, 3}), at::ones({3})}}, "'broadcast' attribute");
}

TEST(ElementwiseOpsTest, BinaryOpRejectsMixedElementTypes) {
  expectNodeError({"Add", 13, {at::ones({2}), at::ones({2}, at::kInt)}}, "different element types");
}

TEST(ElementwiseOpsTest, IntegerDivTruncatesTowardZero) {
  at::Tensor a = at::tensor({7, -7, 7, -7, 6}, at::kInt);
  at::Tensor b = at::tensor({2, 2, -2, -2, 3}, at::kInt);
  expectTensorEqual(run1({"Div", 14, {a, b}}), at::tensor({3, -3, -3, 3, 2}, at::kInt));
}

TEST(ElementwiseOpsTest, FloatDivIsTrueDivision) {
  expectTensorNear(run1({"Div", 13, {at::tensor({7.0, -1.0}), at::tensor({2.0, 4.0})}}),
                   at::tensor({3.5, -0.25}));
}

TEST(ElementwiseOpsTest, PowKeepsTheBaseType) {
  // Integer base, float exponent: sqrt(2) = 1.41 truncates to 1.
  expectTensorEqual(run1({"Pow", 15, {at::tensor({2, 3}, at::kInt), at::tensor({0.5f, 2.f})}}),
                    at::tensor({1, 9}, at::kInt));
  // Float base, integer exponent (negative too).
  expectTensorNear(run1({"Pow", 15, {at::tensor({2.f, 0.5f}), at::tensor({3, -1}, at::kLong)}}),
                   at::tensor({8.f, 2.f}));
  // Float base, double exponent: result stays float32.
  expectTensorNear(run1({"Pow", 13, {at::tensor({9.f}), at::tensor({0.5})}}), at::tensor({3.f}));
}

// A single exponent is read as a scalar: squaring gives x * x exactly, other exponents libm's
// pow; an exponent of rank above the base's still broadcasts the result to its shape.
TEST(ElementwiseOpsTest, PowByASingleExponent) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({3, 4, 5});
  expectTensorEqual(run1({"Pow", 13, {x, at::scalar_tensor(2.f)}}), x * x);
  expectTensorNear(run1({"Pow", 13, {x.abs(), at::tensor({0.3f})}}),
                   at::tensor(std::vector<float>([&] {
                     std::vector<float> v;
                     const at::Tensor a = x.abs().contiguous();
                     for (int64_t i = 0; i < a.numel(); ++i)
                       v.push_back(std::pow(a.data_ptr<float>()[i], 0.3f));
                     return v;
                   }()))
                       .reshape({3, 4, 5}),
                   1e-6, 1e-6);
  expectValuesNear(run1({"Pow", 13, {at::scalar_tensor(3.f), at::tensor({2.f}).reshape({1, 1})}}),
                   {1, 1}, {9});
}

TEST(ElementwiseOpsTest, PowBeforeOpset12NeedsSameTypes) {
  expectNodeError({"Pow", 11, {at::tensor({2.f}), at::tensor({2}, at::kLong)}},
                  "same element type");
}

TEST(ElementwiseOpsTest, MathOpsMatchClosedForms) {
  at::Tensor x = at::tensor({0.25, 1.0, 4.0});
  expectTensorNear(run1({"Sqrt", 13, {x}}), at::tensor({0.5, 1.0, 2.0}));
  expectTensorNear(run1({"Exp", 13, {x}}),
                   at::tensor({std::exp(0.25), std::exp(1.0), std::exp(4.0)}));
  expectTensorNear(run1({"Log", 13, {x}}), at::tensor({std::log(0.25), 0.0, std::log(4.0)}));
  expectTensorNear(run1({"Reciprocal", 13, {x}}), at::tensor({4.0, 1.0, 0.25}));
  // erf(1) and erf(-0.5) from tables.
  expectTensorNear(run1({"Erf", 13, {at::tensor({1.0, -0.5})}}),
                   at::tensor({0.8427007929497149, -0.5204998778130465}));
  expectTensorEqual(run1({"Neg", 13, {at::tensor({3, -4}, at::kInt)}}),
                    at::tensor({-3, 4}, at::kInt));
  expectTensorEqual(run1({"Abs", 13, {at::tensor({3, -4}, at::kLong)}}),
                    at::tensor({3, 4}, at::kLong));
  expectTensorEqual(run1({"Sign", 13, {at::tensor({2.5f, -0.0f, 0.0f, -3.0f})}}),
                    at::tensor({1.0f, 0.0f, 0.0f, -1.0f}));
  expectTensorEqual(run1({"Sign", 13, {at::tensor({7, 0, -2}, at::kInt)}}),
                    at::tensor({1, 0, -1}, at::kInt));
  expectTensorEqual(run1({"Floor", 13, {at::tensor({1.5f, -1.5f, 2.0f, -0.25f})}}),
                    at::tensor({1.0f, -2.0f, 2.0f, -1.0f}));
  // Ties to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2.
  expectTensorEqual(run1({"Round", 13, {at::tensor({0.5f, 1.5f, 2.5f, -2.5f, 0.7f})}}),
                    at::tensor({0.0f, 2.0f, 2.0f, -2.0f, 1.0f}));
}

TEST(ElementwiseOpsTest, MathOnFloat16KeepsFloat16) {
  at::Tensor y = run1({"Exp", 13, {at::tensor({0.f, 1.f}).to(at::kHalf)}});
  ASSERT_EQ(y.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::allclose(y.to(at::kDouble), at::tensor({1.0, std::exp(1.0)}), 1e-3, 1e-3)) << y;
}

TEST(ElementwiseOpsTest, FloatOnlyMathRejectsIntegers) {
  expectNodeError({"Sqrt", 13, {at::tensor({4}, at::kInt)}}, "floating-point");
}

TEST(ElementwiseOpsTest, MinMaxAreVariadicAndBroadcast) {
  at::Tensor a = at::tensor({1.f, 5.f, 3.f, 0.f}).reshape({2, 2});
  at::Tensor b = at::tensor({2.f, 2.f});
  at::Tensor c = at::tensor({4.f}).reshape({1, 1});
  expectTensorEqual(run1({"Max", 13, {a, b, c}}), at::tensor({4.f, 5.f, 4.f, 4.f}).reshape({2, 2}));
  expectTensorEqual(run1({"Min", 13, {a, b, c}}), at::tensor({1.f, 2.f, 2.f, 0.f}).reshape({2, 2}));
  expectTensorEqual(run1({"Max", 13, {a}}), a);
}

TEST(ElementwiseOpsTest, MinRejectsMixedTypes) {
  expectNodeError({"Min", 13, {at::ones({2}), at::ones({2}, at::kDouble)}}, "same element type");
}

TEST(ElementwiseOpsTest, ComparisonsGiveBoolAndBroadcast) {
  at::Tensor a = at::tensor({1, 2, 3}, at::kInt);
  at::Tensor b = at::tensor({2}, at::kInt);
  expectTensorEqual(run1({"Equal", 13, {a, b}}), bools({0, 1, 0}));
  expectTensorEqual(run1({"Less", 13, {a, b}}), bools({1, 0, 0}));
  expectTensorEqual(run1({"Greater", 13, {a, b}}), bools({0, 0, 1}));
  expectTensorEqual(run1({"LessOrEqual", 16, {a, b}}), bools({1, 1, 0}));
  expectTensorEqual(run1({"GreaterOrEqual", 16, {a, b}}), bools({0, 1, 1}));
}

TEST(ElementwiseOpsTest, WhereSelectsWithBroadcasting) {
  at::Tensor condition = bools({1, 0});
  at::Tensor x = at::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2});
  at::Tensor y = at::tensor({-1.f});
  expectTensorEqual(run1({"Where", 16, {condition, x, y}}),
                    at::tensor({1.f, -1.f, 3.f, -1.f}).reshape({2, 2}));
}

TEST(ElementwiseOpsTest, WhereNeedsBoolCondition) {
  expectNodeError({"Where", 16, {at::ones({2}), at::ones({2}), at::ones({2})}},
                  "condition must be bool");
}

TEST(ElementwiseOpsTest, CastFollowsOnnxConversions) {
  const auto to = [](DType t) { return Attribute::makeInt("to", static_cast<int64_t>(t)); };
  at::Tensor x = at::tensor({-1.7f, 1.7f, 2.5f, 0.f});
  expectTensorEqual(run1({"Cast", 13, {x}, {to(DType::Int32)}}),
                    at::tensor({-1, 1, 2, 0}, at::kInt));
  at::Tensor flags = at::tensor({0.f, -0.f, 0.5f, NAN});
  expectTensorEqual(run1({"Cast", 13, {flags}, {to(DType::Bool)}}), bools({0, 0, 1, 1}));
  expectTensorEqual(run1({"Cast", 13, {bools({1, 0})}, {to(DType::Float16)}}),
                    at::tensor({1.f, 0.f}).to(at::kHalf));
  // Opsets 1-5 name the type as a string.
  expectTensorEqual(run1({"Cast", 5, {x}, {Attribute::makeString("to", "INT64")}}),
                    at::tensor({-1, 1, 2, 0}, at::kLong));
}

TEST(ElementwiseOpsTest, CastToTypeAtenCannotHoldFails) {
  expectNodeError({"Cast", 13, {at::ones({2})}, {Attribute::makeInt("to", 12 /* UINT32 */)}},
                  "uint32");
  expectNodeError({"Cast", 5, {at::ones({2})}, {Attribute::makeString("to", "REAL")}},
                  "unknown target type 'REAL'");
  expectNodeError({"Cast", 13, {at::ones({2})}}, "'to' is missing");
}

}  // namespace
}  // namespace qforge
