// Reduction lowerings: axes as attribute vs input across opsets, noop_with_empty_axes, integer
// types, and errors for bad axes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]
at::Tensor cube() {
  return at::arange(1, 13, at::kFloat).reshape({2, 2, 3});
}

at::Tensor axes(std::vector<int64_t> values) {
  return at::tensor(values, at::kLong);
}

TEST(ReductionOpsTest, RegisteredFormsPerOpset) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* name : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
    for (int64_t opset = 11; opset <= 17; ++opset) {
      EXPECT_NE(registry.find("", name, opset), nullptr) << name << " opset " << opset;
    }
  }
  // ReduceSum switched to the axes input at 13, the others at 18: different entries.
  EXPECT_NE(registry.find("", "ReduceSum", 12), registry.find("", "ReduceSum", 13));
  EXPECT_EQ(registry.find("", "ReduceMean", 13), registry.find("", "ReduceMean", 17));
  EXPECT_NE(registry.find("", "ReduceMean", 17), registry.find("", "ReduceMean", 18));
  EXPECT_TRUE(registry.find("", "ReduceMax", 13)->moves_data_only);
  EXPECT_FALSE(registry.find("", "ReduceSum", 13)->moves_data_only);
}

TEST(ReductionOpsTest, ReduceSumOpset13TakesAxesInput) {
  expectTensorEqual(
      run1({"ReduceSum", 13, {cube(), axes({-1})}, {Attribute::makeInt("keepdims", 0)}}),
      at::tensor({6.f, 15.f, 24.f, 33.f}).reshape({2, 2}));
  expectTensorEqual(run1({"ReduceSum", 13, {cube(), axes({0, 2})}}),
                    at::tensor({30.f, 48.f}).reshape({1, 2, 1}));
}

TEST(ReductionOpsTest, ReduceSumOpset11TakesAxesAttribute) {
  expectTensorEqual(run1({"ReduceSum", 11, {cube()}, {Attribute::makeInts("axes", {1})}}),
                    at::tensor({5.f, 7.f, 9.f, 17.f, 19.f, 21.f}).reshape({2, 1, 3}));
}

TEST(ReductionOpsTest, ReduceSumEmptyAxesIsAllOrNothing) {
  // Empty axes with noop_with_empty_axes = 1: the input passes through.
  expectTensorEqual(
      run1({"ReduceSum", 13, {cube(), axes({})}, {Attribute::makeInt("noop_with_empty_axes", 1)}}),
      cube());
  // Omitted axes, default noop_with_empty_axes = 0: reduce over everything.
  expectTensorEqual(run1({"ReduceSum", 13, {cube()}}), at::tensor({78.f}).reshape({1, 1, 1}));
  expectTensorEqual(
      run1({"ReduceSum", 13, {cube(), axes({})}, {Attribute::makeInt("keepdims", 0)}}),
      at::scalar_tensor(78.f));
}

TEST(ReductionOpsTest, ReduceSumKeepsIntegerType) {
  at::Tensor x = at::tensor({100, 100, 100, 1}, at::kInt).reshape({2, 2});
  expectTensorEqual(run1({"ReduceSum", 13, {x, axes({1})}, {Attribute::makeInt("keepdims", 0)}}),
                    at::tensor({200, 101}, at::kInt));
}

TEST(ReductionOpsTest, ReduceMeanOnFloatsAndIntegers) {
  expectTensorEqual(run1({"ReduceMean", 13, {cube()}, {Attribute::makeInts("axes", {0, -1})}}),
                    at::tensor({5.f, 8.f}).reshape({1, 2, 1}));
  // Integer mean truncates: (1 + 2) / 2 = 1, (-3 - 4) / 2 = -3.
  at::Tensor x = at::tensor({1, 2, -3, -4}, at::kLong).reshape({2, 2});
  expectTensorEqual(run1({"ReduceMean",
                          13,
                          {x},
                          {Attribute::makeInts("axes", {1}), Attribute::makeInt("keepdims", 0)}}),
                    at::tensor({1, -3}, at::kLong));
}

TEST(ReductionOpsTest, ReduceMeanOpset18TakesAxesInput) {
  expectTensorEqual(
      run1({"ReduceMean", 18, {cube(), axes({1, 2})}, {Attribute::makeInt("keepdims", 0)}}),
      at::tensor({3.5f, 9.5f}));
  expectTensorEqual(
      run1({"ReduceMean", 18, {cube(), axes({})}, {Attribute::makeInt("noop_with_empty_axes", 1)}}),
      cube());
}

TEST(ReductionOpsTest, ReduceMaxMinWithAndWithoutAxes) {
  at::Tensor x = at::tensor({3.f, -1.f, 7.f, 2.f, 9.f, -5.f}).reshape({2, 3});
  expectTensorEqual(run1({"ReduceMax", 17, {x}, {Attribute::makeInts("axes", {1})}}),
                    at::tensor({7.f, 9.f}).reshape({2, 1}));
  expectTensorEqual(run1({"ReduceMin",
                          17,
                          {x},
                          {Attribute::makeInts("axes", {-2}), Attribute::makeInt("keepdims", 0)}}),
                    at::tensor({2.f, -1.f, -5.f}));
  // No axes attribute: all axes.
  expectTensorEqual(run1({"ReduceMax", 13, {x}, {Attribute::makeInt("keepdims", 0)}}),
                    at::scalar_tensor(9.f));
  expectTensorEqual(run1({"ReduceMin", 11, {x}}), at::tensor({-5.f}).reshape({1, 1}));
  at::Tensor bytes = at::tensor({3, 250, 7}, at::kByte);
  expectTensorEqual(run1({"ReduceMax", 12, {bytes}}), at::tensor({250}, at::kByte));
}

TEST(ReductionOpsTest, AxisOutOfRangeNamesTheNode) {
  expectNodeError({"ReduceMean", 13, {cube()}, {Attribute::makeInts("axes", {3})}},
                  "axis 3 is out of range");
  expectNodeError({"ReduceSum", 13, {cube(), axes({-4})}}, "axis -4 is out of range");
}

TEST(ReductionOpsTest, RepeatedAxisIsAnError) {
  expectNodeError({"ReduceMax", 13, {cube()}, {Attribute::makeInts("axes", {1, -2})}},
                  "listed twice");
}

TEST(ReductionOpsTest, MaxOverEmptyAxisIsAnError) {
  expectNodeError({"ReduceMin", 13, {at::zeros({2, 0})}, {Attribute::makeInts("axes", {1})}},
                  "empty axis 1");
}

}  // namespace
}  // namespace qforge
