#include "pipelines/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "algos/bit_allocation.h"
#include "algos/sensitivity.h"
#include "core/error.h"

namespace qforge::pipelines {

namespace {

constexpr const char* kTag = "mixed precision";

std::string bitsText(double bits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bits);
  return text;
}

void checkOptions(const MixedPrecisionOptions& o, const std::vector<int>& widths,
                  const std::string& backend) {
  require(o.bits_budget.has_value() != o.size_budget.has_value(),
          "give one budget: --bits-budget (average weight bits) or --size-budget (bytes)");
  require(o.ranking == "isolated" || o.ranking == "fisher",
          "--tune-ranking must be isolated or fisher, not '" + o.ranking + "'");
  require(o.sensitivity_samples >= 1, "mixed precision needs at least one sample");
  require(widths.size() >= 2, "mixed precision chooses among weight widths, and " + backend +
                                  " runs only " + std::to_string(widths.front()) +
                                  "-bit weights (its \"alternatives\": docs/BACKENDS.md); pick a "
                                  "backend that runs more, or give it alternatives");
  if (o.bits_budget) {
    require(std::isfinite(*o.bits_budget) && *o.bits_budget >= widths.front(),
            "--bits-budget " + bitsText(*o.bits_budget) + " is below the narrowest weight width " +
                backend + " runs (" + std::to_string(widths.front()) + " bits)");
  } else {
    require(*o.size_budget > 0, "--size-budget must be more than 0 bytes");
  }
}

// The weight widths to choose among: the backend's alternatives, and the starting width.
std::vector<int> candidateWidths(const TrialRunner& runner) {
  std::set<int> widths(runner.backend().alternatives.weight_bits.begin(),
                       runner.backend().alternatives.weight_bits.end());
  widths.insert(runner.startWeightBits());
  return {widths.begin(), widths.end()};
}

// Per unit, what one uniform run at `width` shows: its elements, the width it actually got, and
// its weights' noise.
void recordUniformRun(passes::PreparedModel& model, int width, const TrialRunner& runner,
                      const MixedPrecisionOptions& o, std::map<std::string, UnitPrecision>& units,
                      double& signal) {
  const std::vector<algos::AnalysisBatch> some = runner.firstBatches(o.sensitivity_samples);
  algos::SensitivityOptions so;
  so.isolated = o.ranking == "isolated";
  so.leave_one_out = false;
  so.fisher = !so.isolated;
  std::map<std::string, const passes::QuantPoint*> weight_points;
  for (const passes::QuantPoint& p : model.points()) {
    if (p.kind != passes::PointKind::Weight || p.unit.empty()) continue;
    weight_points[p.quantizer] = &p;
    so.measured.push_back(p.quantizer);
  }
  if (weight_points.empty()) return;
  const algos::SensitivityResult s = algos::analyzeSensitivity(model, some, so);
  signal = s.quantized.signal;
  // This run's figures per unit, summed over its weight quantizers.
  struct RunFigures {
    int bits = 0;
    int64_t elements = 0;
    double noise = 0;
  };
  std::map<std::string, RunFigures> run;
  for (const algos::QuantizerSensitivity& q : s.quantizers) {
    const auto point = weight_points.find(q.quantizer);
    if (point == weight_points.end()) continue;
    const passes::QuantPoint& p = *point->second;
    RunFigures& f = run[p.unit];
    f.bits = p.spec.scheme.bits;
    f.noise += so.isolated ? (q.isolated ? q.isolated->noise : 0.0) : q.fisher.value_or(0);
    const Value* v = model.graph().findValue(p.value);
    if (v != nullptr && v->isInitializer()) f.elements += v->initializer().numel();
  }
  for (const auto& [name, f] : run) {
    UnitPrecision& u = units[name];
    u.unit = name;
    u.elements = f.elements;
    u.noise[f.bits] = f.noise;
    // A width other than the run's: the backend or the config pins it.
    if (f.bits != width) {
      u.fixed = true;
      u.bits = f.bits;
    }
  }
}

// The uniform metric at `bits`, on the line between the uniform trials either side of it.
std::optional<double> interpolated(const std::vector<TuningTrial>& uniform, double bits) {
  std::vector<const TuningTrial*> sorted;
  for (const TuningTrial& t : uniform)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const TuningTrial* a, const TuningTrial* b) {
    return a->avg_weight_bits < b->avg_weight_bits;
  });
  for (size_t i = 0; i + 1 < sorted.size(); ++i) {
    const TuningTrial& a = *sorted[i];
    const TuningTrial& b = *sorted[i + 1];
    if (bits < a.avg_weight_bits || bits > b.avg_weight_bits) continue;
    if (b.avg_weight_bits == a.avg_weight_bits) return std::max(a.metric, b.metric);
    const double f = (bits - a.avg_weight_bits) / (b.avg_weight_bits - a.avg_weight_bits);
    return a.metric + f * (b.metric - a.metric);
  }
  return std::nullopt;
}

