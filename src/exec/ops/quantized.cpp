// ONNX's linear quantization ops: QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul,
// ConvInteger and MatMulInteger.
//
// Exactness: the integer ops shift both 8-bit operands by their zero points, convert them to
// float64 and run ATen's convolution / matmul there. Products of 8-bit values are below 2^17, so
// the float64 sums stay exact integers until ~2^36 terms, far beyond any real layer. The exact
// sum is then wrapped to int32 like the 32-bit accumulator ONNX specifies. Requantization follows
// ONNX's reference implementation: the multiplier (x_scale * w_scale / y_scale) is computed in
// float32, applied to the int32 accumulator in float64, then rounded half to even and saturated.
#include <ATen/ATen.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/conv_geometry.h"

namespace qforge {
namespace {

using ops::kLatestOpset;
using ops::op;
using ops::withWeights;

std::string shapeString(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

std::string typeName(const at::Tensor& t) {
  return c10::toString(t.scalar_type());
}

bool isQuant8(at::ScalarType type) {
  return type == at::kByte || type == at::kChar;
}

void requireQuant8(const OpContext& ctx, const at::Tensor& t, const std::string& name) {
  if (!isQuant8(t.scalar_type())) {
    ctx.fail(name + " must be uint8 or int8, got " + typeName(t));
  }
}

// ONNX requires each zero point to have the type of the tensor it belongs to.
void requireSameType(const OpContext& ctx, const at::Tensor& zero_point,
                     const std::string& zero_point_name, const at::Tensor& t,
                     const std::string& t_name) {
  if (zero_point.scalar_type() != t.scalar_type()) {
    ctx.fail(zero_point_name + " is " + typeName(zero_point) + " but " + t_name + " is " +
             typeName(t) + "; they must have the same type");
  }
}

void requireFloatScale(const OpContext& ctx, const at::Tensor& scale, const std::string& name) {
  if (scale.scalar_type() != at::kFloat) {
    ctx.fail(name + " must be float32, got " + typeName(scale));
  }
}

// A per-tensor parameter: a scalar or a one-element 1-D tensor (exporters write both).
bool isPerTensor(const at::Tensor& t) {
  return t.numel() == 1 && t.dim() <= 1;
}

at::Tensor requirePerTensor(const OpContext& ctx, const at::Tensor& t, const std::string& name) {
  if (!isPerTensor(t)) ctx.fail(name + " must be a scalar, got shape " + shapeString(t));
  return t.reshape({});
}

// Scale and zero point must describe the same quantization: same number of elements.
void requireMatchingPair(const OpContext& ctx, const at::Tensor& scale,
                         const std::string& scale_name, const at::Tensor& zero_point,
                         const std::string& zero_point_name) {
  if (zero_point.numel() != scale.numel()) {
    ctx.fail(zero_point_name + " has shape " + shapeString(zero_point) + " but " + scale_name +
             " has shape " + shapeString(scale) + "; they must match");
  }
}

std::pair<double, double> rangeOf(at::ScalarType type) {
  return type == at::kByte ? std::make_pair(0.0, 255.0) : std::make_pair(-128.0, 127.0);
}

// round_half_to_even(v) + zero_point, saturated into `type` (uint8 or int8). at::round rounds
// half to even. NaN (a NaN input or degenerate scales) maps to the zero point rather than
// reaching an undefined float-to-integer conversion.
at::Tensor roundAndSaturate(const at::Tensor& v, const at::Tensor& zero_point,
                            at::ScalarType type) {
  at::Tensor r = at::round(v).to(at::kDouble).nan_to_num(0.0);
  if (zero_point.defined()) r = r + zero_point.to(at::kDouble);
  const auto range = rangeOf(type);
  return r.clamp(range.first, range.second).to(type);
}

// The exact integer result wrapped to int32: ONNX lets the accumulation overflow only as a
// 32-bit accumulator would.
at::Tensor wrapToInt32(const at::Tensor& exact) {
  return exact.to(at::kLong).to(at::kInt);
}

// Scale and zero point of QuantizeLinear / DequantizeLinear, shaped to broadcast against x.
struct LinearParams {
  at::Tensor scale;
  at::Tensor zero_point;  // undefined when omitted
};

LinearParams linearParams(const OpContext& ctx, const at::Tensor& x, const std::string& prefix) {
  const std::string scale_name = prefix + "_scale", zero_point_name = prefix + "_zero_point";
  LinearParams p;
  p.scale = ctx.input(1);
  requireFloatScale(ctx, p.scale, scale_name);
  if (ctx.hasInput(2)) {
    p.zero_point = ctx.input(2);
    requireMatchingPair(ctx, p.scale, scale_name, p.zero_point, zero_point_name);
  }
  if (isPerTensor(p.scale)) {
    p.scale = p.scale.reshape({});
    if (p.zero_point.defined()) p.zero_point = p.zero_point.reshape({});
    return p;
  }
  // Opset 10 knows per-tensor quantization only; 13 adds `axis` for a 1-D scale.
  if (ctx.opset() < 13) {
    ctx.fail(scale_name + " must be a scalar before opset 13, got shape " + shapeString(p.scale));
  }
  if (p.scale.dim() != 1) {
    ctx.fail(scale_name + " must be a scalar or 1-D, got shape " + shapeString(p.scale));
  }
  const int64_t axis = ops::normalizeAxis(ctx, ctx.attrInt("axis", 1), x.dim());
  if (p.scale.size(0) != x.size(axis)) {
    ctx.fail(scale_name + " has " + std::to_string(p.scale.size(0)) + " elements but axis " +
             std::to_string(axis) + " of x has size " + std::to_string(x.size(axis)));
  }
  if (p.zero_point.defined() && p.zero_point.dim() != 1) {
    ctx.fail(zero_point_name + " has shape " + shapeString(p.zero_point) + " but " + scale_name +
             " has shape " + shapeString(p.scale) + "; they must match");
  }
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(axis)] = x.size(axis);
  p.scale = p.scale.reshape(shape);
  if (p.zero_point.defined()) p.zero_point = p.zero_point.reshape(shape);
  return p;
}

// y = saturate(round_half_to_even(x / y_scale) + y_zero_point).
std::vector<at::Tensor> quantizeLinear(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kInt) {
    ctx.fail("x must be float32 or int32, got " + typeName(x));
  }
  const LinearParams p = linearParams(ctx, x, "y");
  at::ScalarType out_type = at::kByte;  // the spec's default when y_zero_point is omitted
  if (p.zero_point.defined()) {
    requireQuant8(ctx, p.zero_point, "y_zero_point");
    out_type = p.zero_point.scalar_type();
  }
  // float32 / float32 divides in float32 (as ONNX Runtime and the reference do); int32 input is
  // divided in float64, the type numpy's reference promotes int32 / float32 to.
  const at::Tensor scaled =
      x.scalar_type() == at::kInt ? x.to(at::kDouble) / p.scale.to(at::kDouble) : x / p.scale;
  return {roundAndSaturate(scaled, p.zero_point, out_type)};
}

// y = (x - x_zero_point) * x_scale, in float32.
std::vector<at::Tensor> dequantizeLinear(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (!isQuant8(x.scalar_type()) && x.scalar_type() != at::kInt) {
    ctx.fail("x must be uint8, int8 or int32, got " + typeName(x));
  }
  const LinearParams p = linearParams(ctx, x, "x");
  at::Tensor shifted = x.to(at::kInt);
  if (p.zero_point.defined()) {
    requireSameType(ctx, p.zero_point, "x_zero_point", x, "x");
    if (x.scalar_type() == at::kInt) {
      // int32 holds biases, quantized with zero point 0 by definition.
      if (p.zero_point.ne(0).any().item<bool>()) ctx.fail("an int32 x_zero_point must be 0");
    } else {
      shifted = shifted - p.zero_point.to(at::kInt);  // 8-bit differences: exact in int32
    }
  }
  return {shifted.to(at::kFloat) * p.scale};
}

// A per-output-channel parameter of a convolution (w_scale, w_zero_point): a scalar or [M];
// returned as [M, 1 x trailing_dims] so it broadcasts along axis 0 of an (M, C/group, kernel...)
// weight (trailing_dims = rank - 1) or axis 1 of an (N, M, spatial...) output (rank - 2).
at::Tensor channelParam(const OpContext& ctx, const at::Tensor& t, const std::string& name,
                        int64_t out_channels, int64_t trailing_dims) {
  if (isPerTensor(t)) return t.reshape({});
  if (t.dim() != 1 || t.size(0) != out_channels) {
    ctx.fail(name + " must be a scalar or have one element per output channel (" +
             std::to_string(out_channels) + "), got shape " + shapeString(t));
  }
  std::vector<int64_t> shape(static_cast<size_t>(trailing_dims) + 1, 1);
  shape[0] = out_channels;
  return t.reshape(shape);
}

// Convolution of zero-point-shifted operands (float64, so exact) with ONNX's conv attributes.
// Padding is applied to the shifted input, i.e. it pads with the zero point, as ONNX specifies.
at::Tensor shiftedConv(const OpContext& ctx, const at::Tensor& x, const at::Tensor& w,
                       const at::Tensor& bias) {
  if (x.dim() < 3) ctx.fail("x must be (N, C, spatial...), got shape " + shapeString(x));
  if (w.dim() != x.dim()) {
    ctx.fail("w has shape " + shapeString(w) + " but x has shape " + shapeString(x) +
             "; they must have the same rank");
  }
  const int64_t group = ctx.attrInt("group", 1);
  if (group <= 0) ctx.fail("group must be positive, got " + std::to_string(group));
  if (w.size(1) * group != x.size(1) || w.size(0) % group != 0) {
    ctx.fail("w of shape " + shapeString(w) + " does not fit x with " + std::to_string(x.size(1)) +
             " channels in " + std::to_string(group) + " groups");
  }
  const at::IntArrayRef kernel = w.sizes().slice(2);
  if (ctx.hasAttr("kernel_shape") && ctx.attrInts("kernel_shape", {}) != kernel.vec()) {
    ctx.fail("kernel_shape does not match the spatial dims of w " + shapeString(w));
  }
  const ops::WindowGeometry g = ops::resolveWindowGeometry(ctx, x.sizes().slice(2), kernel);
  at::Tensor input = x;
  std::vector<int64_t> padding = g.pads_begin;
  if (!g.symmetric()) {
    // ATen pads symmetrically only; pad explicitly (with 0, i.e. the zero point) instead.
    input = ops::padSpatial(x, g, 0.0);
    padding.assign(padding.size(), 0);
  }
  const std::vector<int64_t> output_padding(padding.size(), 0);
  return at::convolution(input, w, bias, g.strides, padding, g.dilations, /*transposed=*/false,
                         output_padding, group);
}

std::vector<at::Tensor> convInteger(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& w = ctx.input(1);
  requireQuant8(ctx, x, "x");
  requireQuant8(ctx, w, "w");
  at::Tensor xs = x.to(at::kDouble), ws = w.to(at::kDouble);
  if (ctx.hasInput(2)) {
    requireSameType(ctx, ctx.input(2), "x_zero_point", x, "x");
    xs = xs - requirePerTensor(ctx, ctx.input(2), "x_zero_point").to(at::kDouble);
  }
  if (ctx.hasInput(3)) {
    requireSameType(ctx, ctx.input(3), "w_zero_point", w, "w");
    ws = ws -
         channelParam(ctx, ctx.input(3), "w_zero_point", w.size(0), w.dim() - 1).to(at::kDouble);
  }
  return {wrapToInt32(shiftedConv(ctx, xs, ws, at::Tensor()))};
}

// The input layout QLinearConv and QLinearMatMul share; ONNX calls a and b x and w in the conv.
struct QLinearInputs {
  at::Tensor a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point;
};

// Reads the shared inputs with the checks both ops make: 8-bit data, zero points typed like
// their tensor, float32 scales. Which scale and zero point shapes are allowed differs per op, so
// the callers check those.
QLinearInputs qlinearInputs(const OpContext& ctx, const std::string& a_name,
                            const std::string& b_name) {
  QLinearInputs in;
  in.a = ctx.input(0);
  in.b = ctx.input(3);
  in.a_zero_point = ctx.input(2);
  in.b_zero_point = ctx.input(5);
  in.y_zero_point = ctx.input(7);
  requireQuant8(ctx, in.a, a_name);
  requireQuant8(ctx, in.b, b_name);
  requireQuant8(ctx, in.y_zero_point, "y_zero_point");
  requireSameType(ctx, in.a_zero_point, a_name + "_zero_point", in.a, a_name);
  requireSameType(ctx, in.b_zero_point, b_name + "_zero_point", in.b, b_name);
  in.a_scale = ctx.input(1);
  requireFloatScale(ctx, in.a_scale, a_name + "_scale");
  in.b_scale = ctx.input(4);
  requireFloatScale(ctx, in.b_scale, b_name + "_scale");
  in.y_scale = ctx.input(6);
  requireFloatScale(ctx, in.y_scale, "y_scale");
  return in;
}

std::vector<at::Tensor> qlinearConv(const OpContext& ctx) {
  const QLinearInputs in = qlinearInputs(ctx, "x", "w");
  const at::Tensor& x = in.a;
  const at::Tensor& w = in.b;
  requireMatchingPair(ctx, in.b_scale, "w_scale", in.b_zero_point, "w_zero_point");
  if (w.dim() < 3) ctx.fail("w must be (M, C/group, kernel...), got shape " + shapeString(w));
  const int64_t out_channels = w.size(0);
  const at::Tensor x_scale = requirePerTensor(ctx, in.a_scale, "x_scale");
  const at::Tensor y_scale = requirePerTensor(ctx, in.y_scale, "y_scale");
  const at::Tensor y_zp = requirePerTensor(ctx, in.y_zero_point, "y_zero_point");
  // The zero point shifts the weight; the scale multiplies the (N, M, spatial...) output.
  const at::Tensor w_scale = channelParam(ctx, in.b_scale, "w_scale", out_channels, w.dim() - 2);
  const at::Tensor w_zp =
      channelParam(ctx, in.b_zero_point, "w_zero_point", out_channels, w.dim() - 1);

  at::Tensor bias;
  if (ctx.hasInput(8)) {
    const at::Tensor& b = ctx.input(8);
    if (b.scalar_type() != at::kInt) ctx.fail("B must be int32, got " + typeName(b));
    if (b.dim() != 1 || b.size(0) != out_channels) {
      ctx.fail("B must have shape [" + std::to_string(out_channels) + "], got " + shapeString(b));
    }
    bias = b.to(at::kDouble);
  }
  const at::Tensor xs =
      x.to(at::kDouble) - requirePerTensor(ctx, in.a_zero_point, "x_zero_point").to(at::kDouble);
  const at::Tensor ws = w.to(at::kDouble) - w_zp.to(at::kDouble);
  const at::Tensor acc = wrapToInt32(shiftedConv(ctx, xs, ws, bias));

  const at::Tensor multiplier = x_scale * w_scale / y_scale;  // float32, as the reference
  return {
      roundAndSaturate(acc.to(at::kDouble) * multiplier.to(at::kDouble), y_zp, y_zp.scalar_type())};
}

// numpy.matmul operands with 1-D inputs promoted to matrices, so per-row / per-column parameters
// broadcast the same way for every rank; `restore` drops the promoted dims again.
struct MatMulOperands {
  at::Tensor a, b;
  bool a_was_vector, b_was_vector;

