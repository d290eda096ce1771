// Unit tests for Slice and Gather (exec/ops/indexing.cpp). Expected values are written out by
// hand from the ONNX clamping rules.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Slices the 1-d tensor [0, 1, ..., 5] with the opset-13 input form.
at::Tensor slice6(int64_t start, int64_t end, int64_t step) {
  return run1(
      {"Slice", 13, {i64({0, 1, 2, 3, 4, 5}), i64({start}), i64({end}), i64({0}), i64({step})}});
}

TEST(SliceTest, AttributesBeforeOpset10InputsFrom10) {
  at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor old = run1({"Slice",
                         9,
                         {x},
                         {Attribute::makeInts("starts", {1}), Attribute::makeInts("ends", {3}),
                          Attribute::makeInts("axes", {1})}});
  expectTensorEqual(old, f32({1, 2, 5, 6, 9, 10}).reshape({3, 2}));
  // Without axes, starts/ends apply to the leading axes.
  at::Tensor leading =
      run1({"Slice",
            1,
            {x},
            {Attribute::makeInts("starts", {2, 0}), Attribute::makeInts("ends", {3, 1})}});
  expectTensorEqual(leading, f32({8}).reshape({1, 1}));
  at::Tensor now = run1({"Slice", 10, {x, i64({1}), i64({3}), i64({1})}});
  expectTensorEqual(now, old);
}

TEST(SliceTest, PositiveStepsAndClamping) {
  expectTensorEqual(slice6(1, 6, 2), i64({1, 3, 5}));
  expectTensorEqual(slice6(-4, kMax, 1), i64({2, 3, 4, 5}));
  expectTensorEqual(slice6(-100, 2, 1), i64({0, 1}));
  expectTensorEqual(slice6(4, 2, 1), i64({}));
  expectTensorEqual(slice6(10, 20, 1), i64({}));
}

TEST(SliceTest, NegativeStepsRunBackwards) {
  // INT_MIN end means "through index 0".
  expectTensorEqual(slice6(-1, kMin, -1), i64({5, 4, 3, 2, 1, 0}));
  expectTensorEqual(slice6(kMax, kMin, -2), i64({5, 3, 1}));
  // end -7 + 6 = -1 is clamped to -1 (before index 0), start 10 to 5.
  expectTensorEqual(slice6(10, -7, -3), i64({5, 2}));
  expectTensorEqual(slice6(4, 1, -1), i64({4, 3, 2}));
  expectTensorEqual(slice6(1, 4, -1), i64({}));
}

TEST(SliceTest, SeveralAxesWithNegativeAxisAndStep) {
  at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor y = run1({"Slice", 13, {x, i64({0, -1}), i64({kMax, 0}), i64({0, -1}), i64({2, -2})}});
  // Rows 0 and 2; columns 3 and 1.
  expectTensorEqual(y, f32({3, 1, 11, 9}).reshape({2, 2}));
}

TEST(SliceTest, BadArgumentsNameTheNode) {
  at::Tensor x = at::arange(6, at::kLong);
  expectError({"Slice", 13, {x, i64({0}), i64({3}), i64({0}), i64({0})}},
              {"node 'op' (Slice), opset 13", "step 0"});
  expectError({"Slice", 13, {x, i64({0, 1}), i64({3})}}, {"differ in length"});
  expectError({"Slice", 13, {x, i64({0}), i64({3}), i64({1})}}, {"out of range"});
  expectError({"Slice", 13, {x.reshape({2, 3}), i64({0, 0}), i64({1, 1}), i64({1, -1})}},
              {"sliced twice"});
}

TEST(GatherTest, NegativeIndicesOnAnyAxis) {
  at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor y = run1({"Gather", 13, {x, i64({-1, 0})}, {Attribute::makeInt("axis", 1)}});
  expectTensorEqual(y, f32({3, 0, 7, 4, 11, 8}).reshape({3, 2}));
  // 2-d indices on axis 0: output shape indices.shape + data.shape[1:].
  at::Tensor z = run1({"Gather", 11, {x, i64({2, 0, 1, 2}).reshape({2, 2})}});
  ASSERT_EQ(z.sizes(), at::IntArrayRef({2, 2, 4}));
  expectTensorEqual(z[0][0], f32({8, 9, 10, 11}));
  expectTensorEqual(z[1][1], f32({8, 9, 10, 11}));
}

TEST(GatherTest, ScalarIndexOnShapeDropsTheAxis) {
  // Shape -> Gather(0) is how models read the batch size at run time.
  at::Tensor shape = i64({5, 3, 224, 224});
  expectTensorEqual(run1({"Gather", 13, {shape, at::scalar_tensor(0, at::kLong)}}),
                    at::scalar_tensor(5, at::kLong));
  expectTensorEqual(
      run1({"Gather", 13, {shape, at::tensor(std::vector<int32_t>{-2, -1}, at::kInt)}}),
      i64({224, 224}));
}

TEST(GatherTest, ScalarIndexOnAnInnerAxisOfActivations) {
  // qkv[..., i, ...] as attention splits it: the slice at i (negative counts from the end).
  const at::Tensor x = at::arange(24, at::kFloat).reshape({2, 3, 4});
  const at::Tensor y =
      run1({"Gather", 13, {x, at::scalar_tensor(1, at::kLong)}, {Attribute::makeInt("axis", 1)}});
  expectValuesNear(y, {2, 4}, {4, 5, 6, 7, 16, 17, 18, 19});
  const at::Tensor last =
      run1({"Gather", 13, {x, at::scalar_tensor(-1, at::kInt)}, {Attribute::makeInt("axis", 2)}});
  expectValuesNear(last, {2, 3}, {3, 7, 11, 15, 19, 23});
  expectError({"Gather", 13, {x, at::scalar_tensor(3, at::kLong)}, {Attribute::makeInt("axis", 1)}},
              {"index 3 is out of range for axis 1 of size 3"});
  expectError(
      {"Gather", 13, {x, at::scalar_tensor(-4, at::kLong)}, {Attribute::makeInt("axis", 1)}},
      {"index -4 is out of range"});
}

TEST(GatherTest, OutOfRangeIndexNamesTheNode) {
  at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3});
  expectError({"Gather", 13, {x, i64({0, 3})}, {Attribute::makeInt("axis", 1)}},
              {"node 'op' (Gather), opset 13", "index 3 is out of range", "size 3"});
  expectError({"Gather", 13, {x, i64({-3})}}, {"index -3 is out of range"});
  expectError({"Gather", 13, {x, i64({0})}, {Attribute::makeInt("axis", 2)}}, {"axis 2"});
}

}  // namespace
}  // namespace qforge
