#include "passes/fake_quantize_node.h"

#include <any>

#include "core/error.h"

namespace qforge::passes {

bool isFakeQuantize(const Node* node) {
  return node != nullptr && node->domain() == kQforgeDomain && node->opType() == kFakeQuantizeOp;
}

std::string quantizerOf(const Node& node) {
  const Attribute* a = node.attributes.find("quantizer");
  require(a != nullptr && a->kind == AttributeKind::String,
          node.describe() + " has no string attribute 'quantizer'");
  return a->s;
}

std::string uniqueNodeName(const Graph& graph, const std::string& base) {
  std::string name = base;
  for (int k = 1; graph.findNode(name) != nullptr; ++k)
    name = base + "_" + std::to_string(k);
  return name;
}

Node* addFakeQuantizeNode(Graph& graph, Value* v, const std::string& quantizer,
                          const std::vector<Use>& uses) {
  graph.model.opset_imports[kQforgeDomain] = 1;
  const std::string node_name = uniqueNodeName(graph, "fq/" + quantizer);
  const bool all = uses.empty();
  const bool graph_output = all && graph.isGraphOutput(v);
  Node* node =
      graph.insertOnValue(v, kFakeQuantizeOp, uses, node_name, graph_output, kQforgeDomain);
  node->attributes.set(Attribute::makeString("quantizer", quantizer));
  if (graph_output) {
    // Keep the output's name on the graph's interface: the float value is renamed instead.
    const std::string name = v->name();
    Value* out = node->output(0);
    graph.renameValue(v, graph.uniqueName(name + "_float"));
    graph.renameValue(out, name);
  }
  return node;
}

OpRegistry registryWithFakeQuantize(QuantizerLookup lookup) {
  OpRegistry registry = OpRegistry::builtin();
  OpInfo info;
  info.op_type = kFakeQuantizeOp;
  info.domain = kQforgeDomain;
  info.since_version = 1;
  info.run = [lookup](const OpContext& ctx) -> std::vector<at::Tensor> {
    // The quantizer is looked up by name once per node and kept in the node's state: copying
    // the name and searching for it was a third of a FakeQuantize node's cost at batch 1.
    std::any* state = ctx.nodeState();
    quant::FakeQuantizer* const* cached =
        state != nullptr ? std::any_cast<quant::FakeQuantizer*>(state) : nullptr;
    quant::FakeQuantizer* q = cached != nullptr ? *cached : nullptr;
    if (q == nullptr) {
      const std::string name = ctx.attrString("quantizer", "");
      q = lookup(name);
      if (q == nullptr) ctx.fail("no fake quantizer named '" + name + "' in this model");
      if (state != nullptr) *state = q;
    }
    const at::Tensor& x = ctx.input(0);
    if (!at::isFloatingType(x.scalar_type())) {
      ctx.fail("quantizer '" + ctx.attrString("quantizer", "") + "' received a " +
               std::string(c10::toString(x.scalar_type())) +
               " tensor; only float values can be fake-quantized");
    }
    return {q->forward(x)};
  };
  registry.add(info);
  return registry;
}

}  // namespace qforge::passes
