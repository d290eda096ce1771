// Elementwise arithmetic, math, comparison, selection and Cast lowerings.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/gelu_pattern.h"
#include "exec/ops/mlas_ops.h"
#include "ir/dtype.h"

namespace qforge {

namespace {

using ops::floatInput;
using ops::kLatestOpset;
using ops::op;

// Opsets 1-6 of the binary ops broadcast only when `broadcast` = 1, and then B's dims line up
// with A's starting at `axis` (default: B's trailing dims match A's). Returns B reshaped so that
// numpy broadcasting gives that alignment.
at::Tensor legacyBroadcastRhs(const OpContext& ctx, const at::Tensor& a, const at::Tensor& b) {
  if (ctx.attrInt("broadcast", 0) == 0) {
    if (a.sizes() != b.sizes()) {
      ctx.fail("inputs have different shapes and the 'broadcast' attribute is not set");
    }
    return b;
  }
  const int64_t rank_a = a.dim(), rank_b = b.dim();
  if (rank_b > rank_a) ctx.fail("with broadcast = 1, input B cannot have more dims than A");
  int64_t axis = rank_a - rank_b;  // default: B matches A's trailing dims
  if (ctx.hasAttr("axis")) axis = ops::normalizeAxis(ctx, ctx.attrInt("axis"), rank_a);
  if (axis + rank_b > rank_a) {
    ctx.fail("input B does not fit into A at axis " + std::to_string(axis));
  }
  std::vector<int64_t> shape = b.sizes().vec();
  shape.resize(static_cast<size_t>(rank_a - axis), 1);  // trailing ones pin B at `axis`
  return b.reshape(shape);
}

// The two operands of a binary op, checked for the same element type (ONNX requires it; ATen
// would silently promote).
std::pair<at::Tensor, at::Tensor> binaryOperands(const OpContext& ctx) {
  const at::Tensor& a = ctx.input(0);
  at::Tensor b = ctx.input(1);
  if (a.scalar_type() != b.scalar_type()) {
    ctx.fail(std::string("inputs have different element types (") + c10::toString(a.scalar_type()) +
             " and " + c10::toString(b.scalar_type()) + ")");
  }
  if (ctx.opset() < 7) b = legacyBroadcastRhs(ctx, a, b);
  return {a, b};
}

using BinaryFn = at::Tensor (*)(const at::Tensor&, const at::Tensor&);

// A same-type binary op for opsets `since`..latest (legacy broadcast handled below 7).
OpInfo binary(const std::string& name, int64_t since, BinaryFn fn) {
  return op(name, since, kLatestOpset, [fn](const OpContext& ctx) {
    auto [a, b] = binaryOperands(ctx);
    return std::vector<at::Tensor>{fn(a, b)};
  });
}

void addBinary(OpRegistry& registry, const std::string& name, int64_t since, BinaryFn fn) {
  registry.add(binary(name, since, fn));
}

using InPlaceFn = void (*)(const at::Tensor& into, const at::Tensor& other);

// Writes the result into an operand the executor has released (see
// OpContext::mayOverwriteInput) when that operand already has the result's shape; `commutative`
// ops may reuse either operand. IEEE addition and multiplication are commutative, so the result
// is bit-identical to the allocating path.
OpInfo inPlaceArithmetic(const std::string& name, BinaryFn fn, InPlaceFn in_place,
                         bool commutative) {
  return op(name, 1, kLatestOpset, [fn, in_place, commutative](const OpContext& ctx) {
    auto [a, b] = binaryOperands(ctx);
    // Only float32/64: libtorch 1.13 lacks some CPU float16 in-place kernels.
    const bool in_place_type = a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble;
    if (ctx.opset() >= 7 && in_place_type) {
      const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
      if (ctx.mayOverwriteInput(0) && a.sizes() == shape) {
        in_place(a, b);
        return std::vector<at::Tensor>{a};
      }
      if (commutative && ctx.mayOverwriteInput(1) && b.sizes() == shape) {
        in_place(b, a);
        return std::vector<at::Tensor>{b};
      }
    }
    return std::vector<at::Tensor>{fn(a, b)};
  });
}

using UnaryFn = at::Tensor (*)(const at::Tensor&);

void addUnary(OpRegistry& registry, const std::string& name, int64_t since, bool float_only,
              UnaryFn fn) {
  registry.add(op(name, since, kLatestOpset, [fn, float_only](const OpContext& ctx) {
    const at::Tensor& x = float_only ? floatInput(ctx, 0) : ctx.input(0);
    // libtorch 1.13 has no CPU float16 kernels for exp, log, sqrt, erf...: compute those in
    // float32 and round back (still differentiable).
    if (x.scalar_type() == at::kHalf) {
      return std::vector<at::Tensor>{fn(x.to(at::kFloat)).to(at::kHalf)};
    }
    return std::vector<at::Tensor>{fn(x)};
  }));
}

at::Tensor onnxDivide(const at::Tensor& a, const at::Tensor& b) {
  // Integer Div truncates toward zero (ONNX's reference and onnxruntime); ATen's `/` would give
  // a float result.
  if (at::isIntegralType(a.scalar_type(), /*includeBool=*/false)) return at::div(a, b, "trunc");
  return at::div(a, b);
}

// Pow's exponent may have another type than the base (opset 12+); the result has the base's type.
std::vector<at::Tensor> power(const OpContext& ctx) {
  const at::Tensor& base = ctx.input(0);
  at::Tensor exponent = ctx.input(1);
  if (ctx.opset() < 7) exponent = legacyBroadcastRhs(ctx, base, exponent);
  if (ctx.opset() < 12 && base.scalar_type() != exponent.scalar_type()) {
    ctx.fail("base and exponent must have the same element type before opset 12");
  }
  const bool float_base = at::isFloatingType(base.scalar_type());
  const bool float_exponent = at::isFloatingType(exponent.scalar_type());
  // A float base takes the exponent in its own type (differentiable in both). A single exponent
  // that broadcasts to the base's shape (LayerNorm's Pow(d, 2) as exporters write it) is read as
  // a scalar: ATen's scalar kernels compute 2 as x * x, and the tensor-exponent path called pow
  // per element (14 of the zoo ViT's 71 ms at batch 100).
  if (float_base && exponent.numel() == 1 && exponent.dim() <= base.dim() &&
      !(at::GradMode::is_enabled() && exponent.requires_grad())) {
    return {at::pow(base, exponent.item().to<double>())};
  }
  if (float_base) return {at::pow(base, exponent.to(base.scalar_type()))};
  if (float_exponent) {
    // Integer base, float exponent: compute in double, then truncate to the base type as numpy's
    // astype does.
    return {at::pow(base.to(at::kDouble), exponent.to(at::kDouble)).to(base.scalar_type())};
  }
  return {at::pow(base, exponent.to(base.scalar_type()))};
}

// Variadic Min/Max with numpy broadcasting.
std::vector<at::Tensor> variadic(const OpContext& ctx, BinaryFn fn) {
  if (ctx.inputCount() == 0) ctx.fail("needs at least one input");
  at::Tensor result = ctx.input(0);
  for (size_t i = 1; i < ctx.inputCount(); ++i) {
    const at::Tensor& next = ctx.input(i);
    if (next.scalar_type() != result.scalar_type()) {
      ctx.fail("all inputs must have the same element type; input " + std::to_string(i) + " is " +
               c10::toString(next.scalar_type()) + ", input 0 is " +
               c10::toString(result.scalar_type()));
    }
    result = fn(result, next);
  }
  return {result};
}

std::vector<at::Tensor> where(const OpContext& ctx) {
  const at::Tensor& condition = ctx.input(0);
  const at::Tensor& x = ctx.input(1);
  const at::Tensor& y = ctx.input(2);
  if (condition.scalar_type() != at::kBool) {
    ctx.fail(std::string("condition must be bool, got ") + c10::toString(condition.scalar_type()));
  }
  if (x.scalar_type() != y.scalar_type()) {
    ctx.fail(std::string("X and Y have different element types (") +
             c10::toString(x.scalar_type()) + " and " + c10::toString(y.scalar_type()) + ")");
  }
  return {at::where(condition, x, y)};
}

// Opsets 1-5 of Cast name the target type as a string ("FLOAT", "INT64", ...).
DType castTargetFromName(const OpContext& ctx, const std::string& name) {
  static const std::pair<const char*, DType> kNames[] = {
      {"FLOAT", DType::Float},     {"UINT8", DType::UInt8},      {"INT8", DType::Int8},
      {"UINT16", DType::UInt16},   {"INT16", DType::Int16},      {"INT32", DType::Int32},
      {"INT64", DType::Int64},     {"STRING", DType::String},    {"BOOL", DType::Bool},
      {"FLOAT16", DType::Float16}, {"DOUBLE", DType::Double},    {"UINT32", DType::UInt32},
      {"UINT64", DType::UInt64},   {"BFLOAT16", DType::BFloat16}};
  for (const auto& [n, dtype] : kNames) {
    if (name == n) return dtype;
  }
  ctx.fail("unknown target type '" + name + "' in attribute 'to'");
}

std::vector<at::Tensor> cast(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const Attribute* to_attr = ctx.node().attributes.find("to");
  if (to_attr == nullptr) ctx.fail("required attribute 'to' is missing");
  const DType target = to_attr->kind == AttributeKind::String
                           ? castTargetFromName(ctx, to_attr->s)
                           : static_cast<DType>(ctx.attrInt("to"));
  if (!hasScalarType(target)) {
    ctx.fail("cannot cast to " + dtypeName(target) + ": qforge's runtime has no such tensor type");
  }
  // Float -> integer truncates toward zero and anything -> bool is `x != 0`, as in ONNX.
  return {x.to(toScalarType(target))};
}

}  // namespace

void registerElementwiseOps(OpRegistry& registry) {
  using ops::combinesActivations;
  // The sum of values >= 0 is >= 0 (a residual Add after two ReLUs).
  registry.add(
      ops::withSign(combinesActivations(inPlaceArithmetic(
                        "Add", [](const at::Tensor& a, const at::Tensor& b) { return a + b; },
                        [](const at::Tensor& into, const at::Tensor& other) { into.add_(other); },
                        /*commutative=*/true)),
                    OutputSign::OfAllInputs));
  registry.add(combinesActivations(inPlaceArithmetic(
      "Sub", [](const at::Tensor& a, const at::Tensor& b) { return a - b; },
      [](const at::Tensor& into, const at::Tensor& other) { into.sub_(other); },
      /*commutative=*/false)));
  registry.add(combinesActivations(inPlaceArithmetic(
      "Mul", [](const at::Tensor& a, const at::Tensor& b) { return a * b; },
      [](const at::Tensor& into, const at::Tensor& other) { into.mul_(other); },
      /*commutative=*/true)));
  // A Div that starts GELU written out computes the whole of it (exec/ops/gelu_pattern.h).
  OpInfo div = combinesActivations(op("Div", 1, kLatestOpset, [](const OpContext& ctx) {
    auto [a, b] = binaryOperands(ctx);
    if (std::optional<at::Tensor> gelu = ops::geluOfTail(ctx, a, b)) return std::vector{*gelu};
    return std::vector<at::Tensor>{onnxDivide(a, b)};
  }));
  div.fusable_followers = ops::geluFollowers();
  registry.add(std::move(div));
  registry.add(op("Pow", 1, kLatestOpset, power));

  addUnary(registry, "Sqrt", 1, true, [](const at::Tensor& x) { return at::sqrt(x); });
  addUnary(registry, "Exp", 1, true, [](const at::Tensor& x) { return at::exp(x); });
  addUnary(registry, "Log", 1, true, [](const at::Tensor& x) { return at::log(x); });
  addUnary(registry, "Reciprocal", 1, true, [](const at::Tensor& x) { return at::reciprocal(x); });
  // As ONNX Runtime computes it wherever the MLAS kernel applies (exec/ops/mlas_ops.h).
  addUnary(registry, "Erf", 9, true, [](const at::Tensor& x) {
    return ops::mlasKernelsApply(x) ? ops::mlasErf(x) : at::erf(x);
  });
  addUnary(registry, "Neg", 1, false, [](const at::Tensor& x) { return at::neg(x); });
  addUnary(registry, "Abs", 1, false, [](const at::Tensor& x) { return at::abs(x); });
  // Written-out fake quantization (deploy/qdq_onnx.h) needs these; at::round rounds half to even
  // as ONNX's Round does.
  addUnary(registry, "Floor", 1, true, [](const at::Tensor& x) { return at::floor(x); });
  addUnary(registry, "Ceil", 1, true, [](const at::Tensor& x) { return at::ceil(x); });
  addUnary(registry, "Round", 11, true, [](const at::Tensor& x) { return at::round(x); });
  addUnary(registry, "Sign", 9, false, [](const at::Tensor& x) { return at::sign(x); });

  // Before opset 8 Min/Max required equal shapes; broadcasting is a superset of that.
  registry.add(combinesActivations(op("Min", 1, kLatestOpset, [](const OpContext& ctx) {
    return variadic(ctx,
                    [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); });
  })));
  registry.add(combinesActivations(op("Max", 1, kLatestOpset, [](const OpContext& ctx) {
    return variadic(ctx,
                    [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); });
  })));

  addBinary(registry, "Equal", 1,
            [](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); });
  addBinary(registry, "Less", 1,
            [](const at::Tensor& a, const at::Tensor& b) { return at::lt(a, b); });
  addBinary(registry, "Greater", 1,
            [](const at::Tensor& a, const at::Tensor& b) { return at::gt(a, b); });
  addBinary(registry, "LessOrEqual", 12,
            [](const at::Tensor& a, const at::Tensor& b) { return at::le(a, b); });
  addBinary(registry, "GreaterOrEqual", 12,
            [](const at::Tensor& a, const at::Tensor& b) { return at::ge(a, b); });

  registry.add(combinesActivations(op("Where", 9, kLatestOpset, where)));
  // Casts convert shapes and indices (Shape -> Cast -> Div) far more often than activations.
  OpInfo cast_info = op("Cast", 1, kLatestOpset, cast);
  cast_info.shape_computation = true;
  registry.add(std::move(cast_info));
}

}  // namespace qforge
