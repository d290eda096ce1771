// Reading a QDQ graph: which DequantizeLinear feeds a value, which QuantizeLinear reads one, and
// whether two carry the same grid. The QOperator rewrite's selectors are written in these terms.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ir/graph.h"

namespace qforge::deploy {

// A DequantizeLinear feeding a value: the integer tensor and its (constant) parameters.
struct Dq {
  Node* node = nullptr;
  Value* q = nullptr;
  Value* scale = nullptr;
  Value* zero_point = nullptr;
  bool per_tensor = true;
  int64_t axis = 1;
};

int64_t intAttr(const Node* n, const std::string& name, int64_t fallback);
double floatAttr(const Node* n, const std::string& name, double fallback);

// Default-domain op of this type (nullptr is no op).
bool isOp(const Node* n, const char* type);

// The DequantizeLinear producing `v`, when its scale and zero point are initializers (the integer
// kernels need constant parameters with a known type).
std::optional<Dq> dqOf(const Value* v);
// The same, only when it is per tensor (what activations of the integer kernels must be).
std::optional<Dq> perTensorDq(const Value* v);

// The per-tensor QuantizeLinear with constant parameters that is the only reader of `v`.
Node* soleQuantize(const Value* v, const Graph& g);

// An initializer holding one value: a per-tensor scale or zero point.
bool isScalarInitializer(const Value* v);

bool sameParams(const Value* scale_a, const Value* zp_a, const Value* scale_b, const Value* zp_b);

// [qmin, qmax] of an int8 or uint8 container.
std::pair<int64_t, int64_t> typeRange(at::ScalarType t);

// Whether a weight's stored integers are constant int8/uint8 (what the kernels take).
bool constantIntegers(const Dq& w);

// The integers QuantizeLinear `q` computes when its input, scale and zero point are constants
// (ONNX's rule: saturate(round_half_even(x / scale) + zero_point), in the zero point's type; a
// per-channel scale along `axis`), else nullopt.
std::optional<at::Tensor> constantQuantize(const Node& q);

}  // namespace qforge::deploy
