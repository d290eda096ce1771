// The analysis report's HTML as a string: one complete document that loads nothing from outside,
// the report embedded as JSON that parses back unchanged and that no name can end early, the
// title escaped, and any JSON value accepted (nulls, missing fields, non-objects, bytes that are
// not UTF-8, non-finite numbers). What the page draws is checked in a browser
// (analysis_html_browser_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "pipelines/analysis_html.h"

namespace qforge::testing {
namespace {

using nlohmann::json;
using pipelines::analysisHtml;

constexpr const char* kBlockStart = "<script type=\"application/json\" id=\"qforge-report\">";

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The embedded JSON block's text, "" when there is not exactly one.
std::string jsonBlock(const std::string& html) {
  if (count(html, kBlockStart) != 1) return "";
  const size_t begin = html.find(kBlockStart) + std::string(kBlockStart).size();
  const size_t end = html.find("</script>", begin);
  return end == std::string::npos ? "" : html.substr(begin, end - begin);
}

std::string title(const std::string& html) {
  const size_t begin = html.find("<title>");
  const size_t end = html.find("</title>");
  if (begin == std::string::npos || end == std::string::npos) return "";
  return html.substr(begin + 7, end - begin - 7);
}

json sampleReport() {
  return json::parse(R"json({
    "command": "analyze", "model": "models/zoo/resnet.onnx", "backend": "TensorRT",
    "data": "fashion-mnist:test (10000 samples)", "samples": 32,
    "calibration": {"data": "fashion-mnist:train", "samples": 256}, "outputs": ["logits"],
    "quantized": {"sqnr_db": 21.3, "cosine": 0.996},
    "task": {"metric": "top1", "float": 93.2, "quantized": 92.9},
    "ranking_by": "leave_one_out", "ranking": ["conv1.weight_fq"],
    "rankings_agreement": {"isolated_vs_leave_one_out": 0.91, "fisher_vs_isolated": null},
    "quantizers": [{
      "name": "conv1.weight_fq", "kind": "weight", "value": "conv1.weight", "unit": "conv1",
      "op": "Conv", "bits": 8, "signed": true, "granularity": "per-channel", "observer": "MinMax",
      "isolated": {"sqnr_db": 45.1, "cosine": 0.9999},
      "leave_one_out": {"sqnr_db": 22.0, "cosine": 0.998, "gain_db": 0.7},
      "fisher": 0.0012, "local_sqnr_db": 38.2, "accumulated_sqnr_db": null,
      "range": {"min": -1.2, "max": 3.4, "p0_1": -0.9, "p99_9": 2.1, "outlier_ratio": 1.6,
                "clipped_fraction": 0.0, "channel_spread": 3.2,
                "histogram": {"low": -1.2, "high": 3.4, "counts": [1, 2, 3, 4]}},
      "rank": 1,
      "suggestions": [{"fix": "float", "why": "keep the unit float",
                       "override": {"name": "conv1", "skip": true}}]
    }],
    "autotune": {"metric": "sqnr_db", "target": 25.0, "float": null, "met": true,
                 "best_trial": 1, "trials": [{"trial": 1, "change": "baseline", "metric": 21.3,
                 "drop": null, "float_units": 0, "wide_units": 0, "avg_weight_bits": 8.0,
                 "seconds": 1.2}]},
    "seconds": 12.3
  })json");
}

TEST(AnalysisHtml, IsOneCompleteDocument) {
  const std::string html = analysisHtml(sampleReport());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0u);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
  EXPECT_EQ(count(html, "<html"), 1u);
  EXPECT_EQ(count(html, "<body>"), 1u);
  EXPECT_EQ(count(html, "</body>"), 1u);
  EXPECT_EQ(count(html, "<meta charset=\"utf-8\">"), 1u);
  EXPECT_EQ(count(html, "<main id=\"report\"></main>"), 1u);
  EXPECT_EQ(count(html, kBlockStart), 1u);
  // The data block and the page script, nothing else.
  EXPECT_EQ(count(lower(html), "<script"), 2u);
  EXPECT_EQ(count(lower(html), "</script"), 2u);
  EXPECT_EQ(count(html, "<style>"), 1u);
  EXPECT_EQ(title(html), "qforge analyze: models/zoo/resnet.onnx");
}

TEST(AnalysisHtml, EmbedsTheReportSoItParsesBackUnchanged) {
  const json report = sampleReport();
  const std::string block = jsonBlock(analysisHtml(report));
  ASSERT_FALSE(block.empty());
  EXPECT_EQ(json::parse(block), report);
}

