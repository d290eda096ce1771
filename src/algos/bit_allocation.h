// Mixed precision under a size budget: one width per unit, from the widths it may take, so that
// the predicted output noise (each unit's noise at its width, summed: the noise of independent
// quantizers adds) is least while the weight bits stay within the budget. A multiple-choice
// knapsack, solved by dynamic programming over the budget: exact when the bit counts, divided by
// their common factor, fit the table; otherwise on costs rounded up to a grid of kBudgetSteps
// steps (never over budget; at most one step per unit worse than exact), then topped up greedily
// with what the rounding left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qforge::algos {

struct WidthOption {
  int bits = 0;
  double noise = 0;  // predicted output noise with the unit at this width (>= 0)
};

struct AllocationUnit {
  std::string name;
  int64_t elements = 0;              // weight elements, each costing its width in bits
  std::vector<WidthOption> options;  // one option: the unit's width is fixed
};

struct BitAllocation {
  std::vector<int> bits;  // per unit, in the order given
  double noise = 0;       // predicted: the chosen options' noise summed
  int64_t total_bits = 0;
};

constexpr int64_t kBudgetSteps = 1 << 14;

// The least total bits any choice can take (every unit at its narrowest option).
int64_t leastTotalBits(const std::vector<AllocationUnit>& units);

// Throws qforge::Error for a unit without options, a negative element count or noise, or a budget
// below leastTotalBits (the caller words that for its flags first).
BitAllocation allocateBits(const std::vector<AllocationUnit>& units, int64_t budget_bits);

}  // namespace qforge::algos
