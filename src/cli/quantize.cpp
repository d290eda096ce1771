// `qforge quantize MODEL --backend NAME|FILE --calib SOURCE --out DIR`: prepare the model for a
// backend, calibrate it on real data (naive PTQ), optionally reconstruct it (--algo adaround,
// brecq, qdrop), save the prepared model, deploy it (unless --no-deploy), and write every
// quantizer's parameters and a report; with --eval, float vs quantized accuracy. The work is
// pipelines::runPtqPipeline's; this file turns flags into its options and prints its report.
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "algos/algo_passes.h"
#include "cli/commands.h"
#include "cli/eval_support.h"
#include "cli/json_report.h"
#include "core/files.h"
#include "core/strings.h"
#include "core/utf8.h"
#include "pipelines/analysis_html.h"
#include "pipelines/ptq_pipeline.h"

namespace qforge::cli {

namespace {

struct QuantizeFlags {
  pipelines::PtqOptions pipeline;
  std::string calib = "fashion-mnist:train";
  std::string eval;
  bool json = false;
  bool quiet = false;
  bool no_deploy = false;
  std::string report_html;
  double target_drop = NAN;
  double target_sqnr = NAN;
  double bits_budget = NAN;
  int64_t calib_shuffle = -1;  // < 0: the source's first samples
};

// "0.0123" for one value, "0.00101..0.0213 (24 ch)" for per-channel parameters, and the state
// ("data_max=6.21") of a quantizer without an affine grid.
std::string scaleText(const nlohmann::json& q) {
  const nlohmann::json& values = q["scale"];
  char buf[80];
  if (values.empty()) {
    std::string text;
    for (const auto& [key, state] : q["state"].items()) {
      std::snprintf(buf, sizeof(buf), "%s=%.4g", key.c_str(), state.front().get<double>());
      text += (text.empty() ? "" : " ") + std::string(buf);
    }
    return text;
  }
  if (values.size() == 1) {
    std::snprintf(buf, sizeof(buf), "%.4g", values[0].get<double>());
    return buf;
  }
  double lo = values[0], hi = values[0];
  for (const auto& v : values) {
    lo = std::min(lo, v.get<double>());
    hi = std::max(hi, v.get<double>());
  }
  std::snprintf(buf, sizeof(buf), "%.3g..%.3g (%zu ch)", lo, hi, values.size());
  return buf;
}

std::string zeroPointText(const nlohmann::json& values) {
  if (values.empty()) return "-";
  if (values.size() == 1) return std::to_string(values[0].get<int64_t>());
  int64_t lo = values[0], hi = values[0];
  for (const auto& v : values) {
    lo = std::min(lo, v.get<int64_t>());
    hi = std::max(hi, v.get<int64_t>());
  }
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
}

// "int8 sym [-127,127] ch0", "uint8 asym [0,255]", "int32 bias s_in*s_w", and
// "int8 sym [-128,127] amax/127" where the scale spans fewer steps than the clamp.
std::string shortScheme(const nlohmann::json& q) {
  if (!q.contains("qmin")) return "int" + std::to_string(q["bits"].get<int>()) + " s_in*s_w";
  const int64_t qmin = q["qmin"].get<int64_t>();
  const int64_t qmax = q["qmax"].get<int64_t>();
  std::string s = (q["unsigned"].get<bool>() ? "uint" : "int") +
                  std::to_string(q["bits"].get<int>()) +
                  (q["symmetric"].get<bool>() ? " sym [" : " asym [") + std::to_string(qmin) + "," +
                  std::to_string(qmax) + "]";
  if (q.value("scale_steps", qmax - qmin) != qmax - qmin) {
    s += " amax/" + std::to_string(q["scale_steps"].get<int64_t>() / 2);
  }
  if (q["axis"].get<int64_t>() >= 0) s += " ch" + std::to_string(q["axis"].get<int64_t>());
  return s;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s += std::string(width - s.size(), ' ');
  return s;
}

// The lines of the optional stages: reconstruction, equalization, bias correction.
std::string stagesText(const pipelines::PtqReport& report) {
  std::string out;
  char buf[200];
  if (report.reconstruction) {
    const algos::ReconstructionConfig& c = report.reconstruction->config;
    const algos::ReconstructionReport& r = report.reconstruction->result;
    std::snprintf(buf, sizeof(buf),
                  "reconstruct %s (%s): %zu units x %lld iterations of %lld, %.0f it/s, %.1f s; "
                  "cache peak %.1f MiB\n",
                  c.algorithm.c_str(),
                  c.pattern == algos::ReconGranularity::Layer ? "layer" : "block", r.units.size(),
                  static_cast<long long>(c.max_count), static_cast<long long>(c.batch),
                  r.iterations_per_second, r.seconds,
                  static_cast<double>(r.peak_cache_bytes) / (1024.0 * 1024.0));
    out += buf;
  }
  if (report.equalization) {
    const algos::EqualizationReport& e = *report.equalization;
    std::snprintf(buf, sizeof(buf),
                  "equalize   %zu conv pairs (%zu ReLU6 -> ReLU), %d iterations%s\n",
                  e.pairs.size(), e.relu6_replaced.size(), e.iterations,
                  e.converged ? "" : " (not converged)");
    out += buf;
  }
  if (report.bias_correction) {
    size_t corrected = 0;
    double before = 0, after = 0;
    for (const auto& l : report.bias_correction->layers) {
      if (!l.skipped.empty()) continue;
      ++corrected;
      before = std::max(before, l.shift_before);
      after = std::max(after, l.shift_after);
    }
    std::snprintf(buf, sizeof(buf),
                  "bias       %zu layers corrected; largest mean shift %.3g -> %.3g\n", corrected,
                  before, after);
    out += buf;
  }
  return out;
}

// The autotune trials, one line each, the chosen one marked.
std::string autotuneText(const nlohmann::json& a) {
  std::ostringstream out;
  const bool drop = a["metric"] != "sqnr_db";
  const bool script = a["metric"] == "script";
  char buf[240];
  std::snprintf(buf, sizeof(buf),
                "autotune   %s, target %s %.2f%s: %s (trial %lld of %zu, %.1f s)%s%s\n",
                script ? "metric script"
                : drop ? "top-1"
                       : "output SQNR",
                drop ? "drop <=" : ">=", (drop ? a["target_drop"] : a["target"]).get<double>(),
                script ? ""
                : drop ? " points"
                       : " dB",
                a["met"].get<bool>() ? "met" : "not met, best kept",
                static_cast<long long>(a["best_trial"].get<int64_t>()), a["trials"].size(),
                a["seconds"].get<double>(), a["note"].get<std::string>().empty() ? "" : "; ",
                a["note"].get<std::string>().c_str());
  out << buf;
  for (const nlohmann::json& t : a["trials"]) {
    const bool chosen = t["trial"] == a["best_trial"];
    const std::string metric =
        t["metric"].is_null() ? "inf" : std::to_string(t["metric"].get<double>()).substr(0, 6);
    std::snprintf(buf, sizeof(buf),
                  "  %s%2lld  %-8s %s  float %lld  wider %lld  avg w-bits %.2f  %s\n",
                  chosen ? "*" : " ", static_cast<long long>(t["trial"].get<int64_t>()),
                  metric.c_str(), t["met"].get<bool>() ? "met " : "miss",
                  static_cast<long long>(t["float_units"].get<int64_t>()),
                  static_cast<long long>(t["wide_units"].get<int64_t>()),
                  t["avg_weight_bits"].get<double>(), t["change"].get<std::string>().c_str());
    out << buf;
  }
  return out.str();
}

// The mixed-precision choice: the uniform widths and the choice, one line each, then the widths
// the units got.
std::string mixedPrecisionText(const nlohmann::json& m) {
  std::ostringstream out;
  const std::string metric_name = m["metric"] == "top1"     ? "top-1"
                                  : m["metric"] == "script" ? "metric"
                                                            : "SQNR";
  const std::string unit = m["metric"] == "top1" ? "%" : m["metric"] == "script" ? "" : " dB";
  char buf[240];
  std::snprintf(buf, sizeof(buf),
                "mixed      budget %.2f bits per weight (%lld bytes), chose %.2f (%lld bytes); "
                "ranking %s, %.1f s\n",
                m["budget_average_bits"].get<double>(),
                static_cast<long long>((m["budget_bits"].get<int64_t>() + 7) / 8),
                m["average_bits"].get<double>(),
                static_cast<long long>(m["weight_bytes"].get<int64_t>()),
                m["ranking"].get<std::string>().c_str(), m["seconds"].get<double>());
  out << buf;
  for (const nlohmann::json& t : m["trials"]) {
    const bool chosen = t["trial"] == m["chosen_trial"];
    const std::string metric =
        t["metric"].is_null() ? "inf" : std::to_string(t["metric"].get<double>()).substr(0, 6);
    std::snprintf(buf, sizeof(buf), "  %s%2lld  %s %-8s %s  avg w-bits %.2f  %s\n",
                  chosen ? "*" : " ", static_cast<long long>(t["trial"].get<int64_t>()),
                  metric_name.c_str(), metric.c_str(),
                  t["met"].get<bool>() ? "in budget " : "over budget",
                  t["avg_weight_bits"].get<double>(), t["change"].get<std::string>().c_str());
    out << buf;
  }
  if (!m["uniform_interpolated"].is_null()) {
    std::snprintf(buf, sizeof(buf), "  uniform widths at the same bits (interpolated): %.2f%s\n",
                  m["uniform_interpolated"].get<double>(), unit.c_str());
    out << buf;
  }
  std::map<int, std::vector<std::string>> by_width;
  for (const nlohmann::json& u : m["units"])
    by_width[u["bits"].get<int>()].push_back(u["unit"].get<std::string>());
  for (const auto& [bits, names] : by_width) {
    out << "  W" << bits << " (" << names.size() << " unit" << (names.size() == 1 ? "" : "s")
        << "): "
        << join(std::vector<std::string>(names.begin(),
                                         names.begin() + std::min<size_t>(8, names.size())),
                ", ")
        << (names.size() > 8 ? ", ..." : "") << "\n";
  }
  return out.str();
}

std::string reportText(const pipelines::PtqReport& report) {
  const nlohmann::json& table = report.quantizers;
  std::ostringstream out;
  out << "model      " << report.model << "\n";
  out << "backend    " << report.backend << "\n";
  out << "units      " << report.units.size() << " quantized units, " << table.size()
      << " quantizers\n";
  if (!report.float_ops.empty()) {
    out << "float      ops this backend leaves in float:\n";
    for (const std::string& line : report.float_ops)
      out << "             " << line << "\n";
  }
  std::map<std::string, std::string> unit_ops;
  for (const auto& u : report.units)
    unit_ops[u.name] = u.ops;
  size_t unit_w = 4, value_w = 5, ops_w = 3;
  for (const auto& [name, ops] : unit_ops)
    ops_w = std::max(ops_w, ops.size());
  for (const auto& q : table) {
    unit_w = std::max(unit_w, std::min<size_t>(28, q["unit"].get<std::string>().size()));
    value_w = std::max(value_w, std::min<size_t>(28, q["value"].get<std::string>().size()));
  }
  out << "\n"
      << pad("unit", unit_w) << "  " << pad("ops", ops_w) << "  " << pad("value", value_w)
      << "  kind        scheme                   scale                    zp      observer\n";
  for (const auto& q : table) {
    const std::string unit = q["unit"].get<std::string>();
    out << pad(unit, unit_w) << "  "
        << pad(unit_ops.count(unit) ? unit_ops[unit] : "graph I/O", ops_w) << "  "
        << pad(q["value"].get<std::string>(), value_w) << "  "
        << pad(q["kind"].get<std::string>(), 10) << "  " << pad(shortScheme(q), 23) << "  "
        << pad(scaleText(q), 23) << "  " << pad(zeroPointText(q["zero_point"]), 6) << "  "
        << q["observer"].get<std::string>() << "\n";
  }
  out << "\n";
  if (report.evaluation) {
    out << "float      " << pipelines::scoreText(report.evaluation->float_scores) << "\n";
    out << "quantized  " << pipelines::scoreText(report.evaluation->quantized_scores) << "\n";
  }
  char buf[200];
  std::snprintf(
      buf, sizeof(buf),
      "time       prepare %.2f s, calibrate %.2f s (%lld batches), total %.2f s, %d thread%s\n",
      report.prepare_seconds, report.calibration.seconds,
      static_cast<long long>(report.calibration.batches), report.total_seconds, report.threads,
      report.threads == 1 ? "" : "s");
  out << buf;
  out << stagesText(report);
  if (report.autotune) out << autotuneText(*report.autotune);
  if (report.mixed_precision) out << mixedPrecisionText(*report.mixed_precision);
  out << "wrote     ";
  for (const std::string& f : report.files)
    out << " " << f;
  out << "\n";
  if (!report.deploy_notes.empty()) out << "note       " << join(report.deploy_notes, "; ") << "\n";
  return out.str();
}

// What the HTML report draws for a quantize run: the evaluation, the autotune trials and the
// mixed-precision choice.
nlohmann::json htmlReportOf(const pipelines::PtqReport& report) {
  nlohmann::json j = {{"command", "quantize"},
                      {"model", report.model},
                      {"backend", report.backend},
                      {"data", report.calibration.data},
                      {"quantizers", nlohmann::json::array()}};
  if (report.evaluation && report.evaluation->quantized_scores.metric == "top1" &&
      report.evaluation->quantized_scores.samples > 0) {
    const auto percent = [](const pipelines::Scores& s) {
      return 100.0 * static_cast<double>(s.top1) / static_cast<double>(s.samples);
    };
    j["data"] = report.evaluation->data;
    j["samples"] = report.evaluation->quantized_scores.samples;
    j["task"] = {{"metric", "top1"},
                 {"float", percent(report.evaluation->float_scores)},
                 {"quantized", percent(report.evaluation->quantized_scores)}};
  }
  if (report.autotune) j["autotune"] = *report.autotune;
  if (report.mixed_precision) j["mixed_precision"] = *report.mixed_precision;
  return j;
}

int runQuantize(QuantizeFlags& flags) {
  pipelines::PtqOptions& o = flags.pipeline;
  if (!flags.report_html.empty()) requireWritableFile(flags.report_html, "--report");
  o.calib = flags.calib;
  o.eval = flags.eval;
  o.deploy = !flags.no_deploy;
  if (!std::isnan(flags.target_drop)) o.target_drop = flags.target_drop;
  if (!std::isnan(flags.target_sqnr)) o.target_sqnr = flags.target_sqnr;
  if (!std::isnan(flags.bits_budget)) o.bits_budget = flags.bits_budget;
  if (flags.calib_shuffle >= 0) o.calib_shuffle_seed = static_cast<uint64_t>(flags.calib_shuffle);
  StageProgress progress(!flags.json && !flags.quiet && ::isatty(STDERR_FILENO));
  const pipelines::PtqResult result = pipelines::runPtqPipeline(o, progress.callback());
  if (!flags.report_html.empty() && o.distributed.rank == 0)
    writeFileAtomically(flags.report_html, pipelines::analysisHtml(htmlReportOf(result.report)));
  if (flags.json) {
    std::cout << jsonReportText(pipelines::ptqReportJson(result.report));
  } else if (o.distributed.rank != 0) {
    std::printf(
        "rank %d of %d: calibrated %lld batches with the other ranks in %.2f s; rank 0 "
        "writes %s\n",
        o.distributed.rank, o.distributed.world_size,
        static_cast<long long>(result.report.calibration.batches), result.report.total_seconds,
        o.out.c_str());
  } else {
    std::cout << printable(reportText(result.report));  // node names from the file
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addQuantizeCommand(CLI::App& app) {
  auto flags = std::make_shared<QuantizeFlags>();
  pipelines::PtqOptions* o = &flags->pipeline;
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Prepare a model for a backend, calibrate it (naive PTQ or reconstruction), save it and "
      "deploy it");
  sub->add_option("model", o->model_path, "ONNX model file")
      ->type_name(value_type::kFile)
      ->required();
  addBackendOption(sub, o->backend);
  sub->add_option("--calib", flags->calib, "Calibration data (same sources as eval --data)")
      ->type_name(value_type::kSource)
      ->capture_default_str();
  sub->add_option("--calib-batches", o->calib_batches, "Number of calibration batches")
      ->capture_default_str();
  sub->add_option("--calib-batch", o->calib_batch, "Calibration batch size")->capture_default_str();
  addSeedOption(sub, "--calib-shuffle", flags->calib_shuffle,
                "Calibrate on a random subset of --calib, shuffled with this seed (default: its "
                "first samples)");
  sub->add_option("--config", o->config, "Quantization config (.json, .yaml): overrides per node")
      ->type_name(value_type::kFile);
  sub->add_option("--eval", flags->eval, "Evaluate float and quantized models on this data")
      ->type_name(value_type::kSource);
  sub->add_option("--eval-limit", o->eval_limit, "Evaluate only the first N samples");
  sub->add_option("--eval-batch", o->eval_batch, "Evaluation batch size")->capture_default_str();
  sub->add_option("--out", o->out, "Output directory")->type_name(value_type::kDir)->required();
  sub->add_option("--algo", o->algo,
                  "PTQ algorithm after calibration: naive, adaround (layer), brecq (block), "
                  "qdrop (block, float values kept at random)")
      ->capture_default_str();
  sub->add_option("--iters", o->iters,
                  "Reconstruction iterations per unit (default: the algorithm's max_count, 20000)");
  sub->add_option("--recon-batch", o->recon_batch, "Reconstruction batch size (default 32)");
  sub->add_option("--algo-config", o->algo_config,
                  "Reconstruction settings (.json, .yaml; MQBench's quantize.reconstruction keys)")
      ->type_name(value_type::kFile);
  sub->add_option("--cache-limit", o->cache_limit,
                  "Memory for cached unit inputs/outputs (e.g. 512M, 4G; default 4G); beyond it "
                  "they are recomputed");
  sub->add_option("--seed", o->seed, "Seed for reconstruction's batches and QDrop")
      ->capture_default_str();
  sub->add_option(
      "--passes", o->passes,
      "The prepare passes, comma-separated (default: " + passes::defaultPreparePasses(true) +
          "); a list of graph passes only gets the placement passes appended. Known: " +
          join(algos::builtinPasses().names()));
  sub->add_flag("--cle", o->cle,
                "Cross-layer equalization of Conv pairs before preparing (folds BatchNorm)");
  sub->add_flag("--cle-relu6-to-relu", o->cle_relu6_to_relu,
                "--cle, and replace ReLU6 (Clip 0..6) between pairs by ReLU so they equalize "
                "(changes the float model slightly)");
  sub->add_flag("--bias-correction", o->bias_correction,
                "Empirical bias correction on the calibration batches, after calibration (and "
                "reconstruction)");
  sub->add_option("--target-drop", flags->target_drop,
                  "Autotune until the top-1 drop on --eval is at most this many points: "
                  "observers, then the most sensitive units wider or float");
  sub->add_option("--target-sqnr", flags->target_sqnr,
                  "Autotune until the outputs' SQNR against the float model on --eval reaches "
                  "this many dB (models without labels)");
  sub->add_option("--tune-metric", o->tune_metric,
                  "The metric autotune and mixed precision score: top1, sqnr or auto")
      ->capture_default_str();
  sub->add_option("--metric-script", o->metric_script,
                  "An executable scoring the outputs for autotune and mixed precision: run as "
                  "FILE DIR, it reads DIR/outputs.json and the .npy files it names and prints "
                  "the metric, higher is better (--target-drop is in its units)")
      ->type_name(value_type::kFile);
  sub->add_option("--tune-ranking", o->tune_ranking,
                  "How autotune ranks units and mixed precision measures their noise: isolated "
                  "(measured, a run per quantizer) or fisher (gradients, for models with many "
                  "quantizers)")
      ->capture_default_str();
  sub->add_option("--max-trials", o->max_trials, "Autotune's most trials")->capture_default_str();
  sub->add_option("--time-budget", o->time_budget, "Autotune's most seconds (0: no limit)")
      ->capture_default_str();
  sub->add_option("--bits-budget", flags->bits_budget,
                  "Mixed precision: choose each unit's weight width among the backend's so the "
                  "average is at most this many bits and --eval's metric loses the least")
      ->type_name("BITS");
  sub->add_option("--size-budget", o->size_budget,
                  "Mixed precision with the quantized weights in at most this many bytes (2M, "
                  "512K, a count)")
      ->type_name("SIZE");
  addDistributedOptions(sub, o->distributed, "calibrating and reconstructing");
  sub->add_option("--report", flags->report_html,
                  "Write a self-contained HTML report: float vs quantized, the autotune trials "
                  "or the mixed-precision choice")
      ->type_name(value_type::kFile);
  sub->add_flag("--no-deploy", flags->no_deploy,
                "Save the prepared model only; `qforge deploy` writes the deploy files later");
  sub->add_flag("--json", flags->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", flags->quiet, "No progress bars");
  return {sub, [flags] { return runQuantize(*flags); }};
}

}  // namespace qforge::cli
