#include "quant/affine_kernels.h"

#include <atomic>
#include <cmath>
#include <string>

#include "core/error.h"
#include "quant/rounding.h"

namespace qforge {
namespace quant {

namespace {

// Enough elements per chunk that thread start-up is amortised (~30 us of work).
constexpr int64_t kGrain = 32768;

// Calls fn(channel, begin, end) for every maximal run [begin, end) of one channel inside [b, e).
template <typename Fn>
inline void forEachChannelRun(const AffineGrid& grid, int64_t b, int64_t e, const Fn& fn) {
  if (grid.channels == 1) {
    fn(0, b, e);
    return;
  }
  int64_t row = b / grid.inner;
  while (b < e) {
    const int64_t row_end = std::min(e, (row + 1) * grid.inner);
    fn(row % grid.channels, b, row_end);
    b = row_end;
    ++row;
  }
}

template <typename T, typename Fn>
void dispatchGrid(const AffineGrid& grid, const Fn& fn) {
  dispatchRounding(grid.rounding, [&](auto mode) {
    if (grid.division == ScaleDivision::Divide) {
      fn(mode, std::true_type{});
    } else {
      fn(mode, std::false_type{});
    }
  });
}

// Per-channel constants in the element type: T(scale) and the reciprocal rounded in T, as ATen
// does.
template <typename T>
struct ChannelConsts {
  T scale, inv_scale, lo, hi;
};

template <typename T>
ChannelConsts<T> channelConsts(const AffineGrid& grid, int64_t c) {
  const T scale = static_cast<T>(grid.scales[c]);
  const T zp = static_cast<T>(grid.zero_points[c]);
  return {scale, T(1) / scale, static_cast<T>(grid.qmin) - zp, static_cast<T>(grid.qmax) - zp};
}

template <RoundingMode kMode, bool kDivide, typename T>
inline T fakeQuantValue(T x, const ChannelConsts<T>& k) {
  T v = kDivide ? x / k.scale : x * k.inv_scale;
  // Clamping before rounding equals clamping after it (round is monotone and lo, hi are
  // integers) and keeps |v| small enough for the branch-free rounding.
  v = v < k.lo ? k.lo : v;
  v = v > k.hi ? k.hi : v;
  return roundToGrid<kMode>(v) * k.scale;
}

template <RoundingMode kMode, bool kDivide, typename T>
void forwardRun(const T* x, T* y, int64_t n, ChannelConsts<T> k) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fakeQuantValue<kMode, kDivide>(x[i], k);
}

// The same loop compiled for AVX2 (8 float lanes instead of SSE2's 4), picked at run time. The
// operations are IEEE add/mul/div/compare only, so results are bit-identical to the SSE2 loop.
template <RoundingMode kMode, bool kDivide, typename T>
__attribute__((target("avx2"))) void forwardRunAvx2(const T* x, T* y, int64_t n,
                                                    ChannelConsts<T> k) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fakeQuantValue<kMode, kDivide>(x[i], k);
}

std::atomic<bool> avx2_allowed{true};

template <typename T>
void forwardTyped(const at::Tensor& x, const AffineGrid& grid, at::Tensor& out) {
  const T* src = x.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  dispatchGrid<T>(grid, [&](auto mode, auto divide) {
    constexpr RoundingMode kMode = decltype(mode)::value;
    constexpr bool kDivide = decltype(divide)::value;
    const bool avx2 = avx2Enabled();
    forEachChunk(x.numel(), kGrain, [&](int64_t, int64_t b, int64_t e) {
      forEachChannelRun(grid, b, e, [&](int64_t c, int64_t rb, int64_t re) {
        if (avx2) {
          forwardRunAvx2<kMode, kDivide, T>(src + rb, dst + rb, re - rb, channelConsts<T>(grid, c));
        } else {
          forwardRun<kMode, kDivide, T>(src + rb, dst + rb, re - rb, channelConsts<T>(grid, c));
        }
      });
    });
  });
}

template <typename T>
void levelsTyped(const at::Tensor& x, const AffineGrid& grid, at::Tensor& levels) {
  const T* src = x.data_ptr<T>();
  int32_t* dst = levels.data_ptr<int32_t>();
  dispatchGrid<T>(grid, [&](auto mode, auto divide) {
    constexpr RoundingMode kMode = decltype(mode)::value;
    constexpr bool kDivide = decltype(divide)::value;
    forEachChunk(x.numel(), kGrain, [&](int64_t, int64_t b, int64_t e) {
      forEachChannelRun(grid, b, e, [&](int64_t c, int64_t rb, int64_t re) {
        const ChannelConsts<T> k = channelConsts<T>(grid, c);
        const T zp = static_cast<T>(grid.zero_points[c]);
        for (int64_t i = rb; i < re; ++i) {
          T v = kDivide ? src[i] / k.scale : src[i] * k.inv_scale;
          v = v < k.lo ? k.lo : v;
          v = v > k.hi ? k.hi : v;
          dst[i] = static_cast<int32_t>(roundToGrid<kMode>(v) + zp);
        }
      });
    });
  });
}

template <typename T>
void backwardTyped(const at::Tensor& x, const at::Tensor& grad_y, const AffineGrid& grid,
                   at::Tensor* grad_x, std::vector<double>* grad_scale,
                   std::vector<double>* grad_zero_point) {
  const T* src = x.data_ptr<T>();
  const T* gy = grad_y.data_ptr<T>();
  T* gx = (grad_x != nullptr) ? grad_x->data_ptr<T>() : nullptr;
  const bool want_params = grad_scale != nullptr || grad_zero_point != nullptr;
  const int64_t n = x.numel();
  const int64_t chunks = chunkCount(n, kGrain);
  // Per-chunk, per-channel sums; summed in chunk order afterwards so results are deterministic.
  std::vector<double> ds(want_params ? chunks * grid.channels : 0, 0.0);
  std::vector<double> dz(want_params ? chunks * grid.channels : 0, 0.0);
  dispatchGrid<T>(grid, [&](auto mode, auto divide) {
    constexpr RoundingMode kMode = decltype(mode)::value;
    constexpr bool kDivide = decltype(divide)::value;
    forEachChunk(n, kGrain, [&](int64_t chunk, int64_t b, int64_t e) {
      forEachChannelRun(grid, b, e, [&](int64_t c, int64_t rb, int64_t re) {
        const ChannelConsts<T> k = channelConsts<T>(grid, c);
        double sum_ds = 0.0;
        double sum_dz = 0.0;
        for (int64_t i = rb; i < re; ++i) {
          const T v = kDivide ? src[i] / k.scale : src[i] * k.inv_scale;
          T vc = v < k.lo - T(1) ? k.lo - T(1) : v;
          vc = vc > k.hi + T(1) ? k.hi + T(1) : vc;
          const T r = roundToGrid<kMode>(vc);
          const T g = gy[i];
          if (r < k.lo) {
            if (gx != nullptr) gx[i] = T(0);
            sum_ds += static_cast<double>(g) * static_cast<double>(k.lo);
            sum_dz -= static_cast<double>(g) * static_cast<double>(k.scale);
          } else if (r > k.hi) {
            if (gx != nullptr) gx[i] = T(0);
            sum_ds += static_cast<double>(g) * static_cast<double>(k.hi);
            sum_dz -= static_cast<double>(g) * static_cast<double>(k.scale);
          } else {
            if (gx != nullptr) gx[i] = g;
            sum_ds += static_cast<double>(g) * static_cast<double>(r - v);
          }
        }
        if (want_params) {
          ds[chunk * grid.channels + c] += sum_ds;
          dz[chunk * grid.channels + c] += sum_dz;
        }
      });
    });
  });
  if (grad_scale != nullptr) grad_scale->assign(grid.channels, 0.0);
  if (grad_zero_point != nullptr) grad_zero_point->assign(grid.channels, 0.0);
  for (int64_t chunk = 0; chunk < (want_params ? chunks : 0); ++chunk) {
    for (int64_t c = 0; c < grid.channels; ++c) {
      if (grad_scale != nullptr) (*grad_scale)[c] += ds[chunk * grid.channels + c];
      if (grad_zero_point != nullptr) (*grad_zero_point)[c] += dz[chunk * grid.channels + c];
    }
  }
}

template <RoundingMode kMode, bool kDivide, int kPower>
double lpErrorRun(const float* x, int64_t n, ChannelConsts<float> k, double p) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float v = kDivide ? x[i] / k.scale : x[i] * k.inv_scale;
    v = v < k.lo ? k.lo : v;
    v = v > k.hi ? k.hi : v;
    const double err = static_cast<double>(roundToGrid<kMode>(v) * k.scale - x[i]);
    if constexpr (kPower == 2) {
      sum += err * err;
    } else if constexpr (kPower == 1) {
      sum += std::fabs(err);
    } else {
      sum += std::pow(std::fabs(err), p);
    }
  }
  return sum;
}

