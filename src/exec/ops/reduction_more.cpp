// More reductions: ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceProd and
// ReduceSumSquare (axes an attribute up to opset 17, an input from 18), and the two
// normalizations built on windowed or axis-wise sums: LRN and MeanVarianceNormalization.
#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/math_common.h"
#include "exec/ops/reduce_axes.h"

namespace qforge {

namespace {

using ops::floatInput;
using ops::kLatestOpset;
using ops::op;

// Reduces x over dims (normalized, distinct) keeping or dropping them.
using Reducer = std::function<at::Tensor(const at::Tensor& x, at::IntArrayRef dims, bool keepdims)>;

at::Tensor sumSquares(const at::Tensor& x, at::IntArrayRef dims, bool keepdims) {
  // Keep the input type: ATen would widen integer sums to int64.
  return at::sum(x * x, dims, keepdims, x.scalar_type());
}

at::Tensor l1(const at::Tensor& x, at::IntArrayRef dims, bool keepdims) {
  return at::sum(at::abs(x), dims, keepdims, x.scalar_type());
}

// Integers: the square root of the integer sum of squares, truncated back (ONNX's reference).
at::Tensor l2(const at::Tensor& x, at::IntArrayRef dims, bool keepdims) {
  if (at::isFloatingType(x.scalar_type())) return at::sqrt(sumSquares(x, dims, keepdims));
  return at::sqrt(sumSquares(x, dims, keepdims).to(at::kDouble)).to(x.scalar_type());
}

at::Tensor logSum(const at::Tensor& x, at::IntArrayRef dims, bool keepdims) {
  if (at::isFloatingType(x.scalar_type())) return at::log(at::sum(x, dims, keepdims));
  return at::log(at::sum(x.to(at::kDouble), dims, keepdims)).to(x.scalar_type());
}

at::Tensor logSumExp(const at::Tensor& x, at::IntArrayRef dims, bool keepdims) {
  // at::logsumexp subtracts the maximum first: no overflow for large inputs.
  if (at::isFloatingType(x.scalar_type())) return at::logsumexp(x, dims, keepdims);
  return at::logsumexp(x.to(at::kDouble), dims, keepdims).to(x.scalar_type());
}

// at::prod reduces one dim at a time: the highest first, so the others keep their index.
at::Tensor prod(const at::Tensor& x, at::IntArrayRef dims, bool keepdims) {
  if (x.dim() == 0) return x.clone();
  std::vector<int64_t> order(dims.begin(), dims.end());
  std::sort(order.rbegin(), order.rend());
  at::Tensor y = x;
  for (int64_t d : order)
    y = at::prod(y, d, keepdims, x.scalar_type());
  return y;
}

// `axes_from_input`: the axes come from optional input 1 (opset 18+), else from the attribute.
Lowering reduction(const Reducer& reduce, bool axes_from_input) {
  return [reduce, axes_from_input](const OpContext& ctx) -> std::vector<at::Tensor> {
    const at::Tensor& x = ctx.input(0);
    if (x.scalar_type() == at::kBool) ctx.fail("input must be numeric, got Bool");
    const bool keepdims = ctx.attrInt("keepdims", 1) != 0;
    const std::optional<std::vector<int64_t>> dims = ops::reduceDims(ctx, axes_from_input);
    if (!dims) return {x};
    return {
        ops::viaFloat32IfHalf(x, [&](const at::Tensor& t) { return reduce(t, *dims, keepdims); })};
  };
}

// The attribute form for opsets 1-17 and the input form from 18.
void addReduction(OpRegistry& r, const std::string& name, const Reducer& reduce, OutputSign sign) {
  r.add(ops::withSign(op(name, 1, 17, reduction(reduce, false)), sign));
  r.add(ops::withSign(op(name, 18, kLatestOpset, reduction(reduce, true)), sign));
}

// y = x / (bias + alpha / size * sum of x^2 over the `size` channels around c)^beta, the window
// being [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] cut to the existing channels.
std::vector<at::Tensor> lrn(const OpContext& ctx) {
  const at::Tensor& x = floatInput(ctx, 0);
  if (x.dim() < 3) ctx.fail("input must be [N, C, D1, ...], got shape " + c10::str(x.sizes()));
  const int64_t size = ctx.attrInt("size");
  if (size < 1) ctx.fail("attribute 'size' must be >= 1, got " + std::to_string(size));
  const double alpha = ctx.attrFloat("alpha", 1e-4), beta = ctx.attrFloat("beta", 0.75);
  const double bias = ctx.attrFloat("bias", 1.0);
  return {ops::viaFloat32IfHalf(x, [&](const at::Tensor& t) {
    const int64_t channels = t.size(1), before = (size - 1) / 2;
    const at::Tensor squares = t * t;
    std::vector<int64_t> pad_shape = t.sizes().vec();
    pad_shape[1] = before;
    const at::Tensor front = at::zeros(pad_shape, t.options());
    pad_shape[1] = size - 1 - before;
    const at::Tensor padded = at::cat({front, squares, at::zeros(pad_shape, t.options())}, 1);
    // One shifted slice per window position: `size` vectorised adds.
    at::Tensor window_sum = at::zeros_like(t);
    for (int64_t i = 0; i < size; ++i)
      window_sum += padded.narrow(1, i, channels);
    return t / at::pow(bias + (alpha / static_cast<double>(size)) * window_sum, beta);
  })};
}

// (x - mean) / (std + 1e-9) over `axes` (default [0, 2, 3]: per channel of an NCHW tensor), the
// variance being the mean of squared deviations as in ONNX's function body.
std::vector<at::Tensor> meanVarianceNormalization(const OpContext& ctx) {
  const at::Tensor& x = floatInput(ctx, 0);
  std::vector<int64_t> dims;
  for (int64_t axis : ctx.attrInts("axes", {0, 2, 3})) {
    const int64_t d = ops::normalizeAxis(ctx, axis, x.dim());
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      ctx.fail("axis " + std::to_string(axis) + " is listed twice in axes");
    }
    dims.push_back(d);
  }
  return {ops::viaFloat32IfHalf(x, [&](const at::Tensor& t) {
    const at::Tensor centered = t - at::mean(t, dims, /*keepdim=*/true);
    const at::Tensor variance = at::mean(centered * centered, dims, /*keepdim=*/true);
    return centered / (at::sqrt(variance) + 1e-9);
  })};
}

}  // namespace

void registerMoreReductionOps(OpRegistry& r) {
  // Norms and sums of squares are >= 0; a product of values >= 0 is >= 0.
  addReduction(r, "ReduceL1", l1, OutputSign::NonNegative);
  addReduction(r, "ReduceL2", l2, OutputSign::NonNegative);
  addReduction(r, "ReduceSumSquare", sumSquares, OutputSign::NonNegative);
  addReduction(r, "ReduceProd", prod, OutputSign::OfDataInput);
  addReduction(r, "ReduceLogSum", logSum, OutputSign::Unknown);
  addReduction(r, "ReduceLogSumExp", logSumExp, OutputSign::Unknown);
  // LRN divides x by a positive power: x's sign.
  r.add(ops::withSign(op("LRN", 1, kLatestOpset, lrn), OutputSign::OfDataInput));
  r.add(op("MeanVarianceNormalization", 9, kLatestOpset, meanVarianceNormalization));
}

}  // namespace qforge
