// The analysis report as a browser draws it: hand-made reports written to a file, rendered in
// headless Chromium (support/chromium.h), and the DOM after the page's script ran read back. The
// charts exist (a bar per quantizer with the figure, a histogram per range histogram, the trials
// chart with autotune), the numbers shown are the JSON's (data-value in full, the visible text
// within its printed precision), and names from the model stay text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/files.h"
#include "pipelines/analysis_html.h"
#include "support/chromium.h"
#include "support/dom.h"

namespace qforge::testing {
namespace {

using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

// --- Rendering, once per report per test process ------------------------------------------------

struct Rendering {
  ::testing::AssertionResult ok = ::testing::AssertionFailure();
  std::unique_ptr<Dom> dom;
};

const Rendering& rendered(const std::string& key, const json& report) {
  static std::map<std::string, Rendering> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Rendering r;
  TempDir dir("analysis-html");
  const std::string path = dir.file("report.html");
  writeFileAtomically(path, pipelines::analysisHtml(report));
  std::string dom;
  r.ok = renderDom(path, &dom);
  if (r.ok) r.dom = std::make_unique<Dom>(dom);
  return cache.emplace(key, std::move(r)).first->second;
}

// Fails the test (returns nullptr) unless the page rendered and its script ran to the end.
const Dom* renderedDom(const std::string& key, const json& report) {
  const Rendering& r = rendered(key, report);
  EXPECT_TRUE(r.ok);
  if (!r.ok) return nullptr;
  const Dom& dom = *r.dom;
  const Element* error = dom.byId("render-error");
  EXPECT_EQ(error, nullptr) << error->text;
  const Element* body = dom.one("body", "");
  EXPECT_TRUE(body && body->attr("data-rendered") == "ok") << "the page script did not finish";
  return error == nullptr ? &dom : nullptr;
}

// --- Reports ------------------------------------------------------------------------------------

std::vector<int> histogramCounts(int seed) {
  std::vector<int> counts;
  for (int i = 0; i < 64; ++i)
    counts.push_back((i * 37 + seed * 11) % 97 + (i == 20 + seed ? 5000 : 0));
  return counts;
}

// Five quantizers: full figures; identical outputs written as null; as 1e308 and a range without
// a histogram; nothing optional at all; a negative gain. Names hold <, &, quotes and </script>.
json fullReport() {
  json report = json::parse(R"json({
    "command": "analyze", "model": "models/zoo/<resnet> & \"friends\".onnx", "backend": "TensorRT",
    "data": "fashion-mnist:test (10000 samples)", "samples": 32,
    "calibration": {"data": "fashion-mnist:train", "samples": 256}, "outputs": ["logits"],
    "quantized": {"sqnr_db": 21.3, "cosine": 0.996},
    "task": {"metric": "top1", "float": 93.2, "quantized": 92.875},
    "ranking_by": "leave_one_out",
    "ranking": ["fc.weight_fq</script>", "conv1.weight_fq", "act<relu>&\"1\"", "out'quote"],
    "rankings_agreement": {"isolated_vs_leave_one_out": 0.91, "fisher_vs_isolated": null},
    "quantizers": [
      {"name": "conv1.weight_fq", "kind": "weight", "value": "conv1.weight", "unit": "conv1",
       "op": "Conv", "bits": 8, "signed": true, "granularity": "per-channel", "observer": "MinMax",
       "isolated": {"sqnr_db": 45.126, "cosine": 0.9999},
       "leave_one_out": {"sqnr_db": 22.0, "cosine": 0.998, "gain_db": 0.7},
       "fisher": 0.0012, "local_sqnr_db": 38.2, "accumulated_sqnr_db": 30.1049,
       "range": {"min": -1.2, "max": 3.4, "p0_1": -0.9, "p99_9": 2.1, "outlier_ratio": 1.6,
                 "clipped_fraction": 0.0, "channel_spread": 3.2,
                 "histogram": {"low": -1.2, "high": 3.4, "counts": []}},
       "rank": 2,
       "suggestions": [{"fix": "bits", "why": "16-bit weights for conv1",
                        "override": {"name": "conv1", "weight": {"bits": 16}}}]},
      {"name": "act<relu>&\"1\"", "kind": "activation", "value": "relu_out", "unit": "conv1",
       "op": "Relu", "bits": 8, "signed": false, "granularity": "per-tensor",
       "observer": "Percentile",
       "isolated": {"sqnr_db": null, "cosine": 1.0},
       "leave_one_out": {"sqnr_db": 21.9, "cosine": 0.997, "gain_db": 0.6},
       "fisher": 3.25e-7, "local_sqnr_db": null, "accumulated_sqnr_db": 28.0,
       "range": {"min": 0.0, "max": 6.0, "p0_1": 0.0, "p99_9": 4.5, "outlier_ratio": 1.33,
                 "clipped_fraction": 0.001, "channel_spread": null,
                 "histogram": {"low": 0.0, "high": 6.0, "counts": []}},
       "rank": 3, "suggestions": []},
      {"name": "fc.weight_fq</script>", "kind": "weight", "value": "fc.weight", "unit": "fc",
       "op": "Gemm", "bits": 4, "signed": true, "granularity": "per-channel",
       "observer": "MinMax",
       "isolated": {"sqnr_db": 1e308, "cosine": 1.0},
       "leave_one_out": {"sqnr_db": 23.8, "cosine": 0.999, "gain_db": 2.5},
       "fisher": 0.0123, "local_sqnr_db": 1e308, "accumulated_sqnr_db": 19.994,
       "range": {"min": -0.5, "max": 0.5, "p0_1": -0.4, "p99_9": 0.4, "outlier_ratio": 1.25,
                 "clipped_fraction": 0.0, "channel_spread": 2.0, "histogram": null},
       "rank": 1,
       "suggestions": [{"fix": "float", "why": "keep the unit float: <fc> & \"co\"",
                        "override": {"name": "fc", "skip": true}},
                       {"fix": "bits", "why": "8-bit weights"}]},
      {"name": "bias_q", "kind": "bias", "isolated": null, "leave_one_out": null,
       "fisher": null, "local_sqnr_db": null, "accumulated_sqnr_db": null, "range": null,
       "rank": null},
      {"name": "out'quote", "kind": "fixed_output", "value": "softmax_out", "unit": "softmax",
       "op": "Softmax", "bits": 8, "signed": false, "granularity": "per-tensor",
       "observer": "Fixed",
       "isolated": {"sqnr_db": 12.345, "cosine": 0.97},
       "leave_one_out": {"sqnr_db": 21.05, "cosine": 0.9959, "gain_db": -0.25},
       "fisher": 0.0, "local_sqnr_db": -3.5, "accumulated_sqnr_db": 11.0,
       "range": {"min": 0.0, "max": 1.0, "p0_1": 0.0, "p99_9": 0.99, "outlier_ratio": 1.01,
                 "clipped_fraction": 0.0, "channel_spread": null,
                 "histogram": {"low": 0.0, "high": 1.0, "counts": []}},
       "rank": 4, "suggestions": null}
    ],
    "autotune": {"metric": "sqnr_db", "target": 25.0, "float": 30.5, "met": true,
                 "best_trial": 3,
                 "trials": [
                   {"trial": 1, "change": "baseline", "metric": 21.3, "drop": null,
                    "float_units": 0, "wide_units": 0, "avg_weight_bits": 7.2, "seconds": 1.2},
                   {"trial": 2, "change": "fc: float <&>", "metric": null, "drop": null,
                    "float_units": 1, "wide_units": 0, "avg_weight_bits": 7.5, "seconds": 0.9},
                   {"trial": 3, "change": "conv1: 16-bit weights", "metric": 25.437,
                    "drop": null, "float_units": 1, "wide_units": 1,
                    "avg_weight_bits": 8.75, "seconds": 1.35}]},
    "seconds": 12.3
  })json");
  for (size_t i = 0; i < report["quantizers"].size(); ++i) {
    json& range = report["quantizers"][i]["range"];
    if (range.is_object() && range["histogram"].is_object())
      range["histogram"]["counts"] = histogramCounts(static_cast<int>(i));
  }
  return report;
}

// Only what a report cannot go without: names. No task, ranking, autotune or measurements.
json minimalReport() {
  return json::parse(R"json({
    "command": "analyze", "model": "m.onnx",
    "quantizers": [{"name": "a"}, {"name": "b", "isolated": null, "range": {"min": 0.0}}]
  })json");
}

