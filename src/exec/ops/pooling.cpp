// Lowerings of the pooling ops: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
//
// Symmetric pads that ATen accepts (at most half the kernel) go straight to at::max_pool2d /
// at::avg_pool2d as in PyTorch eager. Anything else (asymmetric pads, larger pads) is padded
// explicitly so that ATen runs unpadded windows that cover exactly the ONNX windows.
//
// A float 2-D MaxPool of a channels-last activation (a convolution's output) runs on oneDNN's
// kernel (exec/ops/dnnl_pool.h) instead.
//
// Output sizes follow ATen's rule, which ONNX later adopted for ceil_mode: a last window that
// would start inside the end padding (beyond input + begin pad) is dropped.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <dnnl.hpp>
#include <limits>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/conv_geometry.h"
#include "exec/ops/dnnl_pool.h"

namespace qforge {

namespace {

using ops::kLatestOpset;

// A pooling window resolved against its input. 1-D pooling is lifted to 2-D (a leading spatial
// dim of size 1) so that only the 2-D and 3-D ATen kernels are needed.
struct PoolWindow {
  at::Tensor x;  // (N, C, spatial...) with 2 or 3 spatial dims
  std::vector<int64_t> kernel;
  ops::WindowGeometry g;
  bool lifted = false;

  int64_t rank() const { return static_cast<int64_t>(kernel.size()); }
};

PoolWindow resolvePoolWindow(const OpContext& ctx) {
  PoolWindow w;
  w.x = ctx.input(0);
  if (w.x.dim() < 3 || w.x.dim() > 5) {
    ctx.fail("input must be (N, C, D1[, D2[, D3]]), got rank " + std::to_string(w.x.dim()));
  }
  if (!ctx.hasAttr("kernel_shape")) ctx.fail("required attribute 'kernel_shape' is missing");
  w.kernel = ctx.attrInts("kernel_shape", {});
  w.g = ops::resolveWindowGeometry(ctx, w.x.sizes().slice(2), w.kernel);
  for (int64_t k : w.kernel) {
    if (k <= 0) ctx.fail("kernel_shape entries must be positive");
  }
  if (w.x.dim() == 3) {
    w.lifted = true;
    w.x = w.x.unsqueeze(2);
    w.kernel.insert(w.kernel.begin(), 1);
    w.g.strides.insert(w.g.strides.begin(), 1);
    w.g.dilations.insert(w.g.dilations.begin(), 1);
    w.g.pads_begin.insert(w.g.pads_begin.begin(), 0);
    w.g.pads_end.insert(w.g.pads_end.begin(), 0);
  }
  return w;
}

// ATen's pooling_output_shape, with separate begin/end pads.
int64_t pooledSize(const OpContext& ctx, const PoolWindow& w, int64_t i, bool ceil_mode) {
  const int64_t in = w.x.size(2 + i);
  const int64_t extent = w.g.dilations[i] * (w.kernel[i] - 1) + 1;
  const int64_t span = in + w.g.pads_begin[i] + w.g.pads_end[i] - extent;
  const int64_t s = w.g.strides[i];
  if (span < 0) ctx.fail("the pooling window is larger than the padded input");
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + w.g.pads_begin[i]) --out;
  return out;
}

// True when ATen can apply the pads itself: symmetric and at most half the kernel.
bool atenCanPad(const PoolWindow& w) {
  if (!w.g.symmetric()) return false;
  for (int64_t i = 0; i < w.rank(); ++i) {
    if (w.g.pads_begin[i] > w.kernel[i] / 2) return false;
  }
  return true;
}

// Pads `x` so that unpadded floor-mode windows give exactly `out` outputs per dim starting at
// -pads_begin. The end pad can be negative: trailing input no window reaches is cropped.
at::Tensor padForWindows(const PoolWindow& w, const at::Tensor& x, const std::vector<int64_t>& out,
                         double value) {
  std::vector<int64_t> pad;
  for (int64_t i = w.rank(); i-- > 0;) {
    const int64_t extent = w.g.dilations[i] * (w.kernel[i] - 1) + 1;
    const int64_t needed = (out[i] - 1) * w.g.strides[i] + extent;
    pad.push_back(w.g.pads_begin[i]);
    pad.push_back(needed - w.g.pads_begin[i] - w.x.size(2 + i));
  }
  return at::constant_pad_nd(x, pad, value);
}

at::Tensor unlift(const PoolWindow& w, const at::Tensor& t) {
  return w.lifted ? t.squeeze(2) : t;
}

// ATen gives each maximum's flat position inside its (n, c) plane of the tensor it pooled (of
// spatial sizes `pooled`, `pad_begin` ahead of the input). ONNX wants the flat position in the
// whole input: plane offset plus the in-plane index, row-major (storage_order 0) or column-major.
at::Tensor onnxIndices(const PoolWindow& w, const at::Tensor& aten_indices, at::IntArrayRef pooled,
                       const std::vector<int64_t>& pad_begin, int64_t storage_order) {
  const int64_t rank = w.rank();
  const at::IntArrayRef in = w.x.sizes().slice(2);
  std::vector<at::Tensor> coords(rank);
  at::Tensor rest = aten_indices;
  for (int64_t i = rank; i-- > 0;) {
    coords[i] = rest.remainder(pooled[i]) - pad_begin[i];
    rest = rest.div(pooled[i], "floor");
  }
  at::Tensor flat = at::zeros_like(aten_indices);
  if (storage_order == 0) {
    for (int64_t i = 0; i < rank; ++i)
      flat = flat * in[i] + coords[i];
  } else {
    for (int64_t i = rank; i-- > 0;)
      flat = flat * in[i] + coords[i];
  }
  int64_t plane = 1;
  for (int64_t s : in)
    plane *= s;
  std::vector<int64_t> plane_shape(rank + 2, 1);
  plane_shape[0] = w.x.size(0);
  plane_shape[1] = w.x.size(1);
  const at::Tensor offsets =
      at::arange(w.x.size(0) * w.x.size(1), aten_indices.options()).reshape(plane_shape) * plane;
  return flat + offsets;
}

std::vector<at::Tensor> maxPool(const OpContext& ctx) {
  PoolWindow w = resolvePoolWindow(ctx);
  const int64_t storage_order = ctx.attrInt("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) {
    ctx.fail("storage_order must be 0 (row major) or 1 (column major), got " +
             std::to_string(storage_order));
  }
  bool ceil_mode = ctx.attrInt("ceil_mode", 0) != 0;
  const bool want_indices = ctx.outputCount() > 1 && !ctx.node().output(1)->anonymous;
  const int64_t rank = w.rank();

  if (rank == 2 && !want_indices &&
      std::all_of(w.g.dilations.begin(), w.g.dilations.end(), [](int64_t d) { return d == 1; })) {
    ops::MaxPoolWindow window{w.kernel, w.g.strides, w.g.pads_begin, {}};
    for (int64_t i = 0; i < rank; ++i)
      window.output.push_back(pooledSize(ctx, w, i, ceil_mode));
    if (ops::dnnlMaxPoolApplies(w.x, window)) {
      try {
        return {unlift(w, ops::dnnlMaxPool2d(ctx.nodeState(), w.x, window))};
      } catch (const dnnl::error&) {
        // No oneDNN kernel for this case: ATen's below.
      }
    }
  }
  // ATen's max pooling kernels are floating-point only; int8/uint8 values are exact in float.
  const at::ScalarType dtype = w.x.scalar_type();
  at::Tensor x = at::isFloatingType(dtype) ? w.x : w.x.to(at::kFloat);
  std::vector<int64_t> aten_pads = w.g.pads_begin;
  std::vector<int64_t> explicit_begin(rank, 0);
  if (!atenCanPad(w)) {
    std::vector<int64_t> out(rank);
    for (int64_t i = 0; i < rank; ++i)
      out[i] = pooledSize(ctx, w, i, ceil_mode);
    x = padForWindows(w, x, out, -std::numeric_limits<double>::infinity());
    explicit_begin = w.g.pads_begin;
    aten_pads.assign(rank, 0);
    ceil_mode = false;
  }
  at::Tensor y, aten_indices;
  if (want_indices) {
    std::tie(y, aten_indices) =
        rank == 2 ? at::max_pool2d_with_indices(x, w.kernel, w.g.strides, aten_pads, w.g.dilations,
                                                ceil_mode)
                  : at::max_pool3d_with_indices(x, w.kernel, w.g.strides, aten_pads, w.g.dilations,
                                                ceil_mode);
  } else {
    y = rank == 2 ? at::max_pool2d(x, w.kernel, w.g.strides, aten_pads, w.g.dilations, ceil_mode)
                  : at::max_pool3d(x, w.kernel, w.g.strides, aten_pads, w.g.dilations, ceil_mode);
  }
  if (y.scalar_type() != dtype) y = y.to(dtype);
  if (!want_indices) return {unlift(w, y)};
  at::Tensor indices =
      onnxIndices(w, aten_indices, x.sizes().slice(2), explicit_begin, storage_order);
  return {unlift(w, y), unlift(w, indices)};
}

std::vector<at::Tensor> averagePool(const OpContext& ctx) {
  PoolWindow w = resolvePoolWindow(ctx);
  for (int64_t d : w.g.dilations) {
    if (d != 1) ctx.fail("dilations other than 1 are not supported for AveragePool");
  }
  const bool ceil_mode = ctx.attrInt("ceil_mode", 0) != 0;
  const bool count_include_pad = ctx.attrInt("count_include_pad", 0) != 0;
  const int64_t rank = w.rank();
  auto avgPool = [&](const at::Tensor& t, at::IntArrayRef pads, bool ceil, bool include_pad) {
    return rank == 2 ? at::avg_pool2d(t, w.kernel, w.g.strides, pads, ceil, include_pad)
                     : at::avg_pool3d(t, w.kernel, w.g.strides, pads, ceil, include_pad);
  };
  if (atenCanPad(w)) return {unlift(w, avgPool(w.x, w.g.pads_begin, ceil_mode, count_include_pad))};

  // Window sums over the zero-padded input, divided by the number of counted cells per window:
  // input cells, plus the pad cells (not the ceil-mode overhang) when count_include_pad.
  std::vector<int64_t> out(rank);
  for (int64_t i = 0; i < rank; ++i)
    out[i] = pooledSize(ctx, w, i, ceil_mode);
  const std::vector<int64_t> no_pads(rank, 0);
  const at::Tensor sums = avgPool(padForWindows(w, w.x, out, 0.0), no_pads, false, true);
  std::vector<int64_t> plane_shape = {1, 1};
  for (int64_t i = 0; i < rank; ++i) {
    plane_shape.push_back(w.x.size(2 + i) +
                          (count_include_pad ? w.g.pads_begin[i] + w.g.pads_end[i] : 0));
  }
  at::Tensor counted = at::ones(plane_shape, w.x.options());
  if (count_include_pad) {
    // `counted` already spans the pads: only the overhang past the end pad is added, as zeros.
    std::vector<int64_t> overhang;
    for (int64_t i = rank; i-- > 0;) {
      const int64_t needed = (out[i] - 1) * w.g.strides[i] + w.kernel[i];
      overhang.push_back(0);
      overhang.push_back(needed - plane_shape[2 + i]);
    }
    counted = at::constant_pad_nd(counted, overhang, 0.0);
  } else {
    PoolWindow plane = w;
    plane.x = counted;
    counted = padForWindows(plane, counted, out, 0.0);
  }
  const at::Tensor counts = avgPool(counted, no_pads, false, true);
  return {unlift(w, sums / counts)};
}

std::vector<int64_t> spatialDims(const OpContext& ctx, const at::Tensor& x) {
  if (x.dim() < 3) {
    ctx.fail("input must be (N, C, spatial...) of rank >= 3, got rank " + std::to_string(x.dim()));
  }
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.dim(); ++d)
    dims.push_back(d);
  return dims;
}

