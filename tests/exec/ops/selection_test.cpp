// Unit tests for ArgMax, ArgMin, TopK, NonZero, Unique and Compress (exec/ops/selection.cpp):
// their op-table facts, the opset differences ONNX's node tests do not cover, and the errors.
// ONNX's own node tests (tests/conformance) check the numerics of the common cases; expected
// values here are worked out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

TEST(SelectionOpsTest, IndexOutputsAreShapeComputationsAndSelectionsMoveData) {
  for (const char* op : {"ArgMax", "ArgMin"}) {
    EXPECT_EQ(trueFacts(op, 13), std::set<std::string>{"shape_computation"}) << op;
  }
  EXPECT_EQ(trueFacts("NonZero", 13), std::set<std::string>{"shape_computation"});
  for (const char* op : {"TopK", "Unique", "Compress"}) {
    EXPECT_EQ(trueFacts(op, 11), std::set<std::string>{"moves_data_only"}) << op;
    EXPECT_EQ(signOf(op, 11), OutputSign::OfDataInput) << op;
  }
  EXPECT_EQ(signOf("ArgMax", 13), OutputSign::Unknown);
}

TEST(SelectionOpsTest, ArgMaxSelectsTheLastTieFromOpset12) {
  const at::Tensor x = f32({1, 3, 3, 2, 2, 0}, {2, 3});
  const Attribute axis1 = Attribute::makeInt("axis", 1);
  const Attribute last = Attribute::makeInt("select_last_index", 1);
  expectTensorEqual(run1({"ArgMax", 12, {x}, {axis1}}), i64({1, 0}).reshape({2, 1}));
  expectTensorEqual(run1({"ArgMax", 12, {x}, {axis1, last}}), i64({2, 1}).reshape({2, 1}));
  expectTensorEqual(run1({"ArgMin", 13, {x}, {axis1, last, Attribute::makeInt("keepdims", 0)}}),
                    i64({0, 2}));
  // Opset 11 has no select_last_index.
  expectTensorEqual(run1({"ArgMax", 11, {x}, {axis1, last}}), i64({1, 0}).reshape({2, 1}));
  // Along axis 0 of an int64 tensor, negative axis, float16 input.
  expectTensorEqual(run1({"ArgMin", 13, {i64({4, -2, 7}).reshape({3, 1})}}),
                    i64({1}).reshape({1, 1}));
  expectTensorEqual(run1({"ArgMax", 13, {x.to(at::kHalf)}, {Attribute::makeInt("axis", -1)}}),
                    i64({1, 0}).reshape({2, 1}));
}

TEST(SelectionOpsTest, TopKTakesKFromAttributeThenInputAndKeepsTiesInIndexOrder) {
  const at::Tensor x = f32({3, 1, 3, 2});
  auto top = [&](int64_t opset, std::vector<at::Tensor> inputs, std::vector<Attribute> attrs) {
    return runSingleOp({"TopK", opset, std::move(inputs), std::move(attrs), 2});
  };
  for (const auto& out : {top(1, {x}, {Attribute::makeInt("k", 3)}), top(10, {x, i64({3})}, {})}) {
    expectTensorEqual(out[0], f32({3, 3, 2}));
    expectTensorEqual(out[1], i64({0, 2, 3}));
  }
  const auto smallest = top(11, {x, i64({2})}, {Attribute::makeInt("largest", 0)});
  expectTensorEqual(smallest[0], f32({1, 2}));
  expectTensorEqual(smallest[1], i64({1, 3}));
  // int64 and float16 values keep their type.
  expectTensorEqual(top(11, {i64({5, 9, 1}), i64({1})}, {})[0], i64({9}));
  expectTensorEqual(top(11, {x.to(at::kHalf), i64({1})}, {})[0], f32({3}).to(at::kHalf));
  expectTensorEqual(top(11, {x, i64({0})}, {})[1], i64({}));
}

TEST(SelectionOpsTest, NonZeroListsCoordinatesPerDimension) {
  const at::Tensor x = i64({0, 5, 0, 7, 8, 0}).reshape({2, 3});
  expectTensorEqual(run1({"NonZero", 13, {x}}), i64({0, 1, 1, 1, 0, 1}).reshape({2, 3}));
  expectTensorEqual(run1({"NonZero", 9, {at::zeros({2, 2})}}), i64({}).reshape({2, 0}));
}

TEST(SelectionOpsTest, UniqueOnIntegersSortedOrInFirstOccurrenceOrder) {
  const at::Tensor x = i64({2, 1, 2, 3, 1, 2});
  const auto sorted = runSingleOp({"Unique", 11, {x}, {}, 4});
  expectTensorEqual(sorted[0], i64({1, 2, 3}));
  expectTensorEqual(sorted[1], i64({1, 0, 3}));
  expectTensorEqual(sorted[2], i64({1, 0, 1, 2, 0, 1}));
  expectTensorEqual(sorted[3], i64({2, 3, 1}));
  const auto unsorted = runSingleOp({"Unique", 11, {x}, {Attribute::makeInt("sorted", 0)}, 4});
  expectTensorEqual(unsorted[0], i64({2, 1, 3}));
  expectTensorEqual(unsorted[1], i64({0, 1, 3}));
  expectTensorEqual(unsorted[2], i64({0, 1, 0, 2, 1, 0}));
  expectTensorEqual(unsorted[3], i64({3, 2, 1}));
}

TEST(SelectionOpsTest, CompressDropsSlicesPastAShortCondition) {
  const at::Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  const at::Tensor keep = i64({0, 1}).to(at::kBool);
  expectTensorEqual(run1({"Compress", 11, {x, keep}, {Attribute::makeInt("axis", -1)}}),
                    f32({2, 5}, {2, 1}));
  // Without an axis, the flattened input; false entries past the end are allowed.
  const at::Tensor longer = i64({1, 0, 0, 0, 0, 1, 0}).to(at::kBool);
  expectTensorEqual(run1({"Compress", 9, {x, longer}}), f32({1, 6}));
}

TEST(SelectionOpsTest, BadInputsNameTheNodeAndTheProblem) {
  const at::Tensor x = f32({1, 2, 3, 4}, {2, 2});
  expectNodeError({"ArgMax", 13, {f32({1}).reshape({})}}, "rank >= 1");
  expectNodeError({"ArgMax", 13, {x}, {Attribute::makeInt("axis", 2)}}, "out of range");
  expectNodeError({"ArgMin", 13, {at::zeros({2, 0})}, {Attribute::makeInt("axis", 1)}}, "empty");
  expectNodeError({"TopK", 11, {x, i64({3})}, {}, 2}, "k 3 is outside [0, 2]");
  expectNodeError({"TopK", 11, {x, i64({1, 1})}, {}, 2}, "K must hold one value");
  expectNodeError({"TopK", 1, {x}, {}, 2}, "'k' is missing");
  expectNodeError({"Unique", 11, {f32({1}).reshape({})}, {Attribute::makeInt("axis", 0)}, 4},
                  "scalar");
  expectNodeError({"Compress", 11, {x, at::ones({3}, at::kBool)}, {Attribute::makeInt("axis", 0)}},
                  "selects entry 2");
  expectNodeError({"Compress", 11, {x, at::ones({2, 1}, at::kBool)}}, "must be 1-D");
}

}  // namespace
}  // namespace qforge