// A quantize report with a mixed-precision choice: three uniform widths and the choice, two
// units (one pinned), a noise figure absent at one width.
json mixedPrecisionReport() {
  return json::parse(R"json({
    "command": "quantize", "model": "resnet.onnx", "backend": "Academic", "quantizers": [],
    "mixed_precision": {
      "metric": "top1", "float": 94.05, "ranking": "isolated", "widths": [4, 5, 8],
      "budget_bits": 1000, "budget_average_bits": 5.0, "weight_elements": 200,
      "total_bits": 990, "average_bits": 4.95, "weight_bytes": 124,
      "predicted_sqnr_db": 27.125, "chosen_metric": 93.28, "uniform_interpolated": 93.2575,
      "chosen_trial": 4, "seconds": 60.9,
      "units": [
        {"unit": "layer1/conv<1>", "elements": 150, "bits": 4, "fixed": false,
         "noise": {"4": 0.00123, "5": 0.000305, "8": 4.5e-6}},
        {"unit": "fc", "elements": 50, "bits": 8, "fixed": true, "noise": {"8": 1.25e-5}}],
      "trials": [
        {"trial": 1, "change": "uniform W4", "metric": 92.99, "avg_weight_bits": 5.0,
         "met": true, "seconds": 7.5},
        {"trial": 2, "change": "uniform W5", "metric": 93.27, "avg_weight_bits": 5.75,
         "met": false, "seconds": 7.25},
        {"trial": 3, "change": "uniform W8", "metric": null, "avg_weight_bits": 8.0,
         "met": false, "seconds": 7.0},
        {"trial": 4, "change": "mixed precision, 4.95 bits per weight", "metric": 93.28,
         "avg_weight_bits": 4.95, "met": true, "seconds": 8.0}]}
  })json");
}