void checkFloating(const at::Tensor& t, const char* what) {
  requireLazily(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, [&] {
    return std::string("fake quantize: ") + what + " must be float32 or float64, got " +
           std::string(c10::toString(t.scalar_type()));
  });
  requireLazily(t.is_contiguous(),
                [&] { return std::string("fake quantize: ") + what + " must be contiguous"; });
}

}  // namespace

bool setAvx2Allowed(bool allowed) {
  return avx2_allowed.exchange(allowed);
}

bool avx2Enabled() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has && avx2_allowed.load(std::memory_order_relaxed);
}

AffineGrid makeAffineGrid(const at::Tensor& x, const QScheme& scheme, std::vector<double> scales,
                          std::vector<double> zero_points, const std::string& who) {
  scheme.validate();
  AffineGrid grid;
  grid.qmin = scheme.qmin();
  grid.qmax = scheme.qmax();
  grid.rounding = scheme.rounding;
  grid.division = scheme.division;
  const int64_t count = static_cast<int64_t>(scales.size());
  requireLazily(count > 0 && zero_points.size() == scales.size(), [&] {
    return who + ": got " + std::to_string(scales.size()) + " scales and " +
           std::to_string(zero_points.size()) + " zero points";
  });
  if (scheme.perChannel()) {
    requireLazily(scheme.axis < x.dim(), [&] {
      return who + ": per-channel axis " + std::to_string(scheme.axis) +
             " is out of range for a tensor of rank " + std::to_string(x.dim());
    });
    grid.channels = x.size(scheme.axis);
    grid.inner = 1;
    for (int64_t d = scheme.axis + 1; d < x.dim(); ++d)
      grid.inner *= x.size(d);
    requireLazily(count == grid.channels, [&] {
      return who + ": " + std::to_string(count) + " scales for " + std::to_string(grid.channels) +
             " channels on axis " + std::to_string(scheme.axis);
    });
  } else {
    requireLazily(count == 1, [&] {
      return who + ": per-tensor scheme needs one scale, got " + std::to_string(count);
    });
    grid.inner = std::max<int64_t>(x.numel(), 1);
  }
  for (int64_t c = 0; c < count; ++c) {
    requireLazily(std::isfinite(scales[c]) && scales[c] > 0.0, [&] {
      return who + ": scale " + std::to_string(scales[c]) + " of channel " + std::to_string(c) +
             " is not a positive finite number";
    });
    requireLazily(zero_points[c] >= static_cast<double>(grid.qmin) &&
                      zero_points[c] <= static_cast<double>(grid.qmax) &&
                      zero_points[c] == std::nearbyint(zero_points[c]),
                  [&] {
                    return who + ": zero point " + std::to_string(zero_points[c]) + " of channel " +
                           std::to_string(c) + " is not an integer inside [" +
                           std::to_string(grid.qmin) + ", " + std::to_string(grid.qmax) + "]";
                  });
  }
  grid.scales = std::move(scales);
  grid.zero_points = std::move(zero_points);
  return grid;
}

