// `qforge quantize MODEL --backend NAME|FILE --calib SOURCE --out DIR`: prepare the model for a
// backend, calibrate it on real data (naive PTQ), optionally reconstruct it (--algo adaround,
// brecq, qdrop; algos/reconstruction.h), save the prepared model (prepared_io.h), deploy it
// (deploy.h; unless --no-deploy), and write every quantizer's parameters and a report; with
// --eval, float vs quantized accuracy.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "algos/bias_correction.h"
#include "algos/calibrate.h"
#include "algos/equalization.h"
#include "algos/reconstruction.h"
#include "backends/backend_config.h"
#include "cli/commands.h"
#include "cli/eval_support.h"
#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "deploy/deploy.h"
#include "deploy/qdq_onnx.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/prepare.h"
#include "passes/prepared_io.h"
#include "passes/quant_config.h"

namespace qforge::cli {

namespace {

struct QuantizeOptions {
  std::string model;
  std::string backend;
  std::string calib = "fashion-mnist:train";
  int64_t calib_batches = 32;
  int64_t calib_batch = 64;
  std::string config;
  std::string eval;
  int64_t eval_limit = -1;
  int64_t eval_batch = 100;
  std::string out;
  bool json = false;
  bool quiet = false;
  bool no_deploy = false;
  std::string algo = "naive";
  int64_t iters = 0;  // 0: the algorithm's max_count
  int64_t recon_batch = 0;
  std::string algo_config;
  std::string cache_limit;
  uint64_t seed = 0;
  bool cle = false;
  bool cle_relu6 = false;
  bool bias_correction = false;
};

using Clock = std::chrono::steady_clock;

// Top-1 (or PSNR) of `executor` over the whole loader.
Scores score(Executor& executor, const Graph& graph, data::BatchLoader& loader,
             const std::string& what, bool show_progress) {
  Scores scores;
  scores.metric = "auto";
  const std::string input = algos::dataInput(graph).name();
  const std::string output = graph.outputs().front()->name();
  ProgressBar progress(loader.size(), show_progress);
  const auto start = Clock::now();
  loader.reset();
  while (auto batch = loader.next()) {
    at::Tensor y = executor.run({{input, batch->inputs}}, {output}).at(output);
    if (scores.metric == "auto") {
      scores.metric = y.dim() == 2 && batch->labels.defined() ? "top1" : "psnr";
    }
    scoreBatch(*batch, y, 1.0, what, scores);
    progress.update(scores.samples, secondsSince(start));
  }
  return scores;
}

nlohmann::json scoreJson(const Scores& s, double seconds) {
  nlohmann::json j{{"metric", s.metric}, {"samples", s.samples}, {"seconds", seconds}};
  if (s.metric == "top1") {
    j["top1"] = static_cast<double>(s.top1) / s.samples;
    if (s.has_top5) j["top5"] = static_cast<double>(s.top5) / s.samples;
  } else {
    j["psnr_db"] = s.psnr_sum / s.samples;
  }
  return j;
}

std::string scoreText(const Scores& s) {
  char buf[64];
  if (s.metric == "top1") {
    std::snprintf(buf, sizeof(buf), "top-1 %.2f%%", 100.0 * s.top1 / s.samples);
  } else {
    std::snprintf(buf, sizeof(buf), "psnr %.2f dB", s.psnr_sum / s.samples);
  }
  return buf;
}

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

// "int8 sym [-127,127] ch0", "uint8 asym [0,255]", "int32 bias s_in*s_w".
std::string shortScheme(const nlohmann::json& q) {
  if (!q.contains("qmin")) return "int" + std::to_string(q["bits"].get<int>()) + " s_in*s_w";
  std::string s = (q["unsigned"].get<bool>() ? "uint" : "int") +
                  std::to_string(q["bits"].get<int>()) +
                  (q["symmetric"].get<bool>() ? " sym [" : " asym [") +
                  std::to_string(q["qmin"].get<int64_t>()) + "," +
                  std::to_string(q["qmax"].get<int64_t>()) + "]";
  if (q["axis"].get<int64_t>() >= 0) s += " ch" + std::to_string(q["axis"].get<int64_t>());
  return s;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s += std::string(width - s.size(), ' ');
  return s;
}

std::string reportText(const nlohmann::json& report, const nlohmann::json& table) {
  std::ostringstream out;
  out << "model      " << report["model"].get<std::string>() << "\n";
  out << "backend    " << report["backend"].get<std::string>() << "\n";
  out << "units      " << report["units"].size() << " quantized units, " << table.size()
      << " quantizers\n";
  if (!report["float_ops"].empty()) {
    out << "float      ops this backend leaves in float:\n";
    for (const auto& line : report["float_ops"])
      out << "             " << line.get<std::string>() << "\n";
  }
  std::map<std::string, std::string> unit_ops;
  for (const auto& u : report["units"])
    unit_ops[u["name"].get<std::string>()] = u["ops"].get<std::string>();
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
  if (report.contains("float")) {
    out << "float      " << report["float_text"].get<std::string>() << "\n";
    out << "quantized  " << report["quantized_text"].get<std::string>() << "\n";
  }
  const auto& s = report["seconds"];
  char buf[200];
  std::snprintf(
      buf, sizeof(buf),
      "time       prepare %.2f s, calibrate %.2f s (%lld batches), total %.2f s, %d thread%s\n",
      s["prepare"].get<double>(), s["calibrate"].get<double>(),
      static_cast<long long>(report["calibration"]["batches"].get<int64_t>()),
      s["total"].get<double>(), at::get_num_threads(), at::get_num_threads() == 1 ? "" : "s");
  out << buf;
  if (report.contains("reconstruction")) {
    const auto& r = report["reconstruction"];
    std::snprintf(
        buf, sizeof(buf),
        "reconstruct %s (%s): %zu units x %lld iterations of %lld, %.0f it/s, %.1f s; "
        "cache peak %.1f MiB\n",
        r["algorithm"].get<std::string>().c_str(), r["pattern"].get<std::string>().c_str(),
        r["units"].size(), static_cast<long long>(r["max_count"].get<int64_t>()),
        static_cast<long long>(r["batch"].get<int64_t>()), r["iterations_per_second"].get<double>(),
        r["seconds"].get<double>(), r["peak_cache_bytes"].get<double>() / (1024.0 * 1024.0));
    out << buf;
  }
  if (report.contains("equalization")) {
    const auto& e = report["equalization"];
    std::snprintf(buf, sizeof(buf),
                  "equalize   %zu conv pairs (%zu ReLU6 -> ReLU), %d iterations%s\n",
                  e["pairs"].size(), e["relu6_replaced"].size(), e["iterations"].get<int>(),
                  e["converged"].get<bool>() ? "" : " (not converged)");
    out << buf;
  }
  if (report.contains("bias_correction")) {
    const auto& b = report["bias_correction"];
    size_t corrected = 0;
    double before = 0, after = 0;
    for (const auto& l : b["layers"]) {
      if (!l["skipped"].get<std::string>().empty()) continue;
      ++corrected;
      before = std::max(before, l["shift_before"].get<double>());
      after = std::max(after, l["shift_after"].get<double>());
    }
    std::snprintf(buf, sizeof(buf),
                  "bias       %zu layers corrected; largest mean shift %.3g -> %.3g\n", corrected,
                  before, after);
    out << buf;
  }
  out << "wrote     ";
  for (const auto& f : report["files"])
    out << " " << f.get<std::string>();
  out << "\n";
  if (report.contains("deploy_note"))
    out << "note       " << report["deploy_note"].get<std::string>() << "\n";
  return out.str();
}

// "4G", "512M", "64K" or a byte count.
int64_t parseBytes(const std::string& text) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  const std::string suffix = text.substr(std::min(used, text.size()));
  const double unit = suffix.empty() || suffix == "B"    ? 1
                      : suffix == "K" || suffix == "KiB" ? 1024.0
                      : suffix == "M" || suffix == "MiB" ? 1024.0 * 1024
                      : suffix == "G" || suffix == "GiB" ? 1024.0 * 1024 * 1024
                                                         : -1;
  require(value >= 0 && unit > 0,
          "--cache-limit '" + text + "' is not a size; write bytes or e.g. 512M, 4G");
  return static_cast<int64_t>(value * unit);
}

// The reconstruction settings from --algo, --algo-config and the flags, checked before any work.
algos::ReconstructionConfig reconstructionConfig(const QuantizeOptions& o) {
  algos::ReconstructionConfig c = algos::reconstructionPreset(o.algo);
  if (!o.algo_config.empty()) {
    const std::string text = readFile(o.algo_config);
    const bool yaml =
        o.algo_config.size() > 5 && (o.algo_config.substr(o.algo_config.size() - 5) == ".yaml" ||
                                     o.algo_config.substr(o.algo_config.size() - 4) == ".yml");
    nlohmann::json j;
    try {
      j = yaml ? passes::yamlToJson(text, o.algo_config) : nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(o.algo_config + ": not valid JSON (" + e.what() + ")");
    }
    algos::applyReconstructionKeys(c, j, o.algo_config);
  }
  require(o.iters >= 0, "--iters must be positive");
  require(o.recon_batch >= 0, "--recon-batch must be positive");
  if (o.iters > 0) c.max_count = o.iters;
  if (o.recon_batch > 0) c.batch = o.recon_batch;
  if (!o.cache_limit.empty()) c.cache_limit = parseBytes(o.cache_limit);
  c.seed = o.seed;
  return c;
}

// The first `batches` batches of the calibration data, as one tensor.
at::Tensor collectInputs(data::BatchLoader& loader, int64_t batches) {
  loader.reset();
  std::vector<at::Tensor> parts;
  while (static_cast<int64_t>(parts.size()) < batches) {
    auto batch = loader.next();
    if (!batch) break;
    parts.push_back(batch->inputs);
  }
  require(!parts.empty(), "the calibration data yielded no batch to reconstruct on");
  return at::cat(parts);
}

nlohmann::json reconstructionJson(const algos::ReconstructionConfig& c,
                                  const algos::ReconstructionReport& r, int64_t samples) {
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : r.units) {
    units.push_back({{"name", u.name},
                     {"entry", u.entry},
                     {"exit", u.exit},
                     {"layers", u.layers},
                     {"first_rec_loss", u.first_rec_loss},
                     {"last_rec_loss", u.last_rec_loss},
                     {"last_round_loss", u.last_round_loss},
                     {"flipped", u.flipped},
                     {"cached_samples", u.cached_samples},
                     {"cached_bytes", u.cached_bytes},
                     {"recomputed_samples", u.recomputed_samples},
                     {"seconds", u.seconds},
                     {"cache_seconds", u.cache_seconds}});
  }
  return {{"algorithm", c.algorithm},
          {"pattern", c.pattern == algos::ReconGranularity::Layer ? "layer" : "block"},
          {"max_count", c.max_count},
          {"batch", c.batch},
          {"prob", c.prob},
          {"scale_lr", c.scale_lr},
          {"lr", c.lr},
          {"warm_up", c.warm_up},
          {"weight", c.weight},
          {"b_range", {c.b_start, c.b_end}},
          {"max_block_layers", c.max_block_layers},
          {"cache_limit", c.cache_limit},
          {"seed", c.seed},
          {"samples", samples},
          {"units", units},
          {"iterations", r.iterations},
          {"iterations_per_second", r.iterations_per_second},
          {"peak_cache_bytes", r.peak_cache_bytes},
          {"seconds", r.seconds}};
}

