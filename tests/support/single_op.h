// Builds a one-node graph and runs it through the Executor: the smallest end-to-end path for
// op-level tests.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/graph.h"

namespace qforge::testing {

struct SingleOp {
  SingleOp() = default;
  // The fields most tests set, in order, so call sites can brace-initialize a SingleOp:
  // run1({"Relu", 13, {x}}).
  SingleOp(std::string op_type, int64_t opset, std::vector<at::Tensor> inputs,
           std::vector<Attribute> attributes = {}, size_t outputs = 1);

  std::string op_type;
  int64_t opset = 13;
  std::vector<at::Tensor> inputs;  // undefined tensor = omitted optional input
  std::vector<Attribute> attributes;
  size_t outputs = 1;
  std::string domain;
  // Inputs that become initializers instead of graph inputs (by slot).
  std::vector<size_t> initializer_slots;
};

// Builds the graph (inputs "in0", "in1"..., outputs "out0"...) without running it.
Graph buildSingleOpGraph(const SingleOp& op);

// Runs the op; returns one tensor per output.
std::vector<at::Tensor> runSingleOp(const SingleOp& op);

}  // namespace qforge::testing