// --- Reading numbers back -----------------------------------------------------------------------

// The SQNR a JSON figure means: null or >= 1e300 is identical outputs.
double shownDb(const json& v) {
  if (v.is_null()) return kInf;
  const double x = v.get<double>();
  return x >= 1e300 ? kInf : x;
}

// What data-value holds for an SQNR: the JSON number itself, Infinity for null.
double rawDb(const json& v) {
  return v.is_null() ? kInf : v.get<double>();
}

const json* quantizerNamed(const json& report, const std::string& name) {
  for (const json& q : report["quantizers"]) {
    if (q["name"] == name) return &q;
  }
  return nullptr;
}

// --- Tests --------------------------------------------------------------------------------------

TEST(AnalysisHtmlBrowser, HeaderShowsTheWholeModelFigures) {
  const json report = fullReport();
  const Dom* dom = renderedDom("full", report);
  ASSERT_NE(dom, nullptr);
  const Element* model = dom->byId("model");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->text, report["model"]);
  const Element* sqnr = dom->byId("quantized-sqnr");
  const Element* cosine = dom->byId("quantized-cosine");
  ASSERT_TRUE(sqnr && cosine);
  EXPECT_EQ(dataValue(*sqnr), 21.3);
  expectText2(sqnr->text, 21.3, "quantized SQNR");
  EXPECT_EQ(dataValue(*cosine), 0.996);
  EXPECT_EQ(cosine->text, "0.996000");
  const Element* task_float = dom->byId("task-float");
  const Element* task_quantized = dom->byId("task-quantized");
  const Element* task_delta = dom->byId("task-delta");
  ASSERT_TRUE(task_float && task_quantized && task_delta);
  expectText2(task_float->text, 93.2, "float top1");
  expectText2(task_quantized->text, 92.875, "quantized top1");
  EXPECT_EQ(dataValue(*task_quantized), 92.875);
  EXPECT_NEAR(dataValue(*task_delta), 92.875 - 93.2, 1e-12);
  EXPECT_EQ(task_delta->text, "-0.33");
  EXPECT_EQ(dom->title(), "qforge analyze: " + report["model"].get<std::string>());
}