void affineFakeQuantForward(const at::Tensor& x, const AffineGrid& grid, at::Tensor& out) {
  checkFloating(x, "input");
  checkFloating(out, "output");
  require(out.scalar_type() == x.scalar_type() && out.numel() == x.numel(),
          "fake quantize: output must match the input's dtype and size");
  if (x.scalar_type() == at::kFloat) {
    forwardTyped<float>(x, grid, out);
  } else {
    forwardTyped<double>(x, grid, out);
  }
}

void affineQuantizeToLevels(const at::Tensor& x, const AffineGrid& grid, at::Tensor& levels) {
  checkFloating(x, "input");
  require(levels.scalar_type() == at::kInt && levels.is_contiguous() && levels.numel() == x.numel(),
          "quantize: levels must be a contiguous int32 tensor of the input's size");
  if (x.scalar_type() == at::kFloat) {
    levelsTyped<float>(x, grid, levels);
  } else {
    levelsTyped<double>(x, grid, levels);
  }
}

void affineFakeQuantBackward(const at::Tensor& x, const at::Tensor& grad_y, const AffineGrid& grid,
                             at::Tensor* grad_x, std::vector<double>* grad_scale,
                             std::vector<double>* grad_zero_point) {
  checkFloating(x, "input");
  checkFloating(grad_y, "incoming gradient");
  require(grad_y.scalar_type() == x.scalar_type() && grad_y.numel() == x.numel(),
          "fake quantize backward: gradient must match the input's dtype and size");
  if (grad_x != nullptr) checkFloating(*grad_x, "input gradient");
  if (x.scalar_type() == at::kFloat) {
    backwardTyped<float>(x, grad_y, grid, grad_x, grad_scale, grad_zero_point);
  } else {
    backwardTyped<double>(x, grad_y, grid, grad_x, grad_scale, grad_zero_point);
  }
}

