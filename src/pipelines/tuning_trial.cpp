#include "pipelines/tuning_trial.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "exec/op_traits.h"
#include "ir/onnx_import.h"
#include "pipelines/analyze_pipeline.h"
#include "pipelines/metric_script.h"

namespace qforge::pipelines {

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

TrialRunner::TrialRunner(const PtqOptions& ptq, const std::string& metric, std::string stage,
                         std::string override_tag, const ProgressCallback& progress)
    : ptq_(ptq),
      requested_metric_(metric),
      stage_(std::move(stage)),
      override_tag_(std::move(override_tag)),
      progress_(progress),
      start_(Clock::now()) {
  require(!ptq.eval.empty(), "tuning measures on evaluation data: pass --eval");
  require(metric == "top1" || metric == "sqnr" || metric == "auto",
          "--tune-metric must be top1, sqnr or auto, not '" + metric + "'");
  if (!ptq.metric_script.empty()) {
    require(metric == "auto", "--metric-script is the metric: leave out --tune-metric " + metric);
    checkMetricScript(ptq.metric_script);
    requested_metric_ = "script";
  }
  if (ptq.quant_config) {
    start_config_ = *ptq.quant_config;
  } else if (!ptq.config.empty()) {
    start_config_ = passes::loadQuantConfig(ptq.config);
  }
  backend_ = backends::loadBackend(ptq.backend);
  const Graph float_graph =
      ptq.graph != nullptr ? copyGraph(*ptq.graph) : importOnnxFile(ptq.model_path);
  batches_ = analysisBatches(ptq.eval, float_graph, ptq.eval_batch,
                             ptq.eval_limit < 0 ? 0 : ptq.eval_limit, &described_);
  for (const algos::AnalysisBatch& b : batches_)
    labelled_ = labelled_ && b.labels.defined();
}

std::vector<algos::AnalysisBatch> TrialRunner::firstBatches(int64_t samples) const {
  std::vector<algos::AnalysisBatch> some;
  int64_t taken = 0;
  for (const algos::AnalysisBatch& b : batches_) {
    if (taken >= samples) break;
    some.push_back(b);
    taken += b.feeds.begin()->second.dim() > 0 ? b.feeds.begin()->second.size(0) : 1;
  }
  return some;
}

int TrialRunner::startWeightBits() const {
  return start_config_.weight.is_object()
             ? start_config_.weight.value("bits", backend_.weight.scheme.bits)
             : backend_.weight.scheme.bits;
}

TuningTrial TrialRunner::run(const std::string& change, const passes::QuantConfig& config,
                             int64_t total, PtqResult* result_out) {
  const auto trial_start = Clock::now();
  PtqOptions p = ptq_;
  p.eval = DataSource();
  p.config.clear();
  p.quant_config = config;
  PtqResult result = quantizeModel(p);
  // The float outputs are the same for every config: measured once, with the first trial.
  algos::SensitivityOptions so;
  so.isolated = so.leave_one_out = so.fisher = false;
  so.references = references_.empty() ? nullptr : &references_;
  so.keep_references = references_.empty();
  so.keep_outputs = requested_metric_ == "script";
  algos::SensitivityResult s = algos::analyzeSensitivity(*result.model, batches_, so);
  if (references_.empty()) references_ = std::move(s.references);

  if (requested_metric_ == "script") {
    std::vector<at::Tensor> labels;
    for (const algos::AnalysisBatch& b : batches_)
      labels.push_back(b.labels);
    if (metric_.empty()) {
      metric_ = "script";
      float_metric_ = runMetricScript(ptq_.metric_script, references_, s.outputs, labels, "float");
    }
    script_value_ =
        runMetricScript(ptq_.metric_script, s.quantized_outputs, s.outputs, labels, "quantized");
  }
  if (metric_.empty()) {
    const bool top1 = s.float_top1.has_value();
    metric_ = requested_metric_ == "auto" ? (top1 ? "top1" : "sqnr") : requested_metric_;
    require(metric_ != "top1" || top1,
            "the top-1 metric needs labelled evaluation data and a model whose first output "
            "holds class scores; measure the outputs' SQNR instead");
    if (metric_ == "top1") float_metric_ = s.top1Percent(false);
  }

  TuningTrial t;
  t.trial = ++trials_run_;
  t.change = change;
  if (metric_ == "top1" || metric_ == "script") {
    t.metric = metric_ == "top1" ? *s.top1Percent(true) : script_value_;
    t.drop = *float_metric_ - t.metric;
  } else {
    t.metric = s.quantized.sqnrDb();
  }
  for (const passes::UnitSummary& u : result.model->units())
    t.float_units += u.skipped ? 1 : 0;
  for (const passes::NodeOverride& o : config.overrides)
    t.wide_units += !o.skip && o.where.rfind(override_tag_, 0) == 0 ? 1 : 0;
  const std::map<int, int64_t> widths = weightElementsByWidth(*result.model);
  int64_t elements = 0;
  double bits = 0;
  for (const auto& [width, count] : widths) {
    elements += count;
    bits += static_cast<double>(width) * static_cast<double>(count);
  }
  const int base = startWeightBits();
  t.avg_weight_bits = elements > 0 ? bits / static_cast<double>(elements) : 0;
  t.base_width_share = elements > 0 && widths.count(base)
                           ? static_cast<double>(widths.at(base)) / static_cast<double>(elements)
                           : 0;
  t.weight_bytes = static_cast<int64_t>(std::ceil(bits / 8));
  t.config = quantConfigJson(config);
  t.seconds = secondsSince(trial_start);
  if (progress_) {
    ProgressEvent e;
    e.stage = stage_;
    e.unit = "trial";
    e.done = t.trial;
    e.total = total;
    e.seconds = secondsSince(start_);
    e.note = change.substr(0, 60);
    progress_(e);
  }
  if (result_out != nullptr) *result_out = std::move(result);
  return t;
}

nlohmann::json tuningTrialJson(const TuningTrial& t) {
  return {{"trial", t.trial},
          {"change", t.change},
          {"metric", std::isfinite(t.metric) ? nlohmann::json(t.metric) : nullptr},
          {"drop", t.drop ? nlohmann::json(*t.drop) : nullptr},
          {"met", t.met},
          {"float_units", t.float_units},
          {"wide_units", t.wide_units},
          {"avg_weight_bits", t.avg_weight_bits},
          {"base_width_share", t.base_width_share},
          {"weight_bytes", t.weight_bytes},
          {"seconds", t.seconds},
          {"config", t.config}};
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

}  // namespace qforge::pipelines
