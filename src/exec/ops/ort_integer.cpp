// ONNX Runtime's integer arithmetic for the QOperator ops (CPU execution provider, MLAS kernels
// on x86-64), so qforge can predict ORT's outputs exactly. Facts from ORT's sources
// (core/mlas/lib/quantize.cpp, qladd.cpp + intrinsics/avx2/qladd_avx2.cpp, qlmul.cpp,
// qlgavgpool.cpp; providers/cpu/quantization/qlinearconv.cc, quantize_linear_matmul.cc;
// contrib_ops/cpu/quantization/quant_gemm.cc, qlinear_pool.cc, qlinear_concat.cc,
// qlinear_lookup_table.cc, qlinear_activations.cc), checked against onnxruntime-node 1.30 by the
// golden tests (tools/ort/qop_golden.js):
//
// - Requantization (QLinearConv, QLinearMatMul, QGemm, QLinearGlobalAveragePool): the int32
//   accumulator (bias added in int32) is converted to float32 (rounding to nearest even past
//   2^24), multiplied in float32 by a multiplier formed in float32 as x_scale * w_scale / y_scale
//   (left to right), clamped to [lowest - y_zp, max - y_zp], rounded half to even (cvtps2dq) and
//   shifted by y_zp. The ONNX reference instead multiplies in float64, so ties and near-ties can
//   land one level apart.
// - QuantizeLinear: x / scale in float32, clamped before rounding; NaN becomes the lowest value
//   (MAXPS returns its second operand), where the reference gives the zero point.
// - QLinearAdd: ratios a_scale / c_scale and b_scale / c_scale in float32, a fixed part
//   c_zp - fma(ra, a_zp, rb * b_zp) (the compiler contracts MLAS's C++ expression), then per
//   element fma(a, ra, fma(b, rb, fixed)) on the raw 8-bit values (a broadcast operand is folded
//   into the fixed part first), rounded half to even and saturated.
// - QLinearMul: (a - a_zp) * (b - b_zp) exactly in int32, times a_scale * b_scale / c_scale, plus
//   c_zp, all in float32 without fusing, rounded half to even, saturated.
// - QLinearGlobalAveragePool: sum - x_zp * pixels in int32, multiplier x_scale / (y_scale *
//   pixels), then the requantization above.
// - QLinearAveragePool: dequantized to float32, summed window by window in row-major order,
//   divided by the element count, quantized as nearbyint(v / y_scale + y_zp); windows covering
//   the whole image without padding take the global path.
// - QLinearConcat, QLinearLeakyRelu, QLinearSigmoid: a 256-entry table per input,
//   x_scale * (x - x_zp) -> f -> QuantizeLinear; an input with the output's scale and zero point
//   is copied.
//
// Exactness of the integer parts: operands are shifted by their zero points in float32 (exact)
// and convolved / multiplied there when no partial sum can exceed 2^24 (every partial sum is then
// an exactly representable integer, in whatever order the kernel adds), else in float64. The
// exact sum is wrapped to int32 like MLAS's accumulator. One MLAS detail is not modelled: u8s8
// GEMMs on AVX2 machines without VNNI saturate pairs of products to int16 (vpmaddubsw); on
// VNNI / AVX-512 machines, and for u8u8, ORT's sums are exact as here.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/conv_geometry.h"
#include "exec/ops/ort_integer_common.h"
#include "exec/ort_emulation.h"

