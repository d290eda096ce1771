// `qforge eval MODEL --data SOURCE`: run a model (an ONNX file, or a prepared model directory:
// simulated quantization) over a dataset and score it — top-1/top-5 for classifiers, PSNR/MSE
// for image-to-image models, nothing (--metric none: only --dump-outputs), and with --reference
// SQNR/cosine against another model's outputs — with throughput (pipelines/eval_pipeline.h). The
// yardstick every later step (quantization, deployment) reports against.
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <tuple>

#include "cli/commands.h"
#include "cli/eval_support.h"
#include "cli/json_report.h"
#include "core/error.h"
#include "core/utf8.h"
#include "pipelines/eval_pipeline.h"

namespace qforge::cli {

namespace {

using pipelines::EvalOptions;
using pipelines::EvalReport;

std::string referenceText(const EvalReport& r, const std::string& path) {
  std::string out;
  char buf[256];
  for (const pipelines::ReferenceComparison& c : r.reference) {
    std::snprintf(buf, sizeof(buf), "vs ref   output '%s': sqnr %s dB, cosine %.6f, p99 %.3g steps",
                  c.output.c_str(),
                  std::isfinite(c.sqnr_db) ? std::to_string(c.sqnr_db).c_str() : "inf", c.cosine,
                  c.p99_steps);
    out += buf;
    if (c.iou) out += ", iou " + std::to_string(*c.iou);
    out += "  (" + path + ")\n";
  }
  return out;
}

// The human-readable summary printed by default.
std::string textReport(const EvalOptions& o, const EvalReport& r) {
  const Scores& scores = r.scores;
  const int64_t n = scores.samples;
  std::ostringstream out;
  out << "model    " << o.model_path << "\ndata     " << r.data << " (" << n
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
  if (!r.reference.empty()) out << referenceText(r, o.reference);
  std::snprintf(
      buf, sizeof(buf), "speed    %.0f images/s (model alone %.0f images/s), %.2f s, %d thread%s\n",
      n / r.seconds, n / r.model_seconds, r.seconds, r.threads, r.threads == 1 ? "" : "s");
  out << buf;
  if (!o.dump_outputs.empty()) out << "outputs  " << o.dump_outputs << "\n";
  return out.str();
}

// The flags that are not pipeline options, or are strings the options parse.
struct EvalFlags {
  std::string data = "fashion-mnist:test";
  std::string crop;
  bool json = false;
  bool quiet = false;
};

int runEval(const EvalOptions& o, bool json, bool quiet) {
  StageProgress progress(!json && !quiet && ::isatty(STDERR_FILENO));
  const EvalReport report = pipelines::runEval(o, progress.callback());
  if (json) {
    std::cout << jsonReportText(pipelines::evalReportJson(o, report));
    return 0;
  }
  std::cout << printable(textReport(o, report));  // output names from the file
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
  auto flags = std::make_shared<EvalFlags>();
  auto mean = std::make_shared<std::string>();
  auto std_dev = std::make_shared<std::string>();
  auto shuffle = std::make_shared<int64_t>(-1);
  CLI::App* sub = app.add_subcommand(
      "eval", "Evaluate a model on a dataset: top-1/top-5 or PSNR/MSE, and images/s");
  sub->add_option("model", o->model_path,
                  "ONNX model file, or a prepared model directory (quantize --out): its "
                  "simulated quantization")
      ->type_name(value_type::kPath)
      ->required();
  sub->add_option("--data", flags->data,
                  "fashion-mnist:test|train, an IDX file, a class folder (folder:DIR) of images, "
                  ".npy or .npz samples, a stacked .npy (npy:FILE) or .npz keyed by input name "
                  "(npz:FILE), a list of sample paths (list:FILE), synthetic samples shaped like "
                  "the model inputs (random:normal|uniform[,seed=N][,count=N]...), or one source "
                  "per input: 'NAME=SPEC;NAME=const:VALUE'")
      ->type_name(value_type::kSource)
      ->capture_default_str();
  sub->add_option("--limit", o->limit, "Evaluate only the first N samples (after shuffling)");
  sub->add_option("--batch", o->batch, "Batch size")->capture_default_str();
  sub->add_option("--metric", o->metric,
                  "top1 (classifiers), psnr (image-to-image), none (only run; --dump-outputs), or "
                  "auto: top1 for [batch, classes] outputs on labelled data without --noise, "
                  "psnr when the output has the input's shape, else none")
      ->capture_default_str();
  addSeedOption(sub, "--shuffle", *shuffle,
                "Shuffle the samples with this seed (with --limit: a random subset)");
  sub->add_option("--noise", o->noise,
                  "Denoising: feed sample + SIGMA * N(0,1), score against the clean sample");
  sub->add_option("--noise-seed", o->noise_seed, "Seed of --noise")->capture_default_str();
  sub->add_option("--peak", o->peak, "Peak signal value of --metric psnr")->capture_default_str();
  sub->add_option("--labels", o->labels, "Labels of an IDX or stacked .npy source")
      ->type_name(value_type::kFile);
  sub->add_option("--mean", *mean,
                  "Per-channel mean subtracted from images scaled to [0,1] "
                  "(one value or one per channel)");
  sub->add_option("--std", *std_dev, "Per-channel standard deviation to divide by");
  sub->add_option("--resize", o->resize, "Resize images: shorter side to N pixels (bilinear)");
  sub->add_option("--crop", flags->crop, "Center crop to SIZE or HEIGHTxWIDTH");
  sub->add_option("--channels", o->channels,
                  "Channels images must have (default: the model input's)");
  sub->add_flag("--bgr", o->bgr, "The model wants BGR channel order");
  sub->add_flag("--nhwc", o->nhwc, "The model wants samples as HxWxC instead of CxHxW");
  sub->add_option("--dump-outputs,--dump-logits", o->dump_outputs,
                  "Write every output row (logits, images) to this .npy file, in evaluation "
                  "order")
      ->type_name(value_type::kFile);
  sub->add_option("--reference", o->reference,
                  "Also run this model (ONNX file or prepared directory) on the same inputs and "
                  "report SQNR, cosine similarity and differences of every output against it")
      ->type_name(value_type::kPath);
  sub->add_option("--iou-threshold", o->iou_threshold,
                  "With --reference: also the IoU of the output maps thresholded at this value");
  sub->add_flag("--json", flags->json, "Print machine-readable JSON (no progress bar)");
  sub->add_flag("--quiet,-q", flags->quiet, "No progress bar");
  return {sub, [o, flags, mean, std_dev, shuffle] {
            o->data = flags->data;
            std::tie(o->crop_height, o->crop_width) = pipelines::parseCrop(flags->crop);
            if (!mean->empty()) o->mean = parseList(*mean, "--mean");
            if (!std_dev->empty()) o->std = parseList(*std_dev, "--std");
            if (*shuffle >= 0) o->shuffle_seed = static_cast<uint64_t>(*shuffle);
            return runEval(*o, flags->json, flags->quiet);
          }};
}

}  // namespace qforge::cli
