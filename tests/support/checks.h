// Small checks the tests share: the message of the error a call throws, op counts of a graph.
#pragma once

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

}  // namespace qforge::testing
