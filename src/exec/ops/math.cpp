// Math lowerings: trigonometric and hyperbolic functions, Mod, variadic Sum and Mean, CumSum,
// Det, Trilu, EyeLike, Size, CastLike and DynamicQuantizeLinear.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/math_common.h"
#include "ir/dtype.h"

namespace qforge {

namespace {

using ops::floatInput;
using ops::kLatestOpset;
using ops::op;

using UnaryFn = at::Tensor (*)(const at::Tensor&);

// A one-input float function for opsets `since`..latest.
OpInfo floatUnary(const std::string& name, int64_t since, UnaryFn fn) {
  return op(name, since, kLatestOpset, [fn](const OpContext& ctx) {
    return std::vector<at::Tensor>{ops::viaFloat32IfHalf(floatInput(ctx, 0), fn)};
  });
}

// Inputs 1.. have input 0's element type (ONNX requires it; ATen would silently promote).
void requireSameTypes(const OpContext& ctx) {
  const at::ScalarType type = ctx.input(0).scalar_type();
  for (size_t i = 1; i < ctx.inputCount(); ++i) {
    if (ctx.input(i).scalar_type() != type) {
      ctx.fail("all inputs must have the same element type; input " + std::to_string(i) + " is " +
               c10::toString(ctx.input(i).scalar_type()) + ", input 0 is " + c10::toString(type));
    }
  }
}

// fmod = 1: the remainder takes the dividend's sign (C fmod); fmod = 0: the divisor's (Python's
// %), allowed for integers only.
std::vector<at::Tensor> mod(const OpContext& ctx) {
  requireSameTypes(ctx);
  const at::Tensor& a = ctx.input(0);
  const at::Tensor& b = ctx.input(1);
  const bool fmod = ctx.attrInt("fmod", 0) != 0;
  const bool is_float = at::isFloatingType(a.scalar_type());
  if (is_float && !fmod) ctx.fail("floating-point inputs need fmod = 1");
  if (!is_float && (b == 0).any().item<bool>()) ctx.fail("integer modulo by zero");
  if (fmod) {
    return {ops::viaFloat32IfHalf(
        a, [&](const at::Tensor& x) { return at::fmod(x, b.to(x.scalar_type())); })};
  }
  return {at::remainder(a, b)};
}

// Sum and Mean of one or more same-typed inputs, with numpy broadcasting (before opset 8 the
// shapes had to be equal, a special case).
std::vector<at::Tensor> sumOrMean(const OpContext& ctx, bool mean) {
  if (ctx.inputCount() == 0) ctx.fail("needs at least one input");
  requireSameTypes(ctx);
  at::Tensor total = ctx.input(0);
  for (size_t i = 1; i < ctx.inputCount(); ++i)
    total = total + ctx.input(i);
  if (mean) total = total / static_cast<double>(ctx.inputCount());
  return {total.to(ctx.input(0).scalar_type())};
}

std::vector<at::Tensor> cumSum(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() == 0) ctx.fail("input must have rank >= 1");
  const int64_t axis = ops::normalizeAxis(ctx, ops::scalarIntInput(ctx, 1, "axis"), x.dim());
  const bool exclusive = ctx.attrInt("exclusive", 0) != 0;
  const bool reverse = ctx.attrInt("reverse", 0) != 0;
  at::Tensor y = reverse ? at::flip(x, {axis}) : x;
  // Keep the input type: ATen would widen integer sums to int64.
  y = ops::viaFloat32IfHalf(
      y, [axis](const at::Tensor& t) { return at::cumsum(t, axis, t.scalar_type()); });
  if (exclusive && x.size(axis) > 0) {
    // Element j sums elements 0..j-1: shift by one, zero first (exact, no subtraction).
    y = at::cat({at::zeros_like(y.narrow(axis, 0, 1)), y.narrow(axis, 0, x.size(axis) - 1)}, axis);
  }
  return {reverse ? at::flip(y, {axis}) : y};
}

std::vector<at::Tensor> det(const OpContext& ctx) {
  const at::Tensor& x = floatInput(ctx, 0);
  if (x.dim() < 2 || x.size(-1) != x.size(-2)) {
    ctx.fail("input must be [..., M, M], got shape " + c10::str(x.sizes()));
  }
  return {ops::viaFloat32IfHalf(x, [](const at::Tensor& t) { return at::linalg_det(t); })};
}

std::vector<at::Tensor> trilu(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() < 2) ctx.fail("input must have rank >= 2, got shape " + c10::str(x.sizes()));
  const int64_t k = ctx.hasInput(1) ? ops::scalarIntInput(ctx, 1, "k") : 0;
  return {ctx.attrInt("upper", 1) != 0 ? at::triu(x, k) : at::tril(x, k)};
}

// The element type of attribute `name` (an ONNX TensorProto type) or `fallback` when absent.
at::ScalarType dtypeAttr(const OpContext& ctx, const std::string& name, at::ScalarType fallback) {
  if (!ctx.hasAttr(name)) return fallback;
  const DType dtype = static_cast<DType>(ctx.attrInt(name));
  if (!hasScalarType(dtype)) {
    ctx.fail("attribute '" + name + "' names " + dtypeName(dtype) +
             ", which qforge's runtime cannot hold");
  }
  return toScalarType(dtype);
}

