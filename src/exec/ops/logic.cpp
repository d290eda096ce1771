// Logic and bit lowerings: And, Or, Xor, Not, BitShift, IsInf and IsNaN. Their outputs are masks
// or integer bit patterns, never activations to quantize: the table marks them as shape
// computations (the report does not list them among the ops a backend leaves in float).
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/math_common.h"

namespace qforge {

namespace {

using ops::floatInput;
using ops::kLatestOpset;
using ops::op;

using BinaryFn = at::Tensor (*)(const at::Tensor&, const at::Tensor&);

// A boolean binary op with numpy broadcasting (opset 7+; opsets 1-6 had the legacy `broadcast`
// attribute and are not registered).
OpInfo logical(const std::string& name, BinaryFn fn) {
  return op(name, 7, kLatestOpset, [fn](const OpContext& ctx) {
    ops::requireType(ctx, ctx.input(0), 0, at::kBool);
    ops::requireType(ctx, ctx.input(1), 1, at::kBool);
    return std::vector<at::Tensor>{fn(ctx.input(0), ctx.input(1))};
  });
}

std::vector<at::Tensor> logicalNot(const OpContext& ctx) {
  ops::requireType(ctx, ctx.input(0), 0, at::kBool);
  return {at::logical_not(ctx.input(0))};
}

// ONNX shifts unsigned integers only; uint8 is the one ATen 1.13 holds. Bits shifted out are
// lost, and a shift by the type's width or more gives 0, as numpy's.
std::vector<at::Tensor> bitShift(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& amount = ctx.input(1);
  ops::requireType(ctx, x, 0, at::kByte);
  ops::requireType(ctx, amount, 1, at::kByte);
  const std::string direction = ctx.attrString("direction", "");
  if (direction == "LEFT") return {at::bitwise_left_shift(x, amount)};
  if (direction == "RIGHT") return {at::bitwise_right_shift(x, amount)};
  ctx.fail("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + direction + "\"");
}

std::vector<at::Tensor> isInf(const OpContext& ctx) {
  const at::Tensor& x = floatInput(ctx, 0);
  const bool negative = ctx.attrInt("detect_negative", 1) != 0;
  const bool positive = ctx.attrInt("detect_positive", 1) != 0;
  if (negative && positive) return {at::isinf(x)};
  if (negative) return {at::isneginf(x)};
  if (positive) return {at::isposinf(x)};
  return {at::zeros(x.sizes(), at::kBool)};
}

std::vector<at::Tensor> isNaN(const OpContext& ctx) {
  return {at::isnan(floatInput(ctx, 0))};
}

}  // namespace

void registerLogicOps(OpRegistry& r) {
  r.add(ops::shapeComputation(logical(
      "And", [](const at::Tensor& a, const at::Tensor& b) { return at::logical_and(a, b); })));
  r.add(ops::shapeComputation(logical(
      "Or", [](const at::Tensor& a, const at::Tensor& b) { return at::logical_or(a, b); })));
  r.add(ops::shapeComputation(logical(
      "Xor", [](const at::Tensor& a, const at::Tensor& b) { return at::logical_xor(a, b); })));
  r.add(ops::shapeComputation(op("Not", 1, kLatestOpset, logicalNot)));
  r.add(ops::shapeComputation(op("BitShift", 11, kLatestOpset, bitShift)));
  r.add(ops::shapeComputation(op("IsInf", 10, kLatestOpset, isInf)));
  r.add(ops::shapeComputation(op("IsNaN", 9, kLatestOpset, isNaN)));
}

}  // namespace qforge
