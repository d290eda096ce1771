// Before/after tests of graph rewrites written as graph text (the grammar is in src/ir/dump.h):
//
//   expectPassRewrites([](Graph& g) { foldBatchNorm(g); }, R"(
//     graph g
//     ...)", R"(
//     graph g
//     ...)");
//
// The text in is parsed, verified and rewritten; the result must verify and dump exactly as the
// expected text does once parsed and dumped again (so spacing does not matter, and init lines
// are compared sorted: creation order is not what a rewrite test is about). A mismatch fails
// the test with a line diff.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "ir/graph.h"

namespace qforge::testing {

using GraphRewrite = std::function<void(Graph&)>;

// Initializers of up to `max_values` elements are compared by value as well; 0 compares
// structure, types and shapes only (for rewrites that compute new weights: check those
// numerically against a reference instead). Returns the rewritten graph.
Graph expectPassRewrites(const GraphRewrite& rewrite, const std::string& before,
                         const std::string& after, size_t max_values = 8);

// The same for a graph the test built itself (with real weights, say); `graph` is rewritten.
void expectPassRewrites(const GraphRewrite& rewrite, Graph& graph, const std::string& after,
                        size_t max_values = 8);

// Lines of `expected` and `actual` marked "  " (both), "- " (expected only), "+ " (actual only),
// from a longest common subsequence of lines; "" when the texts are equal.
std::string lineDiff(const std::string& expected, const std::string& actual);

}  // namespace qforge::testing
