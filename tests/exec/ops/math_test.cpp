// Math lowerings (exec/ops/math.cpp): the table facts and opset ranges, the paths ONNX's node
// tests do not reach (float16, broadcasting, integer types, attributes as inputs) against
// closed-form values, and the errors for bad input. ONNX's node tests (tests/conformance) check
// the main numerics.
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

TEST(MathOpsTest, RegisteredFromTheirFirstOpset) {
  const OpRegistry& registry = OpRegistry::builtin();
  const std::pair<const char*, int64_t> first[] = {
      {"Sin", 7},   {"Cos", 7},       {"Tan", 7},
      {"Asin", 7},  {"Acos", 7},      {"Atan", 7},
      {"Sinh", 9},  {"Cosh", 9},      {"Asinh", 9},
      {"Acosh", 9}, {"Atanh", 9},     {"Mod", 10},
      {"Sum", 1},   {"Mean", 1},      {"CumSum", 11},
      {"Det", 11},  {"Trilu", 14},    {"EyeLike", 9},
      {"Size", 1},  {"CastLike", 15}, {"DynamicQuantizeLinear", 11}};
  for (const auto& [name, since] : first) {
    EXPECT_NE(registry.find("", name, since), nullptr) << name;
    EXPECT_NE(registry.find("", name, 21), nullptr) << name;
    if (since > 1) {
      EXPECT_EQ(registry.find("", name, since - 1), nullptr) << name;
    }
  }
}

TEST(MathOpsTest, TableFacts) {
  for (const char* op : {"Sin", "Cos", "Tan", "Asin", "Atan", "Sinh", "Asinh", "Atanh", "Det",
                         "DynamicQuantizeLinear"}) {
    const NodeFacts f = factsOf(op, 17);
    EXPECT_TRUE(f.known) << op;
    EXPECT_TRUE(f.set.empty()) << op;
    EXPECT_EQ(f.sign, OutputSign::Unknown) << op;
  }
  // acos in [0, pi], cosh >= 1, acosh >= 0.
  for (const char* op : {"Acos", "Cosh", "Acosh"})
    EXPECT_EQ(factsOf(op, 17).sign, OutputSign::NonNegative) << op;
  // Every input of Mod, Sum and Mean is an activation; sums of values >= 0 stay >= 0.
  EXPECT_EQ(factsOf("Mod", 13).set, std::set<std::string>{"combines_activations"});
  for (const char* op : {"Sum", "Mean"}) {
    EXPECT_EQ(factsOf(op, 13).set, std::set<std::string>{"combines_activations"}) << op;
    EXPECT_EQ(factsOf(op, 13).sign, OutputSign::OfAllInputs) << op;
  }
  // CumSum and Trilu compute or insert zeros (not data movement) but keep input 0's sign.
  for (const char* op : {"CumSum", "Trilu"}) {
    EXPECT_TRUE(factsOf(op, 14).set.empty()) << op;
    EXPECT_EQ(factsOf(op, 14).sign, OutputSign::OfDataInput) << op;
  }
  // Sizes, identity matrices and type conversions are not activations.
  for (const char* op : {"Size", "EyeLike", "CastLike"})
    EXPECT_EQ(factsOf(op, 15).set, std::set<std::string>{"shape_computation"}) << op;
}

TEST(MathOpsTest, TrigonometryOnFloat16MatchesClosedForm) {
  const std::vector<float> values{-0.75f, -0.1f, 0.3f, 0.9f};
  const at::Tensor x = f32(values).to(at::kHalf);
  const std::pair<const char*, double (*)(double)> fns[] = {
      {"Sin", std::sin},     {"Cos", std::cos},    {"Tan", std::tan},   {"Asin", std::asin},
      {"Acos", std::acos},   {"Atan", std::atan},  {"Sinh", std::sinh}, {"Cosh", std::cosh},
      {"Asinh", std::asinh}, {"Atanh", std::atanh}};
  for (const auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    const at::Tensor y = run1({name, 13, {x}});
    ASSERT_EQ(y.scalar_type(), at::kHalf);
    std::vector<double> expected;
    for (int64_t i = 0; i < x.numel(); ++i)
      expected.push_back(fn(x[i].item<double>()));
    expectValuesNear(y, {4}, expected, 2e-3);
  }
  expectValuesNear(run1({"Acosh", 13, {f32({1.0f, 2.5f}).to(at::kHalf)}}), {2},
                   {0.0, std::acosh(2.5)}, 2e-3);
}

TEST(MathOpsTest, TrigonometryRejectsIntegers) {
  expectNodeError({"Sin", 13, {i64({1, 2})}}, "must be a floating-point tensor");
}

