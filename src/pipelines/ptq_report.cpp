#include "pipelines/ptq_report.h"

#include "core/strings.h"

namespace qforge::pipelines {

namespace {

nlohmann::json scoreJson(const Scores& s, double seconds) {
  nlohmann::json j{{"metric", s.metric}, {"samples", s.samples}, {"seconds", seconds}};
  if (s.metric == "top1") {
    j["top1"] = static_cast<double>(s.top1) / s.samples;
    if (s.has_top5) j["top5"] = static_cast<double>(s.top5) / s.samples;
  } else if (s.metric == "psnr") {
    j["psnr_db"] = s.psnr_sum / s.samples;
  }
  return j;
}

nlohmann::json reconstructionJson(const ReconstructionSummary& summary) {
  const algos::ReconstructionConfig& c = summary.config;
  const algos::ReconstructionReport& r = summary.result;
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
          {"samples", summary.samples},
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

void addEvaluation(const Evaluation& e, nlohmann::json& j) {
  j["float"] = scoreJson(e.float_scores, e.float_seconds);
  j["quantized"] = scoreJson(e.quantized_scores, e.quantized_seconds);
  j["eval_data"] = e.data;
  j["float_text"] = scoreText(e.float_scores);
  j["quantized_text"] = scoreText(e.quantized_scores);
  if (e.float_scores.metric == "top1") {
    j["top1_drop_points"] =
        100.0 * (e.float_scores.top1 - e.quantized_scores.top1) / e.float_scores.samples;
  }
}

}  // namespace

nlohmann::json ptqReportJson(const PtqReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["backend"] = r.backend;
  if (r.autotune) j["autotune"] = *r.autotune;
  if (r.mixed_precision) j["mixed_precision"] = *r.mixed_precision;
  j["calibration"] = {{"data", r.calibration.data},
                      {"batches", r.calibration.batches},
                      {"samples", r.calibration.samples},
                      {"batch_size", r.calibration.batch_size}};
  if (r.calibration.shuffle_seed) j["calibration"]["shuffle_seed"] = *r.calibration.shuffle_seed;
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : r.units) {
    units.push_back(
        {{"name", u.name}, {"ops", u.ops}, {"pattern", u.pattern}, {"skipped", u.skipped}});
  }
  j["units"] = units;
  j["float_ops"] = r.float_ops;
  j["quantizers"] = r.quantizers;
  j["seconds"] = {{"prepare", r.prepare_seconds}, {"calibrate", r.calibration.seconds}};
  j["algorithm"] = r.algorithm;
  if (r.reconstruction) {
    j["reconstruction"] = reconstructionJson(*r.reconstruction);
    j["seconds"]["reconstruct"] = r.reconstruction->result.seconds;
  }
  if (r.equalization) j["equalization"] = equalizationJson(*r.equalization);
  if (r.bias_correction) {
    j["bias_correction"] = biasCorrectionJson(*r.bias_correction);
    j["seconds"]["bias_correction"] = r.bias_correction->seconds;
  }
  if (r.evaluation) addEvaluation(*r.evaluation, j);
  if (!r.deploy_notes.empty()) j["deploy_note"] = join(r.deploy_notes, "; ");
  j["files"] = r.files;
  j["threads"] = r.threads;
  j["world_size"] = r.world_size;
  if (r.world_size > 1) j["rank"] = r.rank;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["seconds"]["total"] = r.total_seconds;
  return j;
}

}  // namespace qforge::pipelines
