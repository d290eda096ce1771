// Quantization ops against hand-computed values (the arithmetic is spelled out next to each
// expectation) and negative cases that must name the node.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// ---------------------------------------------------------------- QuantizeLinear

TEST(QuantizeLinearTest, TiesRoundToEven) {
  // x / 2 = 0.5, 1.5, 2.5, -0.5, -2.5 -> 0, 2, 2, 0, -2 (half to even, not half away from 0).
  const at::Tensor x = f32({1, 3, 5, -1, -5}, {5});
  expectTensorEqual(run1({"QuantizeLinear", 13, {x, scalarF32(2), scalarU8(128)}}),
                    u8({128, 130, 130, 128, 126}, {5}));
  expectTensorEqual(run1({"QuantizeLinear", 13, {x, scalarF32(2), scalarI8(0)}}),
                    i8({0, 2, 2, 0, -2}, {5}));
}

TEST(QuantizeLinearTest, OmittedZeroPointMeansUint8Zero) {
  // 7 / 2 = 3.5 -> 4; -4 / 2 = -2 -> saturates at 0.
  const at::Tensor y = run1({"QuantizeLinear", 13, {f32({7, -4, 600}, {3}), scalarF32(2)}});
  expectTensorEqual(y, u8({4, 0, 255}, {3}));
}

TEST(QuantizeLinearTest, SaturatesUint8AtBothEnds) {
  // scale 1, zero point 10: 300 -> 310 -> 255; -20 -> -10 -> 0; 244.5 -> 244 (tie) -> 254;
  // -10.5 -> -10 (tie) -> 0; -11 -> -1 -> 0; +inf -> 255; -inf -> 0.
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor x = f32({300, -20, 244.5f, -10.5f, -11, inf, -inf}, {7});
  expectTensorEqual(run1({"QuantizeLinear", 13, {x, scalarF32(1), scalarU8(10)}}),
                    u8({255, 0, 254, 0, 0, 255, 0}, {7}));
}

TEST(QuantizeLinearTest, SaturatesInt8AtBothEnds) {
  // scale 1, zero point -3: 200 -> 127; -200 -> -128; 130 -> 127 exactly; -125.5 -> -126 (tie)
  // -> -129 -> -128; -124.5 -> -124 (tie) -> -127; +inf -> 127; -inf -> -128.
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor x = f32({200, -200, 130, -125.5f, -124.5f, inf, -inf}, {7});
  expectTensorEqual(run1({"QuantizeLinear", 13, {x, scalarF32(1), scalarI8(-3)}}),
                    i8({127, -128, 127, -128, -127, 127, -128}, {7}));
}

TEST(QuantizeLinearTest, PerAxisOnAxis1) {
  // x (1, 3, 2), scale [2, 4, 8], zero point [1, -1, 0] along axis 1:
  // c0: 2/2 = 1 -> 2;  -3/2 = -1.5 -> -2 -> -1
  // c1: 5/4 = 1.25 -> 1 -> 0;  7/4 = 1.75 -> 2 -> 1
  // c2: -8/8 = -1 -> -1;  12/8 = 1.5 -> 2 -> 2
  const at::Tensor x = f32({2, -3, 5, 7, -8, 12}, {1, 3, 2});
  const at::Tensor y = run1({"QuantizeLinear",
                             13,
                             {x, f32({2, 4, 8}, {3}), i8({1, -1, 0}, {3})},
                             {Attribute::makeInt("axis", 1)}});
  expectTensorEqual(y, i8({2, -1, 0, 1, -1, 2}, {1, 3, 2}));
}

TEST(QuantizeLinearTest, PerAxisDefaultsToAxis1) {
  const at::Tensor x = f32({2, -3, 5, 7, -8, 12}, {1, 3, 2});
  const at::Tensor y = run1({"QuantizeLinear", 13, {x, f32({2, 4, 8}, {3}), i8({1, -1, 0}, {3})}});
  expectTensorEqual(y, i8({2, -1, 0, 1, -1, 2}, {1, 3, 2}));
}

TEST(QuantizeLinearTest, PerAxisOnNegativeAxis) {
  // x (2, 2), axis -1: column 0 has scale 4 / zero point 3, column 1 scale 20 / zero point 7.
  // [10, 10]:  10/4 = 2.5 -> 2 -> 5;   10/20 = 0.5 -> 0 -> 7
  // [-10, 30]: -10/4 = -2.5 -> -2 -> 1; 30/20 = 1.5 -> 2 -> 9
  const at::Tensor x = f32({10, 10, -10, 30}, {2, 2});
  const at::Tensor y = run1({"QuantizeLinear",
                             13,
                             {x, f32({4, 20}, {2}), u8({3, 7}, {2})},
                             {Attribute::makeInt("axis", -1)}});
  expectTensorEqual(y, u8({5, 7, 1, 9}, {2, 2}));
}