TEST(MathOpsTest, ModFollowsTheDivisorOrTheDividend) {
  const at::Tensor a = i32({-4, 7, -7, 5}, {4}), b = i32({3, -3, -3, 5}, {4});
  // fmod = 0: Python's %, the divisor's sign.
  expectTensorEqual(run1({"Mod", 13, {a, b}}), i32({2, -2, -1, 0}, {4}));
  // fmod = 1: C's fmod, the dividend's sign.
  expectTensorEqual(run1({"Mod", 13, {a, b}, {Attribute::makeInt("fmod", 1)}}),
                    i32({-1, 1, -1, 0}, {4}));
  const at::Tensor y = run1({"Mod",
                             13,
                             {f32({-4.5f, 7.f}).to(at::kHalf), f32({2.f}).to(at::kHalf)},
                             {Attribute::makeInt("fmod", 1)}});
  expectTensorEqual(y, f32({-0.5f, 1.f}).to(at::kHalf));
}

TEST(MathOpsTest, ModErrors) {
  expectNodeError({"Mod", 13, {f32({1.f}), f32({2.f})}}, "floating-point inputs need fmod = 1");
  expectNodeError({"Mod", 13, {i64({1, 2}), i64({1, 0})}}, "integer modulo by zero");
  expectNodeError({"Mod", 13, {i64({1}), i32({1}, {1})}}, "same element type");
}

TEST(MathOpsTest, SumAndMeanBroadcast) {
  const at::Tensor a = f32({1.f, 2.f}, {2, 1}), b = f32({10.f, 20.f, 30.f}), c = f32({100.f});
  const at::Tensor sum = run1({"Sum", 13, {a, b, c}});
  expectValuesNear(sum, {2, 3}, {111, 121, 131, 112, 122, 132});
  expectValuesNear(run1({"Mean", 13, {a, b, c}}), {2, 3},
                   {37, 121.0 / 3, 131.0 / 3, 112.0 / 3, 122.0 / 3, 44});
  // One input: itself.
  expectTensorEqual(run1({"Sum", 8, {b}}), b);
  expectTensorEqual(run1({"Mean", 13, {b.to(at::kHalf), b.to(at::kHalf)}}), b.to(at::kHalf));
}

TEST(MathOpsTest, SumRejectsMixedTypes) {
  expectNodeError({"Sum", 13, {f32({1.f}), f32({1.f}).to(at::kDouble)}}, "same element type");
}

TEST(MathOpsTest, CumSumDirectionsAndTypes) {
  const at::Tensor x = i32({1, 2, 3, 4, 5, 6}, {2, 3});
  const at::Tensor axis = at::scalar_tensor(1, at::kLong);
  expectTensorEqual(run1({"CumSum", 14, {x, axis}}), i32({1, 3, 6, 4, 9, 15}, {2, 3}));
  expectTensorEqual(run1({"CumSum", 14, {x, axis}, {Attribute::makeInt("exclusive", 1)}}),
                    i32({0, 1, 3, 0, 4, 9}, {2, 3}));
  expectTensorEqual(run1({"CumSum", 14, {x, axis}, {Attribute::makeInt("reverse", 1)}}),
                    i32({6, 5, 3, 15, 11, 6}, {2, 3}));
  expectTensorEqual(run1({"CumSum",
                          14,
                          {x, at::tensor({-2}, at::kInt)},
                          {Attribute::makeInt("reverse", 1), Attribute::makeInt("exclusive", 1)}}),
                    i32({4, 5, 6, 0, 0, 0}, {2, 3}));
  expectTensorEqual(run1({"CumSum", 11, {f32({0.5f, 0.25f}).to(at::kDouble), axis.new_zeros({})}}),
                    f32({0.5f, 0.75f}).to(at::kDouble));
  expectTensorEqual(
      run1({"CumSum", 14, {f32({0.5f, 0.25f, 1.f}).to(at::kHalf), axis.new_zeros({})}}),
      f32({0.5f, 0.75f, 1.75f}).to(at::kHalf));
}

TEST(MathOpsTest, CumSumErrors) {
  const at::Tensor x = f32({1.f, 2.f});
  expectNodeError({"CumSum", 14, {x, at::scalar_tensor(1, at::kLong)}}, "axis 1 is out of range");
  expectNodeError({"CumSum", 14, {x, at::scalar_tensor(0.0, at::kFloat)}},
                  "axis (input 1) must be an integer tensor");
  expectNodeError({"CumSum", 14, {x, i64({0, 0})}}, "must hold one value");
}

