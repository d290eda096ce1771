// Small checks the tests share: the message of the error a call throws, op counts of a graph or
// of a list of nodes, closeness of two tensors relative to the expected one's scale.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "core/error.h"
#include "ir/graph.h"

namespace qforge::testing {

// The message of the qforge::Error `f` throws, or "(no error)" when it returns normally.
inline std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// How many nodes of each op type `g` has.
inline std::map<std::string, int> opCounts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Node* n : g.nodes())
    counts[n->opType()]++;
  return counts;
}

// How many of `nodes` (a container of Node pointers) run op `op`.
template <typename Nodes>
size_t countOps(const Nodes& nodes, const std::string& op) {
  return static_cast<size_t>(
      std::count_if(nodes.begin(), nodes.end(), [&](const Node* n) { return n->opType() == op; }));
}

// How many nodes of `g` run op `op`.
inline size_t countOps(const Graph& g, const std::string& op) {
  return countOps(g.nodes(), op);
}

// max |actual - expected| <= rel * max |expected|: relative to the output's scale, so that
// near-zero elements do not demand more than float32 accumulation gives.
inline void expectClose(const at::Tensor& actual, const at::Tensor& expected, double rel) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const double err = (actual - expected).abs().max().item<double>();
  const double scale = expected.abs().max().item<double>();
  EXPECT_LE(err, rel * scale) << "max abs error " << err << " for outputs up to " << scale;
}

}  // namespace qforge::testing
