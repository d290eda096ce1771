#include "pipelines/qat_pipeline_report.h"

#include <cstdio>
#include <sstream>

#include "core/strings.h"

namespace qforge::pipelines {

namespace {

nlohmann::json epochsJson(const std::vector<algos::QatEpochResult>& epochs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : epochs) {
    list.push_back({{"epoch", e.epoch + 1},
                    {"loss", e.loss},
                    {"train_top1", e.train_top1 < 0 ? -1 : 100.0 * e.train_top1},
                    {"eval_top1", e.eval_metric},
                    {"lr", e.lr},
                    {"steps", e.steps},
                    {"bn_frozen", e.bn_frozen},
                    {"seconds", e.seconds}});
  }
  return list;
}

}  // namespace

nlohmann::json qatReportJson(const QatPipelineReport& r) {
  const algos::QatReport& t = r.training;
  nlohmann::json j;
  j["model"] = r.model;
  j["backend"] = r.backend;
  j["algorithm"] = r.algorithm;
  j["loss"] = r.loss;
  j["calibration"] = {{"data", r.calibration.data},
                      {"batches", r.calibration.batches},
                      {"samples", r.calibration.samples}};
  if (!r.eval_data.empty()) j["eval_data"] = r.eval_data;
  if (r.float_top1) j["float_top1"] = *r.float_top1;
  if (r.ptq_top1) j["ptq_top1"] = *r.ptq_top1;
  j["epochs"] = epochsJson(t.epochs);
  j["steps"] = t.steps_run;
  j["global_step"] = t.global_step;
  j["train_seconds"] = t.train_seconds;
  j["step_ms"] = t.step_ms;
  j["samples_per_second"] =
      t.train_seconds > 0 ? static_cast<double>(t.samples_run) / t.train_seconds : 0;
  j["batch_size"] = r.batch_size;
  j["world_size"] = r.world_size;
  j["rank"] = r.rank;
  j["threads"] = r.threads;
  j["batchnorms_simulated"] = t.batchnorms_simulated;
  j["parameters"] = t.parameters;
  j["quantizer_parameters"] = t.quantizer_parameters;
  j["resumed"] = t.resumed;
  j["resumed_at_step"] = t.resumed_at_step;
  j["interrupted"] = t.interrupted;
  j["checkpoint"] = r.checkpoint;
  if (r.batchnorms_merged) j["batchnorms_merged"] = *r.batchnorms_merged;
  if (r.qat_top1) j["qat_top1"] = *r.qat_top1;
  if (!r.deploy_notes.empty()) j["deploy_note"] = join(r.deploy_notes, "; ");
  if (!r.files.empty()) j["files"] = r.files;
  if (r.total_seconds) j["seconds_total"] = *r.total_seconds;
  return j;
}

std::string qatEpochsCsv(const std::vector<algos::QatEpochResult>& epochs) {
  std::ostringstream out;
  out << "epoch,loss,train_top1,eval_top1,lr,steps,bn_frozen,seconds\n";
  char line[256];
  for (const auto& e : epochs) {
    std::snprintf(line, sizeof(line), "%lld,%.6f,%.4f,%.4f,%.6g,%lld,%d,%.3f\n",
                  static_cast<long long>(e.epoch + 1), e.loss,
                  e.train_top1 < 0 ? -1 : 100.0 * e.train_top1, e.eval_metric, e.lr,
                  static_cast<long long>(e.steps), e.bn_frozen ? 1 : 0, e.seconds);
    out << line;
  }
  return out.str();
}

}  // namespace qforge::pipelines
