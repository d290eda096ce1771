// The node that stands for a fake quantizer inside a prepared graph: op "FakeQuantize" in the
// "qforge" domain, attribute "quantizer" naming the FakeQuantizer object that runs it. Several
// nodes may name one quantizer (qparams shared across Concat inputs). Deploy writers replace
// these nodes with each format's own quantize/dequantize ops.
#pragma once

#include <functional>
#include <string>

#include "exec/op_info.h"
#include "ir/graph.h"
#include "quant/fake_quantizer.h"

namespace qforge::passes {

inline constexpr const char* kQforgeDomain = "qforge";
inline constexpr const char* kFakeQuantizeOp = "FakeQuantize";

bool isFakeQuantize(const Node* node);
// The quantizer a FakeQuantize node runs.
std::string quantizerOf(const Node& node);

// A node name not used in `graph` yet: `base`, else `base_1`, `base_2`, ...
std::string uniqueNodeName(const Graph& graph, const std::string& base);

// Adds a FakeQuantize node on `v` for the given uses (all uses when empty; graph outputs then
// move too, and the new value takes `v`'s name so the model's interface does not change).
Node* addFakeQuantizeNode(Graph& graph, Value* v, const std::string& quantizer,
                          const std::vector<Use>& uses);

// The built-in op table plus a FakeQuantize lowering that calls `lookup(quantizer name)` the
// first time each node runs in an executor and keeps the answer: a name must name the same
// quantizer for as long as an executor built from this table lives.
using QuantizerLookup = std::function<quant::FakeQuantizer*(const std::string&)>;
OpRegistry registryWithFakeQuantize(QuantizerLookup lookup);

}  // namespace qforge::passes