// The mean of each channel of a channels-last float activation, summed pixel by pixel in row
// order and divided by the pixel count: how ONNX Runtime's blocked (NCHWc) pooling kernel adds,
// each channel on its own. Vectorized across channels; at::mean spends most of a batch-1
// MobileNet's 7x7 pooling on its reduction set-up.
at::Tensor channelsLastMean(const at::Tensor& x) {
  const int64_t batch = x.size(0), channels = x.size(1), pixels = x.size(2) * x.size(3);
  at::Tensor y = at::zeros({batch, channels, 1, 1}, x.options());
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  const float count = static_cast<float>(pixels);
  for (int64_t n = 0; n < batch; ++n) {
    float* __restrict sums = out + n * channels;
    for (int64_t p = 0; p < pixels; ++p) {
      const float* __restrict pixel = in + (n * pixels + p) * channels;
      for (int64_t c = 0; c < channels; ++c)
        sums[c] += pixel[c];
    }
    for (int64_t c = 0; c < channels; ++c)
      sums[c] /= count;
  }
  return y;
}

std::vector<at::Tensor> globalAveragePool(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() == 4 && x.scalar_type() == at::kFloat && x.device().is_cpu() &&
      x.size(2) * x.size(3) > 1 && !x.is_contiguous() &&
      x.is_contiguous(at::MemoryFormat::ChannelsLast) &&
      !(at::GradMode::is_enabled() && x.requires_grad())) {
    return {channelsLastMean(x)};
  }
  return {at::mean(x, spatialDims(ctx, x), /*keepdim=*/true)};
}

