// `qforge eval MODEL --data SOURCE`: run a model (an ONNX file, or a prepared model directory:
// simulated quantization) over a dataset and score it — top-1/top-5 for classifiers, PSNR/MSE
// for image-to-image models, nothing (--metric none: only --dump-outputs), and with --reference
// SQNR/cosine against another model's outputs — with throughput. The yardstick every later step
// (quantization, deployment) reports against.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "algos/calibrate.h"
#include "algos/model_feeds.h"
#include "cli/commands.h"
#include "cli/eval_support.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/npy.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "passes/prepared_io.h"
#include "verify/output_metrics.h"

namespace qforge::cli {

namespace {

struct EvalOptions {
  std::string model;
  std::string data = "fashion-mnist:test";
  int64_t limit = -1;  // -1: every sample
  int64_t batch = 100;
  std::string metric = "auto";
  std::optional<uint64_t> shuffle_seed;
  double noise = 0;
  uint64_t noise_seed = 0;
  double peak = 1.0;
  std::string labels;
  std::vector<double> mean{0.0};
  std::vector<double> std{1.0};
  int64_t resize = 0;
  std::string crop;
  int64_t channels = 0;
  bool bgr = false;
  bool nhwc = false;
  std::string dump_outputs;
  std::string reference;
  double iou_threshold = -1;  // < 0: no IoU
  bool json = false;
  bool quiet = false;
};

// "32" or "32x24" (height x width).
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
  bool prepared() const { return prepared_ != nullptr; }
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

// --reference: the other model, run on the same feeds, and each output compared with it.
struct ReferenceRun {
  std::unique_ptr<EvalModel> model;
  std::vector<std::string> outputs;  // the reference's, position by position with ours
  std::vector<verify::OutputAccumulator> accumulators;
};

nlohmann::json referenceJson(const ReferenceRun& r) {
  nlohmann::json j = nlohmann::json::array();
  for (const verify::OutputAccumulator& a : r.accumulators) {
    const verify::OutputComparison c =
        a.finish(std::max(a.maxAbsReference(), 1e-12) / 127.0, "int8 step of the reference range");
    nlohmann::json o = {
        {"output", c.output},
        {"sqnr_db", std::isfinite(c.sqnr_db) ? nlohmann::json(c.sqnr_db) : nlohmann::json(nullptr)},
        {"cosine", c.cosine},
        {"max_steps", c.max_steps},
        {"p99_steps", c.p99_steps},
        {"step", c.step}};
    if (c.classifier) o["top1_agreement"] = static_cast<double>(c.top1_agree) / c.samples;
    if (c.iou) o["iou"] = *c.iou;
    j.push_back(o);
  }
  return j;
}

std::string referenceText(const ReferenceRun& r, const std::string& path) {
  std::string out;
  char buf[256];
  for (const auto& o : referenceJson(r)) {
    std::snprintf(
        buf, sizeof(buf), "vs ref   output '%s': sqnr %s dB, cosine %.6f, p99 %.3g steps",
        o["output"].get<std::string>().c_str(),
        o["sqnr_db"].is_null() ? "inf" : std::to_string(o["sqnr_db"].get<double>()).c_str(),
        o["cosine"].get<double>(), o["p99_steps"].get<double>());
    out += buf;
    if (o.contains("iou")) out += ", iou " + std::to_string(o["iou"].get<double>());
    out += "  (" + path + ")\n";
  }
  return out;
}

// The machine-readable summary printed by --json.
nlohmann::json jsonReport(const EvalOptions& o, const std::string& data_description,
                          const Scores& scores, double seconds, double model_seconds,
                          const ReferenceRun* reference) {
  const int64_t n = scores.samples;
  nlohmann::json report;
  report["model"] = o.model;
  report["data"] = data_description;
  report["samples"] = n;
  report["batch"] = o.batch;
  report["metric"] = scores.metric;
  report["threads"] = at::get_num_threads();
  report["seconds"] = seconds;
  report["images_per_second"] = n / seconds;
  report["model_seconds"] = model_seconds;
  report["model_images_per_second"] = n / model_seconds;
  if (o.noise > 0) report["noise"] = {{"sigma", o.noise}, {"seed", o.noise_seed}};
  if (o.shuffle_seed) report["shuffle_seed"] = *o.shuffle_seed;
  if (!o.dump_outputs.empty()) report["outputs_file"] = o.dump_outputs;
  if (reference)
    report["reference"] = {{"model", o.reference}, {"outputs", referenceJson(*reference)}};
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

// The human-readable summary printed by default.
std::string textReport(const EvalOptions& o, const std::string& data_description,
                       const Scores& scores, double seconds, double model_seconds,
                       const ReferenceRun* reference) {
  const int64_t n = scores.samples;
  std::ostringstream out;
  out << "model    " << o.model << "\ndata     " << data_description << " (" << n
      << (n == 1 ? " sample" : " samples") << ", batch " << o.batch
      << (o.shuffle_seed ? ", shuffled with seed " + std::to_string(*o.shuffle_seed) : "")
      << (o.noise > 0 ? ", noise sigma " + nlohmann::json(o.noise).dump() : "") << ")\n";
  char buf[160];
  if (scores.metric == "top1") {
    out << "top-1    " << percent(scores.top1, n) << "\n";
    if (scores.has_top5) out << "top-5    " << percent(scores.top5, n) << "\n";
  } else if (scores.metric == "psnr") {
    std::snprintf(buf, sizeof(buf), "psnr     %.2f dB (mean over samples, peak %g)",
                  scores.psnr_sum / n, o.peak);
    out << buf;
    if (scores.has_input_psnr) {
      std::snprintf(buf, sizeof(buf), "; the noisy input: %.2f dB", scores.input_psnr_sum / n);
      out << buf;
    }
    std::snprintf(buf, sizeof(buf), "\nmse      %.6g\n", scores.mse_sum / n);
    out << buf;
  }
  if (reference) out << referenceText(*reference, o.reference);
  std::snprintf(buf, sizeof(buf),
                "speed    %.0f images/s (model alone %.0f images/s), %.2f s, %d thread%s\n",
                n / seconds, n / model_seconds, seconds, at::get_num_threads(),
                at::get_num_threads() == 1 ? "" : "s");
  out << buf;
  if (!o.dump_outputs.empty()) out << "outputs  " << o.dump_outputs << "\n";
  return out.str();
}

// The dataset and batches --data and the image options give, for every input of `graph`.
std::shared_ptr<data::Dataset> openEvalData(const EvalOptions& o, const Graph& graph,
                                            data::LoaderOptions& loader_options) {
  const std::vector<data::InputSpec> inputs = algos::modelInputs(graph);
  data::DataOptions data_options;
  data_options.labels_path = o.labels;
  data_options.inputs = inputs;
  data::ImageOptions& image = data_options.image;
  image.mean = o.mean;
  image.std = o.std;
  image.resize = o.resize;
  std::tie(image.crop_height, image.crop_width) = parseCrop(o.crop);
  image.bgr = o.bgr;
  image.nhwc = o.nhwc;
  image.channels = o.channels;
  // Images take the channels of the first image-like input (per-input sources their own).
  for (const data::InputSpec& in : inputs) {
    if (image.channels != 0 || in.shape.size() != 3 || !at::isFloatingType(in.dtype)) continue;
    image.channels = in.shape[o.nhwc ? 2 : 0] > 0 ? in.shape[o.nhwc ? 2 : 0] : 0;
    break;
  }
  auto dataset = data::openDataset(o.data, data_options);

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

// --metric auto for the first batch: top-1 for class scores with labels, PSNR when the output
// has the shape of what it would be compared with, else nothing to score.
std::string autoMetric(const data::Batch& batch, const at::Tensor& output, double noise) {
  if (output.dim() == 2 && batch.labels.defined() && noise == 0) return "top1";
  const at::Tensor& target = batch.targets.defined() ? batch.targets : batch.inputs;
  return target.defined() && output.sizes() == target.sizes() ? "psnr" : "none";
}

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

int runEval(const EvalOptions& o) {
  require(o.metric == "auto" || o.metric == "top1" || o.metric == "psnr" || o.metric == "none",
          "--metric must be auto, top1, psnr or none, not '" + o.metric + "'");
  require(o.peak > 0, "--peak must be positive");
  EvalModel model(o.model);
  const Graph& graph = model.graph();
  data::LoaderOptions loader_options;
  auto dataset = openEvalData(o, graph, loader_options);
  data::BatchLoader loader(dataset, loader_options);

  Scores scores;
  scores.metric = o.metric;
  require(scores.metric != "top1" || dataset->hasLabels(),
          dataset->describe() + " has no labels; --metric top1 needs them (or use --metric psnr)");
  std::unique_ptr<ReferenceRun> reference = openReference(o, model);
  const std::vector<std::string> outputs = model.outputs();
  const int64_t fixed = algos::fixedBatch(graph);
  std::unique_ptr<data::NpyWriter> dump;
  ProgressBar progress(loader.size(), !o.json && !o.quiet && ::isatty(STDERR_FILENO));

  const auto start = Clock::now();
  double model_seconds = 0;
  while (auto batch = loader.next()) {
    const TensorMap feeds = algos::feedsOf(*batch, graph);
    const auto model_start = Clock::now();
    const TensorMap out = algos::runInBatches(model.executor(), feeds, outputs, fixed);
    model_seconds += secondsSince(model_start);
    const at::Tensor& output = out.at(outputs.front());
    if (scores.metric == "auto") scores.metric = autoMetric(*batch, output, o.noise);
    scoreBatch(*batch, output, o.peak, dataset->describe(), scores);
    if (reference) {
      const TensorMap ref =
          algos::runInBatches(reference->model->executor(), feeds, reference->outputs,
                              algos::fixedBatch(reference->model->graph()));
      for (size_t i = 0; i < outputs.size(); ++i)
        reference->accumulators[i].add(out.at(outputs[i]), ref.at(reference->outputs[i]));
    }
    if (!o.dump_outputs.empty()) {
      if (!dump) {
        std::vector<int64_t> shape = output.sizes().vec();
        shape[0] = loader.size();
        dump = std::make_unique<data::NpyWriter>(o.dump_outputs, at::kFloat, shape);
      }
      dump->append(output.to(at::kFloat));
    }
    progress.update(scores.samples, secondsSince(start));
  }
  const double seconds = secondsSince(start);
  progress.clear();
  if (dump) dump->close();

  const std::string data_description = dataset->describe();
  if (o.json) {
    std::cout
        << jsonReport(o, data_description, scores, seconds, model_seconds, reference.get()).dump(2)
        << "\n";
    return 0;
  }
  std::cout << textReport(o, data_description, scores, seconds, model_seconds, reference.get());
  return 0;
}

std::vector<double> parseList(const std::string& s, const std::string& flag) {
  std::vector<double> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stod(item, &used));
      require(used == item.size(), "");
    } catch (const std::exception&) {
      throw Error(flag + " '" + s + "' must be comma-separated numbers");
    }
  }
  return out;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addEvalCommand(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto mean = std::make_shared<std::string>();
  auto std_dev = std::make_shared<std::string>();
  auto shuffle = std::make_shared<int64_t>(-1);
  CLI::App* sub = app.add_subcommand(
      "eval", "Evaluate a model on a dataset: top-1/top-5 or PSNR/MSE, and images/s");
  sub->add_option("model", o->model,
                  "ONNX model file, or a prepared model directory (quantize --out): its "
                  "simulated quantization")
      ->required();
  sub->add_option("--data", o->data,
                  "fashion-mnist:test|train, an IDX file, a class folder (folder:DIR) of images, "
                  ".npy or .npz samples, a stacked .npy (npy:FILE) or .npz keyed by input name "
                  "(npz:FILE), a list of sample paths (list:FILE), synthetic samples shaped like "
                  "the model inputs (random:normal|uniform[,seed=N][,count=N]...), or one source "
                  "per input: 'NAME=SPEC;NAME=const:VALUE'")
      ->capture_default_str();
  sub->add_option("--limit", o->limit, "Evaluate only the first N samples (after shuffling)");
  sub->add_option("--batch", o->batch, "Batch size")->capture_default_str();
  sub->add_option("--metric", o->metric,
                  "top1 (classifiers), psnr (image-to-image), none (only run; --dump-outputs), or "
                  "auto: top1 for [batch, classes] outputs on labelled data without --noise, "
                  "psnr when the output has the input's shape, else none")
      ->capture_default_str();
  sub->add_option("--shuffle", *shuffle,
                  "Shuffle the samples with this seed (with --limit: a random subset)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--noise", o->noise,
                  "Denoising: feed sample + SIGMA * N(0,1), score against the clean sample");
  sub->add_option("--noise-seed", o->noise_seed, "Seed of --noise")->capture_default_str();
  sub->add_option("--peak", o->peak, "Peak signal value of --metric psnr")->capture_default_str();
  sub->add_option("--labels", o->labels, "Labels of an IDX or stacked .npy source");
  sub->add_option("--mean", *mean,
                  "Per-channel mean subtracted from images scaled to [0,1] "
                  "(one value or one per channel)");
  sub->add_option("--std", *std_dev, "Per-channel standard deviation to divide by");
  sub->add_option("--resize", o->resize, "Resize images: shorter side to N pixels (bilinear)");
  sub->add_option("--crop", o->crop, "Center crop to SIZE or HEIGHTxWIDTH");
  sub->add_option("--channels", o->channels,
                  "Channels images must have (default: the model input's)");
  sub->add_flag("--bgr", o->bgr, "The model wants BGR channel order");
  sub->add_flag("--nhwc", o->nhwc, "The model wants samples as HxWxC instead of CxHxW");
  sub->add_option("--dump-outputs,--dump-logits", o->dump_outputs,
                  "Write every output row (logits, images) to this .npy file, in evaluation "
                  "order");
  sub->add_option("--reference", o->reference,
                  "Also run this model (ONNX file or prepared directory) on the same inputs and "
                  "report SQNR, cosine similarity and differences of every output against it");
  sub->add_option("--iou-threshold", o->iou_threshold,
                  "With --reference: also the IoU of the output maps thresholded at this value");
  sub->add_flag("--json", o->json, "Print machine-readable JSON (no progress bar)");
  sub->add_flag("--quiet,-q", o->quiet, "No progress bar");
  return {sub, [o, mean, std_dev, shuffle] {
            if (!mean->empty()) o->mean = parseList(*mean, "--mean");
            if (!std_dev->empty()) o->std = parseList(*std_dev, "--std");
            if (*shuffle >= 0) o->shuffle_seed = static_cast<uint64_t>(*shuffle);
            return runEval(*o);
          }};
}

}  // namespace qforge::cli
