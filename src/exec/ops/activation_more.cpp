// More activation lowerings: Selu, Celu, Softplus, Softsign, ThresholdedRelu, Shrink, Hardmax.
#include <ATen/ATen.h>

#include <functional>
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

using Activation = std::function<at::Tensor(const OpContext&, const at::Tensor&)>;

// A one-input float activation for opsets `since`..latest.
OpInfo activation(const std::string& name, int64_t since, Activation fn) {
  return op(name, since, kLatestOpset, [fn](const OpContext& ctx) {
    return std::vector<at::Tensor>{
        ops::viaFloat32IfHalf(floatInput(ctx, 0), [&](const at::Tensor& x) { return fn(ctx, x); })};
  });
}

at::Tensor selu(const OpContext& ctx, const at::Tensor& x) {
  // ONNX's defaults are float32 roundings of the constants of the SELU paper.
  const double alpha = ctx.attrFloat("alpha", 1.67326319217681884765625);
  const double gamma = ctx.attrFloat("gamma", 1.05070102214813232421875);
  // at::elu(x, alpha, scale, 1) = scale * (x > 0 ? x : alpha * (exp(x) - 1)).
  return at::elu(x, alpha, gamma, 1.0);
}

at::Tensor celu(const OpContext& ctx, const at::Tensor& x) {
  const double alpha = ctx.attrFloat("alpha", 1.0);
  if (alpha == 0) ctx.fail("attribute 'alpha' must not be 0 (Celu divides by it)");
  return at::celu(x, alpha);
}

// log(1 + exp(x)) without overflow for large x.
at::Tensor stableSoftplus(const at::Tensor& x) {
  return at::clamp_min(x, 0) + at::log1p(at::exp(-at::abs(x)));
}

at::Tensor thresholdedRelu(const OpContext& ctx, const at::Tensor& x) {
  return at::where(x > ctx.attrFloat("alpha", 1.0), x, at::zeros_like(x));
}

// x + bias below -lambd, x - bias above lambd, 0 between; any numeric type, computed in double
// and converted back as ONNX's reference does.
std::vector<at::Tensor> shrink(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.scalar_type() == at::kBool) ctx.fail("input must be numeric, got Bool");
  const double lambd = ctx.attrFloat("lambd", 0.5), bias = ctx.attrFloat("bias", 0.0);
  const at::Tensor wide = x.to(at::kDouble);
  const at::Tensor y = at::where(wide < -lambd, wide + bias,
                                 at::where(wide > lambd, wide - bias, at::zeros_like(wide)));
  return {y.to(x.scalar_type())};
}

// 1 at the first maximum along the axis, 0 elsewhere. Opsets 1-12 flatten X to 2-D
// [d0*...*d(axis-1), d(axis)*...*dn] (axis default 1) and work per row; opset 13 uses the one
// axis (default -1).
at::Tensor hardmax(const OpContext& ctx, const at::Tensor& x) {
  const int64_t rank = x.dim();
  const bool per_axis = ctx.opset() >= 13;
  const int64_t axis = ops::normalizeAxis(ctx, ctx.attrInt("axis", per_axis ? -1 : 1), rank);
  if (x.numel() == 0) return x.clone();
  at::Tensor view = x;
  int64_t dim = axis;
  if (!per_axis) {
    int64_t rows = 1;
    for (int64_t d = 0; d < axis; ++d)
      rows *= x.size(d);
    view = x.reshape({rows, x.numel() / rows});
    dim = 1;
  }
  // at::argmax returns the first of equal maxima, as numpy's argmax.
  const at::Tensor first_max = at::argmax(view, dim, /*keepdim=*/true);
  return at::zeros_like(view).scatter_(dim, first_max, 1.0).reshape(x.sizes());
}

// ThresholdedRelu is >= 0 when its threshold is.
OutputSign thresholdedReluSign(const Node& node) {
  const Attribute* alpha = node.attributes.find("alpha");
  return alpha == nullptr || alpha->f >= 0 ? OutputSign::NonNegative : OutputSign::Unknown;
}

}  // namespace

void registerMoreActivationOps(OpRegistry& r) {
  r.add(activation("Selu", 1, selu));
  r.add(activation("Celu", 12, celu));
  r.add(ops::withSign(
      activation("Softplus", 1,
                 [](const OpContext&, const at::Tensor& x) { return stableSoftplus(x); }),
      OutputSign::NonNegative));
  r.add(activation("Softsign", 1,
                   [](const OpContext&, const at::Tensor& x) { return x / (1 + at::abs(x)); }));
  OpInfo thresholded = activation("ThresholdedRelu", 10, thresholdedRelu);
  thresholded.output_sign_of = thresholdedReluSign;
  r.add(std::move(thresholded));
  r.add(op("Shrink", 9, kLatestOpset, shrink));
  // One-hot: 0 or 1.
  r.add(ops::withSign(activation("Hardmax", 1, hardmax), OutputSign::NonNegative));
}

}  // namespace qforge
