// Selection ops: ArgMax, ArgMin, TopK, NonZero, Unique and Compress. They pick elements or their
// positions; index outputs are int64 as ONNX types them.
#include <string>
#include <vector>

#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::normalizeAxis;
using ops::op;

// ATen's CPU sort and unique kernels skip the 16-bit floats; float holds them exactly and keeps
// their order, so those run on a float copy.
at::Tensor orderable(const at::Tensor& x) {
  const bool half = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  return half ? x.to(at::kFloat) : x;
}

// ArgMax/ArgMin: axis and keepdims since opset 1, negative axes from 11, select_last_index from 12.
std::vector<at::Tensor> argExtreme(const OpContext& ctx, bool largest) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() == 0) ctx.fail("input must have rank >= 1");
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), x.dim());
  const int64_t dim = x.size(axis);
  if (dim == 0) ctx.fail("axis " + std::to_string(axis) + " is empty: no element to pick");
  const bool keepdims = ctx.attrInt("keepdims", 1) != 0;
  const bool last = ctx.opset() >= 12 && ctx.attrInt("select_last_index", 0) != 0;
  // ATen returns the first extreme; the last one is the first of the flipped axis.
  const at::Tensor values = last ? at::flip(orderable(x), {axis}) : orderable(x);
  at::Tensor index =
      largest ? at::argmax(values, axis, keepdims) : at::argmin(values, axis, keepdims);
  if (last) index = (dim - 1) - index;
  return {index};
}

// TopK: k was an attribute before opset 10, then input 1; largest and sorted came with 11.
std::vector<at::Tensor> topK(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() == 0) ctx.fail("input must have rank >= 1");
  int64_t k = 0;
  if (ctx.opset() < 10) {
    k = ctx.attrInt("k");
  } else {
    const at::Tensor& k_input = ctx.input(1);
    if (k_input.numel() != 1) ctx.fail("K must hold one value, got " + c10::str(k_input.sizes()));
    k = k_input.to(at::kLong).item<int64_t>();
  }
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), x.dim());
  if (k < 0 || k > x.size(axis)) {
    ctx.fail("k " + std::to_string(k) + " is outside [0, " + std::to_string(x.size(axis)) +
             "] for axis " + std::to_string(axis));
  }
  const bool largest = ctx.opset() < 11 || ctx.attrInt("largest", 1) != 0;
  // A stable sort keeps equal values in index order, as ONNX asks; the output is always sorted,
  // which sorted=0 allows.
  const at::Tensor order =
      std::get<1>(at::sort(orderable(x), /*stable=*/true, axis, /*descending=*/largest));
  const at::Tensor indices = order.narrow(axis, 0, k);
  return {at::gather(x, axis, indices), indices};
}

std::vector<at::Tensor> nonZero(const OpContext& ctx) {
  // ATen lists one row per element in row-major order; ONNX wants one row per dimension.
  return {at::nonzero(ctx.input(0)).t().contiguous()};
}

// Unique's first-occurrence indices: for each unique value, the smallest position mapping to it.
at::Tensor firstOccurrences(const at::Tensor& inverse, int64_t unique_count) {
  const int64_t n = inverse.numel();
  const at::Tensor positions = at::arange(n, inverse.options());
  return at::full({unique_count}, n, inverse.options())
      .scatter_reduce(0, inverse, positions, "amin", /*include_self=*/true);
}

std::vector<at::Tensor> unique(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor values = orderable(x);
  const bool has_axis = ctx.hasAttr("axis");
  if (has_axis && x.dim() == 0) ctx.fail("axis is given but the input is a scalar");
  const int64_t axis = has_axis ? normalizeAxis(ctx, ctx.attrInt("axis"), x.dim()) : 0;
  at::Tensor y, inverse, counts;
  if (has_axis) {
    std::tie(y, inverse, counts) = at::unique_dim(values, axis, true, true, true);
  } else {
    std::tie(y, inverse, counts) = at::_unique2(values.reshape({-1}), true, true, true);
  }
  inverse = inverse.reshape({-1});
  at::Tensor first = firstOccurrences(inverse, counts.numel());
  if (ctx.attrInt("sorted", 1) == 0) {
    // Unsorted means in order of first occurrence; `rank` renumbers the inverse to match.
    const at::Tensor order = at::argsort(first);
    const at::Tensor rank = at::empty_like(order).scatter_(0, order, at::arange(order.numel()));
    y = y.index_select(axis, order);
    counts = counts.index_select(0, order);
    first = first.index_select(0, order);
    inverse = rank.index_select(0, inverse);
  }
  return {y.to(x.scalar_type()), first, inverse, counts};
}

// Compress: axis since opset 9, negative axes from 11; without an axis, the flattened input.
std::vector<at::Tensor> compress(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& condition = ctx.input(1);
  if (condition.dim() != 1) {
    ctx.fail("condition must be 1-D, got shape " + c10::str(condition.sizes()));
  }
  const bool has_axis = ctx.hasAttr("axis");
  const at::Tensor data = has_axis ? x : x.reshape({-1});
  const int64_t axis = has_axis ? normalizeAxis(ctx, ctx.attrInt("axis"), x.dim()) : 0;
  const int64_t dim = data.size(axis);
  // A shorter condition drops the slices past its end; a longer one may only add false entries.
  at::Tensor keep = condition.to(at::kBool);
  if (keep.numel() > dim) {
    if (keep.narrow(0, dim, keep.numel() - dim).any().item<bool>()) {
      ctx.fail("condition selects entry " + std::to_string(dim) + " or later of an axis of size " +
               std::to_string(dim));
    }
    keep = keep.narrow(0, 0, dim);
  }
  return {data.index_select(axis, at::nonzero(keep).reshape({-1}))};
}

// Only the data output is an activation; the index outputs of TopK and Unique are int64.
OpInfo selectsValues(OpInfo info) {
  return ops::withSign(ops::movesData(std::move(info)), OutputSign::OfDataInput);
}

}  // namespace

void registerSelectionOps(OpRegistry& r) {
  r.add(ops::shapeComputation(
      op("ArgMax", 1, kLatestOpset, [](const OpContext& c) { return argExtreme(c, true); })));
  r.add(ops::shapeComputation(
      op("ArgMin", 1, kLatestOpset, [](const OpContext& c) { return argExtreme(c, false); })));
  r.add(ops::shapeComputation(op("NonZero", 9, kLatestOpset, nonZero)));
  r.add(selectsValues(op("TopK", 1, kLatestOpset, topK)));
  r.add(selectsValues(op("Unique", 11, kLatestOpset, unique)));
  r.add(selectsValues(op("Compress", 9, kLatestOpset, compress)));
}

}  // namespace qforge