TEST(MathOpsTest, DetOfABatch) {
  // Triangular matrices: the product of the diagonal; a swap of two rows flips the sign.
  const at::Tensor upper = f32({2, 5, 7, 0, 3, 1, 0, 0, -4}, {3, 3});
  const at::Tensor swapped = upper.index_select(0, i64({1, 0, 2}));
  const at::Tensor batch = at::stack({upper, swapped});
  expectValuesNear(run1({"Det", 11, {batch}}), {2}, {-24, 24}, 1e-4);
  expectNodeError({"Det", 11, {f32({1, 2, 3, 4, 5, 6}, {2, 3})}}, "must be [..., M, M]");
}

TEST(MathOpsTest, TriluWithAndWithoutK) {
  const at::Tensor x = at::arange(1, 10, at::kLong).reshape({3, 3});
  expectTensorEqual(run1({"Trilu", 14, {x}}), i64({1, 2, 3, 0, 5, 6, 0, 0, 9}).reshape({3, 3}));
  expectTensorEqual(
      run1({"Trilu", 14, {x, at::scalar_tensor(-1, at::kLong)}, {Attribute::makeInt("upper", 0)}}),
      i64({0, 0, 0, 4, 0, 0, 7, 8, 0}).reshape({3, 3}));
  expectNodeError({"Trilu", 14, {i64({1, 2})}}, "rank >= 2");
}

TEST(MathOpsTest, EyeLikeTypesAndDiagonals) {
  const at::Tensor shape_of = at::zeros({2, 3}, at::kDouble);
  expectTensorEqual(run1({"EyeLike", 9, {shape_of}}),
                    f32({1, 0, 0, 0, 1, 0}, {2, 3}).to(at::kDouble));
  // dtype 6 = INT32; k = 1: the diagonal above the main one.
  expectTensorEqual(
      run1(
          {"EyeLike", 9, {shape_of}, {Attribute::makeInt("dtype", 6), Attribute::makeInt("k", 1)}}),
      i32({0, 1, 0, 0, 0, 1}, {2, 3}));
  expectNodeError({"EyeLike", 9, {at::zeros({2, 2, 2})}}, "must be 2-D");
  // 12 = UINT32, which ATen 1.13 cannot hold.
  expectNodeError({"EyeLike", 9, {shape_of}, {Attribute::makeInt("dtype", 12)}},
                  "attribute 'dtype'");
}

TEST(MathOpsTest, SizeIsAnInt64Scalar) {
  expectTensorEqual(run1({"Size", 13, {at::zeros({2, 3, 4})}}), at::scalar_tensor(24, at::kLong));
  expectTensorEqual(run1({"Size", 1, {at::zeros({0, 5}, at::kInt)}}),
                    at::scalar_tensor(0, at::kLong));
}

TEST(MathOpsTest, CastLikeTakesTheSecondInputsType) {
  // Float to integer truncates toward zero; anything to bool is x != 0.
  expectTensorEqual(run1({"CastLike", 15, {f32({-1.7f, 2.9f}), i32({0}, {1})}}), i32({-1, 2}, {2}));
  expectTensorEqual(run1({"CastLike", 15, {f32({0.f, -0.5f}), at::zeros({0}, at::kBool)}}),
                    i64({0, 1}).to(at::kBool));
}

TEST(MathOpsTest, DynamicQuantizeLinearClosedForm) {
  // Range [-1, 2]: scale 3 / 255, zero point round(1 / scale) = 85.
  const std::vector<at::Tensor> out =
      runSingleOp({"DynamicQuantizeLinear", 11, {f32({-1.f, 0.f, 2.f, 1.f})}, {}, 3});
  expectTensorEqual(out[0], u8({0, 85, 255, 170}, {4}));
  expectValuesNear(out[1], {}, {3.0 / 255}, 1e-9);
  expectTensorEqual(out[2], at::scalar_tensor(85, at::kLong).to(at::kByte));
  // All zeros: no range, scale 1 / 255 by convention.
  const std::vector<at::Tensor> zeros =
      runSingleOp({"DynamicQuantizeLinear", 11, {at::zeros({3})}, {}, 3});
  expectTensorEqual(zeros[0], u8({0, 0, 0}, {3}));
  expectValuesNear(zeros[1], {}, {1.0 / 255}, 1e-9);
}

TEST(MathOpsTest, DynamicQuantizeLinearErrors) {
  expectNodeError({"DynamicQuantizeLinear", 11, {at::zeros({2}, at::kDouble)}, {}, 3},
                  "input 0 must be Float");
  expectNodeError({"DynamicQuantizeLinear", 11, {at::zeros({0})}, {}, 3}, "input is empty");
}

}  // namespace
}  // namespace qforge
