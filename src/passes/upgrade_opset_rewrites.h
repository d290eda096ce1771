// The node rewrites of the opset upgrade (passes/upgrade_opset.h), one per (op, opset where it
// changed). `check` runs for every node before any edit and throws for what the rewrite cannot
// carry over; `apply` then edits the graph and returns the node that now stands for the old one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace qforge::passes::upgrade {

struct Context {
  Graph& graph;
  // The rank of a value when declared or found by a sample run; nullopt when unknown.
  std::function<std::optional<int64_t>(const Value*)> rank;
};

struct Rewrite {
  std::function<void(const Context&, const Node&)> check;
  std::function<Node*(const Context&, Node*)> apply;
  std::string becomes;  // the new op type when the rewrite replaces the op ("" keeps it)
};

// The rewrite for `op_type` at the opset `since` where its definition changed, or nullptr.
const Rewrite* rewriteFor(const std::string& op_type, int64_t since);

// Whether the change of `op_type` at `since` was reviewed as needing no edit.
bool isCompatibleChange(const std::string& op_type, int64_t since);

// Whether `op_type` changed at `since` in a way whose new form needs the input's rank.
bool needsInputRank(const std::string& op_type, int64_t since);

}  // namespace qforge::passes::upgrade
