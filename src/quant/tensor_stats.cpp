#include "quant/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "quant/affine_kernels.h"

namespace qforge {
namespace quant {

namespace {

constexpr int64_t kLanes = 8;

struct Partial {
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  float poison = 0.0f;  // x * 0 is NaN exactly for NaN and Inf inputs
};

// Eight independent lanes let the compiler keep the reductions in vector registers without
// reassociating FP operations (which it may not do without -ffast-math).
Partial scan(const float* x, int64_t n) {
  float mn[kLanes], mx[kLanes], poison[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) {
    mn[l] = std::numeric_limits<float>::infinity();
    mx[l] = -std::numeric_limits<float>::infinity();
    poison[l] = 0.0f;
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float v = x[i + l];
      mn[l] = v < mn[l] ? v : mn[l];
      mx[l] = v > mx[l] ? v : mx[l];
      poison[l] += v * 0.0f;
    }
  }
  for (; i < n; ++i) {
    mn[0] = x[i] < mn[0] ? x[i] : mn[0];
    mx[0] = x[i] > mx[0] ? x[i] : mx[0];
    poison[0] += x[i] * 0.0f;
  }
  Partial p;
  for (int64_t l = 0; l < kLanes; ++l) {
    p.min = std::min(p.min, mn[l]);
    p.max = std::max(p.max, mx[l]);
    p.poison += poison[l];
  }
  return p;
}

}  // namespace

MinMax finiteMinMax(const at::Tensor& x) {
  require(x.scalar_type() == at::kFloat && x.is_contiguous(),
          "finiteMinMax: expects a contiguous float32 tensor");
  const int64_t n = x.numel();
  if (n == 0) return {};
  const float* data = x.data_ptr<float>();
  const int64_t grain = 65536;
  std::vector<Partial> partials(chunkCount(n, grain));
  forEachChunk(n, grain, [&](int64_t chunk, int64_t b, int64_t e) {
    partials[chunk] = scan(data + b, e - b);
  });
  MinMax result;
  result.min = std::numeric_limits<float>::infinity();
  result.max = -std::numeric_limits<float>::infinity();
  float poison = 0.0f;
  for (const Partial& p : partials) {
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
