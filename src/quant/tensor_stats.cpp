#include "quant/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "quant/affine_kernels.h"

namespace qforge {
namespace quant {

namespace {

struct Partial {
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  float poison = 0.0f;  // x * 0 is NaN exactly for NaN and Inf inputs
};

// Eight lanes as one GCC vector: explicit, because the compiler would not vectorize the select
// (v < min ? v : min is not a min under IEEE NaN rules) from plain loops even at -O3, and ran
// them one float at a time. Min and max do not depend on the order values are visited in (but
// for the sign of a zero), and the poison only tells NaN or infinity from finite values.
using Lanes = float __attribute__((vector_size(32)));

__attribute__((always_inline)) inline Partial scanLanes(const float* x, int64_t n) {
  constexpr int64_t kLanes = sizeof(Lanes) / sizeof(float);
  const float inf = std::numeric_limits<float>::infinity();
  Lanes mn = {inf, inf, inf, inf, inf, inf, inf, inf};
  Lanes mx = -mn;
  Lanes poison = {};
  int64_t i = 0;
  // Four independent accumulators of each: one chain waits a min's latency per step, and a
  // batch-1 activation sits in cache, where that latency and not memory is the limit.
  if (n >= 4 * kLanes) {
    Lanes mn4[4] = {mn, mn, mn, mn}, mx4[4] = {mx, mx, mx, mx}, poison4[4] = {};
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
      for (int a = 0; a < 4; ++a) {
        Lanes v;
        std::memcpy(&v, x + i + a * kLanes, sizeof(v));
        mn4[a] = v < mn4[a] ? v : mn4[a];
        mx4[a] = v > mx4[a] ? v : mx4[a];
        poison4[a] += v * 0.0f;
      }
    }
    for (int a = 0; a < 4; ++a) {
      mn = mn4[a] < mn ? mn4[a] : mn;
      mx = mx4[a] > mx ? mx4[a] : mx;
      poison += poison4[a];
    }
  }
  for (; i + kLanes <= n; i += kLanes) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof(v));
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    poison += v * 0.0f;
  }
  Partial p;
  for (; i < n; ++i) {
    p.min = x[i] < p.min ? x[i] : p.min;
    p.max = x[i] > p.max ? x[i] : p.max;
    p.poison += x[i] * 0.0f;
  }
  for (int64_t l = 0; l < kLanes; ++l) {
    p.min = std::min(p.min, mn[l]);
    p.max = std::max(p.max, mx[l]);
    p.poison += poison[l];
  }
  return p;
}

Partial scan(const float* x, int64_t n) {
  return scanLanes(x, n);
}

// The same loop for AVX2, picked at run time as the fake-quantization kernel is: calibration
// reads every activation once here, and the baseline SSE2 loop was half of a calibration batch
// of the zoo MobileNetV2. Compare, min/max and multiply-add only: the same result bit for bit.
__attribute__((target("avx2"))) Partial scanAvx2(const float* x, int64_t n) {
  return scanLanes(x, n);
}

}  // namespace

MinMax finiteMinMax(const at::Tensor& x) {
  // Min and max do not depend on positions: a dense tensor in any layout (a channels-last
  // activation) is scanned in memory order, without a permuted view made for it.
  require(x.scalar_type() == at::kFloat && x.is_non_overlapping_and_dense(),
          "finiteMinMax: expects a non-overlapping, dense float32 tensor");
  const int64_t n = x.numel();
  if (n == 0) return {};
  const float* data = x.data_ptr<float>();
  const int64_t grain = 65536;
  const bool avx2 = avx2Enabled();
  // One chunk (a batch-1 activation) is scanned where it is, without a vector of partials.
  Partial single;
  std::vector<Partial> many;
  const int64_t chunks = chunkCount(n, grain);
  if (chunks > 1) many.resize(static_cast<size_t>(chunks));
  Partial* partials = chunks > 1 ? many.data() : &single;
  forEachChunk(n, grain, [&](int64_t chunk, int64_t b, int64_t e) {
    partials[chunk] = avx2 ? scanAvx2(data + b, e - b) : scan(data + b, e - b);
  });
  MinMax result;
  result.min = std::numeric_limits<float>::infinity();
  result.max = -std::numeric_limits<float>::infinity();
  float poison = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    const Partial& p = partials[c];
    result.min = std::min(result.min, p.min);
    result.max = std::max(result.max, p.max);
    poison += p.poison;
  }
  result.finite = poison == 0.0f;
  return result;
}

int64_t countNonFinite(const at::Tensor& x) {
  return x.numel() - at::isfinite(x).sum().item<int64_t>();
}

at::Tensor channelRows(const at::Tensor& x, int64_t axis) {
  require(axis >= 0 && axis < x.dim(), "per-channel axis " + std::to_string(axis) +
                                           " is out of range for a tensor of rank " +
                                           std::to_string(x.dim()));
  const int64_t channels = x.size(axis);
  return x.movedim(axis, 0).reshape({channels, -1});
}

std::pair<at::Tensor, at::Tensor> channelMinMax(const at::Tensor& x, int64_t axis) {
  const at::Tensor rows = channelRows(x, axis);
  require(rows.size(1) > 0, "per-channel statistics of a tensor with empty channels");
  auto [mn, mx] = at::aminmax(rows, 1);
  return {mn, mx};
}

}  // namespace quant
}  // namespace qforge
