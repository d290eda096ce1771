#include "pipelines/autotune.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "algos/model_feeds.h"
#include "algos/sensitivity.h"
#include "backends/backend_config.h"
#include "core/error.h"
#include "exec/op_traits.h"
#include "ir/onnx_import.h"
#include "pipelines/analyze_pipeline.h"

namespace qforge::pipelines {

namespace {

// What a trial changes about one unit.
struct UnitFix {
  std::string unit;
  int weight_bits = 0;      // 0: unchanged
  int activation_bits = 0;  // 0: unchanged
  bool skip = false;
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

// The weight elements of a prepared model by width (float units' weights at 32 bits).
std::map<int, int64_t> weightElementsByWidth(const passes::PreparedModel& model) {
  std::map<int, int64_t> by_width;
  const Graph& graph = model.graph();
  for (const passes::QuantPoint& p : model.points()) {
    if (p.kind != passes::PointKind::Weight) continue;
    const Value* v = graph.findValue(p.value);
    if (v != nullptr && v->isInitializer())
      by_width[p.spec.scheme.bits] += v->initializer().numel();
  }
  for (const passes::UnitSummary& u : model.units()) {
    if (!u.skipped) continue;
    const Node* anchor = graph.findNode(u.name);
    if (anchor == nullptr) continue;
    const OpInfo* info = opInfoFor(graph, *anchor);
    for (size_t slot = 0; slot < anchor->inputs().size(); ++slot) {
      const Value* in = anchor->inputs()[slot];
      if (in != nullptr && in->isInitializer() && isWeightInput(info, slot))
        by_width[32] += in->initializer().numel();
    }
  }
  return by_width;
}

class Tuner {
 public:
  Tuner(const AutotuneOptions& o, const ProgressCallback& progress)
      : o_(o), progress_(progress), start_(Clock::now()) {
    require(!o.ptq.eval.empty(),
            "--target-drop and --target-sqnr measure on evaluation data: pass --eval");
    require(o.max_trials >= 1, "--max-trials must be at least 1");
    require(o.time_budget >= 0, "--time-budget must not be negative");
    require(o.ranking == "isolated" || o.ranking == "fisher",
            "--tune-ranking must be isolated or fisher, not '" + o.ranking + "'");
    require(o.target_drop.has_value() != o.target_sqnr.has_value(),
            "give one target: --target-drop (top-1 points) or --target-sqnr (dB)");
    if (o.ptq.quant_config) {
      start_config_ = *o.ptq.quant_config;
    } else if (!o.ptq.config.empty()) {
      start_config_ = passes::loadQuantConfig(o.ptq.config);
    }
    backend_ = backends::loadBackend(o.ptq.backend);
    const Graph float_graph =
        o.ptq.graph != nullptr ? copyGraph(*o.ptq.graph) : importOnnxFile(o.ptq.model_path);
    std::string described;
    batches_ = analysisBatches(o.ptq.eval, float_graph, o.ptq.eval_batch,
                               o.ptq.eval_limit < 0 ? 0 : o.ptq.eval_limit, &described);
    bool labelled = true;
    for (const algos::AnalysisBatch& b : batches_)
      labelled = labelled && b.labels.defined();
    require(labelled || (o.metric != "top1" && !o.target_drop),
            "top-1 (--target-drop, --tune-metric top1) needs labelled evaluation data; " +
                described + " has none: use --target-sqnr");
  }

