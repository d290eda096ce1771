#include "pipelines/eval_pipeline.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "algos/model_feeds.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/npy.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "passes/prepared_io.h"
#include "verify/output_metrics.h"

namespace qforge::pipelines {

namespace {

// A model to run: an ONNX file, or a prepared model directory (or its prepared.onnx), run as
// its simulated quantization.
class EvalModel {
 public:
  explicit EvalModel(const std::string& path) {
    const std::filesystem::path p(path);
    std::string dir = path;
    if (p.filename() == "prepared.onnx" && passes::isPreparedModelDir(p.parent_path().string())) {
      dir = p.parent_path().string();
    }
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) {
      prepared_ = passes::loadPreparedModel(dir);
      prepared_->setMode(quant::FakeQuantMode::Quantization);
      return;
    }
    graph_ = std::make_unique<Graph>(importOnnxFile(path));
    executor_ = std::make_unique<Executor>(*graph_);
  }
  const Graph& graph() const { return prepared_ ? prepared_->graph() : *graph_; }
  Executor& executor() { return prepared_ ? prepared_->executor() : *executor_; }
  std::vector<std::string> outputs() const {
    std::vector<std::string> names;
    for (const Value* v : graph().outputs())
      names.push_back(v->name());
    return names;
  }

 private:
  std::unique_ptr<passes::PreparedModel> prepared_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Executor> executor_;
};

// The reference model, run on the same feeds, and each output compared with it.
struct ReferenceRun {
  std::unique_ptr<EvalModel> model;
  std::vector<std::string> outputs;  // the reference's, position by position with ours
  std::vector<verify::OutputAccumulator> accumulators;
};

std::unique_ptr<ReferenceRun> openReference(const EvalOptions& o, const EvalModel& model) {
  if (o.reference.empty()) return nullptr;
  auto r = std::make_unique<ReferenceRun>();
  r->model = std::make_unique<EvalModel>(o.reference);
  r->outputs = r->model->outputs();
  const std::vector<std::string> ours = model.outputs();
  require(r->outputs.size() >= ours.size(),
          "--reference '" + o.reference + "' has " + std::to_string(r->outputs.size()) +
              " outputs, the model " + std::to_string(ours.size()) +
              "; outputs are compared position by position");
  r->outputs.resize(ours.size());
  for (const std::string& name : ours) {
    r->accumulators.emplace_back(
        name, o.iou_threshold >= 0 ? std::optional<double>(o.iou_threshold) : std::nullopt);
  }
  return r;
}

std::vector<ReferenceComparison> finishReference(const ReferenceRun& r) {
  std::vector<ReferenceComparison> out;
  for (const verify::OutputAccumulator& a : r.accumulators) {
    const verify::OutputComparison c =
        a.finish(std::max(a.maxAbsReference(), 1e-12) / 127.0, "int8 step of the reference range");
    ReferenceComparison rc;
    rc.output = c.output;
    rc.sqnr_db = c.sqnr_db;
    rc.cosine = c.cosine;
    rc.max_steps = c.max_steps;
    rc.p99_steps = c.p99_steps;
    rc.step = c.step;
    if (c.classifier) rc.top1_agreement = static_cast<double>(c.top1_agree) / c.samples;
    rc.iou = c.iou;
    out.push_back(rc);
  }
  return out;
}

// The dataset the options name for every input of `graph`, and the batches to read it in.
std::shared_ptr<data::Dataset> openEvalData(const EvalOptions& o, const Graph& graph,
                                            data::LoaderOptions& loader_options) {
  const std::vector<data::InputSpec> inputs = algos::modelInputs(graph);
  std::shared_ptr<data::Dataset> dataset = o.data.dataset;
  if (!dataset) {
    require(!o.data.spec.empty(), "--data names no data source");
    data::DataOptions data_options;
    data_options.labels_path = o.labels;
    data_options.inputs = inputs;
    data::ImageOptions& image = data_options.image;
    image.mean = o.mean;
    image.std = o.std;
    image.resize = o.resize;
    image.crop_height = o.crop_height;
    image.crop_width = o.crop_width;
    image.bgr = o.bgr;
    image.nhwc = o.nhwc;
    image.channels = o.channels;
    // Images take the channels of the first image-like input (per-input sources their own).
    for (const data::InputSpec& in : inputs) {
      if (image.channels != 0 || in.shape.size() != 3 || !at::isFloatingType(in.dtype)) continue;
      image.channels = in.shape[o.nhwc ? 2 : 0] > 0 ? in.shape[o.nhwc ? 2 : 0] : 0;
      break;
    }
    dataset = data::openDataset(o.data.spec, data_options);
  }
  require(o.batch > 0, "--batch must be positive");
  loader_options.batch_size = o.batch;
  require(o.limit == -1 || o.limit > 0, "--limit must be a positive number of samples");
  loader_options.limit = o.limit < 0 ? 0 : o.limit;
  loader_options.shuffle_seed = o.shuffle_seed;
  loader_options.noise_sigma = o.noise;
  loader_options.noise_seed = o.noise_seed;
  loader_options.inputs = inputs;
  loader_options.batch_multiple = std::max<int64_t>(algos::fixedBatch(graph), 1);
  return dataset;
}

// Metric "auto" for the first batch: top-1 for class scores with labels, PSNR when the output
// has the shape of what it would be compared with, else nothing to score.
std::string autoMetric(const data::Batch& batch, const at::Tensor& output, double noise) {
  if (output.dim() == 2 && batch.labels.defined() && noise == 0) return "top1";
  const at::Tensor& target = batch.targets.defined() ? batch.targets : batch.inputs;
  return target.defined() && output.sizes() == target.sizes() ? "psnr" : "none";
}

}  // namespace

