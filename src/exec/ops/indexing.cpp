// Indexing ops: Slice and Gather. Both only select input elements (moves_data_only) and work on
// any dtype, including the int64 tensors of shape computations.
#include <algorithm>
#include <set>

#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::normalizeAxis;
using ops::op;
using ops::toInt64Vector;

std::string listText(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i ? "," : "") + std::to_string(values[i]);
  return s + "]";
}

// Slices one axis the ONNX way: negative starts/ends count from the end, then are clamped to the
// axis ([0, dim] going forward; starts to [0, dim - 1] and ends to [-1, dim - 1] going backward),
// so INT_MAX / INT_MIN mean "to the end" in either direction.
at::Tensor sliceAxis(const at::Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t dim = x.size(axis);
  if (dim == 0) return x;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return x.slice(axis, start, std::max(start, end), step);
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  if (start <= end) return x.narrow(axis, 0, 0);
  // ATen slices forward only: walk the flipped axis, where index i becomes dim - 1 - i.
  const int64_t flipped_start = dim - 1 - start, flipped_end = dim - 1 - end;
  return at::flip(x, {axis}).slice(axis, flipped_start, flipped_end, -step);
}

std::vector<at::Tensor> slice(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t rank = x.dim();
  // Slice-1 took starts/ends/axes as attributes; Slice-10 made them inputs and added steps.
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false, has_steps = false;
  if (ctx.opset() < 10) {
    starts = ctx.attrInts("starts", {});
    ends = ctx.attrInts("ends", {});
    if (!ctx.hasAttr("starts") || !ctx.hasAttr("ends")) ctx.fail("starts and ends are required");
    has_axes = ctx.hasAttr("axes");
    if (has_axes) axes = ctx.attrInts("axes", {});
  } else {
    starts = toInt64Vector(ctx.input(1));
    ends = toInt64Vector(ctx.input(2));
    has_axes = ctx.hasInput(3);
    if (has_axes) axes = toInt64Vector(ctx.input(3));
    has_steps = ctx.hasInput(4);
    if (has_steps) steps = toInt64Vector(ctx.input(4));
  }
  const size_t n = starts.size();
  if (ends.size() != n) {
    ctx.fail("starts " + listText(starts) + " and ends " + listText(ends) + " differ in length");
  }
  if (!has_axes) {
    axes.resize(n);
    for (size_t i = 0; i < n; ++i)
      axes[i] = static_cast<int64_t>(i);
  }
  if (!has_steps) steps.assign(n, 1);
  if (axes.size() != n || steps.size() != n) {
    ctx.fail("starts, ends, axes and steps must have the same length");
  }
  std::set<int64_t> seen;
  at::Tensor y = x;
  for (size_t i = 0; i < n; ++i) {
    const int64_t axis = normalizeAxis(ctx, axes[i], rank);
    if (!seen.insert(axis).second) ctx.fail("axis " + std::to_string(axes[i]) + " is sliced twice");
    if (steps[i] == 0) ctx.fail("step 0 on axis " + std::to_string(axes[i]));
    y = sliceAxis(y, axis, starts[i], ends[i], steps[i]);
  }
  return {y};
}

std::vector<at::Tensor> gather(const OpContext& ctx) {
  const at::Tensor& data = ctx.input(0);
  const at::Tensor& indices = ctx.input(1);
  if (data.dim() == 0) ctx.fail("data must have rank >= 1");
  if (at::isFloatingType(indices.scalar_type()) || indices.scalar_type() == at::kBool) {
    ctx.fail("indices must be an integer tensor");
  }
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), data.dim());
  const int64_t dim = data.size(axis);
  if (indices.dim() == 0) {
    // One index (attention's q, k, v = qkv[0], qkv[1], qkv[2]): a view of that slice, where the
    // general path's range check, index_select and reshape cost several microseconds each.
    int64_t i = indices.item<int64_t>();
    if (i < -dim || i >= dim) {
      ctx.fail("index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) +
               " of size " + std::to_string(dim));
    }
    return {data.select(axis, i < 0 ? i + dim : i)};
  }
  at::Tensor index = indices.to(at::kLong);
  if (index.numel() > 0) {
    const int64_t lowest = index.min().item<int64_t>(), highest = index.max().item<int64_t>();
    if (lowest < -dim || highest >= dim) {
      ctx.fail("index " + std::to_string(lowest < -dim ? lowest : highest) +
               " is out of range for axis " + std::to_string(axis) + " of size " +
               std::to_string(dim));
    }
    index = at::where(index < 0, index + dim, index);
  }
  // Output shape: data.shape[:axis] + indices.shape + data.shape[axis+1:].
  std::vector<int64_t> shape(data.sizes().begin(), data.sizes().begin() + axis);
  shape.insert(shape.end(), indices.sizes().begin(), indices.sizes().end());
  shape.insert(shape.end(), data.sizes().begin() + axis + 1, data.sizes().end());
  return {at::index_select(data, axis, index.reshape({-1})).reshape(shape)};
}

}  // namespace

// Called from registerShapeOps (op_info.h lists one register function per family).
void registerIndexingOps(OpRegistry& r) {
  r.add(ops::movesData(op("Slice", 1, kLatestOpset, slice)));
  r.add(ops::movesData(op("Gather", 1, kLatestOpset, gather)));
}

}  // namespace qforge
