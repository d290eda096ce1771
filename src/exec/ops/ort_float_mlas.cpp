// ONNX Runtime's float Conv, FusedConv, ConvTranspose, Gemm and GlobalAveragePool as its CPU
// provider computes them on x86-64, for the emulation: MLAS's SGEMM-based kernels
// (exec/ops/mlas_conv.h, exec/ops/mlas_sgemm.h) and MLAS's pooling sums. A quantizer after one of
// these reads values whose last bits ATen and oneDNN round otherwise (they split K and order sums
// their own way), and at a rounding boundary that is a level. Shapes the restatements do not cover
// run the built-in kernels.
//
// GlobalAveragePool: MLAS sums each plane in 4 float lanes, folds them (lanes 0 + 2 and 1 + 3,
// then those two), adds what is left one by one and divides by the plane's size; measured equal
// to onnxruntime-node 1.30 on random planes and the zoo ResNet's pooling. (A float model's pooling
// that ORT moves to its NCHWc kernels sums positions in order; ORT's graph then holds those
// kernels, not this op.)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

#include "core/error.h"
#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/conv_geometry.h"
#include "exec/ops/mlas_conv.h"
#include "exec/ops/mlas_kernels.h"
#include "exec/ops/mlas_ops.h"
#include "exec/ops/mlas_sgemm.h"
#include "exec/ops/ort_integer_common.h"
#include "exec/ort_emulation.h"

