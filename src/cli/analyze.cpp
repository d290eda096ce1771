// `qforge analyze MODEL --backend NAME|FILE --calib SOURCE [--eval SOURCE]` (or a prepared model
// directory): which quantizers cost the model's outputs the most and what to change about each.
// The work is pipelines::runAnalysis's; this file turns flags into its options, prints the
// culprits, and writes the HTML report and the suggested config when asked.
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/eval_support.h"
#include "cli/json_report.h"
#include "core/error.h"
#include "core/files.h"
#include "core/utf8.h"
#include "pipelines/analysis_html.h"
#include "pipelines/analyze_pipeline.h"

namespace qforge::cli {

namespace {

struct AnalyzeFlags {
  pipelines::AnalyzeOptions pipeline;
  std::string calib = "fashion-mnist:train";
  std::string data;
  std::string report_html;
  std::string write_config;
  bool no_isolated = false;
  bool no_leave_one_out = false;
  bool no_fisher = false;
  bool json = false;
  bool quiet = false;
  int64_t calib_shuffle = -1;  // < 0: the source's first samples
};

std::string decibels(const nlohmann::json& value) {
  if (value.is_null()) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", value.get<double>());
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  if (s.size() < width) s += std::string(width - s.size(), ' ');
  return s;
}

// The predicted SQNR of a quantizer alone from its Fisher noise, against the outputs' energy.
std::string fisherText(const nlohmann::json& q, double signal) {
  if (q["fisher"].is_null()) return "-";
  const double noise = q["fisher"].get<double>();
  if (noise <= 0) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", 10 * std::log10(signal / noise));
  return buf;
}

std::string reportText(const nlohmann::json& r, int64_t top,
                       const std::vector<std::string>& files) {
  std::ostringstream out;
  out << "model      " << r["model"].get<std::string>() << "\n";
  out << "backend    " << r["backend"].get<std::string>() << "\n";
  out << "data       " << r["data"].get<std::string>() << ", " << r["samples"].get<int64_t>()
      << " samples, " << r["runs"].get<int64_t>() << " runs\n";
  out << "quantized  output SQNR " << decibels(r["quantized"]["sqnr_db"]) << " dB, cosine "
      << r["quantized"]["cosine"].get<double>() << " against the float model\n";
  if (r.contains("task")) {
    char buf[120];
    std::snprintf(buf, sizeof(buf), "top-1      float %.2f%%, quantized %.2f%%\n",
                  r["task"]["float"].get<double>(), r["task"]["quantized"].get<double>());
    out << buf;
  }
  // The energy the SQNRs are relative to: all-on SQNR and noise give it back.
  const double noise = r["quantized"]["noise"].get<double>();
  const double signal = r["quantized"]["sqnr_db"].is_null()
                            ? 1.0
                            : noise * std::pow(10.0, r["quantized"]["sqnr_db"].get<double>() / 10);
  std::map<std::string, const nlohmann::json*> by_name;
  for (const nlohmann::json& q : r["quantizers"])
    by_name[q["name"].get<std::string>()] = &q;
  out << "\nranked by " << r["ranking_by"].get<std::string>()
      << "; output SQNR in dB: alone = only this quantizer on, gain = what turning it off wins,\n"
         "fisher = predicted alone from gradients; local = its own error, accum = its value's\n"
         "error with all on; unit = the unit reading (activations) or holding (weights) it\n";
  out << "rank  " << pad("quantizer", 36) << pad("kind", 11) << pad("unit ops", 16)
      << "bits  alone  gain  fisher  local  accum  fix\n";
  int64_t shown = 0;
  for (const nlohmann::json& name : r["ranking"]) {
    if (shown++ >= top) break;
    const nlohmann::json& q = *by_name.at(name.get<std::string>());
    char line[96];
    std::snprintf(line, sizeof(line), "%4lld  ", static_cast<long long>(q["rank"].get<int64_t>()));
    out << line << pad(q["name"].get<std::string>(), 36) << pad(q["kind"].get<std::string>(), 11)
        << pad(q["op"].get<std::string>(), 16);
    std::snprintf(line, sizeof(line), "%4d  ", q["bits"].get<int>());
    out << line;
    out << pad(q["isolated"].is_null() ? "-" : decibels(q["isolated"]["sqnr_db"]), 7);
    out << pad(q["leave_one_out"].is_null() ? "-" : decibels(q["leave_one_out"]["gain_db"]), 6);
    out << pad(fisherText(q, signal), 8);
    out << pad(decibels(q["local_sqnr_db"]), 7) << pad(decibels(q["accumulated_sqnr_db"]), 7);
    if (!q["suggestions"].empty()) out << q["suggestions"][0]["fix"].get<std::string>();
    out << "\n";
  }
  const nlohmann::json& agree = r["rankings_agreement"];
  for (const char* key :
       {"isolated_vs_leave_one_out", "fisher_vs_leave_one_out", "fisher_vs_isolated"}) {
    if (agree[key].is_null()) continue;
    char buf[96];
    std::snprintf(buf, sizeof(buf), "agreement  %s: Spearman %.2f\n", key,
                  agree[key].get<double>());
    out << buf;
  }
  out << "\nfixes (first per culprit; --json has them all):\n";
  shown = 0;
  for (const nlohmann::json& name : r["ranking"]) {
    if (shown++ >= top) break;
    const nlohmann::json& q = *by_name.at(name.get<std::string>());
    if (q["suggestions"].empty()) continue;
    const nlohmann::json& fix = q["suggestions"][0];
    out << "  " << q["name"].get<std::string>() << ": " << fix["fix"].get<std::string>() << " - "
        << fix["why"].get<std::string>() << "\n";
  }
  char buf[80];
  std::snprintf(buf, sizeof(buf), "time       %.1f s\n", r["seconds"].get<double>());
  out << buf;
  if (!files.empty()) {
    out << "wrote     ";
    for (const std::string& f : files)
      out << " " << f;
    out << "\n";
  }
  return out.str();
}

int runAnalyze(AnalyzeFlags& flags) {
  if (!flags.report_html.empty()) requireWritableFile(flags.report_html, "--report");
  if (!flags.write_config.empty()) requireWritableFile(flags.write_config, "--write-config");
  pipelines::AnalyzeOptions& o = flags.pipeline;
  o.calib = flags.calib;
  o.data = flags.data;
  if (flags.calib_shuffle >= 0) o.calib_shuffle_seed = static_cast<uint64_t>(flags.calib_shuffle);
  o.isolated = !flags.no_isolated;
  o.leave_one_out = !flags.no_leave_one_out;
  o.fisher = !flags.no_fisher;
  StageProgress progress(!flags.json && !flags.quiet && ::isatty(STDERR_FILENO));
  const pipelines::AnalyzeResult result = pipelines::runAnalysis(o, progress.callback());
  std::vector<std::string> files;
  if (!flags.report_html.empty()) {
    writeFileAtomically(flags.report_html, pipelines::analysisHtml(result.report));
    files.push_back(flags.report_html);
  }
  if (!flags.write_config.empty()) {
    writeFileAtomically(flags.write_config,
                        pipelines::suggestedConfig(result.report).dump(2) + "\n");
    files.push_back(flags.write_config);
  }
  if (flags.json) {
    std::cout << jsonReportText(result.report);
  } else {
    std::cout << printable(reportText(result.report, o.top, files));  // names from the file
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addAnalyzeCommand(CLI::App& app) {
  auto flags = std::make_shared<AnalyzeFlags>();
  pipelines::AnalyzeOptions* o = &flags->pipeline;
  CLI::App* sub = app.add_subcommand(
      "analyze",
      "Rank the quantizers that cost a model's accuracy (isolated, leave-one-out and Fisher "
      "sensitivity, ranges) and suggest a fix for each");
  sub->add_option("model", o->model_path,
                  "ONNX model file (prepared and calibrated here), or a directory written by "
                  "`qforge quantize --out` (analysed as calibrated)")
      ->type_name(value_type::kPath)
      ->required();
  sub->add_option("--backend", o->backend,
                  "Backend for an ONNX model: a built-in name or a backend .json file")
      ->type_name(value_type::kBackend);
  sub->add_option("--config", o->config, "Quantization config for an ONNX model (.json, .yaml)")
      ->type_name(value_type::kFile);
  sub->add_option("--calib", flags->calib, "Calibration data for an ONNX model")
      ->type_name(value_type::kSource)
      ->capture_default_str();
  sub->add_option("--calib-batches", o->calib_batches, "Number of calibration batches")
      ->capture_default_str();
  sub->add_option("--calib-batch", o->calib_batch, "Calibration batch size")->capture_default_str();
  addSeedOption(sub, "--calib-shuffle", flags->calib_shuffle,
                "Calibrate on a random subset of --calib, shuffled with this seed");
  sub->add_option("--eval", flags->data,
                  "The samples analysed (default: the calibration data); with labels, top-1 "
                  "float and quantized too")
      ->type_name(value_type::kSource);
  sub->add_option("--samples", o->samples, "Samples analysed")->capture_default_str();
  sub->add_option("--batch", o->batch, "Samples per run (a fixed batch dim's size wins)")
      ->capture_default_str();
  sub->add_option("--output", o->outputs,
                  "An output to score (repeat for several; default: every float output)");
  sub->add_flag("--no-isolated", flags->no_isolated, "Skip the runs with only one quantizer on");
  sub->add_flag("--no-leave-one-out", flags->no_leave_one_out,
                "Skip the runs with all but one quantizer on");
  sub->add_flag("--no-fisher", flags->no_fisher, "Skip the Fisher (gradient) sensitivity");
  sub->add_option("--fisher-probes", o->fisher_probes,
                  "Random output directions per batch for the Fisher sensitivity")
      ->capture_default_str();
  sub->add_option("--top", o->top, "Culprits shown and given fixes")->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the range samples and Fisher probes")
      ->capture_default_str();
  sub->add_option("--report", flags->report_html,
                  "Write a self-contained HTML report (sensitivity per unit, SQNR bars, range "
                  "histograms)")
      ->type_name(value_type::kFile);
  sub->add_option("--write-config", flags->write_config,
                  "Write the first fix of each culprit as a quantization config (JSON) for "
                  "`qforge quantize --config`")
      ->type_name(value_type::kFile);
  sub->add_flag("--json", flags->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", flags->quiet, "No progress bars");
  return {sub, [flags] { return runAnalyze(*flags); }};
}

}  // namespace qforge::cli
