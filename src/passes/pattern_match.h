// Small graph questions that the matchers of ops written out in primitives (LayerNormalization,
// GELU) ask of each step: who alone reads a value, which number a constant holds, and what the
// other operand of a binary op is.
#pragma once

#include <optional>

#include "ir/graph.h"

namespace qforge::passes {

// The default-domain node of type `op_type` that is the only reader of `v` (a value read twice
// by one node, as Mul(d, d) reads it, counts as one reader), unless `v` is a graph output.
Node* onlyReader(const Graph& graph, const Value* v, const char* op_type);

// The constant's value when it is one number (an initializer or a Constant node's tensor).
std::optional<double> scalarConstant(const Value* v);

// True when `value` is `expected` to float precision (relative 1e-6): constants and attributes
// an exporter wrote in float32 (sqrt 2, 1/6) are never exactly the double.
bool closeTo(double value, double expected);

// True when `v` is a one-number constant close to `expected`.
bool isScalarConstant(const Value* v, double expected);

// A Clip's bound: its `attribute` ("min", "max") before opset 11, else its input `slot` (1, 2)
// when that is a one-number constant; nullopt when there is none.
std::optional<double> clipBound(const Node& clip, size_t slot, const char* attribute);

// The other input of binary `node` when one of its two inputs is `v`.
const Value* otherInput(const Node& node, const Value* v);

}  // namespace qforge::passes