// The chosen widths as a config: the starting one, a global width (the one most weight elements
// of the free units took) and an override for each free unit at another.
passes::QuantConfig choiceConfig(const passes::QuantConfig& start,
                                 const std::vector<UnitPrecision>& units) {
  std::map<int, int64_t> elements_at;
  for (const UnitPrecision& u : units) {
    if (!u.fixed) elements_at[u.bits] += u.elements;
  }
  passes::QuantConfig config = start;
  if (elements_at.empty()) return config;
  const int global =
      std::max_element(elements_at.begin(), elements_at.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  if (!config.weight.is_object()) config.weight = nlohmann::json::object();
  config.weight["bits"] = global;
  for (const UnitPrecision& u : units) {
    if (u.fixed || u.bits == global) continue;
    passes::NodeOverride o;
    o.name = u.unit;
    o.weight = {{"bits", u.bits}};
    o.where = std::string(kTag) + ": unit " + u.unit;
    config.overrides.push_back(o);
  }
  return config;
}

}  // namespace

double MixedPrecisionResult::averageBits() const {
  return weight_elements > 0 ? static_cast<double>(total_bits) / weight_elements : 0;
}

MixedPrecisionResult mixedPrecision(const MixedPrecisionOptions& o,
                                    const ProgressCallback& progress) {
  require(!o.ptq.eval.empty(),
          "--bits-budget and --size-budget score the choice on evaluation data: pass --eval");
  TrialRunner runner(o.ptq, o.metric, kTag, kTag, progress);
  MixedPrecisionResult r;
  r.widths = candidateWidths(runner);
  checkOptions(o, r.widths, runner.backend().name);
  r.ranking = o.ranking;
  const int64_t planned = static_cast<int64_t>(r.widths.size()) + 1;

  // Every width uniformly, narrowest first: the reference curve and each unit's noise there.
  std::map<std::string, UnitPrecision> units;
  for (int width : r.widths) {
    passes::QuantConfig config = runner.startConfig();
    if (!config.weight.is_object()) config.weight = nlohmann::json::object();
    config.weight["bits"] = width;
    PtqResult result;
    r.trials.push_back(runner.run("uniform W" + std::to_string(width), config, planned, &result));
    recordUniformRun(*result.model, width, runner, o, units, r.signal);
    if (width == r.widths.front()) {
      int64_t elements = 0;
      for (const auto& [name, u] : units)
        elements += u.elements;
      require(elements > 0, "mixed precision: the model has no quantized weights to allocate");
      r.weight_elements = elements;
      r.budget_bits =
          o.bits_budget
              ? static_cast<int64_t>(std::floor(*o.bits_budget * static_cast<double>(elements)))
              : *o.size_budget * 8;
    }
  }

  std::vector<algos::AllocationUnit> allocation_units;
  std::vector<UnitPrecision> ordered;
  for (auto& [name, u] : units) {
    algos::AllocationUnit a;
    a.name = name;
    a.elements = u.elements;
    if (u.fixed) {
      a.options.push_back({u.bits, u.noise.count(u.bits) ? u.noise.at(u.bits) : 0.0});
    } else {
      for (const auto& [bits, noise] : u.noise)
        a.options.push_back({bits, noise});
    }
    allocation_units.push_back(a);
    ordered.push_back(u);
  }
  const int64_t least = algos::leastTotalBits(allocation_units);
  if (r.budget_bits < least) {
    const double least_average = static_cast<double>(least) / r.weight_elements;
    throw Error((o.bits_budget ? "--bits-budget " + bitsText(*o.bits_budget)
                               : "--size-budget " + std::to_string(*o.size_budget) + " bytes") +
                " is below what the narrowest widths take: " + std::to_string((least + 7) / 8) +
                " bytes, " + bitsText(least_average) +
                " bits per weight (units the backend or the " +
                "config pins to a width count at it); raise the budget");
  }
  const algos::BitAllocation chosen = algos::allocateBits(allocation_units, r.budget_bits);
  for (size_t i = 0; i < ordered.size(); ++i)
    ordered[i].bits = chosen.bits[i];
  r.units = ordered;
  r.total_bits = chosen.total_bits;
  r.predicted_noise = chosen.noise;

  const passes::QuantConfig config = choiceConfig(runner.startConfig(), r.units);
  const std::vector<TuningTrial> uniform = r.trials;
  r.trials.push_back(runner.run(
      "mixed precision, " + bitsText(r.averageBits()) + " bits per weight", config, planned));
  r.metric = runner.metric();
  r.float_metric = runner.floatMetric();
  r.uniform_interpolated = interpolated(uniform, r.chosen().avg_weight_bits);
  // "met": within the budget, counted as the budget counts (quantized weights only).
  for (size_t i = 0; i < r.widths.size(); ++i) {
    int64_t bits = 0;
    for (const UnitPrecision& u : r.units)
      bits += u.elements * (u.fixed ? u.bits : r.widths[i]);
    r.trials[i].met = bits <= r.budget_bits;
  }
  r.trials.back().met = true;
  r.seconds = runner.secondsSinceStart();
  return r;
}

