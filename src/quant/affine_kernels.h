// Element-wise kernels of affine fake quantization, y = (clamp(round(x / s) + z, qmin, qmax) - z) *
// s, and of its straight-through gradients. Raw loops over contiguous float/double data, parallel
// over chunks; the autograd functions and observers build on them.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <string>
#include <vector>

#include "quant/qscheme.h"

namespace qforge {
namespace quant {

// Everything a kernel needs to know about the grid of one call.
struct AffineGrid {
  int64_t qmin = -128;
  int64_t qmax = 127;
  RoundingMode rounding = RoundingMode::HalfToEven;
  ScaleDivision division = ScaleDivision::Divide;
  // Channel layout of the tensor: outer x channels x inner (channels == 1 for per-tensor).
  int64_t channels = 1;
  int64_t inner = 1;
  std::vector<double> scales;       // one per channel, > 0
  std::vector<double> zero_points;  // one per channel, integers inside [qmin, qmax]
};

// Builds the grid for `x` from a scheme and per-channel (or single) scale and zero point values.
// Throws qforge::Error when the axis, the parameter count or a scale does not fit.
AffineGrid makeAffineGrid(const at::Tensor& x, const QScheme& scheme, std::vector<double> scales,
                          std::vector<double> zero_points, const std::string& who);

// out[i] = fake-quantized x[i]. x and out are contiguous, same dtype (float or double) and numel;
// out may alias x (in-place).
void affineFakeQuantForward(const at::Tensor& x, const AffineGrid& grid, at::Tensor& out);

// Integer levels round(x / s) + z clamped to the grid (QuantizeLinear), as int32.
void affineQuantizeToLevels(const at::Tensor& x, const AffineGrid& grid, at::Tensor& levels);

// Gradients of the forward above with round treated as identity (straight-through estimator):
//   inside the grid:  dx = dy,  ds = dy * (round(x/s) - x/s),  dz = 0
//   below the grid:   dx = 0,   ds = dy * (qmin - z),           dz = -dy * s
//   above the grid:   dx = 0,   ds = dy * (qmax - z),           dz = -dy * s
// (PyTorch's _fake_quantize_learnable_* gradients). grad_x is written when defined; the per-channel
// sums of ds and dz are returned in grad_scale / grad_zero_point when those pointers are non-null.
void affineFakeQuantBackward(const at::Tensor& x, const at::Tensor& grad_y, const AffineGrid& grid,
                             at::Tensor* grad_x, std::vector<double>* grad_scale,
                             std::vector<double>* grad_zero_point);

// Sum over elements of |fake_quantize(x) - x|^p for a contiguous float32 tensor, per channel of
// the grid (p > 0; p == 2 and p == 1 take fast paths). Used by error-minimising range searches.
std::vector<double> affineLpError(const at::Tensor& x, const AffineGrid& grid, double p);

// The forward kernel and finiteMinMax use an AVX2 build when the CPU has it (avx2Enabled). Tests
// switch it off to cover the baseline (SSE2) build on AVX2 machines; returns the previous
// setting.
bool setAvx2Allowed(bool allowed);
bool avx2Enabled();

// Number of chunks forEachChunk(n, grain, ...) uses, so callers can pre-size per-chunk
// accumulators.
inline int64_t chunkCount(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  const int64_t by_size = (n + grain - 1) / grain;
  // A few chunks per thread balance uneven work without making the reduction large.
  const int64_t by_threads = static_cast<int64_t>(at::get_num_threads()) * 4;
  return std::max<int64_t>(1, std::min(by_size, by_threads));
}

// Splits [0, n) into chunkCount(n, grain) chunks of at least `grain` elements and runs
// fn(chunk_index, begin, end) for them in parallel.
template <typename Fn>
void forEachChunk(int64_t n, int64_t grain, const Fn& fn) {
  const int64_t chunks = chunkCount(n, grain);
  if (chunks == 0) return;
  const int64_t per_chunk = (n + chunks - 1) / chunks;
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t begin = c * per_chunk;
      const int64_t end = std::min(n, begin + per_chunk);
      if (begin < end) fn(c, begin, end);
    }
  });
}

}  // namespace quant
}  // namespace qforge
