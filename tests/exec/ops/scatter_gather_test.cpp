// Unit tests for GatherElements, GatherND, Scatter, ScatterElements, ScatterND, OneHot and
// ReverseSequence (exec/ops/scatter_gather.cpp): op-table facts, the opset-18 max/min reductions
// and other cases ONNX's node tests (tests/conformance) lack, and the errors. Expected values are
// worked out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

TEST(ScatterGatherOpsTest, GathersMoveDataScattersWithReductionsDoNot) {
  for (const char* op : {"GatherElements", "GatherND"}) {
    EXPECT_EQ(trueFacts(op, 13), std::set<std::string>{"moves_data_only"}) << op;
    EXPECT_EQ(signOf(op, 13), OutputSign::OfDataInput) << op;
  }
  EXPECT_EQ(trueFacts("Scatter", 9), std::set<std::string>{"moves_data_only"});
  EXPECT_EQ(trueFacts("ScatterElements", 11), std::set<std::string>{});
  EXPECT_EQ(trueFacts("ScatterND", 18), std::set<std::string>{});
  EXPECT_EQ(trueFacts("OneHot", 11), std::set<std::string>{"shape_computation"});
  EXPECT_EQ(trueFacts("ReverseSequence", 10),
            (std::set<std::string>{"moves_data_only", "layout_only"}));
  EXPECT_EQ(signOf("ReverseSequence", 10), OutputSign::OfDataInput);
  // Scatter is deprecated from opset 11.
  EXPECT_EQ(opInfoFor("Scatter", 11), nullptr);
}

TEST(ScatterGatherOpsTest, ScatterElementsReductionsByOpset) {
  const at::Tensor data = f32({1, 2, 3, 4, 5});
  const at::Tensor indices = i64({1, 1, -2});
  const at::Tensor updates = f32({10, 0, -1});
  auto scatter = [&](int64_t opset, const std::string& reduction) {
    return run1({"ScatterElements",
                 opset,
                 {data, indices, updates},
                 {Attribute::makeString("reduction", reduction)}});
  };
  expectTensorEqual(scatter(16, "add"), f32({1, 12, 3, 3, 5}));
  expectTensorEqual(scatter(16, "mul"), f32({1, 0, 3, -4, 5}));
  expectTensorEqual(scatter(18, "max"), f32({1, 10, 3, 4, 5}));
  expectTensorEqual(scatter(18, "min"), f32({1, 0, 3, -1, 5}));
  // Scatter-9 is ScatterElements without reductions.
  expectTensorEqual(run1({"Scatter", 9, {data, i64({0, 4}), f32({7, 8})}}), f32({7, 2, 3, 4, 8}));
  expectNodeError({"ScatterElements",
                   16,
                   {data, indices, updates},
                   {Attribute::makeString("reduction", "max")}},
                  "unknown reduction 'max'");
}

TEST(ScatterGatherOpsTest, ScatterNdReductionsOnRows) {
  const at::Tensor data = i64({1, 2, 3, 4}).reshape({2, 2});
  const at::Tensor indices = i64({1, -1}).reshape({2, 1});
  const at::Tensor updates = i64({5, 0, 2, 9}).reshape({2, 2});
  auto scatter = [&](const std::string& reduction) {
    return run1({"ScatterND",
                 18,
                 {data, indices, updates},
                 {Attribute::makeString("reduction", reduction)}});
  };
  expectTensorEqual(scatter("max"), i64({1, 2, 5, 9}).reshape({2, 2}));
  expectTensorEqual(scatter("min"), i64({1, 2, 2, 0}).reshape({2, 2}));
  expectTensorEqual(scatter("add"), i64({1, 2, 10, 13}).reshape({2, 2}));
  // Element indices (k = rank): one scalar update each.
  expectTensorEqual(run1({"ScatterND", 11, {data, i64({0, 1, 1, 0}).reshape({2, 2}), i64({7, 8})}}),
                    i64({1, 7, 8, 4}).reshape({2, 2}));
}