nlohmann::json mixedPrecisionJson(const MixedPrecisionResult& r) {
  nlohmann::json units = nlohmann::json::array();
  for (const UnitPrecision& u : r.units) {
    nlohmann::json noise = nlohmann::json::object();
    for (const auto& [bits, value] : u.noise)
      noise[std::to_string(bits)] = value;
    units.push_back({{"unit", u.unit},
                     {"elements", u.elements},
                     {"bits", u.bits},
                     {"fixed", u.fixed},
                     {"noise", noise}});
  }
  nlohmann::json trials = nlohmann::json::array();
  for (const TuningTrial& t : r.trials)
    trials.push_back(tuningTrialJson(t));
  auto orNull = [](const std::optional<double>& v) {
    return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  const double predicted_sqnr = r.predicted_noise > 0 && r.signal > 0
                                    ? 10 * std::log10(r.signal / r.predicted_noise)
                                    : std::numeric_limits<double>::infinity();
  return {{"metric", r.metric == "sqnr" ? "sqnr_db" : r.metric},
          {"float", orNull(r.float_metric)},
          {"ranking", r.ranking},
          {"widths", r.widths},
          {"budget_bits", r.budget_bits},
          {"budget_average_bits",
           r.weight_elements > 0 ? static_cast<double>(r.budget_bits) / r.weight_elements : 0.0},
          {"weight_elements", r.weight_elements},
          {"total_bits", r.total_bits},
          {"average_bits", r.averageBits()},
          {"weight_bytes", (r.total_bits + 7) / 8},
          {"predicted_sqnr_db", orNull(predicted_sqnr)},
          {"chosen_metric",
           orNull(r.trials.empty() ? std::nullopt : std::optional<double>(r.chosen().metric))},
          {"uniform_interpolated", orNull(r.uniform_interpolated)},
          {"chosen_trial",
           r.trials.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.chosen().trial)},
          {"seconds", r.seconds},
          {"units", units},
          {"trials", trials}};
}

}  // namespace qforge::pipelines