std::vector<at::Tensor> globalMaxPool(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  return {at::amax(x, spatialDims(ctx, x), /*keepdim=*/true)};
}

// Pooling selects or averages input 0's values: the output is >= 0 wherever the input is.
OpInfo pooling(OpInfo info) {
  return ops::withSign(std::move(info), OutputSign::OfDataInput);
}

}  // namespace

void registerPoolingOps(OpRegistry& registry) {
  // Later opsets only add attributes (storage_order and Indices in 8, ceil_mode and dilations in
  // 10, int8/uint8 in 12) whose defaults reproduce the older behaviour, so one lowering serves all;
  // MaxPool has two entries only because it takes 8-bit data from opset 12.
  registry.add(pooling(ops::movesData(ops::op("MaxPool", 1, 11, maxPool))));
  OpInfo max_pool_int8 = pooling(ops::movesData(ops::op("MaxPool", 12, kLatestOpset, maxPool)));
  max_pool_int8.moves_int8 = true;
  registry.add(std::move(max_pool_int8));
  registry.add(pooling(ops::op("AveragePool", 1, kLatestOpset, averagePool)));
  registry.add(pooling(ops::op("GlobalAveragePool", 1, kLatestOpset, globalAveragePool)));
  registry.add(pooling(ops::movesData(ops::op("GlobalMaxPool", 1, kLatestOpset, globalMaxPool))));
}

}  // namespace qforge
