// More reductions (exec/ops/reduction_more.cpp): table facts, the axes input of opset 18 (which
// ONNX 1.12's node tests predate), integer types, empty axes, large inputs, LRN and
// MeanVarianceNormalization against closed-form values, and the errors for bad input.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

const char* const kReductions[] = {"ReduceL1",   "ReduceL2",        "ReduceSumSquare",
                                   "ReduceProd", "ReduceLogSumExp", "ReduceLogSum"};

// [[1, -2, 3], [-4, 5, -6]]
at::Tensor signs() {
  return f32({1, -2, 3, -4, 5, -6}, {2, 3});
}

Attribute noKeepdims() {
  return Attribute::makeInt("keepdims", 0);
}

TEST(MoreReductionOpsTest, AttributeFormUpTo17InputFormFrom18) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* name : kReductions) {
    SCOPED_TRACE(name);
    ASSERT_NE(registry.find("", name, 1), nullptr);
    EXPECT_EQ(registry.find("", name, 1), registry.find("", name, 17));
    ASSERT_NE(registry.find("", name, 18), nullptr);
    EXPECT_NE(registry.find("", name, 17), registry.find("", name, 18));
    EXPECT_EQ(registry.find("", name, 18), registry.find("", name, 21));
  }
}

TEST(MoreReductionOpsTest, TableFacts) {
  for (const char* name : kReductions)
    EXPECT_TRUE(factsOf(name, 13).set.empty()) << name;
  for (const char* name : {"ReduceL1", "ReduceL2", "ReduceSumSquare"})
    EXPECT_EQ(factsOf(name, 18).sign, OutputSign::NonNegative) << name;
  EXPECT_EQ(factsOf("ReduceProd", 18).sign, OutputSign::OfDataInput);
  EXPECT_EQ(factsOf("ReduceLogSum", 18).sign, OutputSign::Unknown);
  EXPECT_EQ(factsOf("ReduceLogSumExp", 18).sign, OutputSign::Unknown);
  EXPECT_TRUE(factsOf("LRN", 13).set.empty());
  EXPECT_EQ(factsOf("LRN", 13).sign, OutputSign::OfDataInput);
  EXPECT_TRUE(factsOf("MeanVarianceNormalization", 13).set.empty());
  EXPECT_EQ(factsOf("MeanVarianceNormalization", 13).sign, OutputSign::Unknown);
}

TEST(MoreReductionOpsTest, AttributeAxes) {
  expectValuesNear(run1({"ReduceL1", 13, {signs()}, {ints("axes", {1}), noKeepdims()}}), {2},
                   {6, 15});
  expectValuesNear(run1({"ReduceL2", 11, {signs()}, {ints("axes", {-2})}}), {1, 3},
                   {std::sqrt(17.0), std::sqrt(29.0), std::sqrt(45.0)});
  expectValuesNear(run1({"ReduceSumSquare", 1, {signs()}}), {1, 1}, {91});
  expectValuesNear(run1({"ReduceProd", 13, {signs()}, {ints("axes", {1, 0}), noKeepdims()}}), {},
                   {-720});
  expectValuesNear(run1({"ReduceLogSum", 13, {f32({1, 2, 3, 4}, {2, 2})}, {ints("axes", {1})}}),
                   {2, 1}, {std::log(3.0), std::log(7.0)});
}

TEST(MoreReductionOpsTest, Opset18TakesAxesInput) {
  const at::Tensor axis1 = i64({1});
  expectValuesNear(run1({"ReduceL1", 18, {signs(), axis1}, {noKeepdims()}}), {2}, {6, 15});
  expectValuesNear(run1({"ReduceProd", 18, {signs(), i64({0})}}), {1, 3}, {-4, -10, -18});
  // Omitted axes: all of them; empty axes with noop_with_empty_axes: the identity.
  expectValuesNear(run1({"ReduceSumSquare", 18, {signs()}}), {1, 1}, {91});
  expectTensorEqual(run1({"ReduceL2",
                          18,
                          {signs(), at::zeros({0}, at::kLong)},
                          {Attribute::makeInt("noop_with_empty_axes", 1)}}),
                    signs());
  // The attribute is not read from opset 18 on.
  expectValuesNear(run1({"ReduceL1", 18, {signs()}, {ints("axes", {1}), noKeepdims()}}), {}, {21});
}

TEST(MoreReductionOpsTest, IntegersKeepTheirType) {
  // sqrt(9 + 16) = 5; sqrt(2) truncates to 1, as ONNX's reference.
  expectTensorEqual(run1({"ReduceL2", 13, {i32({3, 4, 1, 1}, {2, 2})}, {ints("axes", {1})}}),
                    i32({5, 1}, {2, 1}));
  expectTensorEqual(run1({"ReduceProd", 13, {i64({2, -3, 4})}, {noKeepdims()}}),
                    at::scalar_tensor(-24, at::kLong));
  expectTensorEqual(run1({"ReduceSumSquare", 18, {i32({100, 100, 3}, {3})}, {noKeepdims()}}),
                    at::scalar_tensor(20009, at::kLong).to(at::kInt));
  expectTensorEqual(run1({"ReduceL1", 18, {i32({-100, 7}, {2})}}), i32({107}, {1}));
}