  MatMulOperands(const OpContext& ctx, const at::Tensor& a_in, const at::Tensor& b_in)
      : a_was_vector(a_in.dim() == 1), b_was_vector(b_in.dim() == 1) {
    if (a_in.dim() == 0 || b_in.dim() == 0) ctx.fail("matmul operands must not be scalars");
    a = a_was_vector ? a_in.unsqueeze(0) : a_in;
    b = b_was_vector ? b_in.unsqueeze(-1) : b_in;
  }

  at::Tensor restore(at::Tensor y) const {
    if (b_was_vector) y = y.squeeze(-1);
    if (a_was_vector) y = y.squeeze(b_was_vector ? -1 : -2);
    return y;
  }

  // A parameter of `a` (scale or zero point): a scalar, per row as [M], or [..., M, 1] with a's
  // leading dims. Returned shaped to broadcast against a and the matmul result.
  at::Tensor rowParam(const OpContext& ctx, const at::Tensor& t, const std::string& name) const {
    if (t.numel() == 1) return t.reshape({});
    const int64_t m = a.size(-2);
    if (t.dim() == 1 && t.size(0) == m) return t.reshape({m, 1});
    if (t.dim() == a.dim() && t.size(-1) == 1 && t.size(-2) == m &&
        t.sizes().slice(0, t.dim() - 2) == a.sizes().slice(0, a.dim() - 2)) {
      return t;
    }
    ctx.fail(name + " of shape " + shapeString(t) +
             " is neither a scalar nor per row ([M] or [..., M, 1]) for a of shape " +
             shapeString(a));
  }

