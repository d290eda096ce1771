#include "pipelines/analyze_pipeline.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "algos/fix_suggestions.h"
#include "algos/model_feeds.h"
#include "algos/sensitivity.h"
#include "core/error.h"
#include "passes/prepared_io.h"
#include "pipelines/ptq_pipeline.h"

namespace qforge::pipelines {

namespace {

// dB and ratios that may be infinite (identical outputs) are written as null.
nlohmann::json finite(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json noiseJson(const algos::NoiseSums& n) {
  return {{"sqnr_db", finite(n.sqnrDb())}, {"cosine", n.cosine()}, {"noise", n.noise}};
}

nlohmann::json rangeJson(const algos::RangeSummary& r) {
  return {{"elements", r.elements},
          {"min", r.min},
          {"max", r.max},
          {"p0_1", r.p0_1},
          {"p99_9", r.p99_9},
          {"outlier_ratio", finite(r.outlier_ratio)},
          {"clipped_fraction", r.clipped_fraction ? nlohmann::json(*r.clipped_fraction) : nullptr},
          {"channel_spread", r.channel_spread ? finite(*r.channel_spread) : nullptr},
          {"histogram", {{"low", r.min}, {"high", r.max}, {"counts", r.histogram}}},
          {"sampled", r.sampled}};
}

std::string observerOf(const passes::QuantPoint& p) {
  switch (p.kind) {
    case passes::PointKind::FixedOutput:
      return "fixed";
    case passes::PointKind::Bias:
      return p.bias_input_quantizer.empty() ? p.spec.observer : "derived";
    default:
      return p.spec.observer;
  }
}

// What ranks the quantizers, most harmful first: what turning each off would win when measured,
// else the noise each brings alone, else its predicted noise.
std::string rankingBasis(const algos::SensitivityOptions& o) {
  return o.leave_one_out ? "leave_one_out" : o.isolated ? "isolated" : "fisher";
}

std::optional<double> rankingScore(const std::string& basis, const algos::NoiseSums& all_on,
                                   const algos::QuantizerSensitivity& s) {
  if (basis == "leave_one_out" && s.leave_one_out) {
    if (s.leave_one_out->noise == 0) return std::numeric_limits<double>::max();
    return 10 * std::log10(std::max(all_on.noise, 1e-300) / s.leave_one_out->noise);
  }
  if (basis == "isolated" && s.isolated) return s.isolated->noise;
  if (basis == "fisher" && s.fisher) return *s.fisher;
  if (basis == "fisher_gain" && s.fisher_gain) return *s.fisher_gain;
  return std::nullopt;
}

// Spearman's rho of two figures over the quantizers that have both.
nlohmann::json agreement(const std::vector<algos::QuantizerSensitivity>& all,
                         const algos::NoiseSums& all_on, const std::string& a,
                         const std::string& b) {
  std::vector<double> xs, ys;
  for (const auto& s : all) {
    const auto x = rankingScore(a, all_on, s), y = rankingScore(b, all_on, s);
    if (!x || !y) continue;
    xs.push_back(*x);
    ys.push_back(*y);
  }
  const std::optional<double> rho = algos::spearman(xs, ys);
  return rho ? nlohmann::json(*rho) : nlohmann::json(nullptr);
}

struct LoadedModel {
  std::unique_ptr<passes::PreparedModel> model;
  nlohmann::json calibration = nullptr;
};

LoadedModel loadOrCalibrate(const AnalyzeOptions& o, const ProgressCallback& progress) {
  LoadedModel loaded;
  if (o.graph == nullptr && std::filesystem::is_directory(o.model_path) &&
      passes::isPreparedModelDir(o.model_path)) {
    require(o.backend.empty(),
            "--backend: a prepared model directory keeps the backend it was prepared for; "
            "leave --backend out");
    require(o.config.empty(),
            "--config: a prepared model directory is analysed as it was quantized; pass the "
            "ONNX model with --backend and --config to analyse another config");
    loaded.model = passes::loadPreparedModel(o.model_path);
    return loaded;
  }
  require(!o.backend.empty(),
          "--backend is needed to analyse an ONNX model (or pass the directory `qforge "
          "quantize --out` wrote)");
  PtqOptions p;
  p.model_path = o.model_path;
  p.graph = o.graph;
  p.backend = o.backend;
  p.config = o.config;
  p.calib = o.calib;
  p.calib_batches = o.calib_batches;
  p.calib_batch = o.calib_batch;
  p.calib_shuffle_seed = o.calib_shuffle_seed;
  PtqResult ptq = quantizeModel(p, progress);
  loaded.model = std::move(ptq.model);
  loaded.calibration = {{"data", ptq.report.calibration.data},
                        {"samples", ptq.report.calibration.samples}};
  if (const auto seed = ptq.report.calibration.shuffle_seed)
    loaded.calibration["shuffle_seed"] = *seed;
  return loaded;
}

}  // namespace

std::vector<algos::AnalysisBatch> analysisBatches(const DataSource& source, const Graph& graph,
                                                  int64_t batch, int64_t limit,
                                                  std::string* described) {
  auto dataset = openSource(source, graph);
  if (described != nullptr) *described = dataset->describe();
  const int64_t fixed = algos::fixedBatch(graph);
  data::BatchLoader loader(dataset, loaderOptionsFor(graph, fixed > 0 ? fixed : batch, limit));
  std::vector<algos::AnalysisBatch> batches;
  while (auto b = loader.next())
    batches.push_back({algos::feedsOf(*b, graph), b->labels});
  require(!batches.empty(), "the data " + dataset->describe() + " yielded no batch");
  return batches;
}

AnalyzeResult runAnalysis(const AnalyzeOptions& o, const ProgressCallback& progress) {
  const auto start = Clock::now();
  require(o.samples > 0, "--samples must be at least 1");
  require(o.batch > 0, "--batch must be at least 1");
  require(o.top >= 0, "--top must not be negative");
  require(o.fisher_probes >= 1, "--fisher-probes must be at least 1");
  require(o.isolated || o.leave_one_out || o.fisher,
          "nothing to measure: --no-isolated, --no-leave-one-out and --no-fisher leave no "
          "sensitivity to rank by");

  LoadedModel loaded = loadOrCalibrate(o, progress);
  passes::PreparedModel& model = *loaded.model;
  std::string data_description;
  const std::vector<algos::AnalysisBatch> batches = analysisBatches(
      o.data.empty() ? o.calib : o.data, model.graph(), o.batch, o.samples, &data_description);

  algos::SensitivityOptions so;
  so.isolated = o.isolated;
  so.leave_one_out = o.leave_one_out;
  so.fisher = o.fisher;
  so.fisher_probes = o.fisher_probes;
  so.seed = o.seed;
  so.outputs = o.outputs;
  ProgressEvent event;
  event.stage = "analyze";
  event.unit = "run";
  const auto analysis_start = Clock::now();
  const algos::SensitivityResult s = algos::analyzeSensitivity(
      model, batches, so, [&](int64_t done, int64_t total, const std::string& what) {
        if (!progress) return;
        event.done = done;
        event.total = total;
        event.seconds = secondsSince(analysis_start);
        event.note = what.substr(0, 48);
        progress(event);
      });
  if (progress) {
    event.last = true;
    progress(event);
  }

  // Rank: most harmful first, ties in graph order.
  const std::string basis = rankingBasis(so);
  std::vector<std::pair<double, size_t>> scored;
  for (size_t i = 0; i < s.quantizers.size(); ++i) {
    if (const auto score = rankingScore(basis, s.quantized, s.quantizers[i]))
      scored.emplace_back(*score, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int64_t> rank_of(s.quantizers.size(), 0);
  nlohmann::json ranking = nlohmann::json::array();
  for (size_t r = 0; r < scored.size(); ++r) {
    rank_of[scored[r].second] = static_cast<int64_t>(r) + 1;
    ranking.push_back(s.quantizers[scored[r].second].quantizer);
  }

  std::map<std::string, std::string> unit_ops;
  for (const passes::UnitSummary& u : model.units())
    unit_ops[u.name] = u.ops;
  nlohmann::json quantizers = nlohmann::json::array();
  const std::vector<passes::QuantPoint>& points = model.points();
  for (size_t i = 0; i < s.quantizers.size(); ++i) {
    const algos::QuantizerSensitivity& q = s.quantizers[i];
    const auto point = std::find_if(points.begin(), points.end(),
                                    [&](const auto& p) { return p.quantizer == q.quantizer; });
    require(point != points.end(), "quantizer '" + q.quantizer + "' has no quantization point");
    const std::string ops = unit_ops.count(point->unit) ? unit_ops[point->unit] : "";
    nlohmann::json entry = {
        {"name", q.quantizer},
        {"kind", passes::toString(point->kind)},
        {"value", point->value},
        {"unit", point->unit},
        {"op", ops},
        {"bits", point->spec.scheme.bits},
        {"signed", !point->spec.scheme.is_unsigned},
        {"granularity", point->spec.scheme.perChannel() ? "per-channel" : "per-tensor"},
        {"observer", observerOf(*point)},
        {"isolated", q.isolated ? noiseJson(*q.isolated) : nlohmann::json(nullptr)},
        {"leave_one_out", nullptr},
        {"fisher", q.fisher ? nlohmann::json(*q.fisher) : nlohmann::json(nullptr)},
        {"fisher_gain", q.fisher_gain ? nlohmann::json(*q.fisher_gain) : nlohmann::json(nullptr)},
        {"local_sqnr_db", q.local ? finite(q.local->sqnrDb()) : nlohmann::json(nullptr)},
        {"accumulated_sqnr_db",
         q.accumulated ? finite(q.accumulated->sqnrDb()) : nlohmann::json(nullptr)},
        {"range", q.range ? rangeJson(*q.range) : nlohmann::json(nullptr)},
        {"rank", rank_of[i] > 0 ? nlohmann::json(rank_of[i]) : nlohmann::json(nullptr)},
        {"suggestions", nlohmann::json::array()}};
    if (q.leave_one_out) {
      entry["leave_one_out"] = noiseJson(*q.leave_one_out);
      entry["leave_one_out"]["gain_db"] = finite(q.leave_one_out->sqnrDb() - s.quantized.sqnrDb());
    }
    if (rank_of[i] > 0 && rank_of[i] <= o.top) {
      for (const algos::FixSuggestion& f : algos::suggestFixes(*point, q, ops, model.backend())) {
        nlohmann::json fix = {{"fix", f.fix}, {"why", f.why}, {"override", f.override_entry}};
        if (!f.flag.empty()) fix["flag"] = f.flag;
        entry["suggestions"].push_back(fix);
      }
    }
    quantizers.push_back(entry);
  }

  nlohmann::json report = {
      {"command", "analyze"},
      {"model", o.model_path},
      {"backend", model.backend().name},
      {"data", data_description},
      {"samples", s.samples},
      {"calibration", loaded.calibration},
      {"outputs", s.outputs},
      {"quantized", noiseJson(s.quantized)},
      {"ranking_by", basis},
      {"ranking", ranking},
      {"rankings_agreement",
       {{"isolated_vs_leave_one_out",
         o.isolated && o.leave_one_out
             ? agreement(s.quantizers, s.quantized, "isolated", "leave_one_out")
             : nlohmann::json(nullptr)},
        {"fisher_vs_leave_one_out",
         o.fisher && o.leave_one_out
             ? agreement(s.quantizers, s.quantized, "fisher", "leave_one_out")
             : nlohmann::json(nullptr)},
        {"fisher_gain_vs_leave_one_out",
         o.fisher && o.leave_one_out
             ? agreement(s.quantizers, s.quantized, "fisher_gain", "leave_one_out")
             : nlohmann::json(nullptr)},
        {"fisher_vs_isolated", o.fisher && o.isolated
                                   ? agreement(s.quantizers, s.quantized, "fisher", "isolated")
                                   : nlohmann::json(nullptr)}}},
      {"quantizers", quantizers},
      {"runs", s.runs}};
  if (s.float_top1) {
    report["task"] = {
        {"metric", "top1"}, {"float", *s.top1Percent(false)}, {"quantized", *s.top1Percent(true)}};
  }
  report["seconds"] = secondsSince(start);
  return {std::move(report), std::move(loaded.model)};
}

nlohmann::json suggestedConfig(const nlohmann::json& report) {
  nlohmann::json overrides = nlohmann::json::array();
  std::map<std::string, const nlohmann::json*> by_name;
  for (const nlohmann::json& q : report.at("quantizers"))
    by_name[q.at("name").get<std::string>()] = &q;
  for (const nlohmann::json& name : report.at("ranking")) {
    for (const nlohmann::json& fix : by_name.at(name.get<std::string>())->at("suggestions")) {
      const nlohmann::json& entry = fix.at("override");
      if (entry.is_null()) continue;
      if (std::find(overrides.begin(), overrides.end(), entry) == overrides.end())
        overrides.push_back(entry);
      break;
    }
  }
  return {{"overrides", overrides}};
}

}  // namespace qforge::pipelines