namespace qforge {
namespace {

std::atomic<int> g_ort_threads{0};

// The built-in lowering of this node's op, without followers to absorb.
std::vector<at::Tensor> builtinRun(const OpContext& ctx, const char* op_type) {
  OpContext alone = ctx;
  alone.setTail({}, {});
  return OpRegistry::builtin().find("", op_type, ctx.opset())->run(alone);
}

// FusedConv's activation attribute as MLAS applies it; nullopt for one not restated.
std::optional<mlas::ConvActivation> activationOf(const OpContext& ctx) {
  const std::string name = ctx.attrString("activation", "");
  const std::vector<double> params = ctx.attrFloats("activation_params", {});
  mlas::ConvActivation a;
  if (name.empty()) return a;
  if (name == "Relu") {
    a.kind = mlas::ConvActivation::Kind::kRelu;
  } else if (name == "Clip" && params.size() == 2) {
    a.kind = mlas::ConvActivation::Kind::kClip;
    a.minimum = static_cast<float>(params[0]);
    a.maximum = static_cast<float>(params[1]);
  } else if (name == "LeakyRelu" && params.size() == 1) {
    a.kind = mlas::ConvActivation::Kind::kLeakyRelu;
    a.alpha = static_cast<float>(params[0]);
  } else {
    return std::nullopt;
  }
  return a;
}

// The same activation in ATen, for the convolutions MLAS's restatement leaves to the built-in.
at::Tensor applyActivation(const OpContext& ctx, at::Tensor y) {
  const std::string name = ctx.attrString("activation", "");
  const std::vector<double> params = ctx.attrFloats("activation_params", {});
  if (name.empty()) return y;
  if (name == "Relu") return at::relu(y);
  if (name == "Clip" && params.size() == 2) return at::clamp(y, params[0], params[1]);
  if (name == "LeakyRelu" && params.size() == 1) return at::leaky_relu(y, params[0]);
  if (name == "Sigmoid") return ops::mlasLogistic(y);
  if (name == "Tanh") return at::tanh(y);
  if (name == "HardSigmoid" && params.size() == 2)
    return at::clamp(y * params[0] + params[1], 0.0, 1.0);
  ctx.fail("FusedConv activation '" + name + "' with " + std::to_string(params.size()) +
           " parameters is not one ONNX Runtime fuses");
}

// MLAS's convolution of ctx's X and W (+ B), starting from `sum` when defined; undefined when
// the restatement does not cover it.
at::Tensor mlasConvOf(const OpContext& ctx, const at::Tensor& sum,
                      const mlas::ConvActivation& activation) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& w = ctx.input(1);
  if (!ops::mlasKernelsApply(x) || !ops::mlasKernelsApply(w) || x.dim() < 3 || x.dim() > 4 ||
      w.dim() != x.dim())
    return {};
  const int64_t groups = ctx.attrInt("group", 1);
  if (groups < 1 || x.size(1) % groups != 0 || w.size(0) % groups != 0 ||
      w.size(1) * groups != x.size(1))
    return {};
  const ops::WindowGeometry g =
      ops::resolveWindowGeometry(ctx, x.sizes().slice(2), w.sizes().slice(2));
  mlas::ConvShape s;
  s.batch = x.size(0);
  s.groups = groups;
  s.in_channels = w.size(1);
  s.filters = w.size(0) / groups;
  std::vector<int64_t> out_sizes = {x.size(0), w.size(0)};
  for (int64_t d = 0; d + 2 < x.dim(); ++d) {
    const int64_t in = x.size(d + 2), k = w.size(d + 2);
    const int64_t span = g.dilations[d] * (k - 1) + 1;
    const int64_t out = (in + g.pads_begin[d] + g.pads_end[d] - span) / g.strides[d] + 1;
    if (out < 1) return {};
    s.input.push_back(in);
    s.kernel.push_back(k);
    s.dilation.push_back(g.dilations[d]);
    s.stride.push_back(g.strides[d]);
    s.output.push_back(out);
    out_sizes.push_back(out);
  }
  s.pads = g.pads_begin;
  s.pads.insert(s.pads.end(), g.pads_end.begin(), g.pads_end.end());
  at::Tensor bias;
  if (ctx.hasInput(2)) {
    bias = ctx.input(2).contiguous();
    if (bias.scalar_type() != at::kFloat || bias.numel() != w.size(0)) return {};
  }
  at::Tensor y = sum.defined() ? sum.to(at::kFloat).expand(out_sizes).contiguous().clone()
                               : at::empty(out_sizes, x.options());
  const at::Tensor xc = x.contiguous(), wc = w.contiguous();
  const bool done = mlas::conv(s, xc.data_ptr<float>(), wc.data_ptr<float>(),
                               bias.defined() ? bias.data_ptr<float>() : nullptr,
                               y.data_ptr<float>(), sum.defined(), activation, ortIntraOpThreads());
  return done ? y : at::Tensor();
}

std::vector<at::Tensor> convAsOrt(const OpContext& ctx) {
  at::Tensor y = mlasConvOf(ctx, {}, {});
  if (y.defined()) return {y};
  return builtinRun(ctx, "Conv");
}

// com.microsoft FusedConv (ORT's Conv + activation, and Conv + Add as its Sum input Z).
std::vector<at::Tensor> fusedConv(const OpContext& ctx) {
  const at::Tensor sum = ctx.hasInput(3) ? ctx.input(3) : at::Tensor();
  const std::optional<mlas::ConvActivation> activation = activationOf(ctx);
  if (activation) {
    at::Tensor y = mlasConvOf(ctx, sum, *activation);
    if (y.defined()) return {y};
  }
  at::Tensor y = mlasConvOf(ctx, sum, {});
  if (!y.defined()) {
    y = builtinRun(ctx, "Conv").front();
    if (sum.defined()) y = y + sum;
  }
  return {applyActivation(ctx, y)};
}

// Gemm as ORT runs it in float: Y = C broadcast (or zero), then MlasGemm with beta 1 adds A B'.
std::vector<at::Tensor> gemmAsOrt(const OpContext& ctx) {
  const at::Tensor& a = ctx.input(0);
  const at::Tensor& b = ctx.input(1);
  const bool trans_b = ctx.attrInt("transB", 0) != 0;
  const bool plain = ctx.attrInt("transA", 0) == 0 && ctx.attrFloat("alpha", 1.0) == 1.0 &&
                     ctx.attrFloat("beta", 1.0) == 1.0;
  if (!plain || !ops::mlasKernelsApply(a) || !ops::mlasKernelsApply(b) || a.dim() != 2 ||
      b.dim() != 2)
    return builtinRun(ctx, "Gemm");
  const int64_t m = a.size(0), k = a.size(1), n = trans_b ? b.size(0) : b.size(1);
  if ((trans_b ? b.size(1) : b.size(0)) != k || k == 0) return builtinRun(ctx, "Gemm");
  at::Tensor y;
  if (ctx.hasInput(2)) {
    const at::Tensor& c = ctx.input(2);
    if (c.scalar_type() != at::kFloat) return builtinRun(ctx, "Gemm");
    y = c.expand({m, n}).contiguous().clone();
  } else {
    y = at::empty({m, n}, a.options());
  }
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const Value* b_value = ctx.node().input(1);
  const bool packed = b_value != nullptr && b_value->initializer().defined();
  mlas::sgemm(m, n, k, ac.data_ptr<float>(), k, bc.data_ptr<float>(), trans_b ? k : n, trans_b,
              y.data_ptr<float>(), n, ctx.hasInput(2), ortIntraOpThreads(), packed);
  return {y};
}

// ConvTranspose as ORT's CPU kernel computes a 2-D float one: per batch and group, MLAS's GEMM
// of the weight's transpose with X into columns (the weight ORT transposed at load when it is a
// constant, else CblasTrans on it as it lies: their K slices differ), then Col2im adds the columns
// into the zeroed output in channel, kernel-row, kernel-column order, then the bias. Undefined for
// what this does not cover (output_shape, SAME padding, other ranks): the built-in runs those.
at::Tensor mlasConvTransposeOf(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& w = ctx.input(1);
  if (!ops::mlasKernelsApply(x) || !ops::mlasKernelsApply(w) || x.dim() != 4 || w.dim() != 4)
    return {};
  const std::string auto_pad = ctx.attrString("auto_pad", "NOTSET");
  if ((auto_pad != "NOTSET" && auto_pad != "VALID") || !ctx.attrInts("output_shape", {}).empty())
    return {};
  const int64_t groups = ctx.attrInt("group", 1);
  const int64_t in_channels = x.size(1);
  if (groups < 1 || in_channels % groups != 0 || w.size(0) != in_channels) return {};
  const std::vector<int64_t> strides = ctx.attrInts("strides", {1, 1});
  const std::vector<int64_t> dilations = ctx.attrInts("dilations", {1, 1});
  const std::vector<int64_t> output_padding = ctx.attrInts("output_padding", {0, 0});
  std::vector<int64_t> pads = ctx.attrInts("pads", {0, 0, 0, 0});
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  if (strides.size() != 2 || dilations.size() != 2 || output_padding.size() != 2 ||
      pads.size() != 4)
    return {};
  const int64_t filters = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t h = x.size(2), wd = x.size(3);
  const int64_t oh =
      strides[0] * (h - 1) + output_padding[0] + (kh - 1) * dilations[0] + 1 - pads[0] - pads[2];
  const int64_t ow =
      strides[1] * (wd - 1) + output_padding[1] + (kw - 1) * dilations[1] + 1 - pads[1] - pads[3];
  if (oh < 1 || ow < 1) return {};
  at::Tensor bias;
  if (ctx.hasInput(2)) {
    bias = ctx.input(2).contiguous();
    if (bias.scalar_type() != at::kFloat || bias.numel() != filters * groups) return {};
  }
  const int64_t k = in_channels / groups;  // the GEMM's K: input channels per group
  const int64_t m = filters * kh * kw;     // its M: one column row per output channel and tap
  const int64_t n = h * wd;                // its N: input positions
  const Value* w_value = ctx.node().input(1);
  const bool transposed_at_load =
      w_value != nullptr && w_value->initializer().defined() && m != 1 && k != 1;
  const at::Tensor xc = x.contiguous();
  // Per group, the weight [k, m] as it lies, or [m, k] as ORT transposed it at load.
  const at::Tensor wc =
      transposed_at_load ? w.reshape({groups, k, m}).transpose(1, 2).contiguous() : w.contiguous();
  at::Tensor y = at::zeros({x.size(0), filters * groups, oh, ow}, x.options());
  std::vector<float> columns(static_cast<size_t>(m * n));
  const int threads = ortIntraOpThreads();
  for (int64_t b = 0; b < x.size(0); ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* filter = wc.data_ptr<float>() + g * k * m;
      const float* xg = xc.data_ptr<float>() + (b * in_channels + g * k) * n;
      if (transposed_at_load) {
        mlas::sgemm(m, n, k, filter, k, xg, n, false, columns.data(), n, false, threads);
      } else {
        mlas::sgemmTransposedA(m, n, k, filter, m, xg, n, columns.data(), n, false, threads);
      }
      float* yg = y.data_ptr<float>() + (b * groups + g) * filters * oh * ow;
      for (int64_t c = 0; c < m; ++c) {
        const int64_t channel = c / (kh * kw), dy = (c / kw) % kh, dx = c % kw;
        for (int64_t iy = 0; iy < h; ++iy) {
          const int64_t y_pos = iy * strides[0] - pads[0] + dy * dilations[0];
          if (y_pos < 0 || y_pos >= oh) continue;
          for (int64_t ix = 0; ix < wd; ++ix) {
            const int64_t x_pos = ix * strides[1] - pads[1] + dx * dilations[1];
            if (x_pos < 0 || x_pos >= ow) continue;
            float& out = yg[(channel * oh + y_pos) * ow + x_pos];
            out = out + columns[c * n + iy * wd + ix];
          }
        }
      }
    }
  }
  if (bias.defined()) y = y + bias.view({1, -1, 1, 1});
  return y;
}

