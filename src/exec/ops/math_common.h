// Helpers shared by the math, logic, reduction and signal lowerings (math.cpp, logic.cpp,
// activation_more.cpp, reduction_more.cpp, signal.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "exec/op_info.h"

namespace qforge::ops {

// fn(x), computed in float32 when x is float16 and rounded back: libtorch 1.13 has no CPU
// float16 kernels for sin, exp, fft... (still differentiable).
template <typename Fn>
at::Tensor viaFloat32IfHalf(const at::Tensor& x, Fn fn) {
  if (x.scalar_type() == at::kHalf) return fn(x.to(at::kFloat)).to(at::kHalf);
  return fn(x);
}

// Input `i`, which must hold exactly one integer (CumSum's axis, Trilu's k, a window's size):
// fails naming `what` otherwise.
inline int64_t scalarIntInput(const OpContext& ctx, size_t i, const std::string& what) {
  const at::Tensor& t = ctx.input(i);
  if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    ctx.fail(what + " (input " + std::to_string(i) + ") must be an integer tensor, got " +
             c10::toString(t.scalar_type()));
  }
  if (t.numel() != 1) {
    ctx.fail(what + " (input " + std::to_string(i) + ") must hold one value, got shape " +
             c10::str(t.sizes()));
  }
  return t.reshape({}).item<int64_t>();
}

// Input `i`, which must hold exactly one number of any type (MelWeightMatrix's frequencies).
inline double scalarInput(const OpContext& ctx, size_t i, const std::string& what) {
  const at::Tensor& t = ctx.input(i);
  if (t.numel() != 1) {
    ctx.fail(what + " (input " + std::to_string(i) + ") must hold one value, got shape " +
             c10::str(t.sizes()));
  }
  return t.reshape({}).item<double>();
}

// Fails unless `x` (input `i`) has element type `type`.
inline void requireType(const OpContext& ctx, const at::Tensor& x, size_t i, at::ScalarType type) {
  if (x.scalar_type() != type) {
    ctx.fail("input " + std::to_string(i) + " must be " + c10::toString(type) + ", got " +
             c10::toString(x.scalar_type()));
  }
}

}  // namespace qforge::ops
