// ONNX Runtime's integer arithmetic for the com.microsoft QOperator ops without weights:
// QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool and the 256-entry-table ops
// (QLinearConcat, QLinearLeakyRelu, QLinearSigmoid), QLinearSoftmax
// (exec/ops/ort_qlinear_softmax), and MatMulIntegerToFloat. The ORT facts they reproduce are listed
// at the top of exec/ops/ort_integer.cpp, which registers them through registerContribOps.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/conv_geometry.h"
#include "exec/ops/ort_integer_common.h"
#include "exec/ops/ort_qlinear_softmax.h"

namespace qforge::ort_integer {
namespace {

using ops::kLatestOpset;
using ops::op;
using ops::shapeString;

// MlasQuantizeLinear on float32 values: x / scale, clamped, NaN -> lowest, half to even, + zp.
at::Tensor mlasQuantize(const at::Tensor& x, float scale, int64_t zero_point, at::ScalarType type) {
  const Range r = rangeOf(type);
  at::Tensor v = x.div(static_cast<double>(scale));
  v = at::where(v.isnan(),
                at::scalar_tensor(static_cast<double>(r.lowest - zero_point), v.options()), v);
  v.clamp_(static_cast<double>(r.lowest - zero_point), static_cast<double>(r.highest - zero_point));
  v.round_().add_(static_cast<double>(zero_point));
  return v.to(type);
}

// ------------------------------------------------------------- QLinearAdd and QLinearMul

// The operands of a com.microsoft binary op (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp).
struct BinaryOperands {
  at::Tensor a, b;
  float a_scale, b_scale, c_scale;
  int64_t a_zp, b_zp, c_zp;
  at::ScalarType type;
};

BinaryOperands binaryOperands(const OpContext& ctx) {
  BinaryOperands p;
  p.a = quant8Input(ctx, 0, "A");
  p.b = quant8Input(ctx, 3, "B");
  p.type = p.a.scalar_type();
  requireType(ctx, p.b, "B", p.type, "A");
  p.a_scale = scaleValue(ctx, 1, "A_scale");
  p.a_zp = zeroPointValue(ctx, 2, "A_zero_point", p.type, "A");
  p.b_scale = scaleValue(ctx, 4, "B_scale");
  p.b_zp = zeroPointValue(ctx, 5, "B_zero_point", p.type, "B");
  p.c_scale = scaleValue(ctx, 6, "C_scale");
  p.c_zp = zeroPointValue(ctx, 7, "C_zero_point", p.type, "A");
  return p;
}

// Which operand ORT's broadcaster hands to the kernel as a scalar: it walks the output dims from
// the innermost, skipping size-1 dims, and the innermost run where each input is either wholly
// broadcast or wholly present decides (A broadcast there: A is the scalar).
enum class SpanKind { kBothVectors, kScalarA, kScalarB };

SpanKind innermostSpanKind(at::IntArrayRef a, at::IntArrayRef b, at::IntArrayRef out) {
  const auto dimOf = [&](at::IntArrayRef s, size_t d) {
    const size_t offset = out.size() - s.size();
    return d < offset ? int64_t{1} : s[d - offset];
  };
  for (size_t d = out.size(); d-- > 0;) {
    if (out[d] == 1) continue;
    if (dimOf(a, d) == 1) return SpanKind::kScalarA;
    if (dimOf(b, d) == 1) return SpanKind::kScalarB;
    return SpanKind::kBothVectors;
  }
  return SpanKind::kBothVectors;
}

template <typename T>
void addKernel(const BinaryOperands& p, SpanKind kind, const at::Tensor& a, const at::Tensor& b,
               at::Tensor& c) {
  const float ra = p.a_scale / p.c_scale;
  const float rb = p.b_scale / p.c_scale;
  const float za = static_cast<float>(p.a_zp), zb = static_cast<float>(p.b_zp);
  // Each step is one float32 operation: qforge targets baseline x86-64, so the compiler has no
  // FMA to contract the unfused ones into, and std::fmaf is exact wherever it runs. ORT's build
  // contracts the zero-point products into one FMA (tests/verify/ort_qlinear_add_test.cpp).
  const float products = std::fmaf(ra, za, rb * zb);
  const float fixed = static_cast<float>(p.c_zp) - products;
  const Range r = rangeOf(p.type);
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* pc = c.data_ptr<T>();
  const int64_t n = c.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float va = static_cast<float>(pa[i]), vb = static_cast<float>(pb[i]);
    float t;
    switch (kind) {
      case SpanKind::kScalarA:
        t = std::fmaf(vb, rb, fixed + va * ra);
        break;
      case SpanKind::kScalarB:
        t = std::fmaf(va, ra, fixed + vb * rb);
        break;
      default:
        t = std::fmaf(va, ra, std::fmaf(vb, rb, fixed));
        break;
    }
    const auto q = static_cast<int64_t>(std::nearbyint(t));
    pc[i] = static_cast<T>(std::min(std::max(q, r.lowest), r.highest));
  }
}

std::vector<at::Tensor> qlinearAdd(const OpContext& ctx) {
  const BinaryOperands p = binaryOperands(ctx);
  const std::vector<int64_t> out_shape = at::infer_size(p.a.sizes(), p.b.sizes());
  const SpanKind kind = innermostSpanKind(p.a.sizes(), p.b.sizes(), out_shape);
  const at::Tensor a = p.a.expand(out_shape).contiguous();
  const at::Tensor b = p.b.expand(out_shape).contiguous();
  at::Tensor c = at::empty(out_shape, p.a.options());
  if (p.type == at::kByte)
    addKernel<uint8_t>(p, kind, a, b, c);
  else
    addKernel<int8_t>(p, kind, a, b, c);
  return {c};
}

std::vector<at::Tensor> qlinearMul(const OpContext& ctx) {
  const BinaryOperands p = binaryOperands(ctx);
  const float ratio = p.a_scale * p.b_scale / p.c_scale;
  // (a - a_zp) * (b - b_zp) is at most 2^16 in magnitude: exact in float32.
  at::Tensor product = (p.a.to(at::kFloat).sub_(static_cast<double>(p.a_zp)))
                           .mul(p.b.to(at::kFloat).sub_(static_cast<double>(p.b_zp)));
  at::Tensor t = product.mul_(static_cast<double>(ratio)).add_(static_cast<double>(p.c_zp));
  const Range r = rangeOf(p.type);
  t.round_().clamp_(static_cast<double>(r.lowest), static_cast<double>(r.highest));
  return {t.to(p.type)};
}

// ------------------------------------------------------------------- Average pooling

// The global average of each (n, c) plane of `x` (channels_last: channel on the last axis) with
// MLAS's integer sum and requantization; output keeps the spatial dims as 1.
at::Tensor globalAveragePool(const OpContext& ctx, const at::Tensor& x, float x_scale, int64_t x_zp,
                             float y_scale, int64_t y_zp, bool channels_last) {
  if (x.dim() < 3) ctx.fail("X must be (N, C, spatial...), got shape " + shapeString(x.sizes()));
  std::vector<int64_t> image_dims;
  for (int64_t d = channels_last ? 1 : 2; d < (channels_last ? x.dim() - 1 : x.dim()); ++d)
    image_dims.push_back(d);
  int64_t pixels = 1;
  for (int64_t d : image_dims)
    pixels *= x.size(d);
  const float multiplier = x_scale / (y_scale * static_cast<float>(pixels));
  if (pixels >= (int64_t{1} << 24) || !(multiplier >= 0x1.0p-32f) || multiplier >= 256.0f) {
    ctx.fail(
        "scales and image size are outside ONNX Runtime's QLinearGlobalAveragePool range "
        "(x_scale / (y_scale * pixels) must be in [2^-32, 256))");
  }
  at::Tensor sum = x.to(at::kLong).sum(image_dims, /*keepdim=*/true).sub_(x_zp * pixels);
  return requantize(wrapToInt32(sum), at::scalar_tensor(multiplier, at::kFloat), y_zp,
                    x.scalar_type());
}

std::vector<at::Tensor> qlinearGlobalAveragePool(const OpContext& ctx) {
  const at::Tensor& x = quant8Input(ctx, 0, "X");
  const float x_scale = scaleValue(ctx, 1, "x_scale");
  const int64_t x_zp = zeroPointValue(ctx, 2, "x_zero_point", x.scalar_type(), "X");
  const float y_scale = scaleValue(ctx, 3, "y_scale");
  const int64_t y_zp = zeroPointValue(ctx, 4, "y_zero_point", x.scalar_type(), "X");
  const bool channels_last = ctx.attrInt("channels_last", 0) != 0;
  return {globalAveragePool(ctx, x, x_scale, x_zp, y_scale, y_zp, channels_last)};
}

// One pooling axis: ORT's output size (floor or ceil; with ceil the last window must start
// inside the input or its begin padding) and window bounds clipped to the input.
struct PoolAxis {
  int64_t in, kernel, stride, pad_begin, out;
};

std::vector<at::Tensor> qlinearAveragePool(const OpContext& ctx) {
  const at::Tensor& x_in = quant8Input(ctx, 0, "X");
  const float x_scale = scaleValue(ctx, 1, "x_scale");
  const int64_t x_zp = zeroPointValue(ctx, 2, "x_zero_point", x_in.scalar_type(), "X");
  const float y_scale = scaleValue(ctx, 3, "y_scale");
  const int64_t y_zp = zeroPointValue(ctx, 4, "y_zero_point", x_in.scalar_type(), "X");
  const bool channels_last = ctx.attrInt("channels_last", 0) != 0;
  const at::ScalarType type = x_in.scalar_type();
  if (x_in.dim() < 3 || x_in.dim() > 5) {
    ctx.fail("X must be (N, C, spatial...) with 1 to 3 spatial dims, got shape " +
             shapeString(x_in.sizes()));
  }
  // Work channels-first; channels_last input is moved there and back.
  at::Tensor x = channels_last ? x_in.movedim(-1, 1) : x_in;
  const std::vector<int64_t> kernel = ctx.attrInts("kernel_shape", {});
  if (static_cast<int64_t>(kernel.size()) != x.dim() - 2) {
    ctx.fail("kernel_shape must have one entry per spatial dim of X");
  }
  const ops::WindowGeometry g = ops::resolveWindowGeometry(ctx, x.sizes().slice(2), kernel);
  for (int64_t d : g.dilations) {
    if (d != 1) ctx.fail("dilations are not supported by ONNX Runtime's QLinearAveragePool");
  }
  const bool no_pads =
      std::all_of(g.pads_begin.begin(), g.pads_begin.end(), [](int64_t p) { return p == 0; }) &&
      std::all_of(g.pads_end.begin(), g.pads_end.end(), [](int64_t p) { return p == 0; });
  if (no_pads && at::IntArrayRef(kernel) == x.sizes().slice(2)) {
    at::Tensor y = globalAveragePool(ctx, x, x_scale, x_zp, y_scale, y_zp, false);
    return {channels_last ? y.movedim(1, -1).contiguous() : y};
  }
  const bool ceil_mode = ctx.attrInt("ceil_mode", 0) != 0;
  const bool count_include_pad = ctx.attrInt("count_include_pad", 0) != 0;
  std::vector<PoolAxis> axes;
  for (size_t i = 0; i < kernel.size(); ++i) {
    PoolAxis axis{x.size(static_cast<int64_t>(i) + 2), kernel[i], g.strides[i], g.pads_begin[i], 0};
    const int64_t span = axis.in + g.pads_begin[i] + g.pads_end[i] - axis.kernel;
    axis.out = (ceil_mode ? (span + axis.stride - 1) / axis.stride : span / axis.stride) + 1;
    if (ceil_mode && (axis.out - 1) * axis.stride >= axis.in + axis.pad_begin) --axis.out;
    axes.push_back(axis);
  }
  while (axes.size() < 3)
    axes.push_back(PoolAxis{1, 1, 1, 0, 1});  // unit dims for 1-D/2-D

  // Dequantized like ORT: x_scale * (x - x_zp) in float32.
  const at::Tensor xf =
      (x.to(at::kInt) - static_cast<int>(x_zp)).to(at::kFloat).mul_(x_scale).contiguous();
  const int64_t planes = x.size(0) * x.size(1);
  std::vector<int64_t> out_shape = {x.size(0), x.size(1)};
  for (size_t i = 0; i < kernel.size(); ++i)
    out_shape.push_back(axes[i].out);
  at::Tensor y = at::empty(out_shape, x.options().dtype(at::kFloat));
  const float* src = xf.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  const int64_t kernel_size = axes[0].kernel * axes[1].kernel * axes[2].kernel;
  const int64_t in_plane = axes[0].in * axes[1].in * axes[2].in;
  const Range r = rangeOf(type);
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = src + p * in_plane;
    for (int64_t o0 = 0; o0 < axes[0].out; ++o0) {
      for (int64_t o1 = 0; o1 < axes[1].out; ++o1) {
        for (int64_t o2 = 0; o2 < axes[2].out; ++o2) {
          int64_t begin[3], end[3];
          const int64_t o[3] = {o0, o1, o2};
          for (int k = 0; k < 3; ++k) {
            const int64_t start = o[k] * axes[k].stride - axes[k].pad_begin;
            end[k] = std::min(start + axes[k].kernel, axes[k].in);
            begin[k] = std::max<int64_t>(start, 0);
          }
          float sum = 0.0f;
          for (int64_t i0 = begin[0]; i0 < end[0]; ++i0)
            for (int64_t i1 = begin[1]; i1 < end[1]; ++i1)
              for (int64_t i2 = begin[2]; i2 < end[2]; ++i2)
                sum += plane[(i0 * axes[1].in + i1) * axes[2].in + i2];
          const int64_t count =
              count_include_pad ? kernel_size
                                : (end[0] - begin[0]) * (end[1] - begin[1]) * (end[2] - begin[2]);
          const float average = sum / static_cast<float>(count);
          const float shifted = average / y_scale + static_cast<float>(y_zp);
          const auto q = static_cast<int64_t>(std::nearbyint(shifted));
          *dst++ = static_cast<float>(std::min(std::max(q, r.lowest), r.highest));
        }
      }
    }
  }
  y = y.to(type);
  return {channels_last ? y.movedim(1, -1).contiguous() : y};
}

