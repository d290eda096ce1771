#include "support/single_op.h"

#include <algorithm>

#include "exec/executor.h"

namespace qforge::testing {

SingleOp::SingleOp(std::string op_type, int64_t opset, std::vector<at::Tensor> inputs,
                   std::vector<Attribute> attributes, size_t outputs)
    : op_type(std::move(op_type)),
      opset(opset),
      inputs(std::move(inputs)),
      attributes(std::move(attributes)),
      outputs(outputs) {}

Graph buildSingleOpGraph(const SingleOp& op) {
  Graph g;
  g.model.opset_imports = {{"", op.opset}};
  if (!op.domain.empty()) g.model.opset_imports[op.domain] = 1;
  std::vector<Value*> inputs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.inputs[i].defined()) {
      inputs.push_back(nullptr);
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    const bool init = std::find(op.initializer_slots.begin(), op.initializer_slots.end(), i) !=
                      op.initializer_slots.end();
    Value* v = init ? g.addInitializer(name, op.inputs[i]) : g.addValue(name);
    if (!init) {
      v->type.dtype = fromScalarType(op.inputs[i].scalar_type());
      std::vector<Dim> dims;
      for (int64_t s : op.inputs[i].sizes())
        dims.push_back(Dim::known(s));
      v->type.shape = dims;
      g.addInput(v);
    }
    inputs.push_back(v);
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < op.outputs; ++i)
    outs.push_back("out" + std::to_string(i));
  Node* node = g.addNode(op.op_type, inputs, outs, "op", op.domain);
  for (const auto& a : op.attributes)
    node->attributes.set(a);
  for (Value* out : node->outputs())
    g.addOutput(out);
  return g;
}

std::vector<at::Tensor> runSingleOp(const SingleOp& op) {
  Graph g = buildSingleOpGraph(op);
  Executor executor(g);
  TensorMap feeds;
  for (const Value* v : g.inputs()) {
    feeds[v->name()] = op.inputs[static_cast<size_t>(std::stoi(v->name().substr(2)))];
  }
  TensorMap out = executor.run(feeds);
  std::vector<at::Tensor> result;
  for (const Value* v : g.outputs())
    result.push_back(out.at(v->name()));
  return result;
}

}  // namespace qforge::testing
