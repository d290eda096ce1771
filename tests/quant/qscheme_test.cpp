#include "quant/qscheme.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "quant/rounding.h"

namespace qforge::quant {
namespace {

QScheme scheme(int bits, bool symmetric, bool symmetric_range, bool is_unsigned) {
  QScheme s;
  s.bits = bits;
  s.symmetric = symmetric;
  s.symmetric_range = symmetric_range;
  s.is_unsigned = is_unsigned;
  return s;
}

TEST(QSchemeTest, GridBoundsForCommonSchemes) {
  struct Case {
    QScheme scheme;
    int64_t qmin, qmax;
  };
  const Case cases[] = {
      {scheme(8, true, false, false), -128, 127},      {scheme(8, true, true, false), -127, 127},
      {scheme(8, false, false, true), 0, 255},         {scheme(8, false, false, false), -128, 127},
      {scheme(4, true, false, false), -8, 7},          {scheme(4, true, true, false), -7, 7},
      {scheme(2, false, false, true), 0, 3},           {scheme(2, true, true, false), -1, 1},
      {scheme(16, true, false, false), -32768, 32767}, {scheme(16, false, false, true), 0, 65535},
      {scheme(8, true, false, true), 0, 255},
  };
  for (const Case& c : cases) {
    EXPECT_NO_THROW(c.scheme.validate()) << c.scheme.str();
    EXPECT_EQ(c.scheme.qmin(), c.qmin) << c.scheme.str();
    EXPECT_EQ(c.scheme.qmax(), c.qmax) << c.scheme.str();
  }
}

// TensorRT's activations: the scale spans [-127, 127] (amax / 127) but the clamp is the full
// int8 range, as roundWithTiesToEven(clip(x / s, -128, 127)) in TensorRT's developer guide.
TEST(QSchemeTest, AFullRangeClampKeepsTheNarrowScaleAndClampsAtTheFullRange) {
  QScheme s = scheme(8, true, true, false);
  EXPECT_EQ(s.scaleSteps(), 254);
  s.full_range_clamp = true;
  EXPECT_NO_THROW(s.validate());
  EXPECT_EQ(s.qmin(), -128);
  EXPECT_EQ(s.qmax(), 127);
  EXPECT_EQ(s.scaleSteps(), 254);
  EXPECT_EQ(s.str(), "int8 symmetric [-128,127] (scale on +-127) per-tensor half-to-even");
  s.bits = 4;
  EXPECT_EQ(s.qmin(), -8);
  EXPECT_EQ(s.scaleSteps(), 14);
  // Without it the scale spans the clamp.
  EXPECT_EQ(scheme(8, true, false, false).scaleSteps(), 255);
  EXPECT_EQ(scheme(8, false, false, true).scaleSteps(), 255);
}

TEST(QSchemeTest, RejectsMeaninglessSchemes) {
  auto expectError = [](const QScheme& s, const std::string& fragment) {
    try {
      s.validate();
      ADD_FAILURE() << "expected an error containing '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expectError(scheme(1, true, false, false), "bits=1");
  expectError(scheme(17, true, false, false), "bits=17");
  expectError(scheme(8, true, true, true), "symmetric_range");
  expectError(scheme(8, false, true, false), "symmetric_range");
  QScheme clamp_without_narrow_range = scheme(8, true, false, false);
  clamp_without_narrow_range.full_range_clamp = true;
  expectError(clamp_without_narrow_range, "full_range_clamp");
  QScheme bad_axis;
  bad_axis.axis = -2;
  expectError(bad_axis, "axis=-2");
  QScheme bad_eps;
  bad_eps.eps = 0.0;
  expectError(bad_eps, "eps");
}

TEST(QSchemeTest, DescribesItself) {
  QScheme s = QScheme::int8Symmetric(true);
  EXPECT_EQ(s.str(), "int8 symmetric [-127,127] per-channel(axis=0) half-to-even");
  EXPECT_EQ(QScheme::uint8Asymmetric().str(), "uint8 asymmetric [0,255] per-tensor half-to-even");
}

// Hand-computed roundings, including ties of both signs and the value just below 0.5 that
// floor(v + 0.5) gets wrong in float arithmetic.
TEST(RoundingTest, EveryModeOnTiesAndNearTies) {
  const float just_below_half = 0.49999997f;
  const float in[] = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, just_below_half, -just_below_half,
                      2.4f,  -2.6f, 3.0f,  -3.0f};
  const float even[] = {-2, -2, 0, 0, 2, 2, 0, 0, 2, -3, 3, -3};
  const float away[] = {-3, -2, -1, 1, 2, 3, 0, 0, 2, -3, 3, -3};
  const float up[] = {-2, -1, 0, 1, 2, 3, 0, 0, 2, -3, 3, -3};
  const float floor_[] = {-3, -2, -1, 0, 1, 2, 0, -1, 2, -3, 3, -3};
  for (size_t i = 0; i < std::size(in); ++i) {
    EXPECT_EQ(roundToGrid(in[i], RoundingMode::HalfToEven), even[i]) << in[i];
    EXPECT_EQ(roundToGrid(in[i], RoundingMode::HalfAwayFromZero), away[i]) << in[i];
    EXPECT_EQ(roundToGrid(in[i], RoundingMode::HalfUp), up[i]) << in[i];
    EXPECT_EQ(roundToGrid(in[i], RoundingMode::Floor), floor_[i]) << in[i];
    EXPECT_EQ(roundToGrid(static_cast<double>(in[i]), RoundingMode::HalfUp), up[i]) << in[i];
  }
}

// The branch-free rounding must agree with the C library on a dense sweep (both precisions).
TEST(RoundingTest, AgreesWithLibmAcrossTheGridRange) {
  for (float v = -70000.0f; v < 70000.0f; v += 0.123f) {
    ASSERT_EQ(roundToGrid(v, RoundingMode::HalfToEven), std::nearbyint(v)) << v;
    ASSERT_EQ(roundToGrid(v, RoundingMode::HalfAwayFromZero), std::round(v)) << v;
    ASSERT_EQ(roundToGrid(v, RoundingMode::Floor), std::floor(v)) << v;
    const double d = static_cast<double>(v) + 1e-9;
    ASSERT_EQ(roundToGrid(d, RoundingMode::HalfToEven), std::nearbyint(d)) << d;
  }
}

}  // namespace
}  // namespace qforge::quant
