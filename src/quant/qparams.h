// Scale and zero point from an observed range, following PyTorch's
// UniformQuantizationObserverBase._calculate_qparams (float32 arithmetic, eps guard, zero always
// representable) with MQBench's power-of-two rounding of the scale.
#pragma once

#include <ATen/ATen.h>

#include "quant/qscheme.h"

namespace qforge {
namespace quant {

struct QParams {
  at::Tensor scale;       // float32, shape [C] per-channel or [1] per-tensor
  at::Tensor zero_point;  // int64, same shape

  bool defined() const { return scale.defined() && zero_point.defined(); }
  int64_t numel() const { return scale.numel(); }
  // Per-tensor accessors; throw qforge::Error when the params hold several channels.
  float scaleValue() const;
  int64_t zeroPointValue() const;
};

// How log2(scale) is moved to an integer for power-of-two scales.
enum class PowerOfTwoRounding {
  Nearest,  // MQBench's pot_quantization
  Ceil,     // never clips more than the unrounded scale (TQT's threshold rounding)
  Floor,    // never loses more resolution than the unrounded scale
};

// 2^r(log2(scale)) for scale > 0. Computed exactly (frexp/ldexp, no libm rounding error).
float roundScaleToPowerOfTwo(float scale, PowerOfTwoRounding mode = PowerOfTwoRounding::Nearest);

// Zero point for a given scale: symmetric grids use 0; asymmetric ones map min(min_val, 0) onto
// qmin, rounded half to even and clamped to the grid.
int64_t zeroPointFor(float scale, float min_val, const QScheme& scheme);

// Scale and zero point for the range [min_val, max_val] (widened to include 0):
//  symmetric signed:   scale = max(|min|, |max|) / ((qmax - qmin) / 2), zero point 0
//  symmetric unsigned: scale = max(max, 0) / (qmax - qmin), zero point 0
//  asymmetric:         scale = (max - min) / (qmax - qmin), zero point = qmin - round(min / scale)
// then scale = max(scale, eps), and for power-of-two schemes scale = 2^round(log2 scale) with the
// zero point recomputed for the rounded scale.
// Throws qforge::Error for NaN/Inf bounds or min_val > max_val.
QParams qparamsFromMinMax(float min_val, float max_val, const QScheme& scheme);
// Per-channel form: min_val and max_val are float tensors of shape [C] (or scalars for per-tensor).
QParams qparamsFromMinMax(const at::Tensor& min_val, const at::Tensor& max_val,
                          const QScheme& scheme);

// Per-channel values [C] reshaped to [1, .., C, .., 1] so they broadcast along `axis` of a
// rank-`rank` tensor (scales, zero points, BatchNormalization factors).
at::Tensor alongAxis(const at::Tensor& values, int64_t axis, int64_t rank);

// Scale/zero point pairs as plain tensors built from values (tests, deploy readers).
QParams makeQParams(std::vector<float> scales, std::vector<int64_t> zero_points);

}  // namespace quant
}  // namespace qforge
