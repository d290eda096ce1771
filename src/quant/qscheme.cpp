#include "quant/qscheme.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace qforge {
namespace quant {

int64_t QScheme::qmin() const {
  if (is_unsigned) return 0;
  const int64_t half = int64_t{1} << (bits - 1);
  return (symmetric && symmetric_range && !full_range_clamp) ? -(half - 1) : -half;
}

int64_t QScheme::qmax() const {
  if (is_unsigned) return (int64_t{1} << bits) - 1;
  return (int64_t{1} << (bits - 1)) - 1;
}

int64_t QScheme::scaleSteps() const {
  if (symmetric && symmetric_range && full_range_clamp) return 2 * qmax();
  return qmax() - qmin();
}

void QScheme::validate() const {
  // 16 bits keep every level, level difference and zero point exact in float32 arithmetic.
  require(bits >= 2 && bits <= 16,
          "quantization scheme: bits=" + std::to_string(bits) + " is outside the supported 2..16");
  require(axis >= -1, "quantization scheme: axis=" + std::to_string(axis) +
                          " is invalid; use -1 for per-tensor or a channel axis >= 0");
  require(!(symmetric_range && (is_unsigned || !symmetric)),
          "quantization scheme: symmetric_range applies only to signed symmetric grids");
  require(!full_range_clamp || symmetric_range,
          "quantization scheme: full_range_clamp applies only to symmetric_range grids");
  require(std::isfinite(eps) && eps > 0.0,
          "quantization scheme: eps must be a positive finite number");
}

const char* toString(RoundingMode mode) {
  switch (mode) {
    case RoundingMode::HalfToEven:
      return "half-to-even";
    case RoundingMode::HalfAwayFromZero:
      return "half-away-from-zero";
    case RoundingMode::HalfUp:
      return "half-up";
    case RoundingMode::Floor:
      return "floor";
  }
  return "?";
}

std::string QScheme::str() const {
  std::ostringstream out;
  out << (is_unsigned ? "uint" : "int") << bits << ' ' << (symmetric ? "symmetric" : "asymmetric")
      << " [" << qmin() << ',' << qmax() << ']';
  if (full_range_clamp) out << " (scale on +-" << qmax() << ')';
  if (perChannel()) {
    out << " per-channel(axis=" << axis << ')';
  } else {
    out << " per-tensor";
  }
  if (power_of_two_scale) out << " pot-scale";
  out << ' ' << toString(rounding);
  return out.str();
}

QScheme QScheme::int8Symmetric(bool per_channel_axis0) {
  QScheme scheme;
  scheme.symmetric = true;
  scheme.symmetric_range = true;
  scheme.axis = per_channel_axis0 ? 0 : -1;
  return scheme;
}

QScheme QScheme::uint8Asymmetric() {
  QScheme scheme;
  scheme.symmetric = false;
  scheme.is_unsigned = true;
  return scheme;
}

}  // namespace quant
}  // namespace qforge
