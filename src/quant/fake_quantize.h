// Functional fake quantization: fixed-parameter (observer-driven) and learnable-parameter affine
// fake quantize as autograd functions, plus allocation-free variants and the integer
// quantize / dequantize pair with ONNX QuantizeLinear / DequantizeLinear semantics.
#pragma once

#include <ATen/ATen.h>

#include "quant/qparams.h"
#include "quant/qscheme.h"

namespace qforge {
namespace quant {

// y = (clamp(round(x / s) + z, qmin, qmax) - z) * s with the scheme's rounding and per-channel
// axis. Autograd: straight-through estimator with clip mask (dy/dx = 1 where round(x/s) + z lies
// inside [qmin, qmax], 0 where it is clipped); scale and zero point receive no gradient. With
// ScaleDivision::MultiplyByReciprocal and half-to-even rounding the result is bit-identical to
// at::fake_quantize_per_tensor_affine / at::fake_quantize_per_channel_affine.
at::Tensor fakeQuantize(const at::Tensor& x, const QParams& params, const QScheme& scheme);

// Same values without autograd, written into a preallocated `out` (contiguous, x's dtype and
// size) or into x itself. For calibration and evaluation loops that reuse buffers.
void fakeQuantizeOut(const at::Tensor& x, const QParams& params, const QScheme& scheme,
                     at::Tensor& out);
void fakeQuantizeInPlace(at::Tensor& x, const QParams& params, const QScheme& scheme);

// QuantizeLinear: int32 levels clamp(round(x / s) + z, qmin, qmax).
at::Tensor quantize(const at::Tensor& x, const QParams& params, const QScheme& scheme);
// DequantizeLinear: float32 (q - z) * s.
at::Tensor dequantize(const at::Tensor& levels, const QParams& params, const QScheme& scheme);

// Learnable affine fake quantize (LSQ, LSQ+, PyTorch's _fake_quantize_learnable_*_affine).
// `scale` and `zero_point` are float tensors of shape [C] (per-channel) or [1] that may require
// grad; the forward rounds the zero point half-to-even and clamps it to the grid. Gradients follow
// the straight-through rules of affineFakeQuantBackward, multiplied by `grad_factor`
// (LSQ's 1 / sqrt(numel * qmax)). Throws qforge::Error for a non-positive scale.
at::Tensor learnableFakeQuantize(const at::Tensor& x, const at::Tensor& scale,
                                 const at::Tensor& zero_point, const QScheme& scheme,
                                 double grad_factor);

// Returns `values` in the forward and passes the incoming gradient to `x` unchanged (or masked by
// `mask` when defined): the straight-through estimator for quantizers whose forward is computed
// outside autograd (log quantization, stochastic mixing).
at::Tensor straightThrough(const at::Tensor& x, const at::Tensor& values,
                           const at::Tensor& mask = at::Tensor());

}  // namespace quant
}  // namespace qforge
