// Unit tests for the shape and data-movement lowerings (exec/ops/shape.cpp): opset variants the
// ONNX conformance data does not cover, runtime shapes, and error cases. Expected values are
// written out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "exec/executor.h"
#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// --- Flatten ------------------------------------------------------------------------------------

TEST(FlattenTest, AxisZeroAndNegativeAxis) {
  at::Tensor x = at::arange(24, at::kFloat).reshape({2, 3, 4});
  EXPECT_EQ(run1({"Flatten", 13, {x}, {Attribute::makeInt("axis", 0)}}).sizes(),
            at::IntArrayRef({1, 24}));
  EXPECT_EQ(run1({"Flatten", 13, {x}, {Attribute::makeInt("axis", -1)}}).sizes(),
            at::IntArrayRef({6, 4}));
  EXPECT_EQ(run1({"Flatten", 13, {x}, {Attribute::makeInt("axis", 3)}}).sizes(),
            at::IntArrayRef({24, 1}));
  expectError({"Flatten", 13, {x}, {Attribute::makeInt("axis", 4)}},
              {"node 'op' (Flatten)", "axis 4"});
}

// --- Reshape ------------------------------------------------------------------------------------

TEST(ReshapeTest, ZeroCopiesAndMinusOneInfers) {
  at::Tensor x = at::arange(24, at::kFloat).reshape({2, 3, 4});
  at::Tensor y = run1({"Reshape", 13, {x, i64({0, -1})}});
  expectTensorEqual(y, at::arange(24, at::kFloat).reshape({2, 12}));
}

TEST(ReshapeTest, AllowZeroKeepsZeroAsASize) {
  at::Tensor x = at::zeros({0, 3});
  // allowzero=1: the 0 is a real size, so [3, 0] is a valid empty shape.
  EXPECT_EQ(run1({"Reshape", 14, {x, i64({3, 0})}, {Attribute::makeInt("allowzero", 1)}}).sizes(),
            at::IntArrayRef({3, 0}));
  // Without allowzero the 0 copies input dim 1 (3): [3, 3] does not fit 0 elements.
  expectError({"Reshape", 14, {x, i64({3, 0})}}, {"node 'op' (Reshape)", "cannot reshape"});
  expectError({"Reshape", 14, {x, i64({0, -1})}, {Attribute::makeInt("allowzero", 1)}},
              {"allowzero"});
}

TEST(ReshapeTest, OpsetOneTakesShapeAttribute) {
  at::Tensor x = at::arange(6, at::kFloat);
  at::Tensor y = run1({"Reshape", 1, {x}, {Attribute::makeInts("shape", {3, 2})}});
  expectTensorEqual(y, at::arange(6, at::kFloat).reshape({3, 2}));
}

TEST(ReshapeTest, RuntimeBatchDiffersFromDeclared) {
  // Declared input [2, 3, 4]; the model is then fed a batch of 5.
  SingleOp call("Reshape", 13, {at::zeros({2, 3, 4}), i64({0, -1})});
  call.initializer_slots = {1};
  Graph g = buildSingleOpGraph(call);
  Executor executor(g);
  at::Tensor x = at::arange(60, at::kFloat).reshape({5, 3, 4});
  at::Tensor y = executor.run({{"in0", x}}).at("out0");
  expectTensorEqual(y, at::arange(60, at::kFloat).reshape({5, 12}));

  SingleOp flat("Reshape", 13, {at::zeros({2, 3, 4}), i64({-1, 4})});
  flat.initializer_slots = {1};
  Graph g2 = buildSingleOpGraph(flat);
  Executor executor2(g2);
  EXPECT_EQ(executor2.run({{"in0", x}}).at("out0").sizes(), at::IntArrayRef({15, 4}));
}