// ------------------------------------------------------------- 256-entry lookup tables

// ORT's table for an 8-bit input: entry i (the byte i read as the input type) is
// QuantizeLinear(f(x_scale * (x - x_zp))).
template <typename F>
at::Tensor lookupTable(at::ScalarType type, float x_scale, int64_t x_zp, float y_scale,
                       int64_t y_zp, F f) {
  std::vector<float> values(256);
  for (int i = 0; i < 256; ++i) {
    const int x = type == at::kByte ? i : static_cast<int8_t>(static_cast<uint8_t>(i));
    values[static_cast<size_t>(i)] = f(x_scale * static_cast<float>(x - static_cast<int>(x_zp)));
  }
  return mlasQuantize(at::tensor(values, at::kFloat), y_scale, y_zp, type);
}

at::Tensor applyTable(const at::Tensor& table, const at::Tensor& x) {
  const at::Tensor bytes = x.to(at::kLong).bitwise_and(255);
  return table.index({bytes.reshape({-1})}).reshape(x.sizes());
}

// QLinearLeakyRelu / QLinearSigmoid: X, X_scale, X_zero_point, Y_scale, Y_zero_point.
template <typename F>
std::vector<at::Tensor> lookupActivation(const OpContext& ctx, F f) {
  const at::Tensor& x = quant8Input(ctx, 0, "X");
  const float x_scale = scaleValue(ctx, 1, "X_scale");
  const int64_t x_zp = zeroPointValue(ctx, 2, "X_zero_point", x.scalar_type(), "X");
  const float y_scale = scaleValue(ctx, 3, "Y_scale");
  const int64_t y_zp = zeroPointValue(ctx, 4, "Y_zero_point", x.scalar_type(), "X");
  return {applyTable(lookupTable(x.scalar_type(), x_scale, x_zp, y_scale, y_zp, f), x)};
}

