#include "pipelines/autotune.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "algos/sensitivity.h"
#include "core/error.h"

namespace qforge::pipelines {

namespace {

// What a trial changes about one unit.
struct UnitFix {
  std::string unit;
  int weight_bits = 0;      // 0: unchanged
  int activation_bits = 0;  // 0: unchanged
  bool skip = false;
  bool weight_worst = false;  // its weights cost more than its activations
  double weight_noise = 0;    // its worst weight quantizer's
};

// The widest width the backend runs above `bits`, up to 8 (16 only from 8 up), or 0.
int promotedWidth(int bits, const std::vector<int>& allowed) {
  int best = 0;
  for (int w : allowed) {
    if (w > bits && w <= 8) best = std::max(best, w);
  }
  if (best == 0 && bits >= 8) {
    for (int w : allowed) {
      if (w > bits) return w;
    }
  }
  return best;
}

passes::QuantConfig withFixes(passes::QuantConfig config, const std::vector<UnitFix>& fixes) {
  for (const UnitFix& f : fixes) {
    passes::NodeOverride o;
    o.name = f.unit;
    o.skip = f.skip;
    if (!f.skip && f.weight_bits > 0) o.weight = {{"bits", f.weight_bits}};
    if (!f.skip && f.activation_bits > 0) o.activation = {{"bits", f.activation_bits}};
    o.where = "autotune: unit " + f.unit;
    config.overrides.push_back(o);
  }
  return config;
}

// The observers autotune tries for a kind of quantizer, in order: for per-tensor activations
// Percentile (99.99), Kl (TensorRT's entropy calibration) and Mse; for weights, or per-channel
// activations, Mse only (the histogram rules are per tensor).
std::vector<nlohmann::json> candidateObservers(bool weights, const backends::QuantSpec& spec) {
  const nlohmann::json mse = {{"observer", "Mse"}};
  if (weights || spec.scheme.perChannel()) return {mse};
  return {{{"observer", "Percentile"}, {"observer_options", {{"percentile", 99.99}}}},
          {{"observer", "Kl"}},
          mse};
}

std::string describeObserver(const nlohmann::json& observer) {
  std::string text = observer["observer"].get<std::string>();
  if (observer.contains("observer_options")) {
    for (const auto& [key, value] : observer["observer_options"].items()) {
      text += " " + key + " " + value.dump();
    }
  }
  return text;
}

class Tuner {
 public:
  Tuner(const AutotuneOptions& o, const ProgressCallback& progress)
      : o_(o), runner_(checked(o), o.metric, "autotune", kTag, progress) {
    require(runner_.labelled() || !o.ptq.metric_script.empty() ||
                (o.metric != "top1" && !o.target_drop),
            "top-1 (--target-drop, --tune-metric top1) needs labelled evaluation data; " +
                runner_.describedData() + " has none: use --target-sqnr");
  }

  AutotuneResult run() {
    r_.target = o_.target_drop ? *o_.target_drop : *o_.target_sqnr;
    passes::QuantConfig best_config = runner_.startConfig();
    PtqResult best = trial("baseline", best_config);
    double best_metric = r_.trials.back().metric;
    if (met()) return finish();

    // Observers first: they cost nothing on the device. Activations try the range rules the
    // calibrators of TensorRT's and ONNX Runtime's tools offer (percentile, entropy, MSE); weights
    // MSE, since the others are per tensor. Each is kept when it beats the best so far.
    for (const char* kind : {"activation", "weight"}) {
      const bool weights = std::string(kind) == "weight";
      const backends::QuantSpec& spec =
          weights ? runner_.backend().weight : runner_.backend().activation;
      for (const nlohmann::json& observer : candidateObservers(weights, spec)) {
        if (budgetSpent()) return finish();
        const nlohmann::json& patch = weights ? best_config.weight : best_config.activation;
        const std::string current = patch.is_object() && patch.contains("observer")
                                        ? patch["observer"].get<std::string>()
                                        : spec.observer;
        if (current == observer["observer"]) continue;
        passes::QuantConfig candidate = best_config;
        nlohmann::json& changed = weights ? candidate.weight : candidate.activation;
        if (!changed.is_object()) changed = nlohmann::json::object();
        changed.erase("observer_options");  // a new observer starts without the old one's
        changed.update(observer);
        PtqResult tried =
            trial(std::string(kind) + " observer " + describeObserver(observer), candidate);
        if (r_.trials.back().metric > best_metric) {
          best_metric = r_.trials.back().metric;
          best_config = candidate;
          best = std::move(tried);
        }
        if (met()) return finish();
      }
    }

    // Then the units that cost the most, a growing prefix of the ranking.
    if (budgetSpent()) return finish();
    const std::vector<UnitFix> ranked = rankedFixes(*best.model);
    if (ranked.empty()) {
      r_.note = "no unit's quantizers change the outputs: nothing left to fall back";
      return finish();
    }
    size_t low = 0, high = 0;  // prefixes known to miss / to meet
    for (size_t k = 1; !budgetSpent(); k = std::min(2 * k, ranked.size())) {
      trial(describe(ranked, k), withFixes(best_config, prefix(ranked, k)));
      if (met()) {
        high = k;
        break;
      }
      low = k;
      if (k == ranked.size()) {
        r_.note = "every ranked unit widened or kept float and the target is still missed";
        return finish();
      }
    }
    while (high > 0 && high - low > 1 && !budgetSpent()) {
      const size_t mid = (low + high) / 2;
      trial(describe(ranked, mid), withFixes(best_config, prefix(ranked, mid)));
      (r_.trials.back().met ? high : low) = mid;
    }
    // Last, within the shortest prefix that meets it, the weights of units whose activations
    // hurt more go back to the starting width, the least noisy first: all of them, then (when
    // that misses) bisected down to the most that still meet the target.
    if (high > 0 && !budgetSpent()) {
      const std::vector<UnitFix> chosen = prefix(ranked, high);
      std::vector<size_t> narrowable;
      for (size_t i = 0; i < chosen.size(); ++i) {
        const UnitFix& f = chosen[i];
        if (!f.skip && !f.weight_worst && f.weight_bits > 0 && f.activation_bits > 0)
          narrowable.push_back(i);
      }
      std::stable_sort(narrowable.begin(), narrowable.end(), [&](size_t a, size_t b) {
        return chosen[a].weight_noise < chosen[b].weight_noise;
      });
      auto narrowed = [&](size_t count) {
        std::vector<UnitFix> fixes = chosen;
        for (size_t k = 0; k < count; ++k)
          fixes[narrowable[k]].weight_bits = 0;
        return fixes;
      };
      auto label = [&](size_t count) {
        return describe(ranked, high) + ", " + std::to_string(count) + " of them with weights at " +
               "the starting width";
      };
      size_t good = 0, bad = narrowable.size() + 1;  // counts known to meet / to miss
      if (!narrowable.empty()) {
        trial(label(narrowable.size()), withFixes(best_config, narrowed(narrowable.size())));
        (r_.trials.back().met ? good : bad) = narrowable.size();
      }
      while (bad <= narrowable.size() && bad - good > 1 && !budgetSpent()) {
        const size_t mid = (good + bad) / 2;
        trial(label(mid), withFixes(best_config, narrowed(mid)));
        (r_.trials.back().met ? good : bad) = mid;
      }
    }
    return finish();
  }