// Ones on diagonal k of a matrix shaped like the 2-D input, zeros elsewhere.
std::vector<at::Tensor> eyeLike(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() != 2) ctx.fail("input must be 2-D, got shape " + c10::str(x.sizes()));
  const at::ScalarType type = dtypeAttr(ctx, "dtype", x.scalar_type());
  const int64_t k = ctx.attrInt("k", 0);
  const at::Tensor ones = at::ones(x.sizes(), at::TensorOptions().dtype(at::kFloat));
  return {ones.triu(k).tril(k).to(type)};
}

std::vector<at::Tensor> size(const OpContext& ctx) {
  return {at::scalar_tensor(ctx.input(0).numel(), at::kLong)};
}

// Cast to input 1's element type, with Cast's conversions (truncation toward zero, x != 0).
std::vector<at::Tensor> castLike(const OpContext& ctx) {
  return {ctx.input(0).to(ctx.input(1).scalar_type())};
}

// Quantizes float32 x to uint8 over [min(x, 0), max(x, 0)], as ONNX's reference: the scale and
// the zero point in float32, each rounding half to even.
std::vector<at::Tensor> dynamicQuantizeLinear(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  ops::requireType(ctx, x, 0, at::kFloat);
  if (x.numel() == 0) ctx.fail("input is empty: there is no range to quantize");
  const at::Tensor zero = at::zeros({}, at::kFloat);
  const at::Tensor high = at::maximum(x.max(), zero), low = at::minimum(x.min(), zero);
  at::Tensor scale = (high - low) / 255.0f;
  scale = at::where(high == low, at::ones({}, at::kFloat) / 255.0f, scale);
  const at::Tensor zero_point = at::round(at::clamp(-low / scale, 0, 255));
  const at::Tensor y = at::clamp(at::round(x / scale) + zero_point, 0, 255);
  return {y.to(at::kByte), scale, zero_point.to(at::kByte)};
}

// Output >= 0 whatever the input (acos, cosh, ...).
OpInfo nonNegative(OpInfo info) {
  return ops::withSign(std::move(info), OutputSign::NonNegative);
}

}  // namespace

void registerMathOps(OpRegistry& r) {
  r.add(floatUnary("Sin", 7, [](const at::Tensor& x) { return at::sin(x); }));
  r.add(floatUnary("Tan", 7, [](const at::Tensor& x) { return at::tan(x); }));
  r.add(floatUnary("Asin", 7, [](const at::Tensor& x) { return at::asin(x); }));
  r.add(floatUnary("Atan", 7, [](const at::Tensor& x) { return at::atan(x); }));
  r.add(floatUnary("Sinh", 9, [](const at::Tensor& x) { return at::sinh(x); }));
  r.add(floatUnary("Asinh", 9, [](const at::Tensor& x) { return at::asinh(x); }));
  r.add(floatUnary("Atanh", 9, [](const at::Tensor& x) { return at::atanh(x); }));
  r.add(floatUnary("Cos", 7, [](const at::Tensor& x) { return at::cos(x); }));
  // acos lies in [0, pi], cosh in [1, inf), acosh in [0, inf).
  r.add(nonNegative(floatUnary("Acos", 7, [](const at::Tensor& x) { return at::acos(x); })));
  r.add(nonNegative(floatUnary("Cosh", 9, [](const at::Tensor& x) { return at::cosh(x); })));
  r.add(nonNegative(floatUnary("Acosh", 9, [](const at::Tensor& x) { return at::acosh(x); })));

  r.add(ops::combinesActivations(op("Mod", 10, kLatestOpset, mod)));
  // A sum or mean of values >= 0 is >= 0, as for Add.
  r.add(ops::withSign(ops::combinesActivations(
                          op("Sum", 1, kLatestOpset,
                             [](const OpContext& ctx) { return sumOrMean(ctx, /*mean=*/false); })),
                      OutputSign::OfAllInputs));
  r.add(ops::withSign(ops::combinesActivations(
                          op("Mean", 1, kLatestOpset,
                             [](const OpContext& ctx) { return sumOrMean(ctx, /*mean=*/true); })),
                      OutputSign::OfAllInputs));
  r.add(ops::withSign(op("CumSum", 11, kLatestOpset, cumSum), OutputSign::OfDataInput));
  r.add(op("Det", 11, kLatestOpset, det));
  // Trilu keeps values or writes 0, which may lie outside the input's range (as Pad's constant),
  // so it does not only move data; but 0 keeps the sign.
  r.add(ops::withSign(op("Trilu", 14, kLatestOpset, trilu), OutputSign::OfDataInput));

  r.add(ops::shapeComputation(op("EyeLike", 9, kLatestOpset, eyeLike)));
  r.add(ops::shapeComputation(op("Size", 1, kLatestOpset, size)));
  // Like Cast, which converts shapes and indices far more often than activations.
  r.add(ops::shapeComputation(op("CastLike", 15, kLatestOpset, castLike)));
  r.add(op("DynamicQuantizeLinear", 11, kLatestOpset, dynamicQuantizeLinear));
}

}  // namespace qforge
