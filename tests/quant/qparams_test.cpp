#include "quant/qparams.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace qforge::quant {
namespace {

QScheme grid(int bits, bool symmetric, bool is_unsigned, bool symmetric_range = false) {
  QScheme s;
  s.bits = bits;
  s.symmetric = symmetric;
  s.is_unsigned = is_unsigned;
  s.symmetric_range = symmetric_range;
  return s;
}

// Expected values printed by torch 1.13's MinMaxObserver.calculate_qparams() for the same float32
// ranges (quint8 affine, qint8 symmetric, and a custom [-8, 7] affine range).
TEST(QParamsTest, MatchesPyTorchMinMaxObserver) {
  struct Case {
    QScheme scheme;
    float lo, hi, scale;
    int64_t zero_point;
  };
  const QScheme u8 = grid(8, false, true);
  const QScheme s8 = grid(8, true, false);
  const QScheme s4 = grid(4, false, false);
  const Case cases[] = {
      {u8, -1.0f, 3.0f, 0x1.0101020000000p-6f, 64},
      {u8, -0.3721f, 0.0071f, 0x1.85d2d20000000p-10f, 250},
      {u8, 0.5f, 7.25f, 0x1.d1d1d20000000p-6f, 0},
      {u8, -12.5f, -0.125f, 0x1.9191920000000p-5f, 255},
      {u8, -0.001f, 0.002f, 0x1.8ac20e0000000p-17f, 85},
      {u8, -3.3f, 3.3f, 0x1.a80e740000000p-6f, 128},
      {s8, -1.0f, 3.0f, 0x1.8181820000000p-6f, 0},
      {s8, -0.3721f, 0.0071f, 0x1.7e864e0000000p-9f, 0},
      {s8, 0.5f, 7.25f, 0x1.d1d1d20000000p-5f, 0},
      {s8, -12.5f, -0.125f, 0x1.9191920000000p-4f, 0},
      {s8, -0.001f, 0.002f, 0x1.072c0a0000000p-16f, 0},
      {s4, -1.0f, 3.0f, 0x1.1111120000000p-2f, -4},
      {s4, -0.3721f, 0.0071f, 0x1.9e30000000000p-6f, 7},
      {s4, 0.5f, 7.25f, 0x1.eeeeee0000000p-2f, -8},
      {s4, -12.5f, -0.125f, 0x1.aaaaaa0000000p-1f, 7},
      {s4, -0.001f, 0.002f, 0x1.a36e2e0000000p-13f, -3},
      {s4, -3.3f, 3.3f, 0x1.c28f5c0000000p-2f, 0},
  };
  for (const Case& c : cases) {
    const QParams p = qparamsFromMinMax(c.lo, c.hi, c.scheme);
    EXPECT_EQ(p.scaleValue(), c.scale) << c.scheme.str() << " [" << c.lo << ", " << c.hi << "]";
    EXPECT_EQ(p.zeroPointValue(), c.zero_point)
        << c.scheme.str() << " [" << c.lo << ", " << c.hi << "]";
  }
}

TEST(QParamsTest, SymmetricRangeAndUnsignedSymmetric) {
  // Restricted signed range divides max|x| by 127; unsigned symmetric by 255 with zero point 0.
  QParams p = qparamsFromMinMax(-2.0f, 1.0f, grid(8, true, false, true));
  EXPECT_EQ(p.scaleValue(), 2.0f / 127.0f);
  EXPECT_EQ(p.zeroPointValue(), 0);
  p = qparamsFromMinMax(0.0f, 5.0f, grid(8, true, true));
  EXPECT_EQ(p.scaleValue(), 5.0f / 255.0f);
  EXPECT_EQ(p.zeroPointValue(), 0);
}

TEST(QParamsTest, AFullRangeClampKeepsTheScaleOfTheNarrowRange) {
  // amax / 127 as TensorRT's calibration: the clamp's extra level -128 does not widen the scale.
  QScheme s = grid(8, true, false, true);
  s.full_range_clamp = true;
  const QParams p = qparamsFromMinMax(-2.0f, 1.0f, s);
  EXPECT_EQ(p.scaleValue(), 2.0f / 127.0f);
  EXPECT_EQ(p.zeroPointValue(), 0);
}

TEST(QParamsTest, ConstantTensorFallsBackToEps) {
  QScheme s = grid(8, false, true);
  QParams p = qparamsFromMinMax(0.0f, 0.0f, s);
  EXPECT_EQ(p.scaleValue(), static_cast<float>(s.eps));
  EXPECT_EQ(p.zeroPointValue(), 0);
  s.eps = 1e-3;
  p = qparamsFromMinMax(-1e-6f, 1e-6f, s);
  EXPECT_EQ(p.scaleValue(), 1e-3f);
}

TEST(QParamsTest, PowerOfTwoRounding) {
  EXPECT_EQ(roundScaleToPowerOfTwo(0.3f), 0.25f);     // log2 = -1.737 -> -2
  EXPECT_EQ(roundScaleToPowerOfTwo(0.36f), 0.5f);     // log2 = -1.474 -> -1
  EXPECT_EQ(roundScaleToPowerOfTwo(0.3535f), 0.25f);  // just below 2^-1.5 = 0.353553
  EXPECT_EQ(roundScaleToPowerOfTwo(0.3536f), 0.5f);   // just above
  EXPECT_EQ(roundScaleToPowerOfTwo(0.25f), 0.25f);
  EXPECT_EQ(roundScaleToPowerOfTwo(0.3f, PowerOfTwoRounding::Floor), 0.25f);
  EXPECT_EQ(roundScaleToPowerOfTwo(0.3f, PowerOfTwoRounding::Ceil), 0.5f);
  EXPECT_EQ(roundScaleToPowerOfTwo(0.25f, PowerOfTwoRounding::Ceil), 0.25f);
  EXPECT_EQ(roundScaleToPowerOfTwo(3000.0f), 4096.0f);  // log2 = 11.55
  EXPECT_EQ(roundScaleToPowerOfTwo(2800.0f), 2048.0f);  // log2 = 11.45
  EXPECT_THROW(roundScaleToPowerOfTwo(0.0f), Error);
  EXPECT_THROW(roundScaleToPowerOfTwo(-1.0f), Error);
}

TEST(QParamsTest, PowerOfTwoSchemeRecomputesZeroPoint) {
  QScheme s = grid(8, false, true);
  s.power_of_two_scale = true;
  // 4/255 = 0.01569 -> 2^-6 = 0.015625; zero point = -round(-1 / 2^-6) = 64.
  QParams p = qparamsFromMinMax(-1.0f, 3.0f, s);
  EXPECT_EQ(p.scaleValue(), 0.015625f);
  EXPECT_EQ(p.zeroPointValue(), 64);
  // -0.7 / 2^-6 = -44.8 -> zero point 45; the unrounded scale 3.7/255 would give 48.
  p = qparamsFromMinMax(-0.7f, 3.0f, s);
  EXPECT_EQ(p.scaleValue(), 0.015625f);
  EXPECT_EQ(p.zeroPointValue(), 45);
}

TEST(QParamsTest, PerChannelTensors) {
  const at::Tensor lo = at::tensor({-1.0f, 0.0f, -4.0f});
  const at::Tensor hi = at::tensor({1.0f, 2.0f, 1.0f});
  QParams p = qparamsFromMinMax(lo, hi, grid(8, true, false, true));
  ASSERT_EQ(p.numel(), 3);
  EXPECT_EQ(p.scale[0].item<float>(), 1.0f / 127.0f);
  EXPECT_EQ(p.scale[1].item<float>(), 2.0f / 127.0f);
  EXPECT_EQ(p.scale[2].item<float>(), 4.0f / 127.0f);
  EXPECT_TRUE(at::equal(p.zero_point, at::zeros({3}, at::kLong)));
  EXPECT_THROW(p.scaleValue(), Error);
}

TEST(QParamsTest, RefusesBadRanges) {
  const QScheme s = grid(8, false, true);
  EXPECT_THROW(qparamsFromMinMax(1.0f, -1.0f, s), Error);
  EXPECT_THROW(qparamsFromMinMax(std::nanf(""), 1.0f, s), Error);
  EXPECT_THROW(qparamsFromMinMax(0.0f, INFINITY, s), Error);
  EXPECT_THROW(qparamsFromMinMax(at::tensor({0.0f, 1.0f}), at::tensor({1.0f}), s), Error);
  QScheme bad = s;
  bad.bits = 40;
  EXPECT_THROW(qparamsFromMinMax(0.0f, 1.0f, bad), Error);
}

}  // namespace
}  // namespace qforge::quant
