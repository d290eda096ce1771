// `qforge analyze` as a library call on tiny models: the report's figures and ranking, the
// suggested config that, applied, wins back what the analysis said it would, a prepared
// directory analysed as saved, and the errors for settings that cannot work.
#include "pipelines/analyze_pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "core/files.h"
#include "pipelines/ptq_pipeline.h"
#include "pipelines/tiny_classifier.h"
#include "support/checks.h"
#include "support/quant_graphs.h"
#include "support/tensor_dataset.h"

namespace qforge::pipelines {
namespace {

using testing::errorOf;

// 3-bit weights and activations: noisy enough that the quantizers rank clearly.
const nlohmann::json kThreeBit = {{"weight", {{"bits", 3}}}, {"activation", {{"bits", 3}}}};

std::shared_ptr<testing::TensorDataset> convInputs(int64_t n, int64_t seed) {
  at::manual_seed(seed);
  return std::make_shared<testing::TensorDataset>(at::randn({n, 2, 5, 5}), at::Tensor(),
                                                  "conv tensors");
}

AnalyzeOptions convOptions(const Graph& graph, const TempDir& dir) {
  AnalyzeOptions o;
  o.graph = &graph;
  o.model_path = "conv-relu-conv";
  o.backend = testing::writeBackend(dir.file("tiny.json"), kThreeBit);
  o.calib = convInputs(16, 1);
  o.calib_batches = 2;
  o.calib_batch = 8;
  o.data = convInputs(12, 2);
  o.samples = 12;
  o.batch = 4;
  o.fisher_probes = 8;
  return o;
}

const nlohmann::json& entry(const nlohmann::json& report, const std::string& name) {
  for (const nlohmann::json& q : report["quantizers"])
    if (q["name"] == name) return q;
  throw Error("no quantizer " + name);
}

TEST(AnalyzePipeline, ReportsEveryQuantizerRankedByWhatTurningItOffWins) {
  TempDir dir("analyze-pipeline");
  const Graph graph = testing::convReluConv();
  const AnalyzeResult r = runAnalysis(convOptions(graph, dir));
  const nlohmann::json& report = r.report;
  EXPECT_EQ(report["command"], "analyze");
  EXPECT_EQ(report["backend"], "Tiny");
  EXPECT_EQ(report["data"], "conv tensors");
  EXPECT_EQ(report["samples"], 12);
  EXPECT_EQ(report["calibration"]["samples"], 16);
  EXPECT_EQ(report["outputs"], nlohmann::json::array({"y"}));
  EXPECT_EQ(report["ranking_by"], "leave_one_out");
  EXPECT_FALSE(report.contains("task"));  // no labels
  // conv1 reads x and w1, conv2 reads r and w2.
  ASSERT_EQ(report["quantizers"].size(), r.model->quantizers().size());
  ASSERT_EQ(report["quantizers"].size(), 4u);
  ASSERT_EQ(report["ranking"].size(), 4u);

  // Ranked by gain, most first; ranks follow the ranking; each gain is that quantizer's
  // leave-one-out SQNR over the all-on SQNR.
  const double all_on = report["quantized"]["sqnr_db"];
  double previous = INFINITY;
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json& q = entry(report, report["ranking"][i]);
    EXPECT_EQ(q["rank"], i + 1);
    const double gain = q["leave_one_out"]["gain_db"];
    EXPECT_NEAR(gain, q["leave_one_out"]["sqnr_db"].get<double>() - all_on, 1e-9);
    EXPECT_LE(gain, previous);
    previous = gain;
    EXPECT_GT(q["isolated"]["sqnr_db"].get<double>(), all_on - 1e-9);  // one alone is cleaner
    EXPECT_GT(q["fisher"].get<double>(), 0);
    ASSERT_FALSE(q["range"].is_null());
    EXPECT_EQ(q["range"]["histogram"]["counts"].size(), 64u);
    EXPECT_EQ(q["bits"], 3);
    ASSERT_FALSE(q["suggestions"].empty());  // all four are within --top
    EXPECT_EQ(q["suggestions"].back()["fix"], "float");
  }
  EXPECT_FALSE(entry(report, "w1")["range"]["channel_spread"].is_null());
  EXPECT_EQ(entry(report, "w1")["granularity"], "per-channel");
  EXPECT_TRUE(report["rankings_agreement"]["isolated_vs_leave_one_out"].is_number());
  EXPECT_TRUE(report["rankings_agreement"]["fisher_gain_vs_leave_one_out"].is_number());
  EXPECT_TRUE(entry(report, "w1")["fisher_gain"].is_number());
  // The model fixes a batch of 2: 6 runs of 2 samples, each float, all on, 4 isolated, 4
  // leave-one-out, 8 Fisher probes and the error alignment.
  EXPECT_EQ(report["runs"], 6 * (2 + 4 + 4 + 8 + 1));
}

TEST(AnalyzePipeline, ApplyingTheSuggestedConfigWinsWhatTheTopCulpritsGainSaid) {
  TempDir dir("analyze-fix");
  const Graph graph = testing::convReluConv();
  AnalyzeOptions o = convOptions(graph, dir);
  o.top = 1;
  const nlohmann::json before = runAnalysis(o).report;
  const nlohmann::json config = suggestedConfig(before);
  ASSERT_EQ(config["overrides"].size(), 1u);  // only the top culprit has fixes
  const nlohmann::json& top = entry(before, before["ranking"][0]);
  EXPECT_EQ(config["overrides"][0], top["suggestions"][0]["override"]);

  // Keep only the float fix so the outcome has a closed form: the culprit's unit in float.
  const std::string unit = top["unit"];
  std::ofstream(dir.file("fix.json"))
      << nlohmann::json({{"overrides", {{{"name", unit}, {"skip", true}}}}});
  o.config = dir.file("fix.json");
  const nlohmann::json after = runAnalysis(o).report;
  EXPECT_LT(after["quantizers"].size(), before["quantizers"].size());
  EXPECT_GT(after["quantized"]["sqnr_db"].get<double>(),
            before["quantized"]["sqnr_db"].get<double>() +
                top["leave_one_out"]["gain_db"].get<double>() - 1e-6);
}

TEST(AnalyzePipeline, APreparedDirectoryIsAnalysedAsItWasCalibrated) {
  TempDir dir("analyze-dir");
  const Graph graph = testing::convReluConv();
  AnalyzeOptions o = convOptions(graph, dir);
  PtqOptions p;
  p.graph = &graph;
  p.backend = o.backend;
  p.calib = o.calib;
  p.calib_batches = o.calib_batches;
  p.calib_batch = o.calib_batch;
  p.out = dir.file("out");
  runPtqPipeline(p);
  const nlohmann::json in_memory = runAnalysis(o).report;
  AnalyzeOptions from_dir = o;
  from_dir.graph = nullptr;
  from_dir.model_path = dir.file("out");
  from_dir.backend.clear();
  const nlohmann::json saved = runAnalysis(from_dir).report;
  EXPECT_TRUE(saved["calibration"].is_null());
  EXPECT_NEAR(saved["quantized"]["sqnr_db"].get<double>(),
              in_memory["quantized"]["sqnr_db"].get<double>(), 1e-9);
  EXPECT_EQ(saved["ranking"], in_memory["ranking"]);
}

TEST(AnalyzePipeline, ScoresTopOneOnLabelledData) {
  TempDir dir("analyze-top1");
  const Graph graph = testing::linearClassifier();
  AnalyzeOptions o;
  o.graph = &graph;
  o.backend = testing::writeBackend(dir.file("tiny.json"));
  o.calib = testing::classifierData(32, 1, "calibration tensors");
  o.data = testing::classifierData(40, 2, "evaluation tensors");
  o.samples = 40;
  o.batch = 10;
  o.fisher = false;
  const nlohmann::json report = runAnalysis(o).report;
  ASSERT_TRUE(report.contains("task"));
  const at::Tensor x = testing::classifierInputs(40, 2);
  const at::Tensor logits =
      at::addmm(testing::classifierBias(), x, testing::classifierWeight().t());
  EXPECT_DOUBLE_EQ(report["task"]["float"].get<double>(),
                   100.0 * testing::correct(logits, testing::classifierLabels(x, 2)) / 40);
  for (const nlohmann::json& q : report["quantizers"])
    EXPECT_TRUE(q["fisher"].is_null());
}

TEST(AnalyzePipeline, RefusesSettingsThatCannotWork) {
  TempDir dir("analyze-bad");
  const Graph graph = testing::convReluConv();
  AnalyzeOptions o = convOptions(graph, dir);
  o.samples = 0;
  EXPECT_EQ(errorOf([&] { runAnalysis(o); }), "--samples must be at least 1");
  o = convOptions(graph, dir);
  o.isolated = o.leave_one_out = o.fisher = false;
  EXPECT_NE(errorOf([&] { runAnalysis(o); }).find("nothing to measure"), std::string::npos);
  o = convOptions(graph, dir);
  o.backend.clear();
  EXPECT_NE(errorOf([&] { runAnalysis(o); }).find("--backend is needed"), std::string::npos);
  o = convOptions(graph, dir);
  o.outputs = {"c1"};
  EXPECT_EQ(errorOf([&] { runAnalysis(o); }), "'c1' is not an output of the model");
}

}  // namespace
}  // namespace qforge::pipelines