TEST(AnalysisHtmlBrowser, OneTableRowPerQuantizerWithItsFigures) {
  const json report = fullReport();
  const Dom* dom = renderedDom("full", report);
  ASSERT_NE(dom, nullptr);
  EXPECT_EQ(dom->find("tr", "quantizer-row").size(), report["quantizers"].size());
  for (const json& q : report["quantizers"]) {
    const std::string name = q["name"];
    SCOPED_TRACE(name);
    const Element* row = dom->one("tr", "quantizer-row", "data-quantizer", name);
    ASSERT_NE(row, nullptr);
    auto cell = [&](const std::string& key) -> const Element& {
      return dom->the("td", "col-" + key, "", "", row);
    };
    const Element* qname = dom->one("span", "qname", "", "", row);
    ASSERT_NE(qname, nullptr);
    EXPECT_EQ(qname->text, name);
    EXPECT_EQ(cell("rank").text, q["rank"].is_null() ? "\u2014" : q["rank"].dump());
    EXPECT_EQ(cell("kind").text, q["kind"]);
    EXPECT_EQ(cell("op").text, q.value("op", "\u2014"));
    if (q.contains("bits")) {
      EXPECT_EQ(cell("bits").text, (q["signed"] ? "int" : "uint") + q["bits"].dump());
    } else {
      EXPECT_EQ(cell("bits").text, "\u2014");
    }
    // The dB columns: data-value the JSON's number, text rounded to 2 decimals.
    const std::vector<std::pair<std::string, const json*>> db = {
        {"isolated", q["isolated"].is_object() ? &q["isolated"]["sqnr_db"] : nullptr},
        {"gain", q["leave_one_out"].is_object() ? &q["leave_one_out"]["gain_db"] : nullptr},
        {"local", &q["local_sqnr_db"]},
        {"accumulated", &q["accumulated_sqnr_db"]}};
    for (const auto& [key, value] : db) {
      const Element& td = cell(key);
      // Outside a measurement (local, accumulated) null means not measured.
      const bool absent = !value || (value->is_null() && (key == "local" || key == "accumulated"));
      if (absent) {
        EXPECT_EQ(td.text, "\u2014") << key;
        EXPECT_FALSE(td.has("data-value")) << key;
        continue;
      }
      EXPECT_EQ(dataValue(td), rawDb(*value)) << key;
      expectText2(td.text, shownDb(*value), key);
    }
    const Element& fisher = cell("fisher");
    if (q["fisher"].is_null()) {
      EXPECT_EQ(fisher.text, "\u2014");
    } else {
      const double f = q["fisher"];
      EXPECT_EQ(dataValue(fisher), f);
      EXPECT_NEAR(std::strtod(fisher.text.c_str(), nullptr), f, std::abs(f) * 0.005);
    }
    // Every suggestion's fix and why, as text.
    const Element& suggestions = cell("suggestions");
    const json& list =
        q.contains("suggestions") && q["suggestions"].is_array() ? q["suggestions"] : json::array();
    EXPECT_EQ(dom->find("li", "", "", "", &suggestions).size(), list.size());
    for (const json& s : list) {
      EXPECT_NE(
          suggestions.text.find(s["fix"].get<std::string>() + ": " + s["why"].get<std::string>()),
          std::string::npos)
          << suggestions.text;
    }
  }
  // Sorted by rank, the unranked last.
  const auto rows = dom->find("tr", "quantizer-row");
  std::vector<std::string> order;
  for (const Element* r : rows)
    order.push_back(r->attr("data-quantizer"));
  const std::vector<std::string> expected = {"fc.weight_fq</script>", "conv1.weight_fq",
                                             "act<relu>&\"1\"", "out'quote", "bias_q"};
  EXPECT_EQ(order, expected);
}