TEST(QuantizeLinearTest, Opset10PerTensor) {
  // 5 / 2 = 2.5 -> 2 (tie) + 1 = 3.
  expectTensorEqual(run1({"QuantizeLinear", 10, {f32({5}, {1}), scalarF32(2), scalarU8(1)}, {}}),
                    u8({3}, {1}));
}

TEST(QuantizeLinearTest, Int32Input) {
  // 7 / 2 = 3.5 -> 4; -1000 / 2 = -500 -> -128.
  expectTensorEqual(run1({"QuantizeLinear", 13, {i32({7, -1000}, {2}), scalarF32(2), scalarI8(0)}}),
                    i8({4, -128}, {2}));
}

TEST(QuantizeLinearTest, ScaleLengthMustMatchAxisSize) {
  expectNodeError({"QuantizeLinear", 13, {at::zeros({2, 3}), f32({1, 2}, {2}), u8({0, 0}, {2})}},
                  "y_scale has 2 elements but axis 1 of x has size 3");
}

TEST(QuantizeLinearTest, ZeroPointShapeMustMatchScale) {
  expectNodeError({"QuantizeLinear", 13, {at::zeros({2, 3}), f32({1, 2, 3}, {3}), u8({0, 0}, {2})}},
                  "y_zero_point has shape [2] but y_scale has shape [3]");
}

TEST(QuantizeLinearTest, ZeroPointMustBe8Bit) {
  expectNodeError({"QuantizeLinear", 13, {at::zeros({2}), scalarF32(1), i32({0}, {1})}},
                  "y_zero_point must be uint8 or int8");
}

TEST(QuantizeLinearTest, Opset10RejectsPerAxisScale) {
  expectNodeError(
      {"QuantizeLinear", 10, {at::zeros({2, 3}), f32({1, 2, 3}, {3}), u8({0, 0, 0}, {3})}, {}},
      "must be a scalar before opset 13");
}

TEST(QuantizeLinearTest, AxisOutOfRange) {
  expectNodeError({"QuantizeLinear",
                   13,
                   {at::zeros({2, 3}), f32({1, 2, 3}, {3}), u8({0, 0, 0}, {3})},
                   {Attribute::makeInt("axis", 2)}},
                  "axis 2 is out of range");
}

// ---------------------------------------------------------------- DequantizeLinear

TEST(DequantizeLinearTest, Int32BiasWithoutZeroPoint) {
  // (x - 0) * 0.25, all exactly representable in float32.
  const at::Tensor x = i32({123456, -7, 0, 1 << 30}, {4});
  expectTensorEqual(run1({"DequantizeLinear", 13, {x, scalarF32(0.25f)}}),
                    f32({30864.0f, -1.75f, 0.0f, 268435456.0f}, {4}));
  // An explicit zero point of 0 is the same thing.
  expectTensorEqual(run1({"DequantizeLinear", 13, {x, scalarF32(0.25f), at::zeros({}, at::kInt)}}),
                    f32({30864.0f, -1.75f, 0.0f, 268435456.0f}, {4}));
}

TEST(DequantizeLinearTest, Int32WithNonzeroZeroPointFails) {
  expectNodeError({"DequantizeLinear", 13, {i32({1}, {1}), scalarF32(1), i32({3}, {1})}},
                  "int32 x_zero_point must be 0");
}

TEST(DequantizeLinearTest, Int8PerTensor) {
  // (x - (-128)) * 0.5: -128 -> 0, 127 -> 127.5, 0 -> 64.
  expectTensorEqual(
      run1({"DequantizeLinear", 13, {i8({-128, 127, 0}, {3}), scalarF32(0.5f), scalarI8(-128)}}),
      f32({0.0f, 127.5f, 64.0f}, {3}));
}

TEST(DequantizeLinearTest, PerAxisOnNegativeAxis) {
  // x (2, 2), axis -1: column scales [2, 0.5], zero points [10, 200].
  // [12, 201] -> [(12-10)*2, (201-200)*0.5] = [4, 0.5]; [0, 0] -> [-20, -100].
  const at::Tensor y = run1({"DequantizeLinear",
                             13,
                             {u8({12, 201, 0, 0}, {2, 2}), f32({2, 0.5f}, {2}), u8({10, 200}, {2})},
                             {Attribute::makeInt("axis", -1)}});
  expectTensorEqual(y, f32({4.0f, 0.5f, -20.0f, -100.0f}, {2, 2}));
}

