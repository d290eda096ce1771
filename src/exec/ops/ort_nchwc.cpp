// ONNX Runtime's com.microsoft.nchwc ops for the emulation, as values rather than layouts. ORT's
// NchwcTransformer (its optimizations at level 'all') moves pooling between a QDQ model's
// quantizers into channel-blocked tensors (NCHW8c/16c): ReorderInput blocks a tensor, the pools
// run on blocks, Concat joins blocks (only when every input's channels fill whole blocks), and
// ReorderOutput unblocks and drops the padding channels. The emulation keeps NCHW throughout,
// so the reorders only change the layout when their channels_last attribute asks for NHWC, and
// each pool computes what MLAS's blocked kernel computes for one element:
// - MaxPool: the largest element of the window (exact, in any order);
// - AveragePool: the window's elements added from zero in kernel-row, kernel-column order, then
//   divided (a true division) by the number of elements inside the input (count_include_pad = 0)
//   or by the kernel size (1);
// - GlobalAveragePool: the plane's elements added in order from zero, then divided by its size.
// nchwc Conv, whose blocked GEMM sums in its own order, is not restated: a graph holding one is
// left to the QOperator model's emulation.
#include <ATen/ATen.h>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ort_emulation.h"

namespace qforge {
namespace {

constexpr const char* kNchwc = "com.microsoft.nchwc";

OpInfo nchwc(OpInfo info) {
  info.domain = kNchwc;
  return info;
}

// A 4-D float tensor, or the op fails naming what it got.
const at::Tensor& planes(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() != 4 || x.scalar_type() != at::kFloat) {
    ctx.fail("the emulation runs " + std::string(kNchwc) + " ops on 4-D float32 tensors, got " +
             std::to_string(x.dim()) + "-D " + std::string(at::toString(x.scalar_type())));
  }
  return x;
}

std::vector<at::Tensor> reorderInput(const OpContext& ctx) {
  const at::Tensor& x = planes(ctx);
  if (ctx.attrInt("channels_last", 0) != 0) return {x.permute({0, 3, 1, 2}).contiguous()};
  return {x};
}

std::vector<at::Tensor> reorderOutput(const OpContext& ctx) {
  const at::Tensor& x = planes(ctx);
  const int64_t channels = ctx.attrInt("channels", x.size(1));
  if (channels < 1 || channels > x.size(1)) {
    ctx.fail("channels " + std::to_string(channels) + " is outside the input's " +
             std::to_string(x.size(1)));
  }
  at::Tensor y = x.narrow(1, 0, channels);
  if (ctx.attrInt("channels_last", 0) != 0) y = y.permute({0, 2, 3, 1});
  return {y.contiguous()};
}

std::vector<at::Tensor> maxPool(const OpContext& ctx) {
  return OpRegistry::builtin().find("", "MaxPool", 12)->run(ctx);
}

std::vector<at::Tensor> averagePool(const OpContext& ctx) {
  const at::Tensor x = planes(ctx).contiguous();
  const std::vector<int64_t> kernel = ctx.attrInts("kernel_shape", {});
  const std::vector<int64_t> strides = ctx.attrInts("strides", {1, 1});
  const std::vector<int64_t> dilations = ctx.attrInts("dilations", {1, 1});
  const std::vector<int64_t> pads = ctx.attrInts("pads", {0, 0, 0, 0});
  const bool include_pad = ctx.attrInt("count_include_pad", 0) != 0;
  if (kernel.size() != 2 || strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 ||
      ctx.attrString("auto_pad", "NOTSET") != "NOTSET" || ctx.attrInt("ceil_mode", 0) != 0) {
    ctx.fail(
        "the emulation's nchwc AveragePool takes 2-D windows with explicit pads and floor "
        "rounding");
  }
  const int64_t h = x.size(2), w = x.size(3);
  const int64_t oh = (h + pads[0] + pads[2] - dilations[0] * (kernel[0] - 1) - 1) / strides[0] + 1;
  const int64_t ow = (w + pads[1] + pads[3] - dilations[1] * (kernel[1] - 1) - 1) / strides[1] + 1;
  if (oh < 1 || ow < 1) ctx.fail("the pooled output would be empty");
  at::Tensor y = at::empty({x.size(0), x.size(1), oh, ow}, x.options());
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  const float kernel_size = static_cast<float>(kernel[0] * kernel[1]);
  for (int64_t p = 0; p < x.size(0) * x.size(1); ++p) {
    const float* plane = in + p * h * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        float sum = 0.0f;
        int64_t inside = 0;
        for (int64_t ky = 0; ky < kernel[0]; ++ky) {
          const int64_t iy = oy * strides[0] - pads[0] + ky * dilations[0];
          if (iy < 0 || iy >= h) continue;
          for (int64_t kx = 0; kx < kernel[1]; ++kx) {
            const int64_t ix = ox * strides[1] - pads[1] + kx * dilations[1];
            if (ix < 0 || ix >= w) continue;
            sum = sum + plane[iy * w + ix];
            ++inside;
          }
        }
        out[(p * oh + oy) * ow + ox] =
            sum / (include_pad ? kernel_size : static_cast<float>(inside));
      }
    }
  }
  return {y};
}

std::vector<at::Tensor> globalAveragePool(const OpContext& ctx) {
  const at::Tensor x = planes(ctx).contiguous();
  const int64_t size = x.size(2) * x.size(3);
  at::Tensor y = at::empty({x.size(0), x.size(1), 1, 1}, x.options());
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  for (int64_t p = 0; p < x.size(0) * x.size(1); ++p) {
    float sum = 0.0f;
    for (int64_t i = 0; i < size; ++i)
      sum = sum + in[p * size + i];
    out[p] = sum / static_cast<float>(size);
  }
  return {y};
}

std::vector<at::Tensor> globalMaxPool(const OpContext& ctx) {
  return OpRegistry::builtin().find("", "GlobalMaxPool", 12)->run(ctx);
}

}  // namespace

void registerOrtNchwcOps(OpRegistry& registry) {
  using ops::kLatestOpset;
  using ops::op;
  registry.add(nchwc(op("ReorderInput", 1, kLatestOpset, reorderInput)));
  registry.add(nchwc(op("ReorderOutput", 1, kLatestOpset, reorderOutput)));
  registry.add(nchwc(op("MaxPool", 1, kLatestOpset, maxPool)));
  registry.add(nchwc(op("AveragePool", 1, kLatestOpset, averagePool)));
  registry.add(nchwc(op("GlobalAveragePool", 1, kLatestOpset, globalAveragePool)));
  registry.add(nchwc(op("GlobalMaxPool", 1, kLatestOpset, globalMaxPool)));
}

}  // namespace qforge
