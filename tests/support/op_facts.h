// The op table's facts as exec/op_traits.h answers them for a one-node graph, for the op
// family tests: which boolean facts hold and what the output's sign follows.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "exec/op_traits.h"
#include "support/single_op.h"

namespace qforge::testing {

// The names of the boolean facts that hold for `op_type` at `opset` (attributes may matter for
// nothing here but the sign).
inline std::set<std::string> trueFacts(const std::string& op_type, int64_t opset) {
  const Graph g = buildSingleOpGraph({op_type, opset, {at::zeros({1})}});
  const Node& n = *g.nodes().front();
  std::set<std::string> facts;
  if (movesDataOnly(g, n)) facts.insert("moves_data_only");
  if (isLayoutOnly(g, n)) facts.insert("layout_only");
  if (movesInt8(g, n)) facts.insert("moves_int8");
  if (absorbsBatchNorm(g, n)) facts.insert("absorbs_batchnorm");
  if (combinesActivations(g, n)) facts.insert("combines_activations");
  if (isShapeComputation(g, n)) facts.insert("shape_computation");
  return facts;
}

inline OutputSign signOf(const std::string& op_type, int64_t opset,
                         const std::vector<Attribute>& attributes = {}) {
  const Graph g = buildSingleOpGraph({op_type, opset, {at::zeros({1})}, attributes});
  const Node& n = *g.nodes().front();
  return outputSign(opInfoFor(g, n), n);
}

}  // namespace qforge::testing
