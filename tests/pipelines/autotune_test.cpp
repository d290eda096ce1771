// Accuracy-driven tuning on a 3-bit Conv-ReLU-Conv whose backend also runs 8 bits: the target is
// met by widening the most sensitive units, the chosen config replays to the trial's figure, a
// target out of reach keeps the best trial and says why, and the flow writes tuned_config.json
// and the trials into report.json; settings that cannot work are refused before any trial.
#include "pipelines/autotune.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "algos/sensitivity.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "pipelines/tiny_classifier.h"
#include "support/checks.h"
#include "support/quant_graphs.h"
#include "support/tensor_dataset.h"

namespace qforge::pipelines {
namespace {

using testing::errorOf;

const nlohmann::json kThreeBitOrEight = {
    {"weight", {{"bits", 3}}},
    {"activation", {{"bits", 3}}},
    {"alternatives", {{"weight_bits", {8}}, {"activation_bits", {8}}}}};

std::shared_ptr<testing::TensorDataset> convInputs(int64_t n, int64_t seed) {
  at::manual_seed(seed);
  return std::make_shared<testing::TensorDataset>(at::randn({n, 2, 5, 5}), at::Tensor(),
                                                  "conv tensors");
}

AutotuneOptions tuneOptions(const Graph& graph, const TempDir& dir, double target_sqnr) {
  AutotuneOptions o;
  o.ptq.graph = &graph;
  o.ptq.model_path = "conv-relu-conv";
  o.ptq.backend = testing::writeBackend(dir.file("tiny.json"), kThreeBitOrEight);
  o.ptq.calib = convInputs(16, 1);
  o.ptq.calib_batches = 2;
  o.ptq.calib_batch = 8;
  o.ptq.eval = convInputs(12, 2);
  o.ptq.eval_batch = 4;
  o.target_sqnr = target_sqnr;
  return o;
}

// The output SQNR of the flow run with `config` on the evaluation data, measured apart.
double replayedSqnr(const AutotuneOptions& o, const nlohmann::json& config) {
  PtqOptions p = o.ptq;
  p.eval = DataSource();
  p.quant_config = passes::parseQuantConfig(config, "replay");
  PtqResult r = quantizeModel(p);
  std::vector<algos::AnalysisBatch> batches;
  const at::Tensor x = [] {
    at::manual_seed(2);
    return at::randn({12, 2, 5, 5});
  }();
  for (int64_t i = 0; i < 12; i += 2)
    batches.push_back({{{"x", x.narrow(0, i, 2)}}, at::Tensor()});
  algos::SensitivityOptions none;
  none.isolated = none.leave_one_out = none.fisher = false;
  return algos::analyzeSensitivity(*r.model, batches, none).quantized.sqnrDb();
}

TEST(Autotune, WidensTheMostSensitiveUnitsUntilTheTargetIsMet) {
  TempDir dir("autotune");
  const Graph graph = testing::convReluConv();
  AutotuneOptions o = tuneOptions(graph, dir, 0);
  // Where the baseline stands, then a target above it that 8 bits everywhere reaches.
  o.max_trials = 1;
  const double baseline = autotune(o).trials.at(0).metric;
  o.max_trials = 20;
  o.target_sqnr = baseline + 6;
  const AutotuneResult r = autotune(o);
  ASSERT_TRUE(r.met) << r.note;
  EXPECT_EQ(r.metric, "sqnr");
  EXPECT_EQ(r.trials[0].change, "baseline");
  EXPECT_NEAR(r.trials[0].metric, baseline, 1e-9);  // deterministic
  EXPECT_FALSE(r.trials[0].met);
  const TuningTrial& best = r.trials[r.best];
  EXPECT_TRUE(best.met);
  EXPECT_GE(best.metric, baseline + 6);
  EXPECT_GT(best.wide_units, 0);
  EXPECT_EQ(best.float_units, 0);  // 8 bits is allowed, so nothing falls back to float
  EXPECT_GT(best.avg_weight_bits, 3.0);
  EXPECT_LE(best.avg_weight_bits, 8.0);
  // No trial that met the target changed fewer units, or as many with fewer weight bits.
  for (const TuningTrial& t : r.trials) {
    if (!t.met) continue;
    EXPECT_GE(t.wide_units + t.float_units, best.wide_units + best.float_units);
    if (t.wide_units + t.float_units == best.wide_units + best.float_units) {
      EXPECT_GE(t.avg_weight_bits, best.avg_weight_bits) << t.change;
    }
  }
  EXPECT_NEAR(replayedSqnr(o, best.config), best.metric, 1e-9);
}

// Two far outliers among 40,000 calibration values set an 8-bit MinMax range 100 times wider
// than the evaluation data's: the first observer trial, Percentile (99.99, so the 4 largest |x|
// fall outside), clips them, and when that meets the target the search ends there with the
// observer in the chosen config.
TEST(Autotune, TriesPercentileBeforeAnyUnitAndKeepsItWhenItMeetsTheTarget) {
  TempDir dir("autotune-observers");
  const Graph graph = testing::convReluConv();
  AutotuneOptions o = tuneOptions(graph, dir, 1000);
  o.ptq.backend = testing::writeBackend(dir.file("eight.json"),
                                        {{"weight", {{"bits", 8}}}, {"activation", {{"bits", 8}}}});
  at::manual_seed(3);
  at::Tensor calib = at::randn({800, 2, 5, 5});
  calib.index_put_({0, 0, 0, 0}, 400.0f);
  calib.index_put_({500, 1, 2, 2}, -400.0f);
  o.ptq.calib = std::make_shared<testing::TensorDataset>(calib, at::Tensor(), "outliers");
  o.ptq.calib_batches = 100;
  o.max_trials = 2;
  const AutotuneResult probe = autotune(o);
  ASSERT_EQ(probe.trials.size(), 2u);
  EXPECT_EQ(probe.trials[1].change, "activation observer Percentile percentile 99.99");
  EXPECT_GT(probe.trials[1].metric, probe.trials[0].metric + 10);  // outliers cost 40+ dB

  o.max_trials = 20;
  o.target_sqnr = probe.trials[1].metric - 0.01;
  const AutotuneResult r = autotune(o);
  ASSERT_TRUE(r.met) << r.note;
  EXPECT_EQ(r.trials.size(), 2u);
  EXPECT_EQ(r.best, 1u);
  EXPECT_EQ(r.trials[1].config["activation"]["observer"], "Percentile");
  EXPECT_EQ(r.trials[1].wide_units + r.trials[1].float_units, 0);
  EXPECT_NEAR(replayedSqnr(o, r.trials[1].config), r.trials[1].metric, 1e-9);
}

TEST(Autotune, ATargetOutOfReachKeepsTheBestTrialAndSaysWhy) {
  TempDir dir("autotune-miss");
  const Graph graph = testing::convReluConv();
  AutotuneOptions o = tuneOptions(graph, dir, 1000);
  const AutotuneResult r = autotune(o);
  EXPECT_FALSE(r.met);
  EXPECT_FALSE(r.note.empty());
  for (const TuningTrial& t : r.trials)
    EXPECT_LE(t.metric, r.trials[r.best].metric);
  const nlohmann::json j = autotuneJson(r);
  EXPECT_EQ(j["metric"], "sqnr_db");
  EXPECT_EQ(j["met"], false);
  EXPECT_EQ(j["best_trial"], r.trials[r.best].trial);
  EXPECT_EQ(j["trials"].size(), r.trials.size());

  o.max_trials = 2;
  const AutotuneResult capped = autotune(o);
  EXPECT_EQ(capped.trials.size(), 2u);
  EXPECT_EQ(capped.note, "--max-trials reached");
}

TEST(Autotune, TheFlowWritesTheChosenConfigAndTheTrials) {
  TempDir dir("autotune-flow");
  const Graph graph = testing::convReluConv();
  const AutotuneOptions a = tuneOptions(graph, dir, 0);
  PtqOptions o = a.ptq;
  o.target_sqnr = 1000;
  o.max_trials = 3;
  o.out = dir.file("out");
  const PtqResult r = runPtqPipeline(o);
  ASSERT_TRUE(r.report.autotune.has_value());
  const nlohmann::json report = parseJson(readFile(dir.file("out/report.json")), "report.json");
  EXPECT_EQ(report["autotune"]["trials"].size(), 3u);
  const nlohmann::json tuned =
      parseJson(readFile(dir.file("out/tuned_config.json")), "tuned_config.json");
  const int64_t best = report["autotune"]["best_trial"];
  EXPECT_EQ(tuned, report["autotune"]["trials"][best - 1]["config"]);
}

TEST(Autotune, RefusesSettingsThatCannotWorkBeforeAnyTrial) {
  TempDir dir("autotune-bad");
  const Graph graph = testing::convReluConv();
  AutotuneOptions o = tuneOptions(graph, dir, 20);
  o.ptq.eval = DataSource();
  EXPECT_NE(errorOf([&] { autotune(o); }).find("pass --eval"), std::string::npos);
  o = tuneOptions(graph, dir, 20);
  o.target_drop = 1.0;
  EXPECT_NE(errorOf([&] { autotune(o); }).find("give one target"), std::string::npos);
  o = tuneOptions(graph, dir, 20);
  o.metric = "top1";
  o.target_sqnr.reset();
  o.target_drop = 1.0;
  EXPECT_NE(errorOf([&] { autotune(o); }).find("needs labelled evaluation data"),
            std::string::npos);
}

}  // namespace
}  // namespace qforge::pipelines
