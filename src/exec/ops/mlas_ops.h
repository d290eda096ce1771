// Softmax and Erf on tensors as ONNX Runtime's CPU provider computes them: MLAS's kernels
// (exec/ops/mlas_kernels.h), bit for bit, over rows in parallel. The executor's own lowerings use
// them, so a quantizer after attention or GELU sees the values the deployed model computes; ATen's
// libm-based kernels differ in the last bits, which flips quantized levels.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace qforge::ops {

// True when the MLAS kernels compute this input: float32, and no gradient wanted through it
// (training keeps ATen's differentiable ops).
bool mlasKernelsApply(const at::Tensor& x);

// ONNX's Softmax of float32 `x` (axis already normalized): along `axis` from opset 13 on, over
// everything from `axis` on, flattened, before it. ORT moves the axis last in the first case.
at::Tensor mlasSoftmax(const at::Tensor& x, int64_t axis, bool flatten_from_axis);

at::Tensor mlasErf(const at::Tensor& x);

// Sigmoid of float32 `x` as ORT's CPU kernel computes it: MLAS's logistic function.
at::Tensor mlasLogistic(const at::Tensor& x);

// GELU of float32 `x` as ONNX Runtime's fused Gelu and BiasGelu kernels compute it once its graph
// optimizations have fused the written-out chain: (x * 0.5) * (erf(x * (float)M_SQRT1_2) + 1), the
// erf MLAS's. The chain itself divides by sqrt(2), which differs in the last bit.
at::Tensor mlasGelu(const at::Tensor& x);

}  // namespace qforge::ops
