// Bit allocation against brute force: every combination of widths enumerated, the least noise
// within the budget found by hand. Exact when the table holds the bit counts; on the rounded grid
// never over budget and never worse than the best choice one step per unit tighter.
#include "algos/bit_allocation.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "core/error.h"

namespace qforge::algos {
namespace {

// The least noise of any choice within `budget` bits (infinity when none fits).
double bruteForce(const std::vector<AllocationUnit>& units, int64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> pick(units.size(), 0);
  for (;;) {
    int64_t bits = 0;
    double noise = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      bits += units[u].elements * units[u].options[pick[u]].bits;
      noise += units[u].options[pick[u]].noise;
    }
    if (bits <= budget) best = std::min(best, noise);
    size_t u = 0;
    while (u < units.size() && ++pick[u] == units[u].options.size())
      pick[u++] = 0;
    if (u == units.size()) return best;
  }
}

int64_t bitsOf(const std::vector<AllocationUnit>& units, const BitAllocation& a) {
  int64_t total = 0;
  for (size_t u = 0; u < units.size(); ++u)
    total += units[u].elements * a.bits[u];
  return total;
}

// Noise that falls by 4x per bit, as uniform rounding noise does, scaled per unit.
std::vector<AllocationUnit> randomUnits(std::mt19937& rng, int count, int64_t min_elements,
                                        int64_t max_elements) {
  std::uniform_int_distribution<int64_t> size(min_elements, max_elements);
  std::uniform_real_distribution<double> scale(0.01, 10.0);
  std::vector<AllocationUnit> units;
  for (int i = 0; i < count; ++i) {
    AllocationUnit u;
    u.name = "u" + std::to_string(i);
    u.elements = size(rng);
    const double s = scale(rng);
    for (int bits : {2, 4, 5, 8})
      u.options.push_back({bits, s * std::pow(4.0, -bits) * (1 + 0.3 * scale(rng) / 10)});
    units.push_back(u);
  }
  return units;
}

TEST(BitAllocation, SpendsTheBudgetWhereItRemovesTheMostNoise) {
  // Moving a from 4 to 8 bits costs 400 bits and removes 9 of noise; b costs 40 bits per 9.
  const std::vector<AllocationUnit> units = {
      {"a", 100, {{4, 10.0}, {8, 1.0}}},
      {"b", 10, {{4, 10.0}, {8, 1.0}}},
  };
  const int64_t least = 4 * 110;
  EXPECT_EQ(leastTotalBits(units), least);
  BitAllocation a = allocateBits(units, least + 40);
  EXPECT_EQ(a.bits, (std::vector<int>{4, 8}));
  EXPECT_DOUBLE_EQ(a.noise, 11.0);
  EXPECT_EQ(a.total_bits, least + 40);
  a = allocateBits(units, least + 39);
  EXPECT_EQ(a.bits, (std::vector<int>{4, 4}));
  EXPECT_DOUBLE_EQ(a.noise, 20.0);
  a = allocateBits(units, 8 * 110);
  EXPECT_EQ(a.bits, (std::vector<int>{8, 8}));
  EXPECT_EQ(a.total_bits, 8 * 110);
}

TEST(BitAllocation, FixedUnitsCountAgainstTheBudget) {
  const std::vector<AllocationUnit> units = {
      {"first", 50, {{8, 0.0}}},
      {"body", 10, {{2, 5.0}, {4, 1.0}}},
  };
  EXPECT_EQ(leastTotalBits(units), 420);
  EXPECT_EQ(allocateBits(units, 439).bits, (std::vector<int>{8, 2}));
  EXPECT_EQ(allocateBits(units, 440).bits, (std::vector<int>{8, 4}));
}

TEST(BitAllocation, EqualsBruteForceWhenTheTableIsExact) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<AllocationUnit> units = randomUnits(rng, 2 + trial % 5, 1, 300);
    const int64_t least = leastTotalBits(units);
    int64_t most = 0;
    for (const AllocationUnit& u : units)
      most += 8 * u.elements;
    const int64_t budget = least + (most - least) * (trial % 11) / 10;
    const BitAllocation a = allocateBits(units, budget);
    ASSERT_LE(bitsOf(units, a), budget);
    EXPECT_EQ(a.total_bits, bitsOf(units, a));
    EXPECT_NEAR(a.noise, bruteForce(units, budget), 1e-12) << "trial " << trial;
  }
}

TEST(BitAllocation, OnTheRoundedGridStaysInBudgetAndLosesAtMostAStepPerUnit) {
  std::mt19937 rng(11);
  int rounded = 0;
  for (int trial = 0; trial < 60; ++trial) {
    // Sizes in the millions with no common factor: the free budget does not fit the table.
    const std::vector<AllocationUnit> units = randomUnits(rng, 3 + trial % 4, 1000003, 9000011);
    const int64_t least = leastTotalBits(units);
    int64_t most = 0;
    for (const AllocationUnit& u : units)
      most += 8 * u.elements;
    const int64_t budget = least + (most - least) * (1 + trial % 9) / 10;
    const BitAllocation a = allocateBits(units, budget);
    ASSERT_LE(bitsOf(units, a), budget);
    const double exact = bruteForce(units, budget);
    EXPECT_GE(a.noise, exact - 1e-12);
    const int64_t step = (budget - least) / kBudgetSteps + 1;
    const int64_t tighter = budget - step * static_cast<int64_t>(units.size());
    EXPECT_LE(a.noise, bruteForce(units, tighter) + 1e-12) << "trial " << trial;
    rounded += a.noise > exact + 1e-12 ? 1 : 0;
  }
  // The rounding matters in few cases, if any: the top-up recovers most of what it loses.
  EXPECT_LE(rounded, 6);
}

TEST(BitAllocation, RefusesWhatCannotBeAllocated) {
  const std::vector<AllocationUnit> units = {{"a", 10, {{4, 1.0}, {8, 0.5}}}};
  EXPECT_THROW(allocateBits(units, 39), Error);
  EXPECT_NO_THROW(allocateBits(units, 40));
  EXPECT_THROW(allocateBits({{"empty", 10, {}}}, 1000), Error);
  EXPECT_THROW(allocateBits({{"neg", -1, {{4, 1.0}}}}, 1000), Error);
  EXPECT_THROW(allocateBits({{"nan", 10, {{4, std::nan("")}}}}, 1000), Error);
  EXPECT_THROW(allocateBits({{"below", 10, {{4, -1.0}}}}, 1000), Error);
  try {
    allocateBits(units, 39);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("least the units can take (40)"), std::string::npos)
        << e.what();
  }
}

TEST(BitAllocation, NoUnitsIsAnEmptyAllocation) {
  const BitAllocation a = allocateBits({}, 0);
  EXPECT_TRUE(a.bits.empty());
  EXPECT_EQ(a.total_bits, 0);
}

}  // namespace
}  // namespace qforge::algos