std::vector<at::Tensor> qlinearLeakyRelu(const OpContext& ctx) {
  const auto alpha = static_cast<float>(ctx.attrFloat("alpha", 0.01));
  return lookupActivation(ctx, [alpha](float v) { return v >= 0.0f ? v : alpha * v; });
}

// MlasComputeLogistic as its FMA3 kernel computes it: Eigen's rational approximation on
// [-18, 18], p(x) / q(x) + 1/2 clamped to [0, 1], each multiply-add fused.
float mlasLogistic(float x) {
  const float v = std::min(std::max(x, -18.0f), 18.0f);
  const float v2 = v * v;
  float p = std::fmaf(v2, 4.37031012579801e-11f, 1.15627324459942e-07f);
  p = std::fmaf(p, v2, 6.08574864600143e-05f);
  p = std::fmaf(p, v2, 8.51377133304701e-03f);
  p = std::fmaf(p, v2, 2.48287947061529e-01f);
  p = p * v;
  float q = std::fmaf(v2, 6.10247389755681e-13f, 5.76102136993427e-09f);
  q = std::fmaf(q, v2, 6.29106785017040e-06f);
  q = std::fmaf(q, v2, 1.70198817374094e-03f);
  q = std::fmaf(q, v2, 1.16817656904453e-01f);
  q = std::fmaf(q, v2, 9.93151921023180e-01f);
  return std::min(std::max(p / q + 0.5f, 0.0f), 1.0f);
}