TEST(AnalysisHtml, NoNameCanEndTheJsonBlock) {
  json report = sampleReport();
  const std::string names[] = {"</script><b>x</b>",   "</SCRIPT >",
                               "a<!--b-->c",          "x&amp;y",
                               "\"quoted\" 'single'", "<script>alert(1)</script>"};
  report["quantizers"] = json::array();
  for (const std::string& name : names)
    report["quantizers"].push_back({{"name", name}, {"unit", name + "<"}});
  report["model"] = "</script><script>";
  const std::string html = analysisHtml(report);
  const std::string block = jsonBlock(html);
  ASSERT_FALSE(block.empty());
  EXPECT_EQ(block.find_first_of("<>&"), std::string::npos) << block;
  EXPECT_NE(block.find("\\u003c/script\\u003e\\u003cb\\u003ex\\u003c/b\\u003e"), std::string::npos);
  EXPECT_NE(block.find("x\\u0026amp;y"), std::string::npos);
  EXPECT_EQ(json::parse(block), report);
  EXPECT_EQ(count(lower(html), "</script"), 2u);
  EXPECT_EQ(count(html, "<!--"), 0u);
}

TEST(AnalysisHtml, TitleEscapesTheModelName) {
  json report = sampleReport();
  report["model"] = "a<b>&\"c'</title><script>";
  EXPECT_EQ(title(analysisHtml(report)),
            "qforge analyze: a&lt;b&gt;&amp;&quot;c&#39;&lt;/title&gt;&lt;script&gt;");
  report["model"] = 42;  // not a path: no name in the title
  EXPECT_EQ(title(analysisHtml(report)), "qforge analyze");
  report.erase("model");
  EXPECT_EQ(title(analysisHtml(report)), "qforge analyze");
}

TEST(AnalysisHtml, LoadsNothingFromOutside) {
  const std::string html = analysisHtml(sampleReport());
  const std::string low = lower(html);
  for (const char* reference : {"src=", "href=", "<link", "@import", "url(", "<iframe", "<img"})
    EXPECT_EQ(low.find(reference), std::string::npos) << reference;
  // The only URL is the SVG namespace, which is a name, not a request.
  EXPECT_EQ(count(low, "://"), count(low, "http://www.w3.org/2000/svg"));
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

TEST(AnalysisHtml, PageScriptNeverParsesMarkup) {
  const std::string html = analysisHtml(sampleReport());
  for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                           "eval(", "new Function", "createContextualFragment", "DOMParser"})
    EXPECT_EQ(html.find(sink), std::string::npos) << sink;
}

TEST(AnalysisHtml, AcceptsAnyJsonValue) {
  for (const json& report : {json(nullptr), json::object(), json::array({1, 2}), json("text"),
                             json(3.5), json::parse(R"({"quantizers": null, "autotune": null})"),
                             json::parse(R"({"quantizers": [null, 1, {}], "task": {}})")}) {
    const std::string html = analysisHtml(report);
    EXPECT_EQ(title(html), "qforge analyze") << report;
    const std::string block = jsonBlock(html);
    ASSERT_FALSE(block.empty()) << report;
    EXPECT_EQ(json::parse(block), report);
  }
}

TEST(AnalysisHtml, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  json report = sampleReport();
  report["model"] = "m\xff.onnx";
  report["quantizers"][0]["name"] = "conv\xc3(";
  std::string html;
  ASSERT_NO_THROW(html = analysisHtml(report));
  EXPECT_EQ(title(html), "qforge analyze: m\xef\xbf\xbd.onnx");
  const json back = json::parse(jsonBlock(html));
  EXPECT_EQ(back["quantizers"][0]["name"], "conv\xef\xbf\xbd(");
  EXPECT_EQ(back["model"], "m\xef\xbf\xbd.onnx");
}

TEST(AnalysisHtml, NonFiniteNumbersAreWrittenAsNull) {
  json report = sampleReport();
  report["quantized"]["sqnr_db"] = std::numeric_limits<double>::infinity();
  report["quantizers"][0]["fisher"] = std::nan("");
  report["quantizers"][0]["isolated"]["sqnr_db"] = 1e308;
  const json back = json::parse(jsonBlock(analysisHtml(report)));
  EXPECT_TRUE(back["quantized"]["sqnr_db"].is_null());
  EXPECT_TRUE(back["quantizers"][0]["fisher"].is_null());
  EXPECT_EQ(back["quantizers"][0]["isolated"]["sqnr_db"].get<double>(), 1e308);
}

}  // namespace
}  // namespace qforge::testing
