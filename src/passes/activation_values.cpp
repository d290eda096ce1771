#include "passes/activation_values.h"

#include <vector>

#include "exec/executor.h"
#include "passes/sample_run.h"

namespace qforge::passes {

bool isFloatType(DType dtype) {
  return dtype == DType::Float || dtype == DType::Float16 || dtype == DType::Double ||
         dtype == DType::BFloat16;
}

namespace {

// Ops whose output depends on their input's shape only: what comes after them is a shape
// computation even when the input is an activation.
bool readsShapeOnly(const Node& node) {
  return node.domain().empty() && (node.opType() == "Shape" || node.opType() == "Size");
}

}  // namespace

ActivationValues::ActivationValues(const Graph& graph) {
  findDataValues(graph);
  findTypes(graph);
}

void ActivationValues::findDataValues(const Graph& graph) {
  for (const Value* in : graph.inputs()) {
    if (!in->isInitializer()) data_.insert(in);
  }
  for (const Node* node : graph.topologicalOrder()) {
    if (readsShapeOnly(*node)) continue;
    bool from_data = false;
    for (const Value* in : node->inputs()) {
      if (in != nullptr && data_.count(in)) from_data = true;
    }
    if (!from_data) continue;
    for (const Value* out : node->outputs())
      data_.insert(out);
  }
}

// Only the data values matter (the others are never quantized), so only their missing types send
// the graph through a sample run.
void ActivationValues::findTypes(const Graph& graph) {
  std::vector<std::string> unknown;
  for (const Node* node : graph.nodes()) {
    for (const Value* out : node->outputs()) {
      if (data_.count(out) && out->type.dtype == DType::Undefined &&
          (!out->uses().empty() || graph.isGraphOutput(out))) {
        unknown.push_back(out->name());
      }
    }
  }
  if (unknown.empty()) return;
  const SampleRun run = runOnSample(graph, unknown);
  sample_failure_ = run.failure;
  for (const auto& [name, tensor] : run.values) {
    if (tensor.defined()) sampled_[graph.value(name)] = fromScalarType(tensor.scalar_type());
  }
}

DType ActivationValues::dtypeOf(const Value* v) const {
  if (v == nullptr) return DType::Undefined;
  if (v->isInitializer()) return fromScalarType(v->initializer().scalar_type());
  if (v->type.dtype != DType::Undefined) return v->type.dtype;
  auto it = sampled_.find(v);
  return it == sampled_.end() ? DType::Undefined : it->second;
}

bool ActivationValues::carriesActivations(const Value* v) const {
  if (v == nullptr || !data_.count(v)) return false;
  const DType dtype = dtypeOf(v);
  return dtype == DType::Undefined || isFloatType(dtype);
}

}  // namespace qforge::passes