TEST(AnalysisHtmlBrowser, SqnrBarsOnePerQuantizerWithAnIsolatedSqnr) {
  const json report = fullReport();
  const Dom* dom = renderedDom("full", report);
  ASSERT_NE(dom, nullptr);
  const Element* chart = dom->one("svg", "", "id", "sqnr-chart");
  ASSERT_NE(chart, nullptr);
  size_t expected = 0;
  for (const json& q : report["quantizers"]) {
    if (!q["isolated"].is_object()) {
      EXPECT_TRUE(dom->find("rect", "sqnr-bar", "data-quantizer", q["name"]).empty());
      continue;
    }
    ++expected;
    const std::string name = q["name"];
    const Element* bar = dom->one("rect", "sqnr-bar", "data-quantizer", name, chart);
    ASSERT_NE(bar, nullptr) << name;
    EXPECT_EQ(dataValue(*bar), rawDb(q["isolated"]["sqnr_db"])) << name;
    EXPECT_GT(std::strtod(bar->attr("width").c_str(), nullptr), 0) << name;
    const Element* label = dom->one("text", "bar-label", "data-quantizer", name, chart);
    ASSERT_NE(label, nullptr) << name;
    expectText2(label->text, shownDb(q["isolated"]["sqnr_db"]), name);
  }
  EXPECT_EQ(dom->find("rect", "sqnr-bar").size(), expected);
  EXPECT_EQ(expected, 4u);
}

TEST(AnalysisHtmlBrowser, GainBarsOnePerQuantizerWithALeaveOneOutGain) {
  const json report = fullReport();
  const Dom* dom = renderedDom("full", report);
  ASSERT_NE(dom, nullptr);
  const Element* chart = dom->one("svg", "", "id", "gain-chart");
  ASSERT_NE(chart, nullptr);
  size_t expected = 0;
  for (const json& q : report["quantizers"]) {
    if (!q["leave_one_out"].is_object()) continue;
    ++expected;
    const std::string name = q["name"];
    const double gain = q["leave_one_out"]["gain_db"];
    const Element* bar = dom->one("rect", "gain-bar", "data-quantizer", name, chart);
    ASSERT_NE(bar, nullptr) << name;
    EXPECT_EQ(dataValue(*bar), gain) << name;
    const Element* label = dom->one("text", "bar-label", "data-quantizer", name, chart);
    ASSERT_NE(label, nullptr) << name;
    expectText2(label->text, gain, name);
  }
  EXPECT_EQ(dom->find("rect", "gain-bar").size(), expected);
  // Bars are drawn from zero: the negative gain ends where the positive ones start.
  const Element* negative = dom->one("rect", "gain-bar", "data-quantizer", "out'quote");
  const Element* positive = dom->one("rect", "gain-bar", "data-quantizer", "conv1.weight_fq");
  ASSERT_TRUE(negative && positive);
  EXPECT_NEAR(std::strtod(negative->attr("x").c_str(), nullptr) +
                  std::strtod(negative->attr("width").c_str(), nullptr),
              std::strtod(positive->attr("x").c_str(), nullptr), 1e-3);
}

TEST(AnalysisHtmlBrowser, HistogramsForQuantizersWithARangeHistogram) {
  const json report = fullReport();
  const Dom* dom = renderedDom("full", report);
  ASSERT_NE(dom, nullptr);
  size_t expected = 0;
  for (const json& q : report["quantizers"]) {
    const std::string name = q["name"];
    const bool has = q["range"].is_object() && q["range"]["histogram"].is_object();
    const auto found = dom->find("svg", "histogram", "data-quantizer", name);
    if (!has) {
      EXPECT_TRUE(found.empty()) << name;
      continue;
    }
    ++expected;
    ASSERT_EQ(found.size(), 1u) << name;
    const auto bins = dom->find("rect", "hist-bin", "", "", found[0]);
    const json& counts = q["range"]["histogram"]["counts"];
    ASSERT_EQ(bins.size(), counts.size()) << name;
    for (size_t i = 0; i < bins.size(); ++i)
      EXPECT_EQ(bins[i]->attr("data-count"), counts[i].dump()) << name << " bin " << i;
    for (const char* mark : {"min", "max", "p0_1", "p99_9"}) {
      const Element* line = dom->one("line", "range-mark", "data-mark", mark, found[0]);
      ASSERT_NE(line, nullptr) << name << " " << mark;
      EXPECT_EQ(dataValue(*line), q["range"][mark].get<double>()) << name << " " << mark;
    }
  }
  EXPECT_EQ(dom->find("svg", "histogram").size(), expected);
  EXPECT_EQ(expected, 3u);
}