TEST(ReshapeTest, BadShapesNameTheNode) {
  at::Tensor x = at::zeros({2, 3});
  expectError({"Reshape", 13, {x, i64({4, 2})}}, {"node 'op' (Reshape), opset 13", "[2,3]"});
  expectError({"Reshape", 13, {x, i64({-1, -1})}}, {"node 'op' (Reshape)", "more than one -1"});
  expectError({"Reshape", 13, {x, i64({4, -1})}}, {"node 'op' (Reshape)", "cannot be inferred"});
  expectError({"Reshape", 13, {x, i64({0, 0, 0})}}, {"node 'op' (Reshape)", "copies dimension 2"});
  expectError({"Reshape", 13, {x, i64({-2, 3})}}, {"negative dimension"});
}

// --- Transpose ----------------------------------------------------------------------------------

TEST(TransposeTest, DefaultReversesAndPermIsApplied) {
  at::Tensor x = at::arange(6, at::kFloat).reshape({1, 2, 3});
  at::Tensor y = run1({"Transpose", 13, {x}});
  ASSERT_EQ(y.sizes(), at::IntArrayRef({3, 2, 1}));
  // y[k][j][0] = x[0][j][k] = 3j + k.
  expectTensorEqual(y.reshape({3, 2}), f32({0, 3, 1, 4, 2, 5}).reshape({3, 2}));
  at::Tensor z = run1({"Transpose", 13, {x}, {Attribute::makeInts("perm", {0, 2, 1})}});
  expectTensorEqual(z, f32({0, 3, 1, 4, 2, 5}).reshape({1, 3, 2}));
  expectError({"Transpose", 13, {x}, {Attribute::makeInts("perm", {0, 1})}}, {"perm"});
  expectError({"Transpose", 13, {x}, {Attribute::makeInts("perm", {0, 1, 1})}}, {"twice"});
}

// --- Squeeze / Unsqueeze ------------------------------------------------------------------------

TEST(SqueezeTest, AxesAttributeBeforeOpset13InputFrom13) {
  at::Tensor x = at::zeros({1, 3, 1, 2});
  EXPECT_EQ(run1({"Squeeze", 11, {x}, {Attribute::makeInts("axes", {-2})}}).sizes(),
            at::IntArrayRef({1, 3, 2}));
  EXPECT_EQ(run1({"Squeeze", 13, {x, i64({0})}}).sizes(), at::IntArrayRef({3, 1, 2}));
  // No axes: every size-1 dimension goes.
  EXPECT_EQ(run1({"Squeeze", 13, {x}}).sizes(), at::IntArrayRef({3, 2}));
  EXPECT_EQ(run1({"Squeeze", 11, {x}}).sizes(), at::IntArrayRef({3, 2}));
  EXPECT_EQ(run1({"Squeeze", 13, {x, i64({})}}).sizes(), at::IntArrayRef({3, 2}));
}

TEST(SqueezeTest, NonUnitAxisIsRejected) {
  at::Tensor x = at::zeros({1, 3});
  expectError({"Squeeze", 13, {x, i64({1})}}, {"node 'op' (Squeeze)", "not 1"});
  expectError({"Squeeze", 11, {x}, {Attribute::makeInts("axes", {2})}}, {"out of range"});
}

TEST(UnsqueezeTest, AxesAttributeBeforeOpset13InputFrom13) {
  at::Tensor x = at::zeros({3, 4});
  EXPECT_EQ(run1({"Unsqueeze", 11, {x}, {Attribute::makeInts("axes", {0, 3})}}).sizes(),
            at::IntArrayRef({1, 3, 4, 1}));
  // Axes index the output; unsorted and negative are allowed.
  EXPECT_EQ(run1({"Unsqueeze", 13, {x, i64({-1, 1})}}).sizes(), at::IntArrayRef({3, 1, 4, 1}));
  EXPECT_EQ(run1({"Unsqueeze", 13, {at::scalar_tensor(2.0), i64({0})}}).sizes(),
            at::IntArrayRef({1}));
  expectError({"Unsqueeze", 13, {x, i64({1, 1})}}, {"node 'op' (Unsqueeze)", "twice"});
  expectError({"Unsqueeze", 13, {x, i64({4})}}, {"out of range"});
}

// --- Concat / Split -----------------------------------------------------------------------------