std::pair<int64_t, int64_t> parseCrop(const std::string& s) {
  if (s.empty()) return {0, 0};
  try {
    size_t used = 0;
    const int64_t h = std::stoll(s, &used);
    if (used == s.size()) return {h, h};
    require(s[used] == 'x' || s[used] == 'X', "");
    size_t used_w = 0;
    const int64_t w = std::stoll(s.substr(used + 1), &used_w);
    require(used + 1 + used_w == s.size(), "");
    return {h, w};
  } catch (const std::exception&) {
    throw Error("--crop '" + s + "' must be SIZE or HEIGHTxWIDTH, e.g. 224 or 32x24");
  }
}

EvalReport runEval(const EvalOptions& o, const ProgressCallback& progress) {
  require(o.metric == "auto" || o.metric == "top1" || o.metric == "psnr" || o.metric == "none",
          "--metric must be auto, top1, psnr or none, not '" + o.metric + "'");
  require(o.peak > 0, "--peak must be positive");
  EvalModel model(o.model_path);
  const Graph& graph = model.graph();
  data::LoaderOptions loader_options;
  auto dataset = openEvalData(o, graph, loader_options);
  data::BatchLoader loader(dataset, loader_options);

  EvalReport report;
  report.data = dataset->describe();
  Scores& scores = report.scores;
  scores.metric = o.metric;
  require(scores.metric != "top1" || dataset->hasLabels(),
          report.data + " has no labels; --metric top1 needs them (or use --metric psnr)");
  std::unique_ptr<ReferenceRun> reference = openReference(o, model);
  const std::vector<std::string> outputs = model.outputs();
  const int64_t fixed = algos::fixedBatch(graph);
  std::unique_ptr<data::NpyWriter> dump;
  int64_t rows_per_sample = 1;

  const auto start = Clock::now();
  while (auto batch = loader.next()) {
    const TensorMap feeds = algos::feedsOf(*batch, graph);
    const auto model_start = Clock::now();
    const TensorMap out = algos::runInBatches(model.executor(), feeds, outputs, fixed);
    report.model_seconds += secondsSince(model_start);
    const at::Tensor& output = out.at(outputs.front());
    if (scores.metric == "auto") scores.metric = autoMetric(*batch, output, o.noise);
    scoreBatch(*batch, output, o.peak, report.data, scores);
    if (reference) {
      const TensorMap ref =
          algos::runInBatches(reference->model->executor(), feeds, reference->outputs,
                              algos::fixedBatch(reference->model->graph()));
      for (size_t i = 0; i < outputs.size(); ++i) {
        reference->accumulators[i].add(out.at(outputs[i]), ref.at(reference->outputs[i]),
                                       static_cast<int64_t>(batch->indices.size()));
      }
    }
    if (!o.dump_outputs.empty()) {
      // Rows per sample: 1 with a batch axis; a model without one (one sample per run) gives its
      // output's rows for each sample, which must not depend on the data to fit one array.
      const at::Tensor rows = output.dim() == 0 ? output.reshape({1}) : output;
      const auto samples = static_cast<int64_t>(batch->indices.size());
      if (!dump) {
        rows_per_sample = rows.size(0) / samples;
        std::vector<int64_t> shape = rows.sizes().vec();
        shape[0] = loader.size() * rows_per_sample;
        dump = std::make_unique<data::NpyWriter>(o.dump_outputs, at::kFloat, shape);
      }
      require(rows.size(0) == rows_per_sample * samples,
              "--dump-outputs: output '" + outputs.front() + "' has " +
                  std::to_string(rows.size(0)) + " rows for " + std::to_string(samples) +
                  " sample(s), not " + std::to_string(rows_per_sample) +
                  " per sample as before: its first dim depends on the data, so its values do "
                  "not fit one array");
      dump->append(rows.to(at::kFloat));
    }
    if (progress)
      progress({"evaluate", scores.samples, loader.size(), "img", secondsSince(start), "", false});
  }
  report.seconds = secondsSince(start);
  if (progress)
    progress({"evaluate", scores.samples, loader.size(), "img", report.seconds, "", true});
  if (dump) dump->close();
  if (reference) report.reference = finishReference(*reference);
  report.threads = at::get_num_threads();
  return report;
}

