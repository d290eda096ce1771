// Mixed precision on Conv-ReLU-Conv whose backend runs 2, 3, 4 and 8-bit weights: each unit's
// weight noise at each width is what ATen's fake-quantize ops on the MinMax grid give; the choice
// is the best of every combination within the budget (enumerated here), fits it, and replays
// from its config; the flow writes tuned_config.json and the report; budgets that cannot work
// are refused.
#include "pipelines/mixed_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/files.h"
#include "core/json_reader.h"
#include "pipelines/tiny_classifier.h"
#include "support/checks.h"
#include "support/quant_graphs.h"
#include "support/tensor_dataset.h"

namespace qforge::pipelines {
namespace {

using testing::errorOf;

// Weights on the restricted grid [-(2^(b-1) - 1), 2^(b-1) - 1]: each channel's largest weight
// lands on a level, where the full grid puts it on a rounding tie that float arithmetic decides.
const nlohmann::json kWeightWidths = {{"weight", {{"bits", 3}, {"symmetric_range", true}}},
                                      {"alternatives", {{"weight_bits", {2, 4, 8}}}}};

at::Tensor evalInputs() {
  at::manual_seed(2);
  return at::randn({12, 2, 5, 5});
}

MixedPrecisionOptions options(const Graph& graph, const TempDir& dir,
                              const nlohmann::json& backend = kWeightWidths) {
  MixedPrecisionOptions o;
  o.ptq.graph = &graph;
  o.ptq.model_path = "conv-relu-conv";
  o.ptq.backend = testing::writeBackend(dir.file("tiny.json"), backend);
  at::manual_seed(1);
  o.ptq.calib = std::make_shared<testing::TensorDataset>(at::randn({16, 2, 5, 5}), at::Tensor());
  o.ptq.calib_batches = 2;
  o.ptq.calib_batch = 8;
  o.ptq.eval = std::make_shared<testing::TensorDataset>(evalInputs(), at::Tensor());
  o.ptq.eval_batch = 4;
  o.bits_budget = 3.0;
  return o;
}

// The model with weights fake-quantized as given, in double.
at::Tensor forward(const Graph& g, const at::Tensor& x, const at::Tensor& w1,
                   const at::Tensor& w2) {
  const at::Tensor b1 = g.findValue("b1")->initializer();
  const at::Tensor h = at::relu(at::conv2d(x, w1, b1, 1, 1));
  return at::conv2d(h, w2).to(at::kDouble);
}

// Symmetric per-channel MinMax on the restricted grid at `bits`, with ATen's op: scale
// max|w| / (2^(b-1) - 1).
at::Tensor quantizedWeight(const at::Tensor& w, int bits) {
  const int64_t top = (int64_t{1} << (bits - 1)) - 1;
  const at::Tensor scales = testing::symmetricScalesPerChannel(w, 2 * top).to(at::kFloat);
  return at::fake_quantize_per_channel_affine(w, scales, at::zeros({w.size(0)}, at::kInt), 0, -top,
                                              top);
}

double noiseOf(const Graph& g, const std::string& unit, int bits) {
  const at::Tensor x = evalInputs();
  const at::Tensor w1 = g.findValue("w1")->initializer();
  const at::Tensor w2 = g.findValue("w2")->initializer();
  const at::Tensor y = forward(g, x, w1, w2);
  const at::Tensor yq = unit == "conv1" ? forward(g, x, quantizedWeight(w1, bits), w2)
                                        : forward(g, x, w1, quantizedWeight(w2, bits));
  return (yq - y).square().sum().item<double>();
}

const UnitPrecision& unitOf(const MixedPrecisionResult& r, const std::string& name) {
  for (const UnitPrecision& u : r.units) {
    if (u.unit == name) return u;
  }
  throw Error("no unit " + name);
}

TEST(MixedPrecision, MeasuresEachUnitsWeightNoiseAtEveryWidth) {
  TempDir dir("mp-noise");
  const Graph graph = testing::convReluConv();
  const MixedPrecisionResult r = mixedPrecision(options(graph, dir));
  EXPECT_EQ(r.widths, (std::vector<int>{2, 3, 4, 8}));
  ASSERT_EQ(r.units.size(), 2u);
  EXPECT_EQ(unitOf(r, "conv1").elements, 54);
  EXPECT_EQ(unitOf(r, "conv2").elements, 6);
  for (const char* unit : {"conv1", "conv2"}) {
    for (int bits : r.widths) {
      const double expected = noiseOf(graph, unit, bits);
      ASSERT_GT(expected, 0) << unit << " W" << bits;
      EXPECT_NEAR(unitOf(r, unit).noise.at(bits), expected, 1e-4 * expected)
          << unit << " W" << bits;
    }
  }
}

TEST(MixedPrecision, ChoosesTheLeastNoiseWithinTheBudgetAndTheConfigReplaysIt) {
  TempDir dir("mp-choice");
  const Graph graph = testing::convReluConv();
  for (const double budget : {2.0, 3.0, 3.5, 8.0}) {
    MixedPrecisionOptions o = options(graph, dir);
    o.bits_budget = budget;
    const MixedPrecisionResult r = mixedPrecision(o);
    const int64_t budget_bits = static_cast<int64_t>(std::floor(budget * 60));
    EXPECT_EQ(r.budget_bits, budget_bits);
    const UnitPrecision& c1 = unitOf(r, "conv1");
    const UnitPrecision& c2 = unitOf(r, "conv2");
    EXPECT_EQ(r.total_bits, 54 * c1.bits + 6 * c2.bits);
    EXPECT_LE(r.total_bits, budget_bits);
    // Every pair of widths within the budget predicts at least the chosen noise.
    double best = std::numeric_limits<double>::infinity();
    for (int b1 : r.widths) {
      for (int b2 : r.widths) {
        if (54 * b1 + 6 * b2 <= budget_bits)
          best = std::min(best, noiseOf(graph, "conv1", b1) + noiseOf(graph, "conv2", b2));
      }
    }
    EXPECT_NEAR(noiseOf(graph, "conv1", c1.bits) + noiseOf(graph, "conv2", c2.bits), best,
                1e-6 * best)
        << "budget " << budget;
    // One uniform trial per width, then the choice; each uniform within the budget or not.
    ASSERT_EQ(r.trials.size(), r.widths.size() + 1);
    for (size_t i = 0; i < r.widths.size(); ++i) {
      EXPECT_EQ(r.trials[i].change, "uniform W" + std::to_string(r.widths[i]));
      EXPECT_EQ(r.trials[i].met, 60 * r.widths[i] <= budget_bits);
    }
    EXPECT_EQ(r.metric, "sqnr");  // the data has no labels

    // The config gives every unit its width, and replays to the trial's figure.
    PtqOptions replay = o.ptq;
    replay.eval = DataSource();
    replay.quant_config = passes::parseQuantConfig(r.chosen().config, "replay");
    const PtqResult q = quantizeModel(replay);
    for (const passes::QuantPoint& p : q.model->points()) {
      if (p.kind != passes::PointKind::Weight) continue;
      EXPECT_EQ(p.spec.scheme.bits, unitOf(r, p.unit).bits) << p.unit;
    }
    std::vector<algos::AnalysisBatch> batches;
    const at::Tensor x = evalInputs();
    for (int64_t i = 0; i < 12; i += 2)
      batches.push_back({{{"x", x.narrow(0, i, 2)}}, at::Tensor()});
    algos::SensitivityOptions none;
    none.isolated = none.leave_one_out = none.fisher = false;
    EXPECT_NEAR(algos::analyzeSensitivity(*q.model, batches, none).quantized.sqnrDb(),
                r.chosen().metric, 1e-9);
  }
}

TEST(MixedPrecision, ASizeBudgetIsTheSameBudgetInBytes) {
  TempDir dir("mp-size");
  const Graph graph = testing::convReluConv();
  MixedPrecisionOptions o = options(graph, dir);
  o.bits_budget = 3.2;  // 192 bits
  const MixedPrecisionResult by_bits = mixedPrecision(o);
  o.bits_budget.reset();
  o.size_budget = 24;  // bytes
  const MixedPrecisionResult by_size = mixedPrecision(o);
  EXPECT_EQ(by_size.budget_bits, 192);
  EXPECT_EQ(by_size.total_bits, by_bits.total_bits);
  EXPECT_EQ(unitOf(by_size, "conv1").bits, unitOf(by_bits, "conv1").bits);
  const nlohmann::json j = mixedPrecisionJson(by_size);
  EXPECT_EQ(j["budget_bits"], 192);
  EXPECT_EQ(j["weight_elements"], 60);
  EXPECT_EQ(j["units"].size(), 2u);
  EXPECT_EQ(j["chosen_trial"], by_size.chosen().trial);
  EXPECT_DOUBLE_EQ(j["average_bits"].get<double>(), by_size.total_bits / 60.0);
}

TEST(MixedPrecision, UnitsTheBackendPinsKeepTheirWidthAndCount) {
  TempDir dir("mp-pinned");
  const Graph graph = testing::convReluConv();
  nlohmann::json backend = kWeightWidths;
  backend["constraints"] = {{"first_last_bits", 8}};  // both units are first or last
  MixedPrecisionOptions o = options(graph, dir, backend);
  o.bits_budget = 4.0;
  EXPECT_EQ(errorOf([&] { mixedPrecision(o); }),
            "--bits-budget 4.00 is below what the narrowest widths take: 60 bytes, 8.00 bits per "
            "weight (units the backend or the config pins to a width count at it); raise the "
            "budget");
  o.bits_budget = 8.0;
  const MixedPrecisionResult r = mixedPrecision(o);
  EXPECT_TRUE(unitOf(r, "conv1").fixed);
  EXPECT_EQ(unitOf(r, "conv1").bits, 8);
  EXPECT_EQ(r.total_bits, 480);
}

TEST(MixedPrecision, RefusesBudgetsThatCannotWork) {
  TempDir dir("mp-bad");
  const Graph graph = testing::convReluConv();
  MixedPrecisionOptions o = options(graph, dir);
  o.bits_budget = 1.5;
  EXPECT_EQ(errorOf([&] { mixedPrecision(o); }),
            "--bits-budget 1.50 is below the narrowest weight width Tiny runs (2 bits)");
  o.size_budget = 100;
  EXPECT_NE(errorOf([&] { mixedPrecision(o); }).find("give one budget"), std::string::npos);
  o = options(graph, dir);
  o.ptq.eval = DataSource();
  EXPECT_NE(errorOf([&] { mixedPrecision(o); }).find("pass --eval"), std::string::npos);
  o = options(graph, dir, {{"weight", {{"bits", 8}, {"symmetric_range", true}}}});
  EXPECT_NE(errorOf([&] { mixedPrecision(o); }).find("Tiny runs only 8-bit weights"),
            std::string::npos);
}

TEST(MixedPrecision, TheFlowWritesTheChoiceAndRefusesATargetBeside) {
  TempDir dir("mp-flow");
  const Graph graph = testing::convReluConv();
  PtqOptions o = options(graph, dir).ptq;
  o.bits_budget = 3.0;
  o.out = dir.file("out");
  const PtqResult r = runPtqPipeline(o);
  ASSERT_TRUE(r.report.mixed_precision.has_value());
  const nlohmann::json report = parseJson(readFile(dir.file("out/report.json")), "report.json");
  const nlohmann::json& mp = report["mixed_precision"];
  EXPECT_EQ(mp["trials"].size(), 5u);
  const nlohmann::json tuned =
      parseJson(readFile(dir.file("out/tuned_config.json")), "tuned_config.json");
  EXPECT_EQ(tuned, mp["trials"][4]["config"]);
  o.out = dir.file("out2");
  o.target_sqnr = 20;
  EXPECT_NE(errorOf([&] { runPtqPipeline(o); }).find("separate searches"), std::string::npos);
  o.target_sqnr.reset();
  o.bits_budget.reset();
  o.size_budget = "12q";
  EXPECT_NE(errorOf([&] { runPtqPipeline(o); }).find("--size-budget"), std::string::npos);
}

}  // namespace
}  // namespace qforge::pipelines
