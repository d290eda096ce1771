#include "support/pass_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "ir/dump.h"
#include "ir/parse.h"
#include "ir/verifier.h"

namespace qforge::testing {

namespace {

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// The error `f` throws, or "" when it does not.
std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The dump with its init lines sorted: the order initializers were created in is not what a
// rewrite test is about.
std::string canonicalDump(const Graph& graph, size_t max_values) {
  std::vector<std::string> lines = linesOf(dumpGraph(graph, max_values));
  auto isInit = [](const std::string& line) { return line.rfind("  init ", 0) == 0; };
  auto first = std::find_if(lines.begin(), lines.end(), isInit);
  std::sort(first, std::find_if_not(first, lines.end(), isInit));
  std::string out;
  for (const std::string& line : lines)
    out += line + "\n";
  return out;
}

}  // namespace

std::string lineDiff(const std::string& expected, const std::string& actual) {
  if (expected == actual) return "";
  const std::vector<std::string> a = linesOf(expected);
  const std::vector<std::string> b = linesOf(actual);
  // common[i][j]: length of the longest common subsequence of a[i..] and b[j..].
  std::vector<std::vector<size_t>> common(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;) {
    for (size_t j = b.size(); j-- > 0;) {
      common[i][j] =
          a[i] == b[j] ? common[i + 1][j + 1] + 1 : std::max(common[i + 1][j], common[i][j + 1]);
    }
  }
  std::string out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      out += "  " + a[i++] + "\n";
      ++j;
    } else if (i < a.size() && (j == b.size() || common[i + 1][j] >= common[i][j + 1])) {
      out += "- " + a[i++] + "\n";
    } else {
      out += "+ " + b[j++] + "\n";
    }
  }
  return out;
}

void expectPassRewrites(const GraphRewrite& rewrite, Graph& graph, const std::string& after,
                        size_t max_values) {
  Graph expected;
  const std::string parse_error = errorOf([&] { expected = parseGraph(after); });
  ASSERT_EQ(parse_error, "") << "the expected graph text does not parse";
  const std::string before_error = errorOf([&] { verifyGraph(graph); });
  ASSERT_EQ(before_error, "") << "the graph before the rewrite does not verify";
  rewrite(graph);
  const std::string after_error = errorOf([&] { verifyGraph(graph); });
  EXPECT_EQ(after_error, "") << "the rewritten graph does not verify";
  const std::string want = canonicalDump(expected, max_values);
  const std::string got = canonicalDump(graph, max_values);
  EXPECT_TRUE(want == got) << "the rewritten graph differs from the expected one (- expected, "
                              "+ actual):\n"
                           << lineDiff(want, got);
}

Graph expectPassRewrites(const GraphRewrite& rewrite, const std::string& before,
                         const std::string& after, size_t max_values) {
  Graph graph;
  const std::string parse_error = errorOf([&] { graph = parseGraph(before); });
  EXPECT_EQ(parse_error, "") << "the graph text before the rewrite does not parse";
  if (parse_error.empty()) expectPassRewrites(rewrite, graph, after, max_values);
  return graph;
}

}  // namespace qforge::testing
