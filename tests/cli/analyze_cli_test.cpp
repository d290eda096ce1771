// `qforge analyze` as a user runs it: the zoo ResNet end to end with --json, --report and
// --write-config, the report rendered in headless Chromium and checked against the JSON printed
// by the same run; the text output; and bad input giving one line on stderr, exit code 2 and no
// file. The analysis and the rendering run once per test process and are shared.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/files.h"
#include "support/chromium.h"
#include "support/cli_runner.h"
#include "support/dom.h"

namespace qforge::testing {
namespace {

using nlohmann::json;

// Explicit too, so that a run outside ctest measures the same way.
const char* const kEnv = "QFORGE_NUM_THREADS=1";

std::string zooResNet() {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx";
}

// 32 test images in one batch: the smallest run that still has top-1 figures.
const char* const kSmallRun = " --eval fashion-mnist:test --samples 32 --batch 32";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// What data-value holds for an SQNR or gain: the JSON number, Infinity for null (identical
// outputs; analysis_html.h).
double rawDb(const json& v) {
  return v.is_null() ? std::numeric_limits<double>::infinity() : v.get<double>();
}

// --- The end-to-end run, once -------------------------------------------------------------------

struct EndToEnd {
  TempDir dir{"analyze-cli"};
  CliStreams run;
  json report;  // stdout parsed; null when it is not JSON
  std::string config_text;
  ::testing::AssertionResult rendered = ::testing::AssertionFailure();
  std::unique_ptr<Dom> dom;
};

const EndToEnd& endToEnd() {
  static const std::unique_ptr<EndToEnd> e = [] {
    auto r = std::make_unique<EndToEnd>();
    const std::string html = r->dir.file("report.html");
    const std::string config = r->dir.file("config.json");
    r->run = runCliStreams("analyze " + zooResNet() +
                               " --backend TensorRT --calib-batches 1 --calib-batch 32" +
                               kSmallRun + " --json --report " + html + " --write-config " + config,
                           kEnv);
    r->report = json::parse(r->run.out, nullptr, /*allow_exceptions=*/false);
    r->config_text = slurp(config);
    std::string dom;
    r->rendered = renderDom(html, &dom);
    if (r->rendered) r->dom = std::make_unique<Dom>(dom);
    return r;
  }();
  return *e;
}

// The run's JSON; fails the test (returns nullptr) when the run failed or printed no JSON.
const json* reportOf(const EndToEnd& e) {
  EXPECT_EQ(e.run.exit_code, 0) << e.run.err;
  EXPECT_TRUE(e.report.is_object()) << "stdout is not a JSON object:\n" << e.run.out;
  return e.run.exit_code == 0 && e.report.is_object() ? &e.report : nullptr;
}

// The rendered report; fails the test (returns nullptr) unless its script ran to the end.
const Dom* domOf(const EndToEnd& e) {
  EXPECT_TRUE(e.rendered);
  if (!e.dom) return nullptr;
  const Element* error = e.dom->byId("render-error");
  EXPECT_EQ(error, nullptr) << error->text;
  const Element* body = e.dom->one("body", "");
  EXPECT_TRUE(body && body->attr("data-rendered") == "ok") << "the page script did not finish";
  return error == nullptr ? e.dom.get() : nullptr;
}

// --- End to end ---------------------------------------------------------------------------------

TEST(AnalyzeCli, ZooResNetPrintsTheJsonReport) {
  const EndToEnd& e = endToEnd();
  const json* report = reportOf(e);
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(e.run.err, "");
  EXPECT_EQ((*report)["command"], "analyze");
  EXPECT_EQ((*report)["backend"], "TensorRT");
  EXPECT_EQ((*report)["samples"], 32);
  EXPECT_EQ((*report)["ranking_by"], "leave_one_out");
  ASSERT_TRUE((*report)["quantizers"].is_array());
  EXPECT_FALSE((*report)["quantizers"].empty());
  EXPECT_EQ((*report)["ranking"].size(), (*report)["quantizers"].size());
  ASSERT_TRUE((*report)["task"].is_object());
}

TEST(AnalyzeCli, ReportHeaderShowsTheJsonFigures) {
  const EndToEnd& e = endToEnd();
  const json* report = reportOf(e);
  const Dom* dom = domOf(e);
  ASSERT_TRUE(report && dom);
  const Element* sqnr = dom->byId("quantized-sqnr");
  ASSERT_NE(sqnr, nullptr);
  const json& quantized_db = (*report)["quantized"]["sqnr_db"];
  ASSERT_TRUE(quantized_db.is_number()) << "an 8-bit ResNet is not lossless";
  EXPECT_EQ(dataValue(*sqnr), quantized_db.get<double>());
  expectText2(sqnr->text, quantized_db.get<double>(), "quantized SQNR");
  const json& task = (*report)["task"];
  for (const char* key : {"float", "quantized"}) {
    const Element* figure = dom->byId(std::string("task-") + key);
    ASSERT_NE(figure, nullptr) << key;
    EXPECT_EQ(dataValue(*figure), task[key].get<double>()) << key;
    expectText2(figure->text, task[key].get<double>(), std::string("top-1 ") + key);
  }
}

TEST(AnalyzeCli, ReportHasOneRowPerQuantizerWithItsRank) {
  const EndToEnd& e = endToEnd();
  const json* report = reportOf(e);
  const Dom* dom = domOf(e);
  ASSERT_TRUE(report && dom);
  EXPECT_EQ(dom->find("tr", "quantizer-row").size(), (*report)["quantizers"].size());
  for (const json& q : (*report)["quantizers"]) {
    const std::string name = q["name"];
    const Element* row = dom->one("tr", "quantizer-row", "data-quantizer", name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(dom->the("span", "qname", "", "", row).text, name);
    if (q["rank"].is_null()) {
      EXPECT_FALSE(row->has("data-rank")) << name;
    } else {
      EXPECT_EQ(row->attr("data-rank"), q["rank"].dump()) << name;
    }
  }
}

TEST(AnalyzeCli, ReportBarsCarryTheJsonSqnrsAndGains) {
  const EndToEnd& e = endToEnd();
  const json* report = reportOf(e);
  const Dom* dom = domOf(e);
  ASSERT_TRUE(report && dom);
  size_t isolated = 0, gains = 0;
  for (const json& q : (*report)["quantizers"]) {
    const std::string name = q["name"];
    const auto sqnr_bars = dom->find("rect", "sqnr-bar", "data-quantizer", name);
    if (q["isolated"].is_object()) {
      ++isolated;
      ASSERT_EQ(sqnr_bars.size(), 1u) << name;
      EXPECT_EQ(dataValue(*sqnr_bars[0]), rawDb(q["isolated"]["sqnr_db"])) << name;
    } else {
      EXPECT_TRUE(sqnr_bars.empty()) << name;
    }
    const auto gain_bars = dom->find("rect", "gain-bar", "data-quantizer", name);
    if (q["leave_one_out"].is_object()) {
      ++gains;
      ASSERT_EQ(gain_bars.size(), 1u) << name;
      EXPECT_EQ(dataValue(*gain_bars[0]), rawDb(q["leave_one_out"]["gain_db"])) << name;
    } else {
      EXPECT_TRUE(gain_bars.empty()) << name;
    }
  }
  EXPECT_EQ(dom->find("rect", "sqnr-bar").size(), isolated);
  EXPECT_EQ(dom->find("rect", "gain-bar").size(), gains);
  // Every quantizer was measured both ways: neither --no-isolated nor --no-leave-one-out.
  EXPECT_EQ(isolated, (*report)["quantizers"].size());
  EXPECT_EQ(gains, (*report)["quantizers"].size());
}

TEST(AnalyzeCli, ReportHasAHistogramPerRangeHistogram) {
  const EndToEnd& e = endToEnd();
  const json* report = reportOf(e);
  const Dom* dom = domOf(e);
  ASSERT_TRUE(report && dom);
  size_t expected = 0;
  for (const json& q : (*report)["quantizers"]) {
    const std::string name = q["name"];
    const auto found = dom->find("svg", "histogram", "data-quantizer", name);
    if (!q["range"].is_object() || !q["range"]["histogram"].is_object()) {
      EXPECT_TRUE(found.empty()) << name;
      continue;
    }
    ++expected;
    ASSERT_EQ(found.size(), 1u) << name;
    const json& counts = q["range"]["histogram"]["counts"];
    const auto bins = dom->find("rect", "hist-bin", "", "", found[0]);
    ASSERT_EQ(bins.size(), counts.size()) << name;
    for (size_t i = 0; i < bins.size(); ++i)
      EXPECT_EQ(bins[i]->attr("data-count"), counts[i].dump()) << name << " bin " << i;
  }
  EXPECT_EQ(dom->find("svg", "histogram").size(), expected);
  EXPECT_GT(expected, 0u);
}

TEST(AnalyzeCli, WrittenConfigStartsWithTheTopCulpritsFix) {
  const EndToEnd& e = endToEnd();
  const json* report = reportOf(e);
  ASSERT_NE(report, nullptr);
  const json config = json::parse(e.config_text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(config.is_object()) << "--write-config wrote:\n" << e.config_text;
  ASSERT_TRUE(config["overrides"].is_array());
  ASSERT_FALSE(config["overrides"].empty());
  const std::string top = (*report)["ranking"].at(0);
  json first_fix;
  for (const json& q : (*report)["quantizers"]) {
    if (q["name"] != top) continue;
    for (const json& s : q["suggestions"]) {
      if (s.contains("override") && !s["override"].is_null()) {
        first_fix = s["override"];
        break;
      }
    }
  }
  ASSERT_FALSE(first_fix.is_null()) << "no fix with an override for the top culprit " << top;
  EXPECT_EQ(config["overrides"][0], first_fix);
}

TEST(AnalyzeCli, TextOutputNamesTheRankingAndTheTopCulprit) {
  const json* report = reportOf(endToEnd());
  ASSERT_NE(report, nullptr);
  const CliStreams r =
      runCliStreams("analyze " + zooResNet() +
                        " --backend TensorRT --calib-batches 1 --calib-batch 32" + kSmallRun,
                    kEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ranked by leave_one_out"), std::string::npos) << r.out;
  // Same data, seed and thread count as the JSON run: the same culprit comes first.
  const std::string top = (*report)["ranking"].at(0);
  EXPECT_NE(r.out.find(top), std::string::npos) << top << " not in\n" << r.out;
}

// --- Bad input ----------------------------------------------------------------------------------

// One line on stderr, exit code 2, nothing on stdout and no file in `scratch`.
void expectRefused(const CliStreams& r, const TempDir& scratch, const std::string& flag) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lineCount(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(filesIn(scratch.path()).empty());
}

TEST(AnalyzeCli, ReportInAMissingDirectoryIsRefusedBeforeAnyWork) {
  ASSERT_FALSE(std::filesystem::exists("/nonexistent-dir"));
  TempDir scratch("analyze-bad");
  // Settings that analyse for many seconds (about 9 s for 512 samples on one thread): refusing
  // within a few seconds means the path was checked first.
  const auto start = std::chrono::steady_clock::now();
  const CliStreams r = runCliStreams(
      "analyze " + zooResNet() +
          " --backend TensorRT --calib-batches 8 --eval fashion-mnist:test --samples 1024 "
          "--batch 32 --report /nonexistent-dir/r.html --write-config " +
          scratch.file("c.json"),
      kEnv);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expectRefused(r, scratch, "--report");
  EXPECT_LT(seconds, 4.0);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir"));
}

TEST(AnalyzeCli, OnnxModelWithoutBackendIsRefused) {
  TempDir scratch("analyze-bad");
  const CliStreams r =
      runCliStreams("analyze " + zooResNet() + kSmallRun + " --report " + scratch.file("r.html") +
                        " --write-config " + scratch.file("c.json"),
                    kEnv);
  expectRefused(r, scratch, "--backend");
}

TEST(AnalyzeCli, ZeroSamplesIsRefused) {
  TempDir scratch("analyze-bad");
  const CliStreams r = runCliStreams(
      "analyze " + zooResNet() +
          " --backend TensorRT --calib-batches 1 --eval fashion-mnist:test --samples 0 "
          "--report " +
          scratch.file("r.html") + " --write-config " + scratch.file("c.json"),
      kEnv);
  expectRefused(r, scratch, "--samples");
}

// A directory `qforge quantize --out` wrote, once per test process; empty when quantize failed.
const std::string& preparedDir() {
  static TempDir dir("analyze-prepared");
  static const std::string path = [] {
    const std::string out = dir.file("resnet");
    const CliResult r =
        runCli("quantize " + zooResNet() +
                   " --backend TensorRT --calib-batches 1 --calib-batch 16 --out " + out,
               kEnv);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.exit_code == 0 ? out : std::string();
  }();
  return path;
}

TEST(AnalyzeCli, PreparedDirectoryWithBackendIsRefused) {
  const std::string& prepared = preparedDir();
  ASSERT_FALSE(prepared.empty());
  const std::vector<std::string> before = filesIn(prepared);
  TempDir scratch("analyze-bad");
  const CliStreams r =
      runCliStreams("analyze " + prepared + " --backend TensorRT" + kSmallRun + " --report " +
                        scratch.file("r.html") + " --write-config " + scratch.file("c.json"),
                    kEnv);
  expectRefused(r, scratch, "--backend");
  EXPECT_EQ(filesIn(prepared), before);
}

TEST(AnalyzeCli, PreparedDirectoryIsAnalysedForItsOwnBackend) {
  const std::string& prepared = preparedDir();
  ASSERT_FALSE(prepared.empty());
  const CliStreams r = runCliStreams("analyze " + prepared + kSmallRun + " --json", kEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << r.out;
  EXPECT_EQ(report["backend"], "TensorRT");
  EXPECT_FALSE(report["quantizers"].empty());
}

}  // namespace
}  // namespace qforge::testing