  // A parameter of `b`: a scalar, per column as [N], or [..., 1, N] with b's leading dims.
  at::Tensor columnParam(const OpContext& ctx, const at::Tensor& t, const std::string& name) const {
    if (t.numel() == 1) return t.reshape({});
    const int64_t n = b.size(-1);
    if (t.dim() == 1 && t.size(0) == n) return t;
    if (t.dim() == b.dim() && t.size(-2) == 1 && t.size(-1) == n &&
        t.sizes().slice(0, t.dim() - 2) == b.sizes().slice(0, b.dim() - 2)) {
      return t;
    }
    ctx.fail(name + " of shape " + shapeString(t) +
             " is neither a scalar nor per column ([N] or [..., 1, N]) for b of shape " +
             shapeString(b));
  }
};

std::vector<at::Tensor> matMulInteger(const OpContext& ctx) {
  const at::Tensor& a = ctx.input(0);
  const at::Tensor& b = ctx.input(1);
  requireQuant8(ctx, a, "A");
  requireQuant8(ctx, b, "B");
  const MatMulOperands m(ctx, a, b);
  at::Tensor as = m.a.to(at::kDouble), bs = m.b.to(at::kDouble);
  if (ctx.hasInput(2)) {
    requireSameType(ctx, ctx.input(2), "a_zero_point", a, "A");
    as = as - m.rowParam(ctx, ctx.input(2), "a_zero_point").to(at::kDouble);
  }
  if (ctx.hasInput(3)) {
    requireSameType(ctx, ctx.input(3), "b_zero_point", b, "B");
    bs = bs - m.columnParam(ctx, ctx.input(3), "b_zero_point").to(at::kDouble);
  }
  return {m.restore(wrapToInt32(at::matmul(as, bs)))};
}

std::vector<at::Tensor> qlinearMatMul(const OpContext& ctx) {
  const QLinearInputs in = qlinearInputs(ctx, "a", "b");
  requireMatchingPair(ctx, in.a_scale, "a_scale", in.a_zero_point, "a_zero_point");
  requireMatchingPair(ctx, in.b_scale, "b_scale", in.b_zero_point, "b_zero_point");
  const MatMulOperands m(ctx, in.a, in.b);
  const at::Tensor a_scale = m.rowParam(ctx, in.a_scale, "a_scale");
  const at::Tensor b_scale = m.columnParam(ctx, in.b_scale, "b_scale");
  const at::Tensor y_scale = requirePerTensor(ctx, in.y_scale, "y_scale");
  const at::Tensor y_zp = requirePerTensor(ctx, in.y_zero_point, "y_zero_point");

  const at::Tensor as =
      m.a.to(at::kDouble) - m.rowParam(ctx, in.a_zero_point, "a_zero_point").to(at::kDouble);
  const at::Tensor bs =
      m.b.to(at::kDouble) - m.columnParam(ctx, in.b_zero_point, "b_zero_point").to(at::kDouble);
  const at::Tensor acc = wrapToInt32(at::matmul(as, bs));
  const at::Tensor multiplier = a_scale * b_scale / y_scale;  // float32, as the reference
  return {m.restore(roundAndSaturate(acc.to(at::kDouble) * multiplier.to(at::kDouble), y_zp,
                                     y_zp.scalar_type()))};
}

}  // namespace