 private:
  bool met() const { return r_.trials.back().met; }

  bool budgetSpent() {
    if (static_cast<int64_t>(r_.trials.size()) >= o_.max_trials) {
      if (r_.note.empty()) r_.note = "--max-trials reached";
      return true;
    }
    if (o_.time_budget > 0 && runner_.secondsSinceStart() >= o_.time_budget) {
      if (r_.note.empty()) r_.note = "--time-budget spent";
      return true;
    }
    return false;
  }

  static std::vector<UnitFix> prefix(const std::vector<UnitFix>& ranked, size_t k) {
    return {ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k)};
  }

  static std::string describe(const std::vector<UnitFix>& ranked, size_t k) {
    int64_t skipped = 0;
    for (size_t i = 0; i < k; ++i)
      skipped += ranked[i].skip ? 1 : 0;
    std::string text = "top " + std::to_string(k) + " sensitive unit" + (k == 1 ? "" : "s") + ": " +
                       std::to_string(k - skipped) + " wider, " + std::to_string(skipped) +
                       " float";
    if (k == 1) text += " (" + ranked[0].unit + ")";
    return text;
  }

  // Units by their worst quantizer's noise on the first samples (isolated: measured, one run per
  // quantizer; fisher: predicted, one backward pass per probe for all), each with the fix the
  // backend allows for the kinds that hurt there (a kind at least half the unit's worst).
  std::vector<UnitFix> rankedFixes(passes::PreparedModel& model) {
    const std::vector<algos::AnalysisBatch> some = runner_.firstBatches(o_.sensitivity_samples);
    const bool isolated = o_.ranking == "isolated";
    algos::SensitivityOptions so;
    so.isolated = isolated;
    so.leave_one_out = false;
    so.fisher = !isolated;
    const algos::SensitivityResult s = algos::analyzeSensitivity(model, some, so);
    struct Scores {
      double weight = 0, activation = 0;
      const passes::QuantPoint* weight_point = nullptr;
      const passes::QuantPoint* activation_point = nullptr;
      double worst() const { return std::max(weight, activation); }
    };
    std::map<std::string, Scores> units;
    std::map<std::string, const passes::QuantPoint*> point_of;
    for (const passes::QuantPoint& p : model.points())
      point_of[p.quantizer] = &p;
    for (const algos::QuantizerSensitivity& q : s.quantizers) {
      const passes::QuantPoint& p = *point_of.at(q.quantizer);
      if (p.unit.empty() || p.kind == passes::PointKind::Bias) continue;
      const std::optional<double> noise =
          isolated ? (q.isolated ? std::optional<double>(q.isolated->noise) : std::nullopt)
                   : q.fisher;
      if (!noise || *noise <= 0) continue;
      Scores& u = units[p.unit];
      if (p.kind == passes::PointKind::Weight) {
        if (*noise > u.weight) {
          u.weight = *noise;
          u.weight_point = &p;
        }
      } else if (*noise > u.activation) {
        u.activation = *noise;
        u.activation_point = &p;
      }
    }
    std::vector<std::pair<double, UnitFix>> ranked;
    for (const auto& [unit, scores] : units) {
      UnitFix f;
      f.unit = unit;
      f.weight_worst = scores.weight >= scores.activation;
      f.weight_noise = scores.weight;
      for (const bool weight : {true, false}) {
        const passes::QuantPoint* p = weight ? scores.weight_point : scores.activation_point;
        if (p == nullptr || (weight ? scores.weight : scores.activation) < scores.worst() / 2)
          continue;
        const int wider =
            p->kind == passes::PointKind::FixedOutput
                ? 0
                : promotedWidth(p->spec.scheme.bits,
                                weight ? runner_.backend().alternatives.weight_bits
                                       : runner_.backend().alternatives.activation_bits);
        if (wider == 0) {
          f.skip = true;
        } else {
          (weight ? f.weight_bits : f.activation_bits) = wider;
        }
      }
      ranked.emplace_back(scores.worst(), f);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<UnitFix> fixes;
    for (auto& [score, fix] : ranked)
      fixes.push_back(fix);
    return fixes;
  }

  PtqResult trial(const std::string& change, const passes::QuantConfig& config) {
    PtqResult result;
    TuningTrial t = runner_.run(change, config, o_.max_trials, &result);
    if (r_.metric.empty()) {
      r_.metric = runner_.metric();
      r_.float_metric = runner_.floatMetric();
      require(r_.metric != "top1" || o_.target_drop.has_value(),
              "the metric is top-1: give the largest drop in points with --target-drop");
      require(r_.metric != "script" || o_.target_drop.has_value(),
              "the metric is --metric-script's: give the largest drop in its units with "
              "--target-drop");
      require(r_.metric != "sqnr" || o_.target_sqnr.has_value(),
              "the metric is the outputs' SQNR (the evaluation data has no labels): give the "
              "smallest SQNR in dB with --target-sqnr");
    }
    t.met = t.drop ? *t.drop <= r_.target : t.metric >= r_.target;
    r_.trials.push_back(t);
    return result;
  }

  AutotuneResult finish() {
    // The trial meeting the target with the fewest changed units (then the fewest weight bits),
    // else the best metric.
    size_t best = 0;
    auto changed = [](const TuningTrial& t) { return t.float_units + t.wide_units; };
    for (size_t i = 1; i < r_.trials.size(); ++i) {
      const TuningTrial& t = r_.trials[i];
      const TuningTrial& b = r_.trials[best];
      const bool better =
          t.met != b.met ? t.met
          : t.met        ? changed(t) < changed(b) ||
                        (changed(t) == changed(b) &&
                         (t.avg_weight_bits < b.avg_weight_bits ||
                          (t.avg_weight_bits == b.avg_weight_bits && t.metric > b.metric)))
                  : t.metric > b.metric;
      if (better) best = i;
    }
    r_.best = best;
    r_.met = r_.trials[best].met;
    if (r_.met) r_.note.clear();
    r_.seconds = runner_.secondsSinceStart();
    return r_;
  }

  // The flags' own checks, before the runner reads any data.
  static const PtqOptions& checked(const AutotuneOptions& o) {
    require(!o.ptq.eval.empty(),
            "--target-drop and --target-sqnr measure on evaluation data: pass --eval");
    require(o.max_trials >= 1, "--max-trials must be at least 1");
    require(o.time_budget >= 0, "--time-budget must not be negative");
    require(o.ranking == "isolated" || o.ranking == "fisher",
            "--tune-ranking must be isolated or fisher, not '" + o.ranking + "'");
    require(o.target_drop.has_value() != o.target_sqnr.has_value(),
            "give one target: --target-drop (top-1 points) or --target-sqnr (dB)");
    return o.ptq;
  }

  static constexpr const char* kTag = "autotune";
  const AutotuneOptions& o_;
  TrialRunner runner_;
  AutotuneResult r_;
};

}  // namespace

AutotuneResult autotune(const AutotuneOptions& options, const ProgressCallback& progress) {
  return Tuner(options, progress).run();
}

nlohmann::json autotuneJson(const AutotuneResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const TuningTrial& t : r.trials)
    trials.push_back(tuningTrialJson(t));
  // "target" is the metric's level to reach (top-1: float minus the drop allowed), so a chart
  // draws it on the metric's axis.
  const bool top1 = r.metric != "sqnr" && r.float_metric;  // a drop from the float figure
  return {{"metric", r.metric == "sqnr" ? "sqnr_db" : r.metric},
          {"target", top1 ? *r.float_metric - r.target : r.target},
          {"target_drop", top1 ? nlohmann::json(r.target) : nlohmann::json(nullptr)},
          {"float", r.float_metric ? nlohmann::json(*r.float_metric) : nullptr},
          {"met", r.met},
          {"best_trial",
           r.trials.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.trials[r.best].trial)},
          {"note", r.note},
          {"seconds", r.seconds},
          {"trials", trials}};
}

}  // namespace qforge::pipelines