TEST(ConcatTest, Int64ShapesAndNegativeAxis) {
  // The typical shape computation: Concat(Shape(x)[0:1], [-1]).
  expectTensorEqual(run1({"Concat", 13, {i64({7}), i64({-1})}, {Attribute::makeInt("axis", 0)}}),
                    i64({7, -1}));
  at::Tensor a = f32({1, 2}).reshape({2, 1}), b = f32({3, 4, 5, 6}).reshape({2, 2});
  expectTensorEqual(run1({"Concat", 13, {a, b}, {Attribute::makeInt("axis", -1)}}),
                    f32({1, 3, 4, 2, 5, 6}).reshape({2, 3}));
  // Concat-1 defaults the axis to 1.
  expectTensorEqual(run1({"Concat", 1, {a, b}}), f32({1, 3, 4, 2, 5, 6}).reshape({2, 3}));
  expectError({"Concat", 13, {a, b}, {Attribute::makeInt("axis", 0)}},
              {"node 'op' (Concat)", "cannot be concatenated"});
  expectError({"Concat", 13, {a, b}}, {"'axis' is missing"});
}

TEST(SplitTest, SplitAttributeAtOpset11InputAtOpset13) {
  at::Tensor x = at::arange(6, at::kFloat);
  auto parts = runSingleOp({"Split", 11, {x}, {Attribute::makeInts("split", {1, 5})}, 2});
  expectTensorEqual(parts[0], f32({0}));
  expectTensorEqual(parts[1], f32({1, 2, 3, 4, 5}));
  parts = runSingleOp({"Split", 13, {x, i64({4, 2})}, {}, 2});
  expectTensorEqual(parts[0], f32({0, 1, 2, 3}));
  expectTensorEqual(parts[1], f32({4, 5}));
}

TEST(SplitTest, EqualSplitWhenSizesAreAbsent) {
  at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3});
  auto parts = runSingleOp({"Split", 13, {x}, {Attribute::makeInt("axis", -1)}, 3});
  ASSERT_EQ(parts.size(), 3u);
  expectTensorEqual(parts[2], f32({2, 5}).reshape({2, 1}));
  parts = runSingleOp({"Split", 11, {x}, {}, 2});
  expectTensorEqual(parts[1], f32({3, 4, 5}).reshape({1, 3}));
  expectError({"Split", 13, {x}, {Attribute::makeInt("axis", 1)}, 2},
              {"node 'op' (Split)", "equal parts"});
}

TEST(SplitTest, Opset18NumOutputsAllowsAShorterLastChunk) {
  auto parts = runSingleOp(
      {"Split", 18, {at::arange(7, at::kFloat)}, {Attribute::makeInt("num_outputs", 3)}, 3});
  expectTensorEqual(parts[0], f32({0, 1, 2}));
  expectTensorEqual(parts[1], f32({3, 4, 5}));
  expectTensorEqual(parts[2], f32({6}));
}

TEST(SplitTest, SizesMustMatchOutputsAndAxis) {
  at::Tensor x = at::arange(6, at::kFloat);
  expectError({"Split", 13, {x, i64({2, 2})}, {}, 2}, {"node 'op' (Split)", "does not add up"});
  expectError({"Split", 13, {x, i64({6})}, {}, 2}, {"2 outputs"});
  expectError({"Split", 11, {x}, {Attribute::makeInts("split", {7, -1})}, 2}, {"does not add up"});
}

// --- Shape / Constant / ConstantOfShape ---------------------------------------------------------

TEST(ShapeTest, StartAndEndFromOpset15) {
  at::Tensor x = at::zeros({2, 3, 4, 5});
  expectTensorEqual(run1({"Shape", 13, {x}}), i64({2, 3, 4, 5}));
  expectTensorEqual(
      run1({"Shape", 15, {x}, {Attribute::makeInt("start", -3), Attribute::makeInt("end", -1)}}),
      i64({3, 4}));
  expectTensorEqual(
      run1({"Shape", 15, {x}, {Attribute::makeInt("start", 3), Attribute::makeInt("end", 1)}}),
      i64({}));
  expectTensorEqual(run1({"Shape", 15, {at::scalar_tensor(1.0)}}), i64({}));
}