std::vector<at::Tensor> qlinearSigmoid(const OpContext& ctx) {
  return lookupActivation(ctx, mlasLogistic);
}

// com.microsoft QLinearSoftmax: X, X_scale, x_zero_point, Y_scale, y_zero_point; `opset` says
// which Softmax it stands for (below 13: axis defaults to 1 and everything from it is one row).
std::vector<at::Tensor> qlinearSoftmax(const OpContext& ctx) {
  const at::Tensor& x = quant8Input(ctx, 0, "X");
  const float x_scale = scaleValue(ctx, 1, "X_scale");
  const float y_scale = scaleValue(ctx, 3, "Y_scale");
  const int64_t y_zp = zeroPointValue(ctx, 4, "y_zero_point", x.scalar_type(), "X");
  const int64_t softmax_opset = ctx.attrInt("opset");
  const bool flatten = softmax_opset < 13;
  const int64_t axis = ctx.attrInt("axis", flatten ? 1 : -1);
  if (axis < -x.dim() || axis >= x.dim()) {
    ctx.fail("axis " + std::to_string(axis) + " is out of range for X of rank " +
             std::to_string(x.dim()));
  }
  return {qlinearSoftmaxLevels(x, x_scale, y_scale, y_zp, axis, flatten)};
}

// com.microsoft QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input.
std::vector<at::Tensor> qlinearConcat(const OpContext& ctx) {
  if (ctx.inputCount() < 5 || (ctx.inputCount() - 2) % 3 != 0) {
    ctx.fail("inputs must be Y_scale, Y_zero_point and (X, X_scale, X_zero_point) per input");
  }
  const float y_scale = scaleValue(ctx, 0, "Y_scale");
  const at::Tensor& y_zp_t = quant8Input(ctx, 1, "Y_zero_point");
  const at::ScalarType type = y_zp_t.scalar_type();
  const int64_t y_zp = zeroPointValue(ctx, 1, "Y_zero_point", type, "Y");
  std::vector<at::Tensor> parts;
  for (size_t i = 2; i < ctx.inputCount(); i += 3) {
    const std::string name = "input " + std::to_string(i);
    const at::Tensor& x = requiredInput(ctx, i, name);
    requireType(ctx, x, name, type, "Y_zero_point");
    const float x_scale = scaleValue(ctx, i + 1, name + "'s scale");
    const int64_t x_zp = zeroPointValue(ctx, i + 2, name + "'s zero point", type, "Y_zero_point");
    if (x_scale == y_scale && x_zp == y_zp) {
      parts.push_back(x);
    } else {
      parts.push_back(applyTable(
          lookupTable(type, x_scale, x_zp, y_scale, y_zp, [](float v) { return v; }), x));
    }
  }
  const int64_t axis = ops::normalizeAxis(ctx, ctx.attrInt("axis"), parts[0].dim());
  return {at::cat(parts, axis)};
}