nlohmann::json equalizationJson(const algos::EqualizationReport& r) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& p : r.pairs) {
    pairs.push_back({{"conv1", p.conv1},
                     {"conv2", p.conv2},
                     {"path", p.path},
                     {"channels", p.channels},
                     {"conv1_spread", {p.conv1_spread_before, p.conv1_spread_after}},
                     {"conv2_spread", {p.conv2_spread_before, p.conv2_spread_after}},
                     {"absorbed_channels", p.absorbed_channels}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : r.skipped)
    skipped.push_back({{"conv", s.conv}, {"reason", s.reason}});
  return {{"batchnorms_folded", r.batchnorms_folded},
          {"pairs", pairs},
          {"skipped", skipped},
          {"relu6_replaced", r.relu6_replaced},
          {"iterations", r.iterations},
          {"converged", r.converged}};
}

nlohmann::json biasCorrectionJson(const algos::BiasCorrectionResult& r) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : r.layers) {
    layers.push_back({{"unit", l.unit},
                      {"op", l.op},
                      {"channels", l.channels},
                      {"shift_before", l.shift_before},
                      {"shift_after", l.shift_after},
                      {"bias_added", l.bias_added},
                      {"skipped", l.skipped}});
  }
  return {
      {"layers", layers}, {"batches", r.batches}, {"samples", r.samples}, {"seconds", r.seconds}};
}