TEST(ConstantTest, EveryNumericValueAttribute) {
  expectTensorEqual(run1({"Constant", 13, {}, {Attribute::makeTensor("value", i64({4, 5}))}}),
                    i64({4, 5}));
  expectTensorEqual(run1({"Constant", 13, {}, {Attribute::makeFloat("value_float", 2.5)}}),
                    at::scalar_tensor(2.5, at::kFloat));
  expectTensorEqual(run1({"Constant", 13, {}, {Attribute::makeFloats("value_floats", {1.5, -2})}}),
                    f32({1.5, -2}));
  expectTensorEqual(run1({"Constant", 13, {}, {Attribute::makeInt("value_int", -7)}}),
                    at::scalar_tensor(-7, at::kLong));
  expectTensorEqual(run1({"Constant", 12, {}, {Attribute::makeInts("value_ints", {1, 2, 3})}}),
                    i64({1, 2, 3}));
}

TEST(ConstantTest, StringAndMissingValuesAreRejected) {
  expectError({"Constant", 13, {}, {Attribute::makeString("value_string", "hi")}},
              {"node 'op' (Constant)", "string constants are not supported"});
  expectError({"Constant", 13, {}, {}}, {"exactly one value attribute", "found 0"});
  expectError({"Constant",
               13,
               {},
               {Attribute::makeInt("value_int", 1), Attribute::makeFloat("value_float", 1)}},
              {"found 2"});
}

TEST(ConstantOfShapeTest, DefaultFloatZeroAndTypedValue) {
  expectTensorEqual(run1({"ConstantOfShape", 9, {i64({2, 3})}}), at::zeros({2, 3}, at::kFloat));
  at::Tensor value = at::full({1}, 7, at::kInt);
  expectTensorEqual(
      run1({"ConstantOfShape", 9, {i64({3})}, {Attribute::makeTensor("value", value)}}),
      at::tensor(std::vector<int32_t>{7, 7, 7}, at::kInt));
  // An empty shape gives a scalar.
  expectTensorEqual(
      run1({"ConstantOfShape", 9, {i64({})}, {Attribute::makeTensor("value", value)}}),
      at::scalar_tensor(7, at::kInt));
  expectError({"ConstantOfShape", 9, {i64({2, -1})}}, {"node 'op' (ConstantOfShape)", "negative"});
}

// --- Identity / Dropout -------------------------------------------------------------------------

TEST(IdentityTest, PassesInt64Through) {
  expectTensorEqual(run1({"Identity", 13, {i64({3, 1, 2})}}), i64({3, 1, 2}));
}

TEST(DropoutTest, InferenceIsIdentityWithAllTrueMask) {
  at::Tensor x = f32({1, -2, 3});
  auto out = runSingleOp({"Dropout", 13, {x, at::scalar_tensor(0.3, at::kFloat)}, {}, 2});
  expectTensorEqual(out[0], x);
  expectTensorEqual(out[1], at::ones({3}, at::kBool));
  // training_mode=true with ratio 0 drops nothing.
  out = runSingleOp({"Dropout",
                     13,
                     {x, at::scalar_tensor(0.0, at::kFloat), at::scalar_tensor(true, at::kBool)},
                     {},
                     2});
  expectTensorEqual(out[0], x);
  expectTensorEqual(out[1], at::ones({3}, at::kBool));
}

TEST(DropoutTest, OldOpsetsIgnoreRatioAndMaskHasInputType) {
  at::Tensor x = f32({1, -2, 3});
  auto out = runSingleOp({"Dropout", 7, {x}, {Attribute::makeFloat("ratio", 0.9)}, 2});
  expectTensorEqual(out[0], x);
  expectTensorEqual(out[1], f32({1, 1, 1}));
  expectTensorEqual(run1({"Dropout", 6, {x}, {Attribute::makeInt("is_test", 1)}}), x);
}