namespace qforge {
namespace ort_integer {

std::string typeName(at::ScalarType type) {
  return c10::toString(type);
}
std::string typeName(const at::Tensor& t) {
  return typeName(t.scalar_type());
}

bool isQuant8(at::ScalarType type) {
  return type == at::kByte || type == at::kChar;
}

Range rangeOf(at::ScalarType type) {
  return type == at::kByte ? Range{0, 255} : Range{-128, 127};
}

bool isPerTensor(const at::Tensor& t) {
  return t.numel() == 1 && t.dim() <= 1;
}

const at::Tensor& requiredInput(const OpContext& ctx, size_t i, const std::string& name) {
  if (!ctx.hasInput(i)) ctx.fail(name + " (input " + std::to_string(i) + ") is missing");
  return ctx.input(i);
}

const at::Tensor& quant8Input(const OpContext& ctx, size_t i, const std::string& name) {
  const at::Tensor& t = requiredInput(ctx, i, name);
  if (!isQuant8(t.scalar_type())) ctx.fail(name + " must be uint8 or int8, got " + typeName(t));
  return t;
}

void requireType(const OpContext& ctx, const at::Tensor& t, const std::string& name,
                 at::ScalarType type, const std::string& owner) {
  if (t.scalar_type() != type) {
    ctx.fail(name + " is " + typeName(t) + " but " + owner + " is " + typeName(type) +
             "; they must have the same type");
  }
}

// A per-tensor float32 scale.
float scaleValue(const OpContext& ctx, size_t i, const std::string& name) {
  const at::Tensor& t = requiredInput(ctx, i, name);
  if (t.scalar_type() != at::kFloat) ctx.fail(name + " must be float32, got " + typeName(t));
  if (!isPerTensor(t))
    ctx.fail(name + " must be a scalar, got shape " + ops::shapeString(t.sizes()));
  return t.reshape({}).item<float>();
}

// A per-tensor zero point of type `type` (that of `owner`); 0 when the optional input is omitted.
int64_t zeroPointValue(const OpContext& ctx, size_t i, const std::string& name, at::ScalarType type,
                       const std::string& owner) {
  if (!ctx.hasInput(i)) return 0;
  const at::Tensor& t = ctx.input(i);
  requireType(ctx, t, name, type, owner);
  if (!isPerTensor(t))
    ctx.fail(name + " must be a scalar, got shape " + ops::shapeString(t.sizes()));
  return t.reshape({}).to(at::kLong).item<int64_t>();
}

// MlasRequantizeOutput: float32(acc) * multiplier, clamped to [lowest - zp, highest - zp],
// rounded half to even, plus zp. `acc` is int32, or float32 already holding float32(acc) (then
// it is overwritten); `multiplier` is float32, broadcastable against `acc`.
at::Tensor requantize(const at::Tensor& acc, const at::Tensor& multiplier, int64_t zero_point,
                      at::ScalarType type) {
  const Range r = rangeOf(type);
  at::Tensor v = acc.to(at::kFloat).mul_(multiplier);
  v.clamp_(static_cast<double>(r.lowest - zero_point), static_cast<double>(r.highest - zero_point));
  v.round_().add_(static_cast<double>(zero_point));
  return v.to(type);
}

at::Tensor wrapToInt32(const at::Tensor& exact) {
  return exact.to(at::kLong).to(at::kInt);
}

OpInfo microsoft(OpInfo info) {
  info.domain = kMicrosoft;
  return info;
}

}  // namespace ort_integer

namespace {

using namespace ort_integer;
using ops::kLatestOpset;
using ops::op;
using ops::shapeString;
using ops::withWeights;

// Activations and weights ORT accepts together: uint8 activations with uint8 or int8 weights,
// int8 activations with int8 weights only.
void requireOrtWeightType(const OpContext& ctx, const at::Tensor& x, const std::string& x_name,
                          const at::Tensor& w, const std::string& w_name) {
  if (x.scalar_type() == at::kChar && w.scalar_type() != at::kChar) {
    ctx.fail(x_name + " is int8 but " + w_name + " is " + typeName(w) +
             "; ONNX Runtime takes int8 " + w_name + " with int8 " + x_name);
  }
}

// A float32 parameter as a C++ vector (for multipliers formed element by element in float32).
std::vector<float> floatValues(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().reshape({-1});
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// x_scale * w_scale[i] / y_scale in float32, evaluated left to right as ORT does.
at::Tensor outputMultipliers(float x_scale, const at::Tensor& w_scale, float y_scale) {
  std::vector<float> m = floatValues(w_scale);
  for (float& v : m)
    v = x_scale * v / y_scale;
  return at::tensor(m, at::kFloat);
}

// The float type in which sums of products of `a_abs_max` times columns whose absolute sums are
// at most `b_abs_column_sum` stay exact integers whatever the summation order.
at::ScalarType exactSumType(double a_abs_max, double b_abs_column_sum) {
  return a_abs_max * b_abs_column_sum <= 16777216.0 ? at::kFloat : at::kDouble;
}

// Shape that puts a 1-D per-channel vector on axis 1 of a rank-`rank` (N, M, ...) tensor.
std::vector<int64_t> channelShape(int64_t channels, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank - 1), 1);
  shape[0] = channels;
  return shape;
}

// The int32 accumulator of a convolution of zero-point-shifted operands (float32 holding exact
// integers) plus the int32 bias (optional). When no partial sum, bias included, can pass 2^24 the
// whole computation stays in float32 and the result is returned as float32 (exact, and equal to
// MLAS's int32 -> float32 conversion); otherwise it runs in float64 and returns the int32 wrap.
// Padding pads the shifted input with 0, i.e. with the zero point, as ORT's im2col does.
at::Tensor exactConvAccumulator(const OpContext& ctx, at::Tensor xs, at::Tensor ws,
                                const at::Tensor& bias) {
  if (xs.dim() < 3) ctx.fail("x must be (N, C, spatial...), got shape " + shapeString(xs.sizes()));
  if (ws.dim() != xs.dim()) {
    ctx.fail("w has shape " + shapeString(ws.sizes()) + " but x has shape " +
             shapeString(xs.sizes()) + "; they must have the same rank");
  }
  const int64_t group = ctx.attrInt("group", 1);
  if (group <= 0) ctx.fail("group must be positive, got " + std::to_string(group));
  if (ws.size(1) * group != xs.size(1) || ws.size(0) % group != 0) {
    ctx.fail("w of shape " + shapeString(ws.sizes()) + " does not fit x with " +
             std::to_string(xs.size(1)) + " channels in " + std::to_string(group) + " groups");
  }
  const at::IntArrayRef kernel = ws.sizes().slice(2);
  if (ctx.hasAttr("kernel_shape") && ctx.attrInts("kernel_shape", {}) != kernel.vec()) {
    ctx.fail("kernel_shape does not match the spatial dims of w " + shapeString(ws.sizes()));
  }
  const double x_max = xs.numel() ? xs.abs().max().item<double>() : 0.0;
  const double w_max =
      ws.numel() ? ws.abs().reshape({ws.size(0), -1}).sum(1).max().item<double>() : 0.0;
  const double bias_max = bias.defined() ? bias.abs().max().item<double>() : 0.0;
  const bool float32_exact = x_max * w_max + bias_max <= 16777216.0;
  const at::ScalarType sum_type = float32_exact ? at::kFloat : at::kDouble;
  xs = xs.to(sum_type);
  ws = ws.to(sum_type);
  const ops::WindowGeometry g = ops::resolveWindowGeometry(ctx, xs.sizes().slice(2), kernel);
  std::vector<int64_t> padding = g.pads_begin;
  if (!g.symmetric()) {
    xs = ops::padSpatial(xs, g, 0.0);
    padding.assign(padding.size(), 0);
  }
  const std::vector<int64_t> output_padding(padding.size(), 0);
  const at::Tensor sum =
      at::convolution(xs, ws, float32_exact && bias.defined() ? bias.to(at::kFloat) : at::Tensor(),
                      g.strides, padding, g.dilations, /*transposed=*/false, output_padding, group);
  if (float32_exact) return sum;
  at::Tensor exact = sum.to(at::kLong);
  if (bias.defined()) exact.add_(bias.to(at::kLong).reshape(channelShape(ws.size(0), exact.dim())));
  return wrapToInt32(exact);
}

// A per-channel parameter: scalar, [1] or [channels], of `type`; returned 1-D.
at::Tensor channelParam(const OpContext& ctx, size_t i, const std::string& name,
                        at::ScalarType type, const std::string& owner, int64_t channels) {
  const at::Tensor& t = requiredInput(ctx, i, name);
  if (type == at::kFloat) {
    if (t.scalar_type() != at::kFloat) ctx.fail(name + " must be float32, got " + typeName(t));
  } else {
    requireType(ctx, t, name, type, owner);
  }
  if (isPerTensor(t)) return t.reshape({1});
  if (t.dim() != 1 || t.size(0) != channels) {
    ctx.fail(name + " must be a scalar or have one element per output channel (" +
             std::to_string(channels) + "), got shape " + shapeString(t.sizes()));
  }
  return t;
}

// --------------------------------------------------------------------------- QLinearConv

std::vector<at::Tensor> qlinearConv(const OpContext& ctx) {
  // com.microsoft's version may take and give channels-last (NHWC) tensors.
  const bool channels_last = ctx.attrInt("channels_last", 0) != 0;
  const at::Tensor x =
      channels_last ? quant8Input(ctx, 0, "x").movedim(-1, 1) : quant8Input(ctx, 0, "x");
  const at::Tensor& w = quant8Input(ctx, 3, "w");
  requireOrtWeightType(ctx, x, "x", w, "w");
  if (w.dim() < 3)
    ctx.fail("w must be (M, C/group, kernel...), got shape " + shapeString(w.sizes()));
  const int64_t out_channels = w.size(0);
  const float x_scale = scaleValue(ctx, 1, "x_scale");
  const int64_t x_zp = zeroPointValue(ctx, 2, "x_zero_point", x.scalar_type(), "x");
  const float y_scale = scaleValue(ctx, 6, "y_scale");
  const int64_t y_zp = zeroPointValue(ctx, 7, "y_zero_point", x.scalar_type(), "x");
  const at::Tensor w_scale = channelParam(ctx, 4, "w_scale", at::kFloat, "", out_channels);
  const at::Tensor w_zp = channelParam(ctx, 5, "w_zero_point", w.scalar_type(), "w", out_channels);
  // ORT takes one weight zero point for all channels (its GEMM has no per-column offsets here).
  if (w_zp.numel() > 1 && !w_zp.eq(w_zp[0]).all().item<bool>()) {
    ctx.fail("w_zero_point must be the same for every channel in ONNX Runtime's QLinearConv");
  }
  at::Tensor bias;
  if (ctx.hasInput(8)) {
    bias = ctx.input(8);
    if (bias.scalar_type() != at::kInt) ctx.fail("B must be int32, got " + typeName(bias));
    if (bias.dim() != 1 || bias.size(0) != out_channels) {
      ctx.fail("B must have shape [" + std::to_string(out_channels) + "], got " +
               shapeString(bias.sizes()));
    }
  }
  const at::Tensor xs = x.to(at::kFloat).sub_(static_cast<double>(x_zp));
  const at::Tensor ws = w.to(at::kFloat).sub_(w_zp[0].item<double>());
  const at::Tensor acc = exactConvAccumulator(ctx, xs, ws, bias);

  at::Tensor multiplier = outputMultipliers(x_scale, w_scale, y_scale);
  if (multiplier.numel() > 1)
    multiplier = multiplier.reshape(channelShape(out_channels, acc.dim()));
  else
    multiplier = multiplier.reshape({});
  const at::Tensor y = requantize(acc, multiplier, y_zp, x.scalar_type());
  return {channels_last ? y.movedim(1, -1).contiguous() : y};
}

// ------------------------------------------------------------- QLinearMatMul and QGemm

// Exact a @ b of shifted operands (b at least 2-D), as int64; `a` may be 1-D.
at::Tensor exactMatMul(at::Tensor as, at::Tensor bs) {
  const double a_max = as.numel() ? as.abs().max().item<double>() : 0.0;
  const double b_max = bs.numel() ? bs.abs().sum(-2).max().item<double>() : 0.0;
  const at::ScalarType sum_type = exactSumType(a_max, b_max);
  return at::matmul(as.to(sum_type), bs.to(sum_type)).to(at::kLong);
}

// b_scale / b_zero_point of QLinearMatMul as ORT accepts them: per tensor, [N] for a 2-D b, or
// b's shape with 1 in place of K. Returned shaped to broadcast against b and the result.
at::Tensor columnParam(const OpContext& ctx, size_t i, const std::string& name,
                       const at::Tensor& b) {
  const at::Tensor& t = requiredInput(ctx, i, name);
  if (isPerTensor(t)) return t.reshape({});
  if (t.dim() == 1 && b.dim() == 2 && t.size(0) == b.size(1)) return t;
  bool fits = t.dim() == b.dim() && t.dim() >= 2 && t.size(-2) == 1;
  for (int64_t d = 0; fits && d < t.dim(); ++d) {
    if (d != t.dim() - 2 && t.size(d) != b.size(d)) fits = false;
  }
  if (!fits) {
    ctx.fail(name + " of shape " + shapeString(t.sizes()) +
             " is neither a scalar, [N] for a 2-D b, nor b's shape with 1 for K; b has shape " +
             shapeString(b.sizes()));
  }
  return t;
}

std::vector<at::Tensor> qlinearMatMul(const OpContext& ctx) {
  const at::Tensor& a = quant8Input(ctx, 0, "a");
  const at::Tensor& b = quant8Input(ctx, 3, "b");
  requireOrtWeightType(ctx, a, "a", b, "b");
  if (a.dim() < 1 || b.dim() < 2) {
    ctx.fail("a must be at least 1-D and b at least 2-D, got shapes " + shapeString(a.sizes()) +
             " and " + shapeString(b.sizes()));
  }
  const float a_scale = scaleValue(ctx, 1, "a_scale");
  const int64_t a_zp = zeroPointValue(ctx, 2, "a_zero_point", a.scalar_type(), "a");
  const float y_scale = scaleValue(ctx, 6, "y_scale");
  const int64_t y_zp = zeroPointValue(ctx, 7, "y_zero_point", a.scalar_type(), "a");
  const at::Tensor b_scale = columnParam(ctx, 4, "b_scale", b);
  const at::Tensor b_zp = columnParam(ctx, 5, "b_zero_point", b);
  if (b_scale.scalar_type() != at::kFloat)
    ctx.fail("b_scale must be float32, got " + typeName(b_scale));
  requireType(ctx, b_zp, "b_zero_point", b.scalar_type(), "b");

  const at::Tensor as = a.to(at::kFloat).sub_(static_cast<double>(a_zp));
  const at::Tensor bs = b.to(at::kFloat) - b_zp.to(at::kFloat);
  const at::Tensor acc = exactMatMul(as, bs);
  const at::Tensor multiplier =
      outputMultipliers(a_scale, b_scale, y_scale).reshape(b_scale.sizes());
  return {requantize(wrapToInt32(acc), multiplier, y_zp, a.scalar_type())};
}

// com.microsoft QGemm: Y = alpha * A' B' + C with A' = transA ? A^T : A; quantized output when
// y_zero_point is given, float32 (scale only) otherwise.
std::vector<at::Tensor> qgemm(const OpContext& ctx) {
  at::Tensor a = quant8Input(ctx, 0, "A");
  at::Tensor b = quant8Input(ctx, 3, "B");
  requireOrtWeightType(ctx, a, "A", b, "B");
  if (a.dim() != 2 || b.dim() != 2) {
    ctx.fail("A and B must be 2-D, got shapes " + shapeString(a.sizes()) + " and " +
             shapeString(b.sizes()));
  }
  if (ctx.attrInt("transA", 0) != 0) a = a.t();
  if (ctx.attrInt("transB", 0) != 0) b = b.t();
  if (a.size(1) != b.size(0)) {
    ctx.fail("A' of shape " + shapeString(a.sizes()) + " and B' of shape " +
             shapeString(b.sizes()) + " cannot be multiplied");
  }
  const int64_t n = b.size(1);
  const float a_scale = scaleValue(ctx, 1, "a_scale");
  const int64_t a_zp = zeroPointValue(ctx, 2, "a_zero_point", a.scalar_type(), "A");
  const at::Tensor b_scale = channelParam(ctx, 4, "b_scale", at::kFloat, "", n);
  const at::Tensor b_zp = channelParam(ctx, 5, "b_zero_point", b.scalar_type(), "B", n);
  if (b_scale.numel() != b_zp.numel()) {
    ctx.fail("b_zero_point and b_scale must have the same shape");
  }
  const auto alpha = static_cast<float>(ctx.attrFloat("alpha", 1.0));
  std::vector<float> multiplier = floatValues(b_scale);
  const bool has_y_scale = ctx.hasInput(7);
  const float y_scale = has_y_scale ? scaleValue(ctx, 7, "y_scale") : 1.0f;
  for (float& m : multiplier) {
    m = alpha * a_scale * m;
    if (has_y_scale) m /= y_scale;
  }

  at::Tensor acc = exactMatMul(a.to(at::kFloat).sub_(static_cast<double>(a_zp)),
                               b.to(at::kFloat) - b_zp.to(at::kFloat));
  if (ctx.hasInput(6)) {
    const at::Tensor& c = ctx.input(6);
    if (c.scalar_type() != at::kInt) ctx.fail("C must be int32, got " + typeName(c));
    if (!at::is_expandable_to(c.sizes(), acc.sizes())) {
      ctx.fail("C of shape " + shapeString(c.sizes()) + " does not broadcast to " +
               shapeString(acc.sizes()));
    }
    acc.add_(c.to(at::kLong));
  }
  const at::Tensor scale = multiplier.size() == 1 ? at::scalar_tensor(multiplier[0], at::kFloat)
                                                  : at::tensor(multiplier, at::kFloat);
  if (!ctx.hasInput(8)) return {wrapToInt32(acc).to(at::kFloat).mul_(scale)};
  const at::Tensor& y_zp_t = ctx.input(8);
  if (!isQuant8(y_zp_t.scalar_type()) || !isPerTensor(y_zp_t)) {
    ctx.fail("y_zero_point must be a uint8 or int8 scalar, got " + typeName(y_zp_t) + " of shape " +
             shapeString(y_zp_t.sizes()));
  }
  return {requantize(wrapToInt32(acc), scale, y_zp_t.reshape({}).to(at::kLong).item<int64_t>(),
                     y_zp_t.scalar_type())};
}

// ------------------------------------------------------------------------ QuantizeLinear

// ORT's QuantizeLinear equals the reference except for NaN, which MLAS clamps to the lowest
// value: the reference lowering runs and NaN positions are overwritten.
std::vector<at::Tensor> quantizeLinear(const OpContext& ctx) {
  const OpInfo* reference = OpRegistry::builtin().find("", "QuantizeLinear", ctx.opset());
  std::vector<at::Tensor> y = reference->run(ctx);
  const at::Tensor& x = ctx.input(0);
  if (at::isFloatingType(x.scalar_type())) {
    const Range r = rangeOf(y[0].scalar_type());
    y[0] = at::where(x.isnan(), at::scalar_tensor(r.lowest, y[0].options()), y[0]);
  }
  return y;
}

}  // namespace