TEST(DequantizeLinearTest, ZeroPointTypeMustMatchInput) {
  expectNodeError({"DequantizeLinear", 13, {u8({1, 2}, {2}), scalarF32(1), scalarI8(0)}},
                  "x_zero_point is Char but x is Byte; they must have the same type");
}

TEST(DequantizeLinearTest, ScaleLengthMustMatchAxisSize) {
  expectNodeError({"DequantizeLinear",
                   13,
                   {u8({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 2, 3}, {3}), u8({0, 0, 0}, {3})},
                   {Attribute::makeInt("axis", 0)}},
                  "x_scale has 3 elements but axis 0 of x has size 2");
}

// ---------------------------------------------------------------- QLinearConv

TEST(QLinearConvTest, PerChannelWeightScalesWithBias) {
  // x (1,1,3,3) uint8, x_scale 0.5, x_zero_point 2 -> shifted x = [[-1,0,1],[2,3,4],[5,6,7]].
  // w (2,1,2,2) int8, w_zero_point [0, 1], w_scale [0.25, 0.125]:
  //   channel 0 shifted = [[1,-1],[2,0]], channel 1 shifted = [[3,1],[1,1]] - 1 = [[2,0],[0,0]].
  // Bias [4, -8]. Valid 2x2 windows:
  //   channel 0: window sums [3, 5; 9, 11] + 4 = [7, 9; 13, 15]
  //   channel 1: 2 * top-left = [-2, 0; 4, 6] - 8 = [-10, -8; -4, -2]
  // Multipliers x_scale * w_scale / y_scale (y_scale 0.25): [0.5, 0.25]; y_zero_point 10:
  //   channel 0: [13.5, 14.5; 16.5, 17.5] -> half to even [14, 14; 16, 18]
  //   channel 1: [7.5, 8; 9, 9.5] -> [8, 8; 9, 10]
  const at::Tensor x = u8({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  const at::Tensor w = i8({1, -1, 2, 0, 3, 1, 1, 1}, {2, 1, 2, 2});
  const at::Tensor y = run1({"QLinearConv",
                             13,
                             {x, scalarF32(0.5f), scalarU8(2), w, f32({0.25f, 0.125f}, {2}),
                              i8({0, 1}, {2}), scalarF32(0.25f), scalarU8(10), i32({4, -8}, {2})}});
  expectTensorEqual(y, u8({14, 14, 16, 18, 8, 8, 9, 10}, {1, 2, 2, 2}));
}

TEST(QLinearConvTest, PadsWithZeroPointAndSaturatesInt8) {
  // x (1,1,1,2) int8 = [100, -100], zero point -100 -> shifted [200, 0]; pads 1 on the width
  // only (begin and end) -> shifted row [0, 200, 0, 0] (padding is the zero point, i.e. 0).
  // w (1,1,1,2) uint8 = [2, 1], zero point 0. Windows: [0*2+200*1, 200*2+0, 0] = [200, 400, 0].
  // Multiplier 1 * 1 / 2 = 0.5, y_zero_point -10 int8: [100-10, 200-10, 0-10] = [90, 127 (sat),
  // -10].
  const at::Tensor y =
      run1({"QLinearConv",
            13,
            {i8({100, -100}, {1, 1, 1, 2}), scalarF32(1), scalarI8(-100), u8({2, 1}, {1, 1, 1, 2}),
             scalarF32(1), scalarU8(0), scalarF32(2), scalarI8(-10)},
            {Attribute::makeInts("pads", {0, 1, 0, 1})}});
  expectTensorEqual(y, i8({90, 127, -10}, {1, 1, 1, 3}));
}

TEST(QLinearConvTest, AsymmetricSameUpperPaddingStridesAndGroups) {
  // Two groups, one channel each; x (1,2,1,3) uint8 zero point 0, w (2,1,1,2) uint8 ones with
  // zero point 0, SAME_UPPER with stride 2: out width ceil(3/2) = 2, total pad (2-1)*2+2-3 = 1,
  // put at the end. Channel 0 row [1,2,3,pad] -> [1+2, 3+0] = [3, 3]; channel 1 row [4,5,6,pad]
  // -> [9, 6]. Multiplier 1, y_zero_point 0.
  const at::Tensor y =
      run1({"QLinearConv",
            13,
            {u8({1, 2, 3, 4, 5, 6}, {1, 2, 1, 3}), scalarF32(1), scalarU8(0),
             u8({1, 1, 1, 1}, {2, 1, 1, 2}), scalarF32(1), scalarU8(0), scalarF32(1), scalarU8(0)},
            {Attribute::makeString("auto_pad", "SAME_UPPER"),
             Attribute::makeInts("strides", {1, 2}), Attribute::makeInt("group", 2)}});
  expectTensorEqual(y, u8({3, 3, 9, 6}, {1, 2, 1, 2}));
}

TEST(QLinearConvTest, WeightScaleLengthMustMatchOutputChannels) {
  expectNodeError({"QLinearConv",
                   13,
                   {u8({1, 2, 3, 4}, {1, 1, 2, 2}), scalarF32(1), scalarU8(0),
                    u8({1, 1, 1, 1, 1, 1, 1, 1}, {2, 1, 2, 2}), f32({1, 1, 1}, {3}),
                    u8({0, 0, 0}, {3}), scalarF32(1), scalarU8(0)}},
                  "w_scale must be a scalar or have one element per output channel (2)");
}

TEST(QLinearConvTest, ZeroPointTypeMustMatchInput) {
  expectNodeError(
      {"QLinearConv",
       13,
       {u8({1, 2, 3, 4}, {1, 1, 2, 2}), scalarF32(1), scalarI8(0), u8({1, 1, 1, 1}, {1, 1, 2, 2}),
        scalarF32(1), scalarU8(0), scalarF32(1), scalarU8(0)}},
      "x_zero_point is Char but x is Byte");
}

TEST(QLinearConvTest, BiasMustBeInt32) {
  expectNodeError(
      {"QLinearConv",
       13,
       {u8({1, 2, 3, 4}, {1, 1, 2, 2}), scalarF32(1), scalarU8(0), u8({1, 1, 1, 1}, {1, 1, 2, 2}),
        scalarF32(1), scalarU8(0), scalarF32(1), scalarU8(0), f32({1}, {1})}},
      "B must be int32");
}

// ---------------------------------------------------------------- ConvInteger

TEST(ConvIntegerTest, PerChannelWeightZeroPoint) {
  // x (1,1,2,2) uint8 [[5,6],[7,8]], zero point 5 -> [[0,1],[2,3]].
  // w (2,1,2,2) uint8, zero points [1, 10]: channel 0 [1,2,3,4]-1 = [0,1,2,3] -> 0+1+4+9 = 14;
  // channel 1 [10,10,10,0]-10 = [0,0,0,-10] -> -30.
  const at::Tensor y =
      run1({"ConvInteger",
            13,
            {u8({5, 6, 7, 8}, {1, 1, 2, 2}), u8({1, 2, 3, 4, 10, 10, 10, 0}, {2, 1, 2, 2}),
             scalarU8(5), u8({1, 10}, {2})}});
  expectTensorEqual(y, i32({14, -30}, {1, 2, 1, 1}));
}

TEST(ConvIntegerTest, WithoutZeroPointsInt8Extremes) {
  // 1-D conv: x int8 [-128, -128], w int8 [-128, -128] -> 2 * 16384 = 32768.
  const at::Tensor y =
      run1({"ConvInteger", 13, {i8({-128, -128}, {1, 1, 2}), i8({-128, -128}, {1, 1, 2})}});
  expectTensorEqual(y, i32({32768}, {1, 1, 1}));
}

// ---------------------------------------------------------------- MatMulInteger

TEST(MatMulIntegerTest, PerRowAndPerColumnZeroPoints) {
  // A [[2,3,4],[5,6,7]] with row zero points [1, 2] -> [[1,2,3],[3,4,5]].
  // B [[4,1],[5,0],[6,2]] with column zero points [3, 0] -> [[1,1],[2,0],[3,2]].
  // A'B' = [[1+4+9, 1+0+6], [3+8+15, 3+0+10]] = [[14, 7], [26, 13]].
  const at::Tensor y = run1({"MatMulInteger",
                             13,
                             {u8({2, 3, 4, 5, 6, 7}, {2, 3}), u8({4, 1, 5, 0, 6, 2}, {3, 2}),
                              u8({1, 2}, {2}), u8({3, 0}, {2})}});
  expectTensorEqual(y, i32({14, 7, 26, 13}, {2, 2}));
}

TEST(MatMulIntegerTest, NdPerRowZeroPointAndScalarB) {
  // A (2,1,2) batches [[3,4]] and [[3,4]] with zero points [[[1]],[[3]]] (shape [2,1,1] = [D, M,
  // 1]): batch 0 -> [2,3], batch 1 -> [0,1]. B (2,1) = [[1],[2]], zero point 1 -> [[0],[1]].
  // Results: [[3]] and [[1]].
  const at::Tensor y =
      run1({"MatMulInteger",
            13,
            {u8({3, 4, 3, 4}, {2, 1, 2}), u8({1, 2}, {2, 1}), u8({1, 3}, {2, 1, 1}), scalarU8(1)}});
  expectTensorEqual(y, i32({3, 1}, {2, 1, 1}));
}

TEST(MatMulIntegerTest, Int8ExtremesAndVectors) {
  // 1-D A and B (numpy: a dot product, 0-d result): A [-128, 127] with zero point -1 ->
  // [-127, 128]; B [127, -128] -> -127*127 + 128*(-128) = -16129 - 16384 = -32513.
  const at::Tensor y =
      run1({"MatMulInteger", 13, {i8({-128, 127}, {2}), i8({127, -128}, {2}), scalarI8(-1)}});
  expectTensorEqual(y, i32({-32513}, {}));
}

TEST(MatMulIntegerTest, ZeroPointLengthMustMatchRows) {
  expectNodeError({"MatMulInteger",
                   13,
                   {u8({1, 2, 3, 4}, {2, 2}), u8({1, 2, 3, 4}, {2, 2}), u8({1, 2, 3}, {3})}},
                  "a_zero_point of shape [3] is neither a scalar nor per row");
}

TEST(MatMulIntegerTest, ZeroPointTypeMustMatchInput) {
  expectNodeError({"MatMulInteger",
                   13,
                   {u8({1, 2, 3, 4}, {2, 2}), u8({1, 2, 3, 4}, {2, 2}), scalarU8(0), scalarI8(0)}},
                  "b_zero_point is Char but B is Byte");
}

// ---------------------------------------------------------------- QLinearMatMul

TEST(QLinearMatMulTest, PerRowAndPerColumnScales) {
  // a (2,2) uint8 [[3,5],[1,1]], row zero points [1, 0], row scales [1, 2] -> [[2,4],[1,1]].
  // b (2,2) int8 [[1,0],[0,1]], column zero points [0, 0], column scales [0.5, 0.25].
  // acc = a' = [[2,4],[1,1]]; multipliers a_scale[i] * b_scale[j] / y_scale (y_scale 0.5):
  // [[1, 0.5], [2, 1]] -> [[2, 2], [2, 1]] + y_zero_point 3 = [[5, 5], [5, 4]].
  const at::Tensor y =
      run1({"QLinearMatMul",
            13,
            {u8({3, 5, 1, 1}, {2, 2}), f32({1, 2}, {2}), u8({1, 0}, {2}), i8({1, 0, 0, 1}, {2, 2}),
             f32({0.5f, 0.25f}, {2}), i8({0, 0}, {2}), scalarF32(0.5f), scalarU8(3)}});
  expectTensorEqual(y, u8({5, 5, 5, 4}, {2, 2}));
}

TEST(QLinearMatMulTest, MultiplierIsFloat32AsInOnnxReference) {
  // acc = -65 * 1. In exact arithmetic -65 * 0.11 * 0.15 / 0.013 = -82.500001..., which would
  // round to -83. ONNX's reference computes the multiplier a_scale * b_scale / y_scale in float32
  // (1.26923072...), giving -82.4999970 -> -82; ONNX Runtime's all-float32 path also gives -82.
  const at::Tensor y = run1({"QLinearMatMul",
                             13,
                             {i8({-65}, {1, 1}), scalarF32(0.11f), scalarI8(0), i8({1}, {1, 1}),
                              scalarF32(0.15f), scalarI8(0), scalarF32(0.013f), scalarI8(0)}});
  expectTensorEqual(y, i8({-82}, {1, 1}));
}

TEST(QLinearMatMulTest, ScaleLengthMustMatchColumns) {
  expectNodeError({"QLinearMatMul",
                   13,
                   {u8({1, 2, 3, 4}, {2, 2}), scalarF32(1), scalarU8(0), u8({1, 2, 3, 4}, {2, 2}),
                    f32({1, 1, 1}, {3}), u8({0, 0, 0}, {3}), scalarF32(1), scalarU8(0)}},
                  "b_scale of shape [3] is neither a scalar nor per column");
}

TEST(QLinearMatMulTest, ZeroPointTypeMustMatchInput) {
  expectNodeError({"QLinearMatMul",
                   13,
                   {u8({1, 2, 3, 4}, {2, 2}), scalarF32(1), scalarI8(0), u8({1, 2, 3, 4}, {2, 2}),
                    scalarF32(1), scalarU8(0), scalarF32(1), scalarU8(0)}},
                  "a_zero_point is Char but a is Byte");
}

}  // namespace
}  // namespace qforge