void registerQuantizedOps(OpRegistry& registry) {
  // Versions 10 and 13 (which adds `axis`) share one lowering that checks the opset; version 19
  // (saturate, float8, other scale types) is not covered.
  registry.add(op("QuantizeLinear", 10, 12, quantizeLinear));
  registry.add(op("QuantizeLinear", 13, 18, quantizeLinear));
  registry.add(op("DequantizeLinear", 10, 12, dequantizeLinear));
  registry.add(op("DequantizeLinear", 13, 18, dequantizeLinear));
  // The weight is (M, C/group, kernel...): output channels on axis 0.
  registry.add(withWeights(op("QLinearConv", 10, kLatestOpset, qlinearConv), {3}, 8,
                           WeightLayout::OutputFirst));
  registry.add(withWeights(op("ConvInteger", 10, kLatestOpset, convInteger), {1}, -1,
                           WeightLayout::OutputFirst));
  // B is (..., K, N): output channels (columns) on its last axis, 1 for the usual 2-D weight.
  // QLinearMatMul 21 adds float8 and other scale types, not covered.
  registry.add(
      withWeights(op("QLinearMatMul", 10, 20, qlinearMatMul), {3}, -1, WeightLayout::LastAxis));
  registry.add(withWeights(op("MatMulInteger", 10, kLatestOpset, matMulInteger), {1}, -1,
                           WeightLayout::LastAxis));
}

}  // namespace qforge