nlohmann::json evalReportJson(const EvalOptions& o, const EvalReport& r) {
  const Scores& scores = r.scores;
  const int64_t n = scores.samples;
  nlohmann::json report;
  report["model"] = o.model_path;
  report["data"] = r.data;
  report["samples"] = n;
  report["batch"] = o.batch;
  report["metric"] = scores.metric;
  report["threads"] = r.threads;
  report["seconds"] = r.seconds;
  report["images_per_second"] = n / r.seconds;
  report["model_seconds"] = r.model_seconds;
  report["model_images_per_second"] = n / r.model_seconds;
  if (o.noise > 0) report["noise"] = {{"sigma", o.noise}, {"seed", o.noise_seed}};
  if (o.shuffle_seed) report["shuffle_seed"] = *o.shuffle_seed;
  if (!o.dump_outputs.empty()) report["outputs_file"] = o.dump_outputs;
  if (!o.reference.empty()) {
    nlohmann::json outputs = nlohmann::json::array();
    for (const ReferenceComparison& c : r.reference) {
      nlohmann::json j = {
          {"output", c.output},
          {"sqnr_db", std::isfinite(c.sqnr_db) ? nlohmann::json(c.sqnr_db) : nlohmann::json()},
          {"cosine", c.cosine},
          {"max_steps", c.max_steps},
          {"p99_steps", c.p99_steps},
          {"step", c.step}};
      if (c.top1_agreement) j["top1_agreement"] = *c.top1_agreement;
      if (c.iou) j["iou"] = *c.iou;
      outputs.push_back(j);
    }
    report["reference"] = {{"model", o.reference}, {"outputs", outputs}};
  }
  if (scores.metric == "top1") {
    report["top1"] = static_cast<double>(scores.top1) / n;
    report["top1_correct"] = scores.top1;
    if (scores.has_top5) {
      report["top5"] = static_cast<double>(scores.top5) / n;
      report["top5_correct"] = scores.top5;
    }
  } else if (scores.metric == "psnr") {
    report["psnr_db"] = scores.psnr_sum / n;
    report["mse"] = scores.mse_sum / n;
    report["peak"] = o.peak;
    if (scores.has_input_psnr) report["input_psnr_db"] = scores.input_psnr_sum / n;
  }
  return report;
}

}  // namespace qforge::pipelines