TEST(AnalysisHtmlBrowser, AutotuneChartAndTrialsTable) {
  const json report = fullReport();
  const Dom* dom = renderedDom("full", report);
  ASSERT_NE(dom, nullptr);
  const Element* chart = dom->one("svg", "", "id", "autotune-chart");
  ASSERT_NE(chart, nullptr);
  const Element* target = dom->one("line", "target-line", "", "", chart);
  ASSERT_NE(target, nullptr);
  EXPECT_EQ(dataValue(*target), 25.0);
  const json& trials = report["autotune"]["trials"];
  size_t points = 0;
  for (const json& t : trials) {
    const std::string trial = t["trial"].dump();
    SCOPED_TRACE("trial " + trial);
    const auto point = dom->find("circle", "trial-point", "data-trial", trial, chart);
    if (t["metric"].is_null()) {
      EXPECT_TRUE(point.empty());
    } else {
      ++points;
      ASSERT_EQ(point.size(), 1u);
      EXPECT_EQ(dataValue(*point[0]), t["metric"].get<double>());
      EXPECT_EQ(point[0]->hasClass("best"), t["trial"] == report["autotune"]["best_trial"]);
    }
    const Element* row = dom->one("tr", "trial-row", "data-trial", trial);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(dom->the("td", "col-change", "", "", row).text, t["change"]);
    const Element* metric = dom->one("td", "col-metric", "", "", row);
    if (t["metric"].is_null()) {
      EXPECT_EQ(metric->text, "\u2014");
    } else {
      EXPECT_EQ(dataValue(*metric), t["metric"].get<double>());
      expectText2(metric->text, t["metric"], "metric");
    }
    expectText2(dom->the("td", "col-avg_weight_bits", "", "", row).text, t["avg_weight_bits"],
                "avg weight bits");
    EXPECT_EQ(dom->the("td", "col-float_units", "", "", row).text, t["float_units"].dump());
  }
  EXPECT_EQ(dom->find("circle", "trial-point").size(), points);
  EXPECT_EQ(dom->find("tr", "trial-row").size(), trials.size());
}