TEST(MoreReductionOpsTest, EmptyAxisGivesTheIdentityOfTheReduction) {
  const at::Tensor empty = at::zeros({2, 0});
  const std::vector<Attribute> over1{ints("axes", {1}), noKeepdims()};
  const double inf = std::numeric_limits<double>::infinity();
  expectValuesNear(run1({"ReduceProd", 13, {empty}, over1}), {2}, {1, 1});
  expectValuesNear(run1({"ReduceL1", 13, {empty}, over1}), {2}, {0, 0});
  expectValuesNear(run1({"ReduceSumSquare", 13, {empty}, over1}), {2}, {0, 0});
  const at::Tensor log_sum = run1({"ReduceLogSum", 13, {empty}, over1});
  EXPECT_TRUE(at::equal(log_sum, at::full({2}, -inf, at::kFloat))) << log_sum;
  const at::Tensor log_sum_exp = run1({"ReduceLogSumExp", 13, {empty}, over1});
  EXPECT_TRUE(at::equal(log_sum_exp, at::full({2}, -inf, at::kFloat))) << log_sum_exp;
}

TEST(MoreReductionOpsTest, LogSumExpOfLargeValues) {
  // log(2 e^1000) = 1000 + log 2: no overflow.
  expectValuesNear(run1({"ReduceLogSumExp", 13, {f32({1000, 1000})}}), {1}, {1000 + std::log(2.0)},
                   1e-3);
  const at::Tensor half = run1({"ReduceLogSumExp", 18, {f32({0, 0, 0, 0}).to(at::kHalf)}});
  EXPECT_EQ(half.scalar_type(), at::kHalf);
  expectValuesNear(half, {1}, {std::log(4.0)}, 1e-3);
}

TEST(MoreReductionOpsTest, ReductionErrors) {
  expectNodeError({"ReduceL1", 13, {signs()}, {ints("axes", {2})}}, "axis 2 is out of range");
  expectNodeError({"ReduceProd", 18, {signs(), i64({1, -1})}}, "listed twice");
  expectNodeError({"ReduceSumSquare", 13, {at::ones({2}, at::kBool)}}, "must be numeric");
}

// ReduceMax and ReduceMin (reduction.cpp) accept bool from opset 20: any and all.
TEST(MoreReductionOpsTest, ReduceMaxMinOnBoolAtOpset20) {
  const at::Tensor x = i64({1, 0, 0, 0}).reshape({2, 2}).to(at::kBool);
  expectTensorEqual(run1({"ReduceMax", 20, {x, i64({1})}, {noKeepdims()}}),
                    i64({1, 0}).to(at::kBool));
  expectTensorEqual(run1({"ReduceMin", 20, {x, i64({0})}, {noKeepdims()}}),
                    i64({0, 0}).to(at::kBool));
}

TEST(MoreReductionOpsTest, LrnWithAnEvenWindow) {
  // size 2: channels c and c + 1. Square sums 1 + 4, 4 + 9, 9; y = x / (1 + s / 2).
  const at::Tensor x = f32({1, 2, 3}, {1, 3, 1, 1});
  const std::vector<Attribute> attrs{Attribute::makeInt("size", 2),
                                     Attribute::makeFloat("alpha", 1),
                                     Attribute::makeFloat("beta", 1)};
  expectValuesNear(run1({"LRN", 13, {x}, attrs}), {1, 3, 1, 1}, {1 / 3.5, 2 / 7.5, 3 / 5.5});
  const at::Tensor half = run1({"LRN", 13, {x.to(at::kHalf)}, attrs});
  EXPECT_EQ(half.scalar_type(), at::kHalf);
  expectValuesNear(half, {1, 3, 1, 1}, {1 / 3.5, 2 / 7.5, 3 / 5.5}, 1e-3);
}

TEST(MoreReductionOpsTest, LrnErrors) {
  expectNodeError({"LRN", 13, {f32({1, 2}, {1, 2})}, {Attribute::makeInt("size", 1)}},
                  "must be [N, C, D1, ...]");
  expectNodeError({"LRN", 13, {at::ones({1, 2, 2})}, {Attribute::makeInt("size", 0)}},
                  "'size' must be >= 1");
  expectNodeError({"LRN", 13, {at::ones({1, 2, 2})}}, "required attribute 'size'");
}

TEST(MoreReductionOpsTest, MeanVarianceNormalizationOverChosenAxes) {
  // Columns [1, 5] (mean 3, std 2) and [3, 11] (mean 7, std 4).
  const at::Tensor x = f32({1, 3, 5, 11}, {2, 2});
  expectValuesNear(run1({"MeanVarianceNormalization", 13, {x}, {ints("axes", {0})}}), {2, 2},
                   {-1, -1, 1, 1});
  // Default axes [0, 2, 3] need rank 4.
  expectNodeError({"MeanVarianceNormalization", 13, {at::ones({1, 2, 2})}},
                  "axis 3 is out of range");
  expectNodeError({"MeanVarianceNormalization", 9, {x}, {ints("axes", {0, -2})}}, "listed twice");
}

}  // namespace
}  // namespace qforge