std::vector<double> affineLpError(const at::Tensor& x, const AffineGrid& grid, double p) {
  require(x.scalar_type() == at::kFloat && x.is_contiguous(),
          "Lp error: expects a contiguous float32 tensor");
  require(p > 0.0, "Lp error: p must be positive");
  const int64_t n = x.numel();
  const int64_t chunks = chunkCount(n, kGrain);
  std::vector<double> partial(chunks * grid.channels, 0.0);
  const float* src = x.data_ptr<float>();
  dispatchGrid<float>(grid, [&](auto mode, auto divide) {
    constexpr RoundingMode kMode = decltype(mode)::value;
    constexpr bool kDivide = decltype(divide)::value;
    forEachChunk(n, kGrain, [&](int64_t chunk, int64_t b, int64_t e) {
      forEachChannelRun(grid, b, e, [&](int64_t c, int64_t rb, int64_t re) {
        const ChannelConsts<float> k = channelConsts<float>(grid, c);
        double sum;
        if (p == 2.0) {
          sum = lpErrorRun<kMode, kDivide, 2>(src + rb, re - rb, k, p);
        } else if (p == 1.0) {
          sum = lpErrorRun<kMode, kDivide, 1>(src + rb, re - rb, k, p);
        } else {
          sum = lpErrorRun<kMode, kDivide, 0>(src + rb, re - rb, k, p);
        }
        partial[chunk * grid.channels + c] += sum;
      });
    });
  });
  std::vector<double> total(grid.channels, 0.0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    for (int64_t c = 0; c < grid.channels; ++c)
      total[c] += partial[chunk * grid.channels + c];
  }
  return total;
}

}  // namespace quant
}  // namespace qforge