TEST(AnalysisHtmlBrowser, MixedPrecisionChartTrialsAndUnits) {
  const json report = mixedPrecisionReport();
  const json& mp = report["mixed_precision"];
  const Dom* dom = renderedDom("mixed", report);
  ASSERT_NE(dom, nullptr);
  EXPECT_EQ(dataValue(*dom->byId("mp-budget")), 5.0);
  // A quantize report without quantizers draws no empty per-quantizer sections.
  EXPECT_EQ(dom->byId("quantizers"), nullptr);
  EXPECT_EQ(dom->byId("histograms"), nullptr);
  EXPECT_EQ(dom->byId("mp-average")->text, "4.95");
  EXPECT_EQ(dataValue(*dom->byId("mp-chosen-metric")), 93.28);
  EXPECT_EQ(dataValue(*dom->byId("mp-interpolated")), 93.2575);
  expectText2(dom->byId("mp-interpolated")->text, 93.2575, "interpolated");
  EXPECT_EQ(dom->byId("mp-predicted")->text, "27.13");
  const Element* chart = dom->one("svg", "", "id", "mp-chart");
  ASSERT_NE(chart, nullptr);
  EXPECT_EQ(dataValue(dom->the("line", "budget-line", "", "", chart)), 5.0);
  size_t points = 0;
  for (const json& t : mp["trials"]) {
    const std::string trial = t["trial"].dump();
    SCOPED_TRACE("trial " + trial);
    const auto point = dom->find("circle", "mp-point", "data-trial", trial, chart);
    if (t["metric"].is_null()) {
      EXPECT_TRUE(point.empty());
    } else {
      ++points;
      ASSERT_EQ(point.size(), 1u);
      EXPECT_EQ(dataValue(*point[0]), t["metric"].get<double>());
      EXPECT_EQ(std::strtod(point[0]->attr("data-bits").c_str(), nullptr),
                t["avg_weight_bits"].get<double>());
      EXPECT_EQ(point[0]->hasClass("chosen"), t["trial"] == mp["chosen_trial"]);
    }
    const Element* row = dom->one("tr", "mp-trial-row", "data-trial", trial);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(dom->the("td", "col-change", "", "", row).text, t["change"]);
    EXPECT_EQ(dom->the("td", "col-met", "", "", row).text, t["met"] == true ? "yes" : "no");
    expectText2(dom->the("td", "col-avg_weight_bits", "", "", row).text, t["avg_weight_bits"],
                "bits");
  }
  EXPECT_EQ(dom->find("circle", "mp-point").size(), points);
  // The chosen point sits left of the uniform W4 one: fewer bits.
  EXPECT_LT(std::strtod(dom->the("circle", "mp-point", "data-trial", "4", chart).attr("cx").c_str(),
                        nullptr),
            std::strtod(dom->the("circle", "mp-point", "data-trial", "1", chart).attr("cx").c_str(),
                        nullptr));
  for (const json& u : mp["units"]) {
    const std::string name = u["unit"];
    SCOPED_TRACE(name);
    const Element* row = dom->one("tr", "mp-unit-row", "data-unit", name);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(dom->the("td", "col-unit", "", "", row).text, name);
    EXPECT_EQ(dataValue(dom->the("td", "col-bits", "", "", row)), u["bits"].get<double>());
    EXPECT_EQ(dom->the("td", "col-elements", "", "", row).text, u["elements"].dump());
    EXPECT_EQ(dom->the("td", "col-fixed", "", "", row).text, u["fixed"] == true ? "yes" : "");
    for (const int w : {4, 5, 8}) {
      const Element& cell = dom->the("td", "col-noise-" + std::to_string(w), "", "", row);
      const json& noise = u["noise"];
      if (!noise.contains(std::to_string(w))) {
        EXPECT_EQ(cell.text, "\u2014");
        continue;
      }
      const double v = noise[std::to_string(w)];
      EXPECT_EQ(dataValue(cell), v);
      EXPECT_NEAR(std::strtod(cell.text.c_str(), nullptr), v, 0.006 * v) << cell.text;
      EXPECT_EQ(cell.hasClass("chosen"), w == u["bits"].get<int>());
    }
  }
}

TEST(AnalysisHtmlBrowser, ReportWithoutOptionalPartsDrawsNoChartForThem) {
  const json report = minimalReport();
  const Dom* dom = renderedDom("minimal", report);
  ASSERT_NE(dom, nullptr);
  EXPECT_EQ(dom->find("tr", "quantizer-row").size(), 2u);
  EXPECT_NE(dom->one("tr", "quantizer-row", "data-quantizer", "b"), nullptr);
  EXPECT_NE(dom->byId("quantizers"), nullptr);  // an analysis report keeps its sections
  EXPECT_EQ(dom->byId("quantized-sqnr")->text, "\u2014");
  EXPECT_EQ(dom->byId("task-float"), nullptr);
  EXPECT_EQ(dom->byId("autotune-chart"), nullptr);
  EXPECT_EQ(dom->byId("mp-chart"), nullptr);
  EXPECT_TRUE(dom->find("tr", "trial-row").empty());
  EXPECT_TRUE(dom->find("tr", "mp-unit-row").empty());
  EXPECT_TRUE(dom->find("rect", "sqnr-bar").empty());
  EXPECT_TRUE(dom->find("rect", "gain-bar").empty());
  EXPECT_TRUE(dom->find("svg", "histogram").empty());
}