int64_t peakResidentBytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

int runQuantize(const QuantizeOptions& o) {
  const auto start = Clock::now();
  require(o.calib_batches > 0, "--calib-batches must be at least 1");
  require(o.calib_batch > 0, "--calib-batch must be at least 1");
  const bool tty = !o.json && !o.quiet && ::isatty(STDERR_FILENO);
  std::optional<algos::ReconstructionConfig> recon;
  if (o.algo != "naive") recon = reconstructionConfig(o);

  const backends::BackendConfig backend = backends::loadBackend(o.backend);
  passes::PrepareOptions prepare_options;
  if (!o.config.empty()) prepare_options.config = passes::loadQuantConfig(o.config);
  Graph float_graph = importOnnxFile(o.model);
  Graph to_prepare = importOnnxFile(o.model);
  nlohmann::json equalization;
  if (o.cle || o.cle_relu6) {
    algos::EqualizationOptions eq;
    eq.relu6_to_relu = o.cle_relu6;
    equalization = equalizationJson(algos::equalizeCrossLayer(to_prepare, eq));
  }

  const auto prepare_start = Clock::now();
  auto model = passes::prepare(std::move(to_prepare), backend, prepare_options);
  const double prepare_seconds = secondsSince(prepare_start);

  auto calib_data = openFor(o.calib, float_graph);
  data::BatchLoader calib_loader(
      calib_data, loaderOptions(float_graph, o.calib_batch, o.calib_batch * o.calib_batches));
  ProgressBar calib_progress(calib_loader.size(), tty);
  const auto calib_start = Clock::now();
  const algos::CalibrationResult calibration = algos::calibrate(
      *model, calib_loader, o.calib_batches, [&](int64_t, int64_t, int64_t samples) {
        calib_progress.update(samples, secondsSince(calib_start));
      });
  calib_progress.clear();

  nlohmann::json recon_json;
  if (recon) {
    const at::Tensor images = collectInputs(calib_loader, o.calib_batches);
    std::unique_ptr<ProgressBar> bar;
    const auto recon_start = Clock::now();
    const algos::ReconstructionReport r =
        algos::reconstruct(*model, images, *recon, [&](const algos::ReconProgress& p) {
          if (!bar) bar = std::make_unique<ProgressBar>(p.units * p.iterations, tty, "it");
          char note[200];
          std::snprintf(note, sizeof(note), "unit %zu/%zu %s  loss %.4g + %.4g", p.unit + 1,
                        p.units, p.name.substr(0, 40).c_str(), p.rec_loss, p.round_loss);
          bar->update(static_cast<int64_t>(p.unit) * p.iterations + p.iteration,
                      secondsSince(recon_start), note);
        });
    if (bar) bar->clear();
    recon_json = reconstructionJson(*recon, r, images.size(0));
  }
  nlohmann::json bias_json;
  if (o.bias_correction) {
    calib_loader.reset();
    bias_json = biasCorrectionJson(algos::correctBias(*model, calib_loader, o.calib_batches));
  }

  nlohmann::json report;
  report["model"] = o.model;
  report["backend"] = backend.name;
  report["calibration"] = {{"data", calib_data->describe()},
                           {"batches", calibration.batches},
                           {"samples", calibration.samples},
                           {"batch_size", o.calib_batch}};
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : model->units()) {
    units.push_back(
        {{"name", u.name}, {"ops", u.ops}, {"pattern", u.pattern}, {"skipped", u.skipped}});
  }
  report["units"] = units;
  report["float_ops"] = model->floatOps();
  const nlohmann::json table = deploy::quantizerTable(*model);
  report["quantizers"] = table;
  report["seconds"] = {{"prepare", prepare_seconds}, {"calibrate", calibration.seconds}};
  report["algorithm"] = o.algo;
  if (recon) {
    report["reconstruction"] = recon_json;
    report["seconds"]["reconstruct"] = recon_json["seconds"];
  }
  if (!equalization.is_null()) report["equalization"] = equalization;
  if (!bias_json.is_null()) {
    report["bias_correction"] = bias_json;
    report["seconds"]["bias_correction"] = bias_json["seconds"];
  }

  if (!o.eval.empty()) {
    auto eval_data = openFor(o.eval, float_graph);
    data::BatchLoader loader(
        eval_data, loaderOptions(float_graph, o.eval_batch, o.eval_limit < 0 ? 0 : o.eval_limit));
    Executor float_executor(float_graph);
    auto t = Clock::now();
    const Scores float_scores =
        score(float_executor, float_graph, loader, eval_data->describe(), tty);
    report["float"] = scoreJson(float_scores, secondsSince(t));
    t = Clock::now();
    const Scores quant_scores =
        score(model->executor(), model->graph(), loader, eval_data->describe(), tty);
    report["quantized"] = scoreJson(quant_scores, secondsSince(t));
    report["eval_data"] = eval_data->describe();
    report["float_text"] = scoreText(float_scores);
    report["quantized_text"] = scoreText(quant_scores);
    if (float_scores.metric == "top1") {
      report["top1_drop_points"] =
          100.0 * (float_scores.top1 - quant_scores.top1) / float_scores.samples;
    }
  }

  // Outputs: every file written beside its final name and renamed into place. Deploy goes first:
  // it checks the backend's constraints before writing anything, so a model the backend cannot
  // take (a config broke one of them) leaves no files at all.
  std::vector<std::string> written;
  if (!o.no_deploy) {
    const deploy::DeployResult deployed = deploy::deployPreparedModel(*model, o.out);
    written = deployed.files;
    if (!deployed.notes.empty()) report["deploy_note"] = join(deployed.notes, "; ");
  }
  std::filesystem::create_directories(o.out);
  const std::string report_path = (std::filesystem::path(o.out) / "report.json").string();
  const std::string table_path = (std::filesystem::path(o.out) / "quantizers.json").string();
  writeFileAtomically(
      table_path, nlohmann::json{{"backend", backend.name}, {"quantizers", table}}.dump(2) + "\n");
  written.push_back(table_path);
  for (const std::string& f :
       passes::savePreparedModel(*model, backends::resolveBackendDocument(o.backend), o.out))
    written.push_back(f);
  report["files"] = written;
  report["files"].push_back(report_path);
  report["threads"] = at::get_num_threads();
  report["peak_rss_bytes"] = peakResidentBytes();
  report["seconds"]["total"] = secondsSince(start);
  writeFileAtomically(report_path, report.dump(2) + "\n");

  if (o.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << reportText(report, table);
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addQuantizeCommand(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Prepare a model for a backend, calibrate it (naive PTQ or reconstruction), save it and "
      "deploy it");
  sub->add_option("model", o->model, "ONNX model file")->required();
  addBackendOption(sub, o->backend);
  sub->add_option("--calib", o->calib, "Calibration data (same sources as eval --data)")
      ->capture_default_str();
  sub->add_option("--calib-batches", o->calib_batches, "Number of calibration batches")
      ->capture_default_str();
  sub->add_option("--calib-batch", o->calib_batch, "Calibration batch size")->capture_default_str();
  sub->add_option("--config", o->config, "Quantization config (.json, .yaml): overrides per node");
  sub->add_option("--eval", o->eval, "Evaluate float and quantized models on this data");
  sub->add_option("--eval-limit", o->eval_limit, "Evaluate only the first N samples");
  sub->add_option("--eval-batch", o->eval_batch, "Evaluation batch size")->capture_default_str();
  sub->add_option("--out", o->out, "Output directory")->required();
  sub->add_option("--algo", o->algo,
                  "PTQ algorithm after calibration: naive, adaround (layer), brecq (block), "
                  "qdrop (block, float values kept at random)")
      ->capture_default_str();
  sub->add_option("--iters", o->iters,
                  "Reconstruction iterations per unit (default: the algorithm's max_count, 20000)");
  sub->add_option("--recon-batch", o->recon_batch, "Reconstruction batch size (default 32)");
  sub->add_option("--algo-config", o->algo_config,
                  "Reconstruction settings (.json, .yaml; MQBench's quantize.reconstruction keys)");
  sub->add_option("--cache-limit", o->cache_limit,
                  "Memory for cached unit inputs/outputs (e.g. 512M, 4G; default 4G); beyond it "
                  "they are recomputed");
  sub->add_option("--seed", o->seed, "Seed for reconstruction's batches and QDrop")
      ->capture_default_str();
  sub->add_flag("--cle", o->cle,
                "Cross-layer equalization of Conv pairs before preparing (folds BatchNorm)");
  sub->add_flag("--cle-relu6-to-relu", o->cle_relu6,
                "--cle, and replace ReLU6 (Clip 0..6) between pairs by ReLU so they equalize "
                "(changes the float model slightly)");
  sub->add_flag("--bias-correction", o->bias_correction,
                "Empirical bias correction on the calibration batches, after calibration (and "
                "reconstruction)");
  sub->add_flag("--no-deploy", o->no_deploy,
                "Save the prepared model only; `qforge deploy` writes the deploy files later");
  sub->add_flag("--json", o->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", o->quiet, "No progress bars");
  return {sub, [o] { return runQuantize(*o); }};
}

}  // namespace qforge::cli