TEST(ScatterGatherOpsTest, GatherNdWithBatchDimsAndNegativeIndices) {
  // data [2, 2, 2]: batch b holds [[4b, 4b+1], [4b+2, 4b+3]].
  const at::Tensor data = at::arange(8, at::kLong).reshape({2, 2, 2});
  const at::Tensor indices = i64({-1, 0, 0, 1}).reshape({2, 1, 2});
  expectTensorEqual(run1({"GatherND", 12, {data, indices}, {Attribute::makeInt("batch_dims", 1)}}),
                    i64({2, 5}).reshape({2, 1}));
  // Without batch dims, k = 1 picks whole [2, 2] slices.
  expectTensorEqual(run1({"GatherND", 11, {data, i64({1}).reshape({1, 1})}}),
                    i64({4, 5, 6, 7}).reshape({1, 2, 2}));
}

TEST(ScatterGatherOpsTest, GatherElementsOnInt64WithNegativeIndices) {
  const at::Tensor data = i64({1, 2, 3, 4}).reshape({2, 2});
  expectTensorEqual(run1({"GatherElements",
                          11,
                          {data, i64({-1, 0}).reshape({1, 2})},
                          {Attribute::makeInt("axis", 0)}}),
                    i64({3, 2}).reshape({1, 2}));
}

TEST(ScatterGatherOpsTest, OneHotNegativeIndicesCountFromTheEndFromOpset11) {
  const at::Tensor indices = i64({-1, 1});
  const at::Tensor values = i64({0, 5});
  expectTensorEqual(run1({"OneHot", 11, {indices, i64({3}), values}}),
                    i64({0, 0, 5, 0, 5, 0}).reshape({2, 3}));
  // Opset 9: out of range, all off.
  expectTensorEqual(run1({"OneHot", 9, {indices, i64({3}), values}}),
                    i64({0, 0, 0, 0, 5, 0}).reshape({2, 3}));
  // axis 0 puts the classes first.
  expectTensorEqual(
      run1({"OneHot", 11, {indices, i64({3}), values}, {Attribute::makeInt("axis", 0)}}),
      i64({0, 0, 0, 5, 5, 0}).reshape({3, 2}));
}

TEST(ScatterGatherOpsTest, ReverseSequenceOnInt64) {
  // time_axis 0, batch_axis 1: column b reverses its first lens[b] rows.
  const at::Tensor x = at::arange(6, at::kLong).reshape({3, 2});
  expectTensorEqual(run1({"ReverseSequence", 10, {x, i64({3, 2})}}),
                    i64({4, 3, 2, 1, 0, 5}).reshape({3, 2}));
}

TEST(ScatterGatherOpsTest, BadInputsNameTheNodeAndTheProblem) {
  const at::Tensor data = f32({1, 2, 3, 4}, {2, 2});
  expectNodeError({"GatherElements", 13, {data, i64({2, 0}).reshape({1, 2})}},
                  "index 2 is out of range for axis 0 of size 2");
  expectNodeError({"GatherElements", 13, {data, i64({0, 1})}}, "must have the rank of data");
  expectNodeError({"GatherElements", 13, {data, f32({0, 1}, {1, 2})}}, "integer tensor");
  expectNodeError({"GatherND", 13, {data, i64({0, 5}).reshape({1, 2})}}, "index 5 is out of range");
  expectNodeError({"GatherND", 13, {data, i64({0, 0, 0}).reshape({1, 3})}},
                  "last dimension 3 must be in [1, 2]");
  expectNodeError(
      {"GatherND", 12, {data, i64({0}).reshape({1, 1})}, {Attribute::makeInt("batch_dims", 2)}},
      "batch_dims 2 must be in [0, 2)");
  expectNodeError({"ScatterND", 16, {data, i64({0}).reshape({1, 1}), f32({1, 2, 3})}},
                  "must have shape [1, 2]");
  expectNodeError({"ScatterElements", 13, {data, i64({0, 1}).reshape({1, 2}), f32({1})}},
                  "must match indices");
  expectNodeError({"OneHot", 11, {i64({0}), i64({0}), f32({0, 1})}}, "depth 0");
  expectNodeError({"OneHot", 11, {i64({0}), i64({2}), f32({0, 1, 2})}}, "values must hold");
  expectNodeError({"ReverseSequence",
                   10,
                   {data, i64({1, 1})},
                   {Attribute::makeInt("batch_axis", 0), Attribute::makeInt("time_axis", 0)}},
                  "batch_axis and time_axis");
  expectNodeError({"ReverseSequence", 10, {data, i64({3, 1})}}, "sequence_lens must lie in [0, 2]");
  expectNodeError({"ReverseSequence", 10, {data, i64({1})}}, "must list 2 lengths");
}

}  // namespace
}  // namespace qforge