std::vector<at::Tensor> convTransposeAsOrt(const OpContext& ctx) {
  at::Tensor y = mlasConvTransposeOf(ctx);
  if (y.defined()) return {y};
  return builtinRun(ctx, "ConvTranspose");
}

constexpr int64_t kPoolLanes = 4;

std::vector<at::Tensor> globalAveragePoolAsOrt(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (!ops::mlasKernelsApply(x) || x.dim() < 3) return builtinRun(ctx, "GlobalAveragePool");
  const int64_t planes = x.size(0) * x.size(1);
  const int64_t size = x.numel() / std::max<int64_t>(planes, 1);
  const at::Tensor xc = x.contiguous();
  std::vector<int64_t> out_sizes = {x.size(0), x.size(1)};
  out_sizes.resize(x.dim(), 1);
  at::Tensor y = at::empty(out_sizes, x.options());
  const float* in = xc.data_ptr<float>();
  float* out = y.data_ptr<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = in + p * size;
    float lanes[kPoolLanes] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + kPoolLanes <= size; i += kPoolLanes) {
      for (int64_t l = 0; l < kPoolLanes; ++l)
        lanes[l] += plane[i + l];
    }
    float total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for (; i < size; ++i)
      total += plane[i];
    out[p] = total / static_cast<float>(size);
  }
  return {y};
}

}  // namespace

void setOrtIntraOpThreads(int threads) {
  g_ort_threads = threads;
}

int ortIntraOpThreads() {
  const int set = g_ort_threads;
  return set > 0 ? set : std::max(1, at::get_num_threads());
}

void registerOrtMlasFloatOps(OpRegistry& registry) {
  registry.replaceLowering("", "Conv", convAsOrt);
  registry.replaceLowering("", "Gemm", gemmAsOrt);
  registry.replaceLowering("", "ConvTranspose", convTransposeAsOrt);
  registry.replaceLowering("", "GlobalAveragePool", globalAveragePoolAsOrt);
  registry.add(ort_integer::microsoft(ops::op("FusedConv", 1, ops::kLatestOpset, fusedConv)));
}

}  // namespace qforge
