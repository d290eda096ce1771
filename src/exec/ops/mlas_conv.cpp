// The algorithms and their slices follow MLAS's convolve.cpp (MlasConvPrepare, MlasConv,
// MlasConvOperation); the products are exec/ops/mlas_sgemm.
#include "exec/ops/mlas_conv.h"

#include <algorithm>
#include <cmath>

#include "exec/ops/mlas_sgemm.h"

namespace qforge::mlas {
namespace {

// The 2-D view MLAS works in: a 1-D convolution is one of height 1.
struct Plane {
  int64_t in_h, in_w, k_h, k_w, d_h, d_w, s_h, s_w, pad_top, pad_left, out_h, out_w;
};

Plane planeOf(const ConvShape& s) {
  if (s.input.size() == 1) {
    return Plane{1, s.input[0],  1, s.kernel[0], 1, s.dilation[0],
                 1, s.stride[0], 0, s.pads[0],   1, s.output[0]};
  }
  return Plane{s.input[0],  s.input[1],  s.kernel[0], s.kernel[1], s.dilation[0], s.dilation[1],
               s.stride[0], s.stride[1], s.pads[0],   s.pads[1],   s.output[0],   s.output[1]};
}

// Rows k0 .. k0 + count_k of the unfolded input, columns n0 .. n0 + count_n: row r is input
// channel r / (kh kw) at kernel offset r % (kh kw); zero where the window reads padding.
void unfold(const Plane& p, const float* x, int64_t k0, int64_t count_k, int64_t n0,
            int64_t count_n, float* out) {
  const int64_t kernel_size = p.k_h * p.k_w;
  for (int64_t r = 0; r < count_k; ++r) {
    const int64_t row = k0 + r;
    const float* channel = x + (row / kernel_size) * p.in_h * p.in_w;
    const int64_t ky = (row % kernel_size) / p.k_w, kx = row % p.k_w;
    float* dst = out + r * count_n;
    // Output positions walked row by row from n0: (oy, ox) advance without a division each.
    int64_t oy = n0 / p.out_w, ox = n0 % p.out_w;
    for (int64_t j = 0; j < count_n; ++j) {
      const int64_t iy = oy * p.s_h + ky * p.d_h - p.pad_top;
      const int64_t ix = ox * p.s_w + kx * p.d_w - p.pad_left;
      const bool inside = iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w;
      dst[j] = inside ? channel[iy * p.in_w + ix] : 0.0f;
      if (++ox == p.out_w) {
        ox = 0;
        ++oy;
      }
    }
  }
}

// MlasConvOperation: output positions start .. start + count in slices, each K slice unfolded
// and multiplied into the output in turn.
void sliced(const Plane& p, int64_t filters, int64_t k, int64_t output_size, const float* x,
            const float* w, float* y, bool accumulate, int64_t start, int64_t count,
            std::vector<float>& columns) {
  int64_t stride_n = 0, stride_k = 0;
  sliceWidths(count, k, &stride_n, &stride_k);
  for (int64_t n = 0; n < count; n += stride_n) {
    const int64_t count_n = std::min(stride_n, count - n);
    bool add = accumulate;
    for (int64_t k0 = 0; k0 < k; k0 += stride_k) {
      const int64_t count_k = std::min(stride_k, k - k0);
      columns.resize(static_cast<size_t>(count_k * count_n));
      unfold(p, x, k0, count_k, start + n, count_n, columns.data());
      sgemmOperation(filters, count_n, count_k, w + k0, k, columns.data(), count_n, false,
                     y + start + n, output_size, add);
      add = true;
    }
  }
}

// MlasActivation over one (batch, group): bias, then the activation, one rounding each.
void activate(const ConvActivation& act, const float* bias, int64_t filters, int64_t size,
              float* y) {
  for (int64_t f = 0; f < filters; ++f) {
    float* row = y + f * size;
    for (int64_t i = 0; i < size; ++i) {
      float v = bias != nullptr ? row[i] + bias[f] : row[i];
      switch (act.kind) {
        case ConvActivation::Kind::kIdentity:
          break;
        case ConvActivation::Kind::kRelu:
          v = std::max(v, 0.0f);
          break;
        case ConvActivation::Kind::kClip:
          v = std::min(std::max(v, act.minimum), act.maximum);
          break;
        case ConvActivation::Kind::kLeakyRelu:
          v = v >= 0 ? v : v * act.alpha;
          break;
      }
      row[i] = v;
    }
  }
}

}  // namespace

bool conv(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
          bool has_sum, const ConvActivation& activation, int threads) {
  if (s.input.empty() || s.input.size() > 2) return false;
  const Plane p = planeOf(s);
  const int64_t input_size = p.in_h * p.in_w;
  const int64_t output_size = p.out_h * p.out_w;
  const int64_t k = s.in_channels * p.k_h * p.k_w;
  bool strides_one = true, pads_zero = true, dilations_one = true;
  for (size_t d = 0; d < s.input.size(); ++d) {
    strides_one = strides_one && s.stride[d] == 1;
    dilations_one = dilations_one && s.dilation[d] == 1;
    pads_zero = pads_zero && s.pads[d] == 0 && s.pads[d + s.input.size()] == 0;
  }
  // GEMM straight on the input (MlasConvAlgorithmGemmDirect): a pointwise convolution, or one
  // input channel whose kernel spans whole input rows (B is the input read with stride in_w,
  // transposed) or whole columns one wide.
  int64_t direct_ldb = 0;
  bool direct_trans_b = false;
  if (strides_one && pads_zero) {
    if (k == s.in_channels) {
      direct_ldb = output_size;
    } else if (dilations_one && s.in_channels == 1) {
      if (p.k_w == p.in_w) {
        direct_ldb = p.in_w;
        direct_trans_b = true;
      } else if (p.k_h == p.in_h && p.k_w == 1) {
        direct_ldb = p.in_w;
      }
    }
  }
  const bool direct = direct_ldb != 0;
  const bool expand_whole = !direct && s.filters > output_size;
  const bool several = s.batch > 1 || s.groups > 1;
  // A single (batch, group) of the sliced form splits its output positions over threads.
  int64_t thread_stride = output_size;
  if (!direct && !expand_whole && !several) {
    const double complexity = static_cast<double>(s.filters) * output_size * k;
    int64_t target = complexity < static_cast<double>(kSgemmThreadComplexity * kMaximumThreadCount)
                         ? static_cast<int64_t>(complexity / kSgemmThreadComplexity) + 1
                         : kMaximumThreadCount;
    target = std::min<int64_t>(target, std::max(threads, 1));
    thread_stride = (output_size + target - 1) / target;
    if (target > 1) {
      thread_stride = (thread_stride + kStrideNThreadAlign - 1) & ~(kStrideNThreadAlign - 1);
    }
  }
  std::vector<float> columns;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* xg = x + (b * s.groups + g) * s.in_channels * input_size;
      const float* wg = w + g * s.filters * k;
      float* yg = y + (b * s.groups + g) * s.filters * output_size;
      if (direct) {
        // One batch and group go through MlasGemm's threads; several, each through one thread.
        if (several) {
          sgemmOperation(s.filters, output_size, k, wg, k, xg, direct_ldb, direct_trans_b, yg,
                         output_size, has_sum);
        } else {
          sgemm(s.filters, output_size, k, wg, k, xg, direct_ldb, direct_trans_b, yg, output_size,
                has_sum, threads);
        }
      } else if (expand_whole) {
        columns.resize(static_cast<size_t>(k * output_size));
        unfold(p, xg, 0, k, 0, output_size, columns.data());
        sgemm(s.filters, output_size, k, wg, k, columns.data(), output_size, false, yg, output_size,
              has_sum, threads);
      } else {
        for (int64_t start = 0; start < output_size; start += thread_stride) {
          sliced(p, s.filters, k, output_size, xg, wg, yg, has_sum, start,
                 std::min(thread_stride, output_size - start), columns);
        }
      }
      activate(activation, bias != nullptr ? bias + g * s.filters : nullptr, s.filters, output_size,
               yg);
    }
  }
  return true;
}

}  // namespace qforge::mlas