TEST(AnalysisHtmlBrowser, NamesFromTheModelCannotInjectMarkup) {
  const std::vector<std::string> names = {
      "</script><script>document.body.setAttribute('data-pwned','script')</script>",
      "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">",
      "\"><b class=\"injected\">bold</b><svg onload=\"document.body.setAttribute('data-pwned',"
      "'svg')\"></svg>",
      "&lt;i&gt;entity&amp;<!--",
  };
  json report = fullReport();
  report["model"] = "</title><script>document.body.setAttribute('data-pwned','title')</script>";
  report["backend"] = names[1];
  report["outputs"] = names;
  for (size_t i = 0; i < names.size(); ++i) {
    json& q = report["quantizers"][i];
    q["name"] = names[i];
    q["unit"] = names[(i + 1) % names.size()];
    q["op"] = names[(i + 2) % names.size()];
    q["suggestions"] = {{{"fix", names[i]},
                         {"why", names[(i + 3) % names.size()]},
                         {"override", {{"name", names[i]}}}}};
  }
  report["autotune"]["trials"][0]["change"] = names[2];
  report["autotune"]["metric"] = names[1];
  report["mixed_precision"] = mixedPrecisionReport()["mixed_precision"];
  report["mixed_precision"]["units"][0]["unit"] = names[0];
  report["mixed_precision"]["trials"][1]["change"] = names[3];
  const Dom* dom = renderedDom("hostile", report);
  ASSERT_NE(dom, nullptr);
  const Element* body = dom->one("body", "");
  ASSERT_NE(body, nullptr);
  EXPECT_FALSE(body->has("data-pwned")) << body->attr("data-pwned");
  // No element but the page's own: two scripts, no img/b/i, no handler attributes, every svg a
  // chart of the page.
  EXPECT_EQ(dom->find("script", "").size(), 2u);
  EXPECT_TRUE(dom->find("img", "").empty());
  EXPECT_TRUE(dom->find("b", "injected").empty());
  EXPECT_TRUE(dom->find("i", "").empty());
  for (const Element& e : dom->elements()) {
    for (const auto& [name, value] : e.attrs)
      EXPECT_NE(name.rfind("on", 0), 0u) << "<" << e.tag << " " << name << "=" << value << ">";
    if (e.tag == "svg") {
      EXPECT_TRUE(e.hasClass("histogram") || e.attr("id") == "sqnr-chart" ||
                  e.attr("id") == "gain-chart" || e.attr("id") == "autotune-chart" ||
                  e.attr("id") == "mp-chart")
          << "stray <svg> " << e.attr("class");
    }
  }
  // Each name shows as itself, in text and in attributes.
  for (const std::string& name : names) {
    const Element* row = dom->one("tr", "quantizer-row", "data-quantizer", name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(dom->the("span", "qname", "", "", row).text, name);
    EXPECT_NE(dom->the("td", "col-suggestions", "", "", row).text.find(name), std::string::npos);
    EXPECT_EQ(dom->find("rect", "sqnr-bar", "data-quantizer", name).size(),
              quantizerNamed(report, name)->at("isolated").is_object() ? 1u : 0u);
  }
  EXPECT_EQ(dom->byId("model")->text, report["model"]);
  EXPECT_EQ(dom->title(), "qforge analyze: " + report["model"].get<std::string>());
  EXPECT_EQ(
      dom->the("td", "col-change", "", "", &dom->the("tr", "trial-row", "data-trial", "1")).text,
      names[2]);
  EXPECT_NE(dom->one("tr", "mp-unit-row", "data-unit", names[0]), nullptr);
  EXPECT_EQ(
      dom->the("td", "col-change", "", "", &dom->the("tr", "mp-trial-row", "data-trial", "2")).text,
      names[3]);
}

TEST(ChromiumHelper, MissingBrowserFailsWithTheInstallHint) {
  std::string dom;
  const ::testing::AssertionResult r =
      renderDom("/nonexistent/report.html", &dom, "/nonexistent/chromium");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("chromium is not installed: run scripts/install-deps.sh"),
            std::string::npos)
      << r.message();
}

}  // namespace
}  // namespace qforge::testing
