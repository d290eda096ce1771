#include "passes/float16_to_float32.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "passes/sample_run.h"

namespace qforge::passes {

namespace {

constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;

bool isHalf(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kHalf;
}

// Attributes that name an element type or hold a typed value, on the ops that have them.
bool retypeAttributes(Node& node) {
  bool changed = false;
  for (const char* name : {"to", "dtype"}) {
    const Attribute* a = node.attributes.find(name);
    if (a != nullptr && a->kind == AttributeKind::Int && a->i == kOnnxFloat16) {
      node.attributes.set(Attribute::makeInt(name, kOnnxFloat));
      changed = true;
    }
  }
  const Attribute* value = node.attributes.find("value");  // Constant, ConstantOfShape
  if (value != nullptr && value->kind == AttributeKind::Tensor && isHalf(value->t)) {
    node.attributes.set(Attribute::makeTensor("value", value->t.to(at::kFloat)));
    changed = true;
  }
  return changed;
}

// A float16 graph input gets a Cast to float32 that every former reader reads instead.
void widenInput(Graph& graph, Value* input, Float16Widening& result) {
  if (input->uses().empty()) return;
  Node* cast =
      graph.insertOnValue(input, "Cast", {}, graph.uniqueName(input->name() + "/to_float32"));
  cast->attributes.set(Attribute::makeInt("to", kOnnxFloat));
  cast->output(0)->type = TensorType{DType::Float, input->type.shape};
  ++result.interface_casts;
}

// A float16 graph output is computed in float32 and cast back under its own name, with its
// declared (float16) `type`.
void narrowOutput(Graph& graph, Value* output, const TensorType& type, Float16Widening& result) {
  const std::string name = output->name();
  Node* cast = graph.insertOnValue(output, "Cast", {}, graph.uniqueName(name + "/to_float16"),
                                   /*move_graph_output=*/true);
  cast->attributes.set(Attribute::makeInt("to", kOnnxFloat16));
  graph.renameValue(output, graph.uniqueName(name + "_float32"));
  output->type = TensorType{DType::Float, type.shape};
  graph.renameValue(cast->output(0), name);
  cast->output(0)->type = type;
  ++result.interface_casts;
}

// A Cast that now turns float32 into float32 goes (not one that writes a graph output). Inputs
// of undeclared type are typed by one run on sample inputs.
void removeFloatToFloatCasts(Graph& graph, Float16Widening& result) {
  std::vector<Node*> casts;
  std::vector<std::string> untyped;
  for (Node* node : graph.nodes()) {
    const Attribute* to = node->attributes.find("to");
    if (node->opType() != "Cast" || !node->domain().empty() || to == nullptr ||
        to->kind != AttributeKind::Int || to->i != kOnnxFloat ||
        graph.isGraphOutput(node->output(0)))
      continue;
    casts.push_back(node);
    const Value* in = node->input(0);
    if (!in->isInitializer() && in->type.dtype == DType::Undefined) untyped.push_back(in->name());
  }
  const SampleRun sample = runOnSample(graph, untyped);
  for (Node* node : casts) {
    Value* in = node->input(0);
    DType in_type =
        in->isInitializer() ? fromScalarType(in->initializer().scalar_type()) : in->type.dtype;
    auto sampled = sample.values.find(in->name());
    if (in_type == DType::Undefined && sampled != sample.values.end() && sampled->second.defined())
      in_type = fromScalarType(sampled->second.scalar_type());
    if (in_type != DType::Float) continue;
    graph.replaceAllUsesWith(node->output(0), in, /*include_graph_outputs=*/false);
    graph.removeNode(node);
    ++result.casts_removed;
  }
}

}  // namespace

Float16Widening float16ToFloat32(Graph& graph) {
  Float16Widening result;
  std::vector<Value*> half_inputs;
  std::vector<std::pair<Value*, TensorType>> half_outputs;  // with their types before widening
  for (Value* v : graph.inputs()) {
    if (!v->isInitializer() && v->type.dtype == DType::Float16) half_inputs.push_back(v);
  }
  for (Value* v : graph.outputs()) {
    if (v->type.dtype == DType::Float16 && !graph.isGraphInput(v))
      half_outputs.emplace_back(v, v->type);
  }
  for (Value* v : graph.initializers()) {
    if (isHalf(v->initializer())) {
      v->setInitializer(v->initializer().to(at::kFloat));
      ++result.initializers;
    }
  }
  std::vector<Node*> nodes = graph.nodes();
  for (Node* node : nodes) {
    if (node->domain().empty() && retypeAttributes(*node)) ++result.nodes_retyped;
    for (Value* out : node->outputs()) {
      if (out->type.dtype == DType::Float16) out->type.dtype = DType::Float;
    }
  }
  for (Value* v : half_inputs)
    widenInput(graph, v, result);
  for (const auto& [v, type] : half_outputs)
    narrowOutput(graph, v, type, result);

  removeFloatToFloatCasts(graph, result);
  return result;
}

}  // namespace qforge::passes
