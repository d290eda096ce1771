#include "passes/float_ops.h"

#include <map>

#include "exec/op_traits.h"
#include "passes/fake_quantize_node.h"

namespace qforge::passes {

std::vector<std::string> listFloatOps(const Graph& graph, const backends::BackendConfig& backend,
                                      const std::set<const Node*>& in_units,
                                      const ActivationValues* activations) {
  std::map<std::string, std::vector<std::string>> by_op;
  for (const Node* n : graph.topologicalOrder()) {
    if (in_units.count(n) || isFakeQuantize(n)) continue;
    const backends::OpTrait* trait = backend.trait(n->opType());
    if (trait != nullptr && trait->role == backends::OpRole::SharesInput) continue;
    if (movesDataOnly(graph, *n) || isShapeComputation(graph, *n)) continue;
    if (activations != nullptr && !activations->carriesActivations(n->outputs().front())) continue;
    by_op[n->opType()].push_back(n->name().empty() ? n->outputs().front()->name() : n->name());
  }
  std::vector<std::string> out;
  for (const auto& [op, names] : by_op) {
    std::string line = op + " x" + std::to_string(names.size()) + ":";
    for (size_t i = 0; i < names.size() && i < 4; ++i)
      line += " " + names[i];
    if (names.size() > 4) line += " ...";
    out.push_back(line);
  }
  return out;
}

}  // namespace qforge::passes
