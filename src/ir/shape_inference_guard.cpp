#include "ir/shape_inference_guard.h"

#include <map>
#include <string>
#include <vector>

namespace qforge {

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

// The weight's input slot of the ops whose ONNX shape inference derives the kernel from it.
int weightSlot(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return -1;
  const std::string& op = node.op_type();
  if (op == "Conv" || op == "ConvTranspose" || op == "ConvInteger") return 1;
  if (op == "QLinearConv") return 3;
  return -1;
}

// Whether ONNX's inference divides by this node's strides: the convolutions' and pools'
// (convPoolShapeInference's users).
bool dividesByStrides(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.op_type();
  return op == "Conv" || op == "ConvInteger" || op == "QLinearConv" || op == "MaxPool" ||
         op == "AveragePool" || op == "LpPool";
}

// Whether the node is a control-flow op without one of the bodies ONNX's inference runs: its Scan
// and Loop inference dereference the body's inferencer unchecked (SIGSEGV on a fuzzed Scan with no
// body, issue #22).
bool missesABody(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const auto has_body = [&](const char* name) {
    for (const auto& a : node.attribute()) {
      if (a.name() == name && a.has_g()) return true;
    }
    return false;
  };
  const std::string& op = node.op_type();
  if (op == "Scan" || op == "Loop") return !has_body("body");
  if (op == "If") return !has_body("then_branch") || !has_body("else_branch");
  return false;
}

void addKnown(const onnx::ValueInfoProto& v, Shapes& known) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
  std::vector<int64_t> dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return;
    dims.push_back(d.dim_value());
  }
  known[v.name()] = dims;
}

void guardGraph(onnx::GraphProto& graph, Shapes known, std::vector<onnx::NodeProto*>& added,
                bool& safe) {
  for (const auto& v : graph.input())
    addKnown(v, known);
  for (const auto& v : graph.value_info())
    addKnown(v, known);
  for (const auto& t : graph.initializer())
    known[t.name()] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) guardGraph(*a.mutable_g(), known, added, safe);
      for (onnx::GraphProto& g : *a.mutable_graphs())
        guardGraph(g, known, added, safe);
    }
    safe = safe && !missesABody(node);
    if (dividesByStrides(node)) {
      for (const auto& a : node.attribute()) {
        if (a.name() != "strides") continue;
        for (int64_t s : a.ints())
          safe = safe && s != 0;
      }
    }
    const int slot = weightSlot(node);
    if (slot < 0 || node.input_size() <= slot) continue;
    bool has_kernel_shape = false;
    for (const auto& a : node.attribute())
      has_kernel_shape = has_kernel_shape || a.name() == "kernel_shape";
    const auto weight = known.find(node.input(slot));
    if (has_kernel_shape || weight == known.end() || weight->second.size() < 2) continue;
    onnx::AttributeProto* kernel_shape = node.add_attribute();
    kernel_shape->set_name("kernel_shape");
    kernel_shape->set_type(onnx::AttributeProto::INTS);
    for (size_t i = 2; i < weight->second.size(); ++i)
      kernel_shape->add_ints(weight->second[i]);
    added.push_back(&node);
  }
}

}  // namespace

ShapeInferenceGuard::ShapeInferenceGuard(onnx::ModelProto& model) {
  if (model.has_graph()) guardGraph(*model.mutable_graph(), {}, added_, safe_);
}

ShapeInferenceGuard::~ShapeInferenceGuard() {
  for (onnx::NodeProto* node : added_)
    node->mutable_attribute()->RemoveLast();
}

}  // namespace qforge
