#include "exec/ops/reshape_layout.h"

#include <ATen/Parallel.h>
#include <ATen/TensorUtils.h>
#include <emmintrin.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace qforge::ops {

namespace {

// Where a pixel's values sit in `x`: the strides of the batch, height and width dims, and each
// channel's offset from the pixel's first.
struct PixelGather {
  int64_t batch_stride = 0, height_stride = 0, width_stride = 0;
  std::vector<int64_t> channel_offsets;
};

// Groups x's dims (size-1 dims dropped) into runs whose products are target's dims, in order.
// The batch, height and width runs must be a single dim each (or none, for a size-1 target dim);
// the channel run may be several, which is where a shuffle's groups merge.
std::optional<PixelGather> pixelGatherOf(const at::Tensor& x, at::IntArrayRef target) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) != 1) dims.push_back(d);
  }
  PixelGather gather;
  size_t next = 0;
  for (size_t k = 0; k < 4; ++k) {
    std::vector<int64_t> run;
    int64_t product = 1;
    while (product < target[k] && next < dims.size()) {
      product *= x.size(dims[next]);
      run.push_back(dims[next++]);
    }
    if (product != target[k]) return std::nullopt;
    if (k == 1) {
      // Row-major over the run: the last dim varies fastest, as Reshape reads it.
      gather.channel_offsets.assign(1, 0);
      for (int64_t d : run) {
        std::vector<int64_t> grown;
        grown.reserve(gather.channel_offsets.size() * x.size(d));
        for (int64_t base : gather.channel_offsets) {
          for (int64_t i = 0; i < x.size(d); ++i)
            grown.push_back(base + i * x.stride(d));
        }
        gather.channel_offsets = std::move(grown);
      }
      continue;
    }
    if (run.size() > 1) return std::nullopt;
    const int64_t stride = run.empty() ? 0 : x.stride(run[0]);
    (k == 0 ? gather.batch_stride : k == 2 ? gather.height_stride : gather.width_stride) = stride;
  }
  if (next != dims.size()) return std::nullopt;
  return gather;
}

// A shuffle of two groups: each pixel's channels interleave two contiguous halves of its input
// (out[2a + b] = pixel[b * stride + a]). Four pairs at a time, by SSE2's unpack.
bool interleavesTwoRuns(const PixelGather& g, int64_t* second_run) {
  const std::vector<int64_t>& off = g.channel_offsets;
  if (off.size() < 8 || off.size() % 8 != 0 || off[0] != 0) return false;
  const int64_t half = static_cast<int64_t>(off.size() / 2);
  for (int64_t a = 0; a < half; ++a) {
    if (off[2 * a] != a || off[2 * a + 1] != off[1] + a) return false;
  }
  *second_run = off[1];
  return true;
}

void interleavePixels(const float* src_row, float* dst_row, int64_t w, int64_t c,
                      int64_t width_stride, int64_t second_run) {
  for (int64_t px = 0; px < w; ++px) {
    const float* first = src_row + px * width_stride;
    const float* second = first + second_run;
    float* to = dst_row + px * c;
    for (int64_t a = 0; a < c / 2; a += 4) {
      const __m128 x = _mm_loadu_ps(first + a), y = _mm_loadu_ps(second + a);
      _mm_storeu_ps(to + 2 * a, _mm_unpacklo_ps(x, y));
      _mm_storeu_ps(to + 2 * a + 4, _mm_unpackhi_ps(x, y));
    }
  }
}

// Elements are moved as bits of their size: the gather never looks at values.
template <typename Bits>
void gatherPixels(const at::Tensor& x, at::Tensor& out, const PixelGather& g) {
  const int64_t n = out.size(0), c = out.size(1), h = out.size(2), w = out.size(3);
  const Bits* src = static_cast<const Bits*>(x.data_ptr());
  Bits* dst = static_cast<Bits*>(out.data_ptr());
  const int64_t* offsets = g.channel_offsets.data();
  int64_t second_run = 0;
  const bool interleave = sizeof(Bits) == sizeof(float) && interleavesTwoRuns(g, &second_run);
  // Rows of pixels, enough per task that a small activation stays on one thread.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, w * c));
  at::parallel_for(0, n * h, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / h, y = row % h;
      const Bits* src_row = src + b * g.batch_stride + y * g.height_stride;
      Bits* dst_row = dst + row * w * c;
      if (interleave) {
        interleavePixels(reinterpret_cast<const float*>(src_row), reinterpret_cast<float*>(dst_row),
                         w, c, g.width_stride, second_run);
        continue;
      }
      for (int64_t px = 0; px < w; ++px) {
        const Bits* pixel = src_row + px * g.width_stride;
        Bits* to = dst_row + px * c;
        for (int64_t ch = 0; ch < c; ++ch)
          to[ch] = pixel[offsets[ch]];
      }
    }
  });
}

}  // namespace

at::Tensor reshapeKeepingLayout(const at::Tensor& x, at::IntArrayRef target) {
  // The cheap tests first: most Reshapes read a tensor whose last dim is its fastest, and for
  // those ATen's reshape is the whole answer (it works out the view's strides itself).
  if (target.size() != 4 || x.numel() == 0 || x.dim() == 0 || x.stride(-1) == 1 ||
      x.requires_grad() || at::detail::computeStride(x.sizes(), x.strides(), target)) {
    return x.reshape(target);
  }
  const std::optional<PixelGather> gather = pixelGatherOf(x, target);
  if (!gather) return x.reshape(target);
  at::Tensor out = at::empty(target, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  switch (x.element_size()) {
    case 1:
      gatherPixels<uint8_t>(x, out, *gather);
      break;
    case 2:
      gatherPixels<uint16_t>(x, out, *gather);
      break;
    case 4:
      gatherPixels<uint32_t>(x, out, *gather);
      break;
    case 8:
      gatherPixels<uint64_t>(x, out, *gather);
      break;
    default:
      return x.reshape(target);
  }
  return out;
}

}  // namespace qforge::ops