  AutotuneResult run() {
    r_.target = o_.target_drop ? *o_.target_drop : *o_.target_sqnr;
    passes::QuantConfig best_config = start_config_;
    PtqResult best = trial("baseline", best_config);
    if (met()) return finish();

    // Observers first: they cost nothing on the device.
    for (const char* kind : {"activation", "weight"}) {
      if (budgetSpent()) return finish();
      const backends::QuantSpec& spec =
          std::string(kind) == "weight" ? backend_.weight : backend_.activation;
      const nlohmann::json& patch =
          std::string(kind) == "weight" ? best_config.weight : best_config.activation;
      if (spec.observer == "Mse" || (patch.is_object() && patch.value("observer", "") == "Mse"))
        continue;
      passes::QuantConfig candidate = best_config;
      (std::string(kind) == "weight" ? candidate.weight : candidate.activation)["observer"] = "Mse";
      const double before = r_.trials.back().metric;
      const size_t index = r_.trials.size();
      PtqResult tried = trial(std::string(kind) + " observer Mse", candidate);
      if (r_.trials[index].metric > before) {
        best_config = candidate;
        best = std::move(tried);
      }
      if (met()) return finish();
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
    return finish();
  }

 private:
  bool met() const { return r_.trials.back().met; }

  bool budgetSpent() {
    if (static_cast<int64_t>(r_.trials.size()) >= o_.max_trials) {
      if (r_.note.empty()) r_.note = "--max-trials reached";
      return true;
    }
    if (o_.time_budget > 0 && secondsSince(start_) >= o_.time_budget) {
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
    std::vector<algos::AnalysisBatch> some;
    int64_t taken = 0;
    for (const algos::AnalysisBatch& b : batches_) {
      if (taken >= o_.sensitivity_samples) break;
      some.push_back(b);
      taken += b.feeds.begin()->second.dim() > 0 ? b.feeds.begin()->second.size(0) : 1;
    }
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
      for (const bool weight : {true, false}) {
        const passes::QuantPoint* p = weight ? scores.weight_point : scores.activation_point;
        if (p == nullptr || (weight ? scores.weight : scores.activation) < scores.worst() / 2)
          continue;
        const int wider = p->kind == passes::PointKind::FixedOutput
                              ? 0
                              : promotedWidth(p->spec.scheme.bits,
                                              weight ? backend_.alternatives.weight_bits
                                                     : backend_.alternatives.activation_bits);
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
    const auto trial_start = Clock::now();
    PtqOptions p = o_.ptq;
    p.eval = DataSource();
    p.config.clear();
    p.quant_config = config;
    PtqResult result = quantizeModel(p);
    algos::SensitivityOptions so;
    so.isolated = so.leave_one_out = so.fisher = false;
    const algos::SensitivityResult s = algos::analyzeSensitivity(*result.model, batches_, so);

    AutotuneTrial t;
    t.trial = static_cast<int64_t>(r_.trials.size()) + 1;
    t.change = change;
    if (r_.metric.empty()) resolveMetric(s);
    if (r_.metric == "top1") {
      t.metric = *s.top1Percent(true);
      t.drop = *r_.float_metric - t.metric;
      t.met = *t.drop <= r_.target;
    } else {
      t.metric = s.quantized.sqnrDb();
      t.met = t.metric >= r_.target;
    }
    for (const passes::UnitSummary& u : result.model->units())
      t.float_units += u.skipped ? 1 : 0;
    for (const passes::NodeOverride& o : config.overrides)
      t.wide_units += !o.skip && o.where.rfind("autotune", 0) == 0 ? 1 : 0;
    const std::map<int, int64_t> widths = weightElementsByWidth(*result.model);
    int64_t elements = 0;
    double bits = 0;
    for (const auto& [width, count] : widths) {
      elements += count;
      bits += static_cast<double>(width) * static_cast<double>(count);
    }
    const int base = start_config_.weight.is_object()
                         ? start_config_.weight.value("bits", backend_.weight.scheme.bits)
                         : backend_.weight.scheme.bits;
    t.avg_weight_bits = elements > 0 ? bits / static_cast<double>(elements) : 0;
    t.base_width_share = elements > 0 && widths.count(base)
                             ? static_cast<double>(widths.at(base)) / static_cast<double>(elements)
                             : 0;
    t.config = quantConfigJson(config);
    t.seconds = secondsSince(trial_start);
    r_.trials.push_back(t);
    if (progress_) {
      ProgressEvent e;
      e.stage = "autotune";
      e.unit = "trial";
      e.done = t.trial;
      e.total = o_.max_trials;
      e.seconds = secondsSince(start_);
      e.note = change.substr(0, 60);
      progress_(e);
    }
    return result;
  }

  void resolveMetric(const algos::SensitivityResult& s) {
    const bool top1 = s.float_top1.has_value();
    r_.metric = o_.metric == "auto" ? (top1 ? "top1" : "sqnr") : o_.metric;
    require(r_.metric == "top1" || r_.metric == "sqnr",
            "--tune-metric must be top1, sqnr or auto, not '" + o_.metric + "'");
    if (r_.metric == "top1") {
      require(top1,
              "--tune-metric top1 needs labelled evaluation data and a model whose first "
              "output holds class scores; use --target-sqnr");
      require(o_.target_drop.has_value(),
              "the metric is top-1: give the largest drop in points with --target-drop");
      r_.float_metric = s.top1Percent(false);
    } else {
      require(o_.target_sqnr.has_value(),
              "the metric is the outputs' SQNR (the evaluation data has no labels): give the "
              "smallest SQNR in dB with --target-sqnr");
    }
  }

  AutotuneResult finish() {
    // The first trial meeting the target with the fewest changed units, else the best metric.
    size_t best = 0;
    auto changed = [](const AutotuneTrial& t) { return t.float_units + t.wide_units; };
    for (size_t i = 1; i < r_.trials.size(); ++i) {
      const AutotuneTrial& t = r_.trials[i];
      const AutotuneTrial& b = r_.trials[best];
      const bool better =
          t.met != b.met ? t.met
          : t.met ? changed(t) < changed(b) || (changed(t) == changed(b) && t.metric > b.metric)
                  : t.metric > b.metric;
      if (better) best = i;
    }
    r_.best = best;
    r_.met = r_.trials[best].met;
    if (r_.met) r_.note.clear();
    r_.seconds = secondsSince(start_);
    return r_;
  }

  const AutotuneOptions& o_;
  ProgressCallback progress_;
  Clock::time_point start_;
  passes::QuantConfig start_config_;
  backends::BackendConfig backend_;
  std::vector<algos::AnalysisBatch> batches_;
  AutotuneResult r_;
};

}  // namespace

AutotuneResult autotune(const AutotuneOptions& options, const ProgressCallback& progress) {
  return Tuner(options, progress).run();
}

nlohmann::json quantConfigJson(const passes::QuantConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  if (!config.weight.is_null() && !config.weight.empty()) j["weight"] = config.weight;
  if (!config.activation.is_null() && !config.activation.empty())
    j["activation"] = config.activation;
  if (!config.extra_quantizable.empty()) j["extra_quantizable"] = config.extra_quantizable;
  nlohmann::json overrides = nlohmann::json::array();
  for (const passes::NodeOverride& o : config.overrides) {
    nlohmann::json e = nlohmann::json::object();
    if (!o.name.empty()) e["name"] = o.name;
    if (!o.name_regex.empty()) e["name_regex"] = o.name_regex;
    if (!o.op_type.empty()) e["op_type"] = o.op_type;
    if (o.skip) e["skip"] = true;
    if (!o.weight.is_null() && !o.weight.empty()) e["weight"] = o.weight;
    if (!o.activation.is_null() && !o.activation.empty()) e["activation"] = o.activation;
    overrides.push_back(e);
  }
  if (!overrides.empty()) j["overrides"] = overrides;
  return j;
}

nlohmann::json autotuneJson(const AutotuneResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const AutotuneTrial& t : r.trials) {
    trials.push_back({{"trial", t.trial},
                      {"change", t.change},
                      {"metric", std::isfinite(t.metric) ? nlohmann::json(t.metric) : nullptr},
                      {"drop", t.drop ? nlohmann::json(*t.drop) : nullptr},
                      {"met", t.met},
                      {"float_units", t.float_units},
                      {"wide_units", t.wide_units},
                      {"avg_weight_bits", t.avg_weight_bits},
                      {"base_width_share", t.base_width_share},
                      {"seconds", t.seconds},
                      {"config", t.config}});
  }
  // "target" is the metric's level to reach (top-1: float minus the drop allowed), so a chart
  // draws it on the metric's axis.
  const bool top1 = r.metric == "top1" && r.float_metric;
  return {{"metric", r.metric == "top1" ? "top1" : "sqnr_db"},
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