TEST(DropoutTest, TrainingModeWithRatioIsRejected) {
  at::Tensor x = f32({1, 2});
  expectError(
      {"Dropout", 13, {x, at::scalar_tensor(0.5, at::kFloat), at::scalar_tensor(true, at::kBool)}},
      {"node 'op' (Dropout)", "training_mode", "inference mode only"});
  // Default ratio (0.5) applies when the ratio input is omitted.
  expectError({"Dropout", 13, {x, at::Tensor(), at::scalar_tensor(true, at::kBool)}},
              {"ratio 0.5"});
}

// --- Expand / Tile / Range ----------------------------------------------------------------------

TEST(ExpandTest, BroadcastsBothWays) {
  at::Tensor x = f32({1, 2, 3}).reshape({3, 1});
  at::Tensor y = run1({"Expand", 13, {x, i64({2, 1, 4})}});
  ASSERT_EQ(y.sizes(), at::IntArrayRef({2, 3, 4}));
  expectTensorEqual(y[1][2], f32({3, 3, 3, 3}));
  // A shorter shape whose entries are 1 keeps the input's sizes.
  EXPECT_EQ(run1({"Expand", 8, {x, i64({1})}}).sizes(), at::IntArrayRef({3, 1}));
  expectError({"Expand", 13, {x, i64({2, 4})}}, {"node 'op' (Expand)", "cannot expand"});
}

TEST(TileTest, RepeatsPerAxisAndOpset1Form) {
  at::Tensor x = f32({1, 2, 3, 4}).reshape({2, 2});
  expectTensorEqual(run1({"Tile", 13, {x, i64({1, 2})}}),
                    f32({1, 2, 1, 2, 3, 4, 3, 4}).reshape({2, 4}));
  // Tile-1: tiles count and axis as scalar inputs.
  expectTensorEqual(
      run1({"Tile", 1, {x, at::scalar_tensor(2, at::kLong), at::scalar_tensor(0, at::kLong)}}),
      f32({1, 2, 3, 4, 1, 2, 3, 4}).reshape({4, 2}));
  expectError({"Tile", 13, {x, i64({2})}}, {"node 'op' (Tile)", "one entry per input dimension"});
  expectError({"Tile", 13, {x, i64({2, -1})}}, {"negative"});
}

TEST(RangeTest, IntegerFloatAndEmptyRanges) {
  auto scalar = [](int64_t v) { return at::scalar_tensor(v, at::kInt); };
  expectTensorEqual(run1({"Range", 11, {scalar(10), scalar(3), scalar(-3)}}),
                    at::tensor(std::vector<int32_t>{10, 7, 4}, at::kInt));
  expectTensorEqual(run1({"Range", 11, {scalar(3), scalar(10), scalar(-1)}}),
                    at::empty({0}, at::kInt));
  at::Tensor f = run1({"Range",
                       11,
                       {at::scalar_tensor(1.0, at::kFloat), at::scalar_tensor(2.0, at::kFloat),
                        at::scalar_tensor(0.25, at::kFloat)}});
  expectTensorEqual(f, f32({1, 1.25, 1.5, 1.75}));
  expectTensorEqual(
      run1({"Range", 11, {i64({0}).reshape({}), i64({5}).reshape({}), i64({2}).reshape({})}}),
      i64({0, 2, 4}));
  expectError({"Range", 11, {scalar(0), scalar(5), scalar(0)}}, {"node 'op' (Range)", "delta"});
}

// --- OpInfo facts -------------------------------------------------------------------------------

TEST(ShapeOpsTest, DataMovementFlags) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* name : {"Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity",
                           "Dropout", "Slice", "Split", "Gather", "Expand", "Tile", "Concat"}) {
    const OpInfo* info = registry.find("", name, 13);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_TRUE(info->moves_data_only) << name;
  }
  for (const char* name : {"Shape", "Constant", "ConstantOfShape", "Range", "Resize", "Pad"}) {
    const OpInfo* info = registry.find("", name, 13);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_FALSE(info->moves_data_only) << name;
  }
}

}  // namespace
}  // namespace qforge
