// Small helpers shared by the op lowerings.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "exec/op_info.h"

namespace qforge::ops {

// Maps a possibly negative ONNX axis into [0, rank); fails naming the node when out of range.
inline int64_t normalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    ctx.fail("axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
             std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// True when every defined tensor given is float32 and no gradient is wanted through any of them:
// where a lowering may run a kernel of its own (oneDNN, MLAS) instead of ATen's differentiable op.
inline bool float32WithoutGrad(std::initializer_list<std::reference_wrapper<const at::Tensor>> ts) {
  const bool grad = at::GradMode::is_enabled();
  for (const at::Tensor& t : ts) {
    if (!t.defined()) continue;
    if (t.scalar_type() != at::kFloat || (grad && t.requires_grad())) return false;
  }
  return true;
}

// `t`'s n values as one contiguous row when they all lie along its last axis (every other dim
// 1): a per-feature weight or a per-column bias. A contiguous 1-D tensor is returned as it is,
// without a reshape through the dispatcher on every run; undefined when t is not such a row.
inline at::Tensor valuesAlongLastAxis(const at::Tensor& t, int64_t n) {
  if (t.dim() == 1 && t.size(0) == n && t.is_contiguous()) return t;
  if (t.dim() < 1 || t.numel() != n || t.size(-1) != n) return {};
  return t.reshape({n}).contiguous();
}

// Reads a 0-d or 1-d integer tensor (shapes, axes, pads given as inputs) into a vector.
inline std::vector<int64_t> toInt64Vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous().reshape({-1});
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// Input `i`, which must be a floating-point tensor; fails naming the node otherwise.
inline const at::Tensor& floatInput(const OpContext& ctx, size_t i) {
  const at::Tensor& x = ctx.input(i);
  if (!at::isFloatingType(x.scalar_type())) {
    ctx.fail(std::string("input ") + std::to_string(i) + " must be a floating-point tensor, got " +
             c10::toString(x.scalar_type()));
  }
  return x;
}

// Shapes for error messages, in the two spellings existing messages use (kept so messages do not
// change): "[2, 3]" (nn, normalization) and the compact "[2,3]" (shape, resize).
inline std::string shapeString(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

inline std::string dimsText(at::IntArrayRef dims) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < dims.size(); ++i)
    out << (i ? "," : "") << dims[i];
  out << "]";
  return out.str();
}

// One lowering for a whole opset range, the common case.
inline OpInfo op(std::string op_type, int64_t since, int64_t until, Lowering run) {
  OpInfo info;
  info.op_type = std::move(op_type);
  info.since_version = since;
  info.until_version = until;
  info.run = std::move(run);
  return info;
}

constexpr int64_t kLatestOpset = 1 << 30;

// Elements per parallel task of qforge's own elementwise kernels: below this, waking a second
// thread costs more than it saves.
constexpr int64_t kParallelGrainElements = 1 << 14;

// `info` with its weight slots, bias slot and the weights' layout filled in.
inline OpInfo withWeights(OpInfo info, std::vector<int> weight_inputs, int bias_input,
                          WeightLayout layout) {
  info.weight_inputs = std::move(weight_inputs);
  info.bias_input = bias_input;
  info.weight_layout = layout;
  return info;
}

// `info` marked as data movement: its output values are selected from its inputs.
inline OpInfo movesData(OpInfo info) {
  info.moves_data_only = true;
  return info;
}

// Computes shapes, indices, masks or constants rather than activations: never quantized.
inline OpInfo shapeComputation(OpInfo info) {
  info.shape_computation = true;
  return info;
}

// `info` marked as layout only: input 0's elements, each once, in another shape or order. That
// moves data and keeps input 0's sign.
inline OpInfo layoutOnly(OpInfo info) {
  info.moves_data_only = true;
  info.layout_only = true;
  info.output_sign = OutputSign::OfDataInput;
  return info;
}

// `info` marked as reading activations on every non-constant input, not input 0 alone.
inline OpInfo combinesActivations(OpInfo info) {
  info.combines_activations = true;
  return info;
}

inline OpInfo withSign(OpInfo info, OutputSign sign) {
  info.output_sign = sign;
  return info;
}

}  // namespace qforge::ops
