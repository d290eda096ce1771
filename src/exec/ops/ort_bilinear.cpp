#include "exec/ops/ort_bilinear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace qforge::ops {

namespace {

// One axis: for each output position, the two input indices it blends and their distances (d1
// from the lower index weights the upper one, and the other way round), all in float as ORT.
struct AxisTaps {
  std::vector<int64_t> lower, upper;
  std::vector<float> d1, d2;
};

float originalCoordinate(const std::string& mode, float x, float scale, float length_resized,
                         float length_original) {
  if (mode == "asymmetric") return x / scale;
  if (mode == "pytorch_half_pixel") return length_resized > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5f) / scale;
  if (mode == "align_corners") {
    return length_resized == 1 ? 0 : x * (length_original - 1) / (length_resized - 1);
  }
  return ((x + 0.5f) / scale) - 0.5f;  // half_pixel
}

AxisTaps axisTaps(int64_t in, int64_t out, float scale, const std::string& mode) {
  AxisTaps t;
  for (int64_t j = 0; j < out; ++j) {
    const auto x = static_cast<float>(j);
    float c = scale == 1 ? x
                         : originalCoordinate(mode, x, scale, static_cast<float>(out),
                                              static_cast<float>(in));
    c = std::max(0.0f, std::min(c, static_cast<float>(in - 1)));
    const int64_t lo = std::min(static_cast<int64_t>(static_cast<int32_t>(c)), in - 1);
    const int64_t hi = std::min(lo + 1, in - 1);
    t.lower.push_back(lo);
    t.upper.push_back(hi);
    // A position on the last row takes half of the same value twice.
    t.d1.push_back(lo == hi ? 0.5f : std::fabs(c - static_cast<float>(lo)));
    t.d2.push_back(lo == hi ? 0.5f : std::fabs(c - static_cast<float>(hi)));
  }
  return t;
}

at::Tensor floats(const std::vector<float>& v) {
  return at::tensor(at::ArrayRef<float>(v), at::kFloat);
}
at::Tensor indices(const std::vector<int64_t>& v) {
  return at::tensor(at::IntArrayRef(v), at::kLong);
}

// The same sums in ATen ops, for autograd: each product and each addition is one float rounding,
// in the kernel's order.
at::Tensor bilinearOps(const at::Tensor& x, const AxisTaps& ty, const AxisTaps& tx) {
  const at::Tensor dy1 = floats(ty.d1).unsqueeze(1), dy2 = floats(ty.d2).unsqueeze(1);
  const at::Tensor dx1 = floats(tx.d1).unsqueeze(0), dx2 = floats(tx.d2).unsqueeze(0);
  const at::Tensor rows1 = x.index_select(2, indices(ty.lower));
  const at::Tensor rows2 = x.index_select(2, indices(ty.upper));
  const at::Tensor x1 = indices(tx.lower), x2 = indices(tx.upper);
  return (dx2 * dy2) * rows1.index_select(3, x1) + (dx1 * dy2) * rows1.index_select(3, x2) +
         (dx2 * dy1) * rows2.index_select(3, x1) + (dx1 * dy1) * rows2.index_select(3, x2);
}

// Images laid out [images, H, W, channels], blended pixel by pixel over their channels: a
// channels-last batch as it lies (convolutions hand those over), or a contiguous NCHW one as
// N * C images of one channel. Each weight is the kernel's product of distances, and the four
// terms are added in its order.
void blend(const float* src, float* dst, int64_t images, int64_t channels, int64_t in_h,
           int64_t in_w, int64_t out_h, int64_t out_w, const AxisTaps& ty, const AxisTaps& tx) {
  at::parallel_for(0, images * out_h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t image = row / out_h, r = row % out_h;
      const float* row1 = src + (image * in_h + ty.lower[r]) * in_w * channels;
      const float* row2 = src + (image * in_h + ty.upper[r]) * in_w * channels;
      const float dy1 = ty.d1[r], dy2 = ty.d2[r];
      for (int64_t c = 0; c < out_w; ++c) {
        const float w11 = tx.d2[c] * dy2, w21 = tx.d1[c] * dy2;
        const float w12 = tx.d2[c] * dy1, w22 = tx.d1[c] * dy1;
        const float* x11 = row1 + tx.lower[c] * channels;
        const float* x21 = row1 + tx.upper[c] * channels;
        const float* x12 = row2 + tx.lower[c] * channels;
        const float* x22 = row2 + tx.upper[c] * channels;
        float* out = dst + (row * out_w + c) * channels;
        for (int64_t k = 0; k < channels; ++k)
          out[k] = w11 * x11[k] + w21 * x21[k] + w12 * x12[k] + w22 * x22[k];
      }
    }
  });
}

}  // namespace

bool ortBilinearCovers(const std::string& mode) {
  return mode == "half_pixel" || mode == "pytorch_half_pixel" || mode == "asymmetric" ||
         mode == "align_corners" || mode == "tf_half_pixel_for_nn";
}

at::Tensor ortBilinear(const at::Tensor& input, int64_t out_h, int64_t out_w, float scale_h,
                       float scale_w, const std::string& coordinate_mode) {
  const int64_t in_h = input.size(2), in_w = input.size(3);
  const AxisTaps ty = axisTaps(in_h, out_h, scale_h, coordinate_mode);
  const AxisTaps tx = axisTaps(in_w, out_w, scale_w, coordinate_mode);
  if (input.requires_grad()) return bilinearOps(input, ty, tx);

  const int64_t n = input.size(0), channels = input.size(1);
  const bool nhwc = !input.is_contiguous() && input.is_contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor x = nhwc ? input : input.contiguous();
  at::Tensor y = at::empty({n, channels, out_h, out_w},
                           x.options().memory_format(nhwc ? at::MemoryFormat::ChannelsLast
                                                          : at::MemoryFormat::Contiguous));
  blend(x.data_ptr<float>(), y.data_ptr<float>(), nhwc ? n : n * channels, nhwc ? channels : 1,
        in_h, in_w, out_h, out_w, ty, tx);
  return y;
}

}  // namespace qforge::ops