// --------------------------------------------------------------------- MatMulIntegerToFloat

// com.microsoft MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias),
// which ORT's QDQ transformer makes of DequantizeLinear x2 -> MatMul with no QuantizeLinear
// after it: QGEMM sums (a - a_zp)(b - b_zp) in int32, and its output processor converts each sum
// to float and multiplies it by a_scale * b_scale (one float product per column when B's scale
// is per column), then adds the bias.
std::vector<at::Tensor> matmulIntegerToFloat(const OpContext& ctx) {
  const at::Tensor& a = quant8Input(ctx, 0, "A");
  const at::Tensor& b = quant8Input(ctx, 1, "B");
  const float a_scale = scaleValue(ctx, 2, "a_scale");
  const int64_t a_zp = zeroPointValue(ctx, 4, "a_zero_point", a.scalar_type(), "A");
  const int64_t columns = b.size(-1);
  const at::Tensor b_scale = requiredInput(ctx, 3, "b_scale").to(at::kFloat).reshape({-1});
  const at::Tensor b_zp =
      ctx.hasInput(5) ? ctx.input(5).to(at::kDouble).reshape({-1}) : at::zeros({1}, at::kDouble);
  for (const at::Tensor* t : {&b_scale, &b_zp}) {
    if (t->numel() != 1 && t->numel() != columns) {
      throw qforge::Error("MatMulIntegerToFloat '" + ctx.node().name() +
                          "': B's scale and zero point " + "must be one value or one per column (" +
                          std::to_string(columns) + "), got " + std::to_string(t->numel()));
    }
  }
  // Integer products summed in double are exact in any order (each sum stays below 2^53).
  const at::Tensor exact =
      at::matmul(a.to(at::kDouble).sub(static_cast<double>(a_zp)), b.to(at::kDouble).sub(b_zp));
  const at::Tensor multiplier = at::scalar_tensor(a_scale, at::kFloat) * b_scale;
  at::Tensor y = wrapToInt32(exact).to(at::kFloat).mul(multiplier);
  if (ctx.hasInput(6)) y = y.add(ctx.input(6).to(at::kFloat));
  return {y};
}

}  // namespace

void registerContribOps(OpRegistry& registry) {
  registry.add(microsoft(op("QLinearAdd", 1, kLatestOpset, qlinearAdd)));
  registry.add(microsoft(op("QLinearMul", 1, kLatestOpset, qlinearMul)));
  registry.add(
      microsoft(op("QLinearGlobalAveragePool", 1, kLatestOpset, qlinearGlobalAveragePool)));
  registry.add(microsoft(op("QLinearAveragePool", 1, kLatestOpset, qlinearAveragePool)));
  registry.add(microsoft(op("QLinearConcat", 1, kLatestOpset, qlinearConcat)));
  registry.add(microsoft(op("QLinearLeakyRelu", 1, kLatestOpset, qlinearLeakyRelu)));
  registry.add(microsoft(op("QLinearSigmoid", 1, kLatestOpset, qlinearSigmoid)));
  registry.add(microsoft(op("QLinearSoftmax", 1, kLatestOpset, qlinearSoftmax)));
  registry.add(microsoft(op("MatMulIntegerToFloat", 1, kLatestOpset, matmulIntegerToFloat)));
}

}  // namespace qforge::ort_integer
