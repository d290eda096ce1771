// Branch-free rounding to the integer grid in every RoundingMode. Only add, subtract, compare and
// select are used, so the compiler vectorises the fake-quantize loops with plain SSE2
// (std::nearbyint is a libm call on baseline x86-64 and would dominate the kernels).
#pragma once

#include <cmath>
#include <type_traits>

#include "quant/qscheme.h"

namespace qforge {
namespace quant {

// Adding and subtracting 1.5 * 2^(mantissa bits) rounds to an integer under the default
// round-to-nearest-even FP environment. Valid for |v| < 2^22 (float) and 2^51 (double); callers
// clamp v to a small range first, which also keeps the result exact.
template <typename T>
struct RoundMagic;
template <>
struct RoundMagic<float> {
  static constexpr float value = 12582912.0f;  // 1.5 * 2^23
};
template <>
struct RoundMagic<double> {
  static constexpr double value = 6755399441055744.0;  // 1.5 * 2^52
};

template <typename T>
inline T roundHalfToEven(T v) {
  // Without -ffast-math the compiler must keep both operations (FP addition is not associative).
  return (v + RoundMagic<T>::value) - RoundMagic<T>::value;
}

template <RoundingMode kMode, typename T>
inline T roundToGrid(T v) {
  const T even = roundHalfToEven(v);
  if constexpr (kMode == RoundingMode::HalfToEven) {
    return even;
  } else if constexpr (kMode == RoundingMode::Floor) {
    return even > v ? even - T(1) : even;
  } else {
    // v - even is exact; it is +-0.5 exactly at ties, where the modes differ from half-to-even.
    const T diff = v - even;
    const bool tie = diff == T(0.5) || diff == T(-0.5);
    if constexpr (kMode == RoundingMode::HalfUp) {
      return tie ? v + T(0.5) : even;
    } else {  // HalfAwayFromZero
      return tie ? (v > T(0) ? v + T(0.5) : v - T(0.5)) : even;
    }
  }
}

// Runtime dispatch for scalar (non-hot) code paths.
template <typename T>
inline T roundToGrid(T v, RoundingMode mode) {
  switch (mode) {
    case RoundingMode::HalfToEven:
      return roundToGrid<RoundingMode::HalfToEven>(v);
    case RoundingMode::HalfAwayFromZero:
      return roundToGrid<RoundingMode::HalfAwayFromZero>(v);
    case RoundingMode::HalfUp:
      return roundToGrid<RoundingMode::HalfUp>(v);
    case RoundingMode::Floor:
      return roundToGrid<RoundingMode::Floor>(v);
  }
  return v;
}

// Calls fn(std::integral_constant-like tag) with the mode as a compile-time constant, so kernels
// are instantiated once per mode and the inner loop carries no switch.
template <typename Fn>
inline void dispatchRounding(RoundingMode mode, Fn&& fn) {
  switch (mode) {
    case RoundingMode::HalfToEven:
      fn(std::integral_constant<RoundingMode, RoundingMode::HalfToEven>{});
      return;
    case RoundingMode::HalfAwayFromZero:
      fn(std::integral_constant<RoundingMode, RoundingMode::HalfAwayFromZero>{});
      return;
    case RoundingMode::HalfUp:
      fn(std::integral_constant<RoundingMode, RoundingMode::HalfUp>{});
      return;
    case RoundingMode::Floor:
      fn(std::integral_constant<RoundingMode, RoundingMode::Floor>{});
      return;
  }
}

}  // namespace quant
}  // namespace qforge
