#include "algos/fix_suggestions.h"

#include <algorithm>
#include <cstdio>

namespace qforge::algos {

namespace {

std::string format(const char* pattern, double value) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), pattern, value);
  return buf;
}

bool minMaxObserver(const std::string& observer) {
  return observer == "MinMax" || observer == "EmaMinMax";
}

// The next width above `bits` the backend runs, or 0.
int widerThan(int bits, const std::vector<int>& widths) {
  for (int w : widths) {
    if (w > bits) return w;
  }
  return 0;
}

nlohmann::json overrideFor(const std::string& unit, const char* kind, nlohmann::json patch) {
  return {{"name", unit}, {kind, std::move(patch)}};
}

}  // namespace

std::vector<FixSuggestion> suggestFixes(const passes::QuantPoint& point,
                                        const QuantizerSensitivity& sensitivity,
                                        const std::string& unit_ops,
                                        const backends::BackendConfig& backend) {
  std::vector<FixSuggestion> fixes;
  if (point.unit.empty() || point.kind == passes::PointKind::Bias) return fixes;
  const bool weight = point.kind == passes::PointKind::Weight;
  const char* kind = weight ? "weight" : "activation";
  const backends::QuantSpec& spec = point.spec;
  const std::optional<RangeSummary>& range = sensitivity.range;

  if (range && point.kind != passes::PointKind::FixedOutput) {
    if (range->outlier_ratio >= kOutlierRatio && minMaxObserver(spec.observer)) {
      fixes.push_back({"observer",
                       format("a few values set the range: max |x| is %.1fx the 99.9th "
                              "percentile's; the Mse observer clips them",
                              range->outlier_ratio),
                       overrideFor(point.unit, kind, {{"observer", "Mse"}}), ""});
    } else if (range->clipped_fraction && *range->clipped_fraction >= kClippedShare &&
               !minMaxObserver(spec.observer)) {
      fixes.push_back({"observer",
                       format("the grid clips %.2g%% of the values; MinMax keeps them all",
                              100 * *range->clipped_fraction),
                       overrideFor(point.unit, kind, {{"observer", "MinMax"}}), ""});
    }
  }
  if (weight && !spec.scheme.perChannel() && range && range->channel_spread &&
      *range->channel_spread >= kChannelSpread) {
    const std::string why =
        format("one output channel's range is %.1fx the median channel's", *range->channel_spread);
    if (backend.alternatives.per_channel_weights) {
      fixes.push_back({"per-channel", why + "; a scale per channel fits each",
                       overrideFor(point.unit, kind, {{"per_channel", true}}), ""});
    }
    if (unit_ops.rfind("Conv", 0) == 0) {
      fixes.push_back({"cle", why + "; cross-layer equalization evens them out", nullptr, "--cle"});
    }
  }
  const std::vector<int>& widths =
      weight ? backend.alternatives.weight_bits : backend.alternatives.activation_bits;
  // A fixed output's grid is the function's range at its width: no other width to offer.
  const int wider =
      point.kind == passes::PointKind::FixedOutput ? 0 : widerThan(spec.scheme.bits, widths);
  if (wider > 0) {
    fixes.push_back({wider == 16 ? "16-bit" : "wider",
                     "the backend also runs " + std::to_string(wider) + "-bit " + kind + "s",
                     overrideFor(point.unit, kind, {{"bits", wider}}), ""});
  }
  fixes.push_back({"float",
                   "keep the unit float: exact, at the cost of speed on the device",
                   {{"name", point.unit}, {"skip", true}},
                   ""});
  return fixes;
}

}  // namespace qforge::algos