void registerOrtIntegerOps(OpRegistry& registry) {
  registry.add(op("QuantizeLinear", 10, 12, quantizeLinear));
  registry.add(op("QuantizeLinear", 13, 18, quantizeLinear));
  registry.add(withWeights(op("QLinearConv", 10, kLatestOpset, qlinearConv), {3}, 8,
                           WeightLayout::OutputFirst));
  registry.add(
      withWeights(op("QLinearMatMul", 10, 20, qlinearMatMul), {3}, -1, WeightLayout::LastAxis));
  registry.add(microsoft(withWeights(op("QLinearConv", 1, kLatestOpset, qlinearConv), {3}, 8,
                                     WeightLayout::OutputFirst)));
  registry.add(
      microsoft(withWeights(op("QGemm", 1, kLatestOpset, qgemm), {3}, 6, WeightLayout::GemmB)));
  ort_integer::registerContribOps(registry);
}

const OpRegistry& ortEmulationRegistry() {
  static const OpRegistry registry = [] {
    // The built-in table with the ops ORT computes differently replaced; everything else
    // (DequantizeLinear, ConvInteger, MatMulInteger, the float ops) is computed alike.
    OpRegistry r = OpRegistry::builtin();
    for (const char* op_type : {"QuantizeLinear", "QLinearConv", "QLinearMatMul"})
      r.remove("", op_type);
    registerOrtIntegerOps(r);
    registerOrtFloatOps(r);
    registerOrtLayerNormOps(r);
    registerOrtMlasFloatOps(r);
    registerOrtNchwcOps(r);
    return r;
  }();
  return registry;
}

}  // namespace qforge