// NNIE's logarithmic grid counted in levels, as verify's trace compares it: neighbouring grid
// values are one level apart on both sides of zero. The grid values are written out in closed form:
// +-2^((code + z) / 16), positive codes from 0, negative ones from 1 (MQBench's NNIE quantizer).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "verify/trace.h"

namespace qforge::verify {
namespace {

constexpr double kZ = -120;  // the grid offset of data_max 2^(7/16)

double gridValue(double code, int sign) {
  return sign * std::exp2((code + kZ) / 16);
}

std::vector<double> levelsOf(const std::vector<double>& values) {
  const at::Tensor levels = logGridLevels(at::tensor(values, at::kDouble), kZ);
  return std::vector<double>(levels.data_ptr<double>(), levels.data_ptr<double>() + levels.numel());
}

TEST(LogGridLevels, NeighbouringGridValuesAreOneLevelApartAcrossZero) {
  // Ascending: the two smallest negative values, zero, the two smallest positive ones.
  const std::vector<double> levels =
      levelsOf({gridValue(2, -1), gridValue(1, -1), 0.0, gridValue(0, 1), gridValue(1, 1)});
  EXPECT_EQ(levels, (std::vector<double>{-2, -1, 0, 1, 2}));
}

TEST(LogGridLevels, TheLargestCodesAndValuesPastThemClamp) {
  EXPECT_EQ(
      levelsOf({gridValue(127, 1), gridValue(140, 1), gridValue(127, -1), gridValue(140, -1)}),
      (std::vector<double>{128, 128, -127, -127}));
}

TEST(LogGridLevels, ValuesNearZeroGoWhereTheGridRoundsThem) {
  // Positive values from 2^((z - 16) / 16) take code 0; negative ones below -2^((z - 15) / 16)
  // take code 1 (the negative side has no code 0); between, zero.
  const double positive_start = std::exp2((kZ - 16) / 16);
  const double negative_start = -std::exp2((kZ - 15) / 16);
  EXPECT_EQ(levelsOf({positive_start, positive_start * 0.99, negative_start * 1.01, negative_start,
                      -1e-30}),
            (std::vector<double>{1, 0, -1, 0, 0}));
}

}  // namespace
}  // namespace qforge::verify
