#include "algos/bit_allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace qforge::algos {

namespace {

int narrowest(const AllocationUnit& unit) {
  int bits = std::numeric_limits<int>::max();
  for (const WidthOption& o : unit.options)
    bits = std::min(bits, o.bits);
  return bits;
}

void checkUnits(const std::vector<AllocationUnit>& units) {
  for (const AllocationUnit& u : units) {
    require(!u.options.empty(), "bit allocation: unit '" + u.name + "' has no width to take");
    require(u.options.size() < 256, "bit allocation: unit '" + u.name + "' has over 255 widths");
    require(u.elements >= 0, "bit allocation: unit '" + u.name + "' has a negative size");
    for (const WidthOption& o : u.options) {
      require(o.bits > 0 && std::isfinite(o.noise) && o.noise >= 0,
              "bit allocation: unit '" + u.name + "' has a width of " + std::to_string(o.bits) +
                  " bits with noise " + std::to_string(o.noise) +
                  "; widths must be positive and noise finite and not negative");
    }
  }
}

// Each option's cost above its unit's narrowest, in table steps: exact multiples of the extras'
// common factor when the free budget fits the table that way, else rounded up on a grid.
struct Table {
  std::vector<std::vector<int64_t>> cost;  // [unit][option]
  int64_t capacity = 0;
};

Table tableOf(const std::vector<AllocationUnit>& units, int64_t free_bits) {
  Table t;
  int64_t common = 0;
  for (const AllocationUnit& u : units) {
    const int least = narrowest(u);
    for (const WidthOption& o : u.options)
      common = std::gcd(common, u.elements * (o.bits - least));
  }
  const bool exact = common == 0 || free_bits / common <= kBudgetSteps;
  const double step = exact ? static_cast<double>(std::max<int64_t>(common, 1))
                            : static_cast<double>(free_bits) / kBudgetSteps;
  t.capacity = exact ? (common == 0 ? 0 : free_bits / common) : kBudgetSteps;
  for (const AllocationUnit& u : units) {
    const int least = narrowest(u);
    std::vector<int64_t> costs;
    for (const WidthOption& o : u.options) {
      const int64_t extra = u.elements * (o.bits - least);
      costs.push_back(exact ? (common == 0 ? 0 : extra / common)
                            : static_cast<int64_t>(std::ceil(static_cast<double>(extra) / step)));
    }
    t.cost.push_back(costs);
  }
  return t;
}

}  // namespace

int64_t leastTotalBits(const std::vector<AllocationUnit>& units) {
  checkUnits(units);
  int64_t total = 0;
  for (const AllocationUnit& u : units)
    total += u.elements * narrowest(u);
  return total;
}

BitAllocation allocateBits(const std::vector<AllocationUnit>& units, int64_t budget_bits) {
  const int64_t least = leastTotalBits(units);
  require(budget_bits >= least, "bit allocation: a budget of " + std::to_string(budget_bits) +
                                    " bits is below the least the units can take (" +
                                    std::to_string(least) + ")");
  const Table table = tableOf(units, budget_bits - least);
  const size_t width = static_cast<size_t>(table.capacity) + 1;
  constexpr double kNone = std::numeric_limits<double>::infinity();

  // best[c]: the least noise of the units so far within c steps; choice[u][c]: unit u's option.
  std::vector<double> best(width, 0.0), next(width);
  std::vector<std::vector<uint8_t>> choice(units.size(), std::vector<uint8_t>(width, 0));
  for (size_t u = 0; u < units.size(); ++u) {
    for (size_t c = 0; c < width; ++c) {
      double least_noise = kNone;
      for (size_t o = 0; o < units[u].options.size(); ++o) {
        const int64_t cost = table.cost[u][o];
        if (cost > static_cast<int64_t>(c)) continue;
        const double noise = best[c - static_cast<size_t>(cost)] + units[u].options[o].noise;
        if (noise < least_noise) {
          least_noise = noise;
          choice[u][c] = static_cast<uint8_t>(o);
        }
      }
      next[c] = least_noise;
    }
    best.swap(next);
  }

  std::vector<size_t> picked(units.size());
  size_t c = width - 1;
  for (size_t u = units.size(); u-- > 0;) {
    picked[u] = choice[u][c];
    c -= static_cast<size_t>(table.cost[u][picked[u]]);
  }

  // Rounded costs may leave bits unspent: take the upgrade that removes the most noise per bit
  // while one fits.
  auto bitsOf = [&](size_t u, size_t o) { return units[u].elements * units[u].options[o].bits; };
  int64_t total = 0;
  for (size_t u = 0; u < units.size(); ++u)
    total += bitsOf(u, picked[u]);
  for (;;) {
    double best_rate = 0;
    size_t best_unit = 0, best_option = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      for (size_t o = 0; o < units[u].options.size(); ++o) {
        const int64_t extra = bitsOf(u, o) - bitsOf(u, picked[u]);
        const double gain = units[u].options[picked[u]].noise - units[u].options[o].noise;
        if (gain <= 0 || total + extra > budget_bits) continue;
        const double rate = extra <= 0 ? std::numeric_limits<double>::infinity()
                                       : gain / static_cast<double>(extra);
        if (rate > best_rate) {
          best_rate = rate;
          best_unit = u;
          best_option = o;
        }
      }
    }
    if (best_rate <= 0) break;
    total += bitsOf(best_unit, best_option) - bitsOf(best_unit, picked[best_unit]);
    picked[best_unit] = best_option;
  }

  BitAllocation result;
  result.total_bits = total;
  for (size_t u = 0; u < units.size(); ++u) {
    result.bits.push_back(units[u].options[picked[u]].bits);
    result.noise += units[u].options[picked[u]].noise;
  }
  return result;
}

}  // namespace qforge::algos
