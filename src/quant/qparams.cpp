#include "quant/qparams.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "quant/rounding.h"

namespace qforge {
namespace quant {

float QParams::scaleValue() const {
  require(defined() && numel() == 1,
          "quantization parameters: expected one per-tensor scale, got " +
              std::to_string(defined() ? numel() : 0));
  return scale.to(at::kFloat).reshape({-1})[0].item<float>();
}

int64_t QParams::zeroPointValue() const {
  require(defined() && zero_point.numel() == 1,
          "quantization parameters: expected one per-tensor zero point");
  return zero_point.reshape({-1})[0].item<int64_t>();
}

float roundScaleToPowerOfTwo(float scale, PowerOfTwoRounding mode) {
  require(
      std::isfinite(scale) && scale > 0.0f,
      "power-of-two scale: scale " + std::to_string(scale) + " is not a positive finite number");
  int exponent = 0;
  // scale = mantissa * 2^exponent with mantissa in [0.5, 1): log2(scale) lies in [exponent-1,
  // exponent).
  const float mantissa = std::frexp(scale, &exponent);
  int k = exponent - 1;  // floor(log2 scale)
  const bool exact = mantissa == 0.5f;
  switch (mode) {
    case PowerOfTwoRounding::Floor:
      break;
    case PowerOfTwoRounding::Ceil:
      if (!exact) k += 1;
      break;
    case PowerOfTwoRounding::Nearest:
      // log2(scale) - k >= 0.5  <=>  mantissa * 2 >= sqrt(2); ties (exactly sqrt 2) cannot occur in
      // float.
      if (mantissa * 2.0f >= 1.41421356237309505f) k += 1;
      break;
  }
  return std::ldexp(1.0f, k);
}

int64_t zeroPointFor(float scale, float min_val, const QScheme& scheme) {
  if (scheme.symmetric) return 0;
  const float min_neg = std::min(min_val, 0.0f);
  const float shifted = roundHalfToEven(std::max(min_neg / scale, -4194304.0f));
  const int64_t zp = scheme.qmin() - static_cast<int64_t>(shifted);
  return std::clamp(zp, scheme.qmin(), scheme.qmax());
}

namespace {

void checkRange(float min_val, float max_val) {
  require(std::isfinite(min_val) && std::isfinite(max_val),
          "quantization parameters: observed range [" + std::to_string(min_val) + ", " +
              std::to_string(max_val) + "] is not finite");
  require(min_val <= max_val, "quantization parameters: observed min " + std::to_string(min_val) +
                                  " exceeds max " + std::to_string(max_val));
}

std::pair<float, int64_t> scaleAndZeroPoint(float min_val, float max_val, const QScheme& scheme) {
  checkRange(min_val, max_val);
  const float min_neg = std::min(min_val, 0.0f);
  const float max_pos = std::max(max_val, 0.0f);
  const float levels = static_cast<float>(scheme.scaleSteps());
  float scale;
  if (scheme.symmetric && !scheme.is_unsigned) {
    scale = std::max(-min_neg, max_pos) / (levels / 2.0f);
  } else if (scheme.symmetric) {
    scale = max_pos / levels;
  } else {
    scale = (max_pos - min_neg) / levels;
  }
  scale = std::max(scale, static_cast<float>(scheme.eps));
  if (scheme.power_of_two_scale) scale = roundScaleToPowerOfTwo(scale);
  return {scale, zeroPointFor(scale, min_neg, scheme)};
}

}  // namespace

QParams qparamsFromMinMax(float min_val, float max_val, const QScheme& scheme) {
  scheme.validate();
  auto [scale, zp] = scaleAndZeroPoint(min_val, max_val, scheme);
  return makeQParams({scale}, {zp});
}

QParams qparamsFromMinMax(const at::Tensor& min_val, const at::Tensor& max_val,
                          const QScheme& scheme) {
  scheme.validate();
  require(min_val.numel() == max_val.numel() && min_val.numel() > 0,
          "quantization parameters: min and max hold " + std::to_string(min_val.numel()) + " and " +
              std::to_string(max_val.numel()) + " values");
  const at::Tensor mins = min_val.detach().to(at::kFloat).contiguous().reshape({-1});
  const at::Tensor maxs = max_val.detach().to(at::kFloat).contiguous().reshape({-1});
  const int64_t channels = mins.numel();
  std::vector<float> scales(channels);
  std::vector<int64_t> zero_points(channels);
  const float* lo = mins.data_ptr<float>();
  const float* hi = maxs.data_ptr<float>();
  for (int64_t c = 0; c < channels; ++c) {
    std::tie(scales[c], zero_points[c]) = scaleAndZeroPoint(lo[c], hi[c], scheme);
  }
  return makeQParams(std::move(scales), std::move(zero_points));
}

QParams makeQParams(std::vector<float> scales, std::vector<int64_t> zero_points) {
  require(scales.size() == zero_points.size() && !scales.empty(),
          "quantization parameters: need as many zero points as scales");
  const int64_t n = static_cast<int64_t>(scales.size());
  QParams params;
  params.scale = at::empty({n}, at::kFloat);
  params.zero_point = at::empty({n}, at::kLong);
  std::copy(scales.begin(), scales.end(), params.scale.data_ptr<float>());
  std::copy(zero_points.begin(), zero_points.end(), params.zero_point.data_ptr<int64_t>());
  return params;
}

at::Tensor alongAxis(const at::Tensor& values, int64_t axis, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = values.numel();
  return values.reshape(shape);
}

}  // namespace quant
}  // namespace qforge
