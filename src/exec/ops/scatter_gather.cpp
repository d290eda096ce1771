// Element-wise gathers and scatters: GatherElements, GatherND, Scatter, ScatterElements,
// ScatterND, plus OneHot and ReverseSequence, which index the same way. Indices may be negative
// (counted from the end) wherever ONNX allows it; an index out of range fails naming the node.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::normalizeAxis;
using ops::op;
using ops::shapeString;

int64_t product(at::IntArrayRef dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

const at::Tensor& integerInput(const OpContext& ctx, size_t i, const char* name) {
  const at::Tensor& t = ctx.input(i);
  if (at::isFloatingType(t.scalar_type()) || t.scalar_type() == at::kBool) {
    ctx.fail(std::string(name) + " must be an integer tensor, got " +
             c10::toString(t.scalar_type()));
  }
  return t;
}

// `index` as int64 with negative entries counted from the end of an axis of size `dim` (a
// tensor broadcasting against `index`, or a scalar); fails when one lies outside [-dim, dim).
at::Tensor wrapIndices(const OpContext& ctx, const at::Tensor& index, const at::Tensor& dim,
                       const std::string& what) {
  at::Tensor i = index.to(at::kLong);
  if (i.numel() == 0) return i;
  const at::Tensor bad = (i < -dim) | (i >= dim);
  if (bad.any().item<bool>()) {
    const int64_t first = at::nonzero(bad.reshape({-1}))[0][0].item<int64_t>();
    ctx.fail("index " + std::to_string(i.reshape({-1})[first].item<int64_t>()) +
             " is out of range for " + what);
  }
  return at::where(i < 0, i + dim, i);
}

at::Tensor wrapIndices(const OpContext& ctx, const at::Tensor& index, int64_t dim, int64_t axis) {
  return wrapIndices(ctx, index, at::scalar_tensor(dim, at::kLong),
                     "axis " + std::to_string(axis) + " of size " + std::to_string(dim));
}

// GatherElements, and the index checks it shares with ScatterElements: same rank, and no index
// dimension larger than the data's off the axis.
at::Tensor elementIndices(const OpContext& ctx, const at::Tensor& data, const at::Tensor& indices,
                          int64_t axis) {
  if (indices.dim() != data.dim()) {
    ctx.fail("indices of shape " + shapeString(indices.sizes()) + " must have the rank of data " +
             shapeString(data.sizes()));
  }
  for (int64_t d = 0; d < data.dim(); ++d) {
    if (d != axis && indices.size(d) > data.size(d)) {
      ctx.fail("indices of shape " + shapeString(indices.sizes()) + " exceed data " +
               shapeString(data.sizes()) + " on axis " + std::to_string(d));
    }
  }
  return wrapIndices(ctx, indices, data.size(axis), axis);
}

std::vector<at::Tensor> gatherElements(const OpContext& ctx) {
  const at::Tensor& data = ctx.input(0);
  if (data.dim() == 0) ctx.fail("data must have rank >= 1");
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), data.dim());
  const at::Tensor index = elementIndices(ctx, data, integerInput(ctx, 1, "indices"), axis);
  return {at::gather(data, axis, index)};
}

// The rows of `data` viewed as [prod(dims[:k]), rest] that the last axis of `indices` (k
// coordinates each, negative ones from the end) points at, as a flat int64 index.
at::Tensor rowIndices(const OpContext& ctx, at::IntArrayRef dims, const at::Tensor& indices) {
  const int64_t k = indices.size(-1);
  std::vector<int64_t> strides(k, 1);
  for (int64_t j = k - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * dims[j + 1];
  const at::Tensor sizes = at::tensor(dims.slice(0, k).vec(), at::kLong);
  const at::Tensor coords =
      wrapIndices(ctx, indices, sizes, "data dimensions " + shapeString(dims.slice(0, k)));
  return (coords * at::tensor(strides, at::kLong)).sum(-1);
}

// GatherND: batch_dims from opset 12.
std::vector<at::Tensor> gatherNd(const OpContext& ctx) {
  const at::Tensor& data = ctx.input(0);
  const at::Tensor& indices = integerInput(ctx, 1, "indices");
  const int64_t b = ctx.opset() >= 12 ? ctx.attrInt("batch_dims", 0) : 0;
  const int64_t r = data.dim(), q = indices.dim();
  if (r < 1 || q < 1) ctx.fail("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) {
    ctx.fail("batch_dims " + std::to_string(b) + " must be in [0, " +
             std::to_string(std::min(r, q)) + ")");
  }
  if (data.sizes().slice(0, b) != indices.sizes().slice(0, b)) {
    ctx.fail("the first " + std::to_string(b) + " dimensions of data " + shapeString(data.sizes()) +
             " and indices " + shapeString(indices.sizes()) + " differ");
  }
  const int64_t k = indices.size(-1);
  if (k < 1 || k > r - b) {
    ctx.fail("indices' last dimension " + std::to_string(k) + " must be in [1, " +
             std::to_string(r - b) + "]");
  }
  // Batches flatten into one axis, the k indexed dimensions into another, the rest into a third.
  const int64_t batches = product(data.sizes().slice(0, b));
  const int64_t picks = product(indices.sizes().slice(b, q - b - 1));
  const at::IntArrayRef rest = data.sizes().slice(b + k);
  const at::Tensor rows =
      rowIndices(ctx, data.sizes().slice(b), indices.reshape({batches, picks, k}));
  const at::Tensor table =
      data.reshape({batches, product(data.sizes().slice(b, k)), product(rest)});
  const at::Tensor batch = at::arange(batches, at::kLong).unsqueeze(1);
  std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end() - 1);
  shape.insert(shape.end(), rest.begin(), rest.end());
  return {table.index({batch, rows}).reshape(shape)};
}

// The reduction of ScatterElements/ScatterND (opset 16: add, mul; 18: max, min) as ATen's
// scatter_reduce names it, or "" for plain assignment.
std::string scatterReduction(const OpContext& ctx) {
  const std::string reduction = ctx.opset() >= 16 ? ctx.attrString("reduction", "none") : "none";
  if (reduction == "none") return "";
  if (reduction == "add") return "sum";
  if (reduction == "mul") return "prod";
  if (ctx.opset() >= 18 && reduction == "max") return "amax";
  if (ctx.opset() >= 18 && reduction == "min") return "amin";
  ctx.fail("unknown reduction '" + reduction + "' (expected none, add, mul" +
           (ctx.opset() >= 18 ? ", max or min)" : ")"));
}

// ScatterElements (opset 11+) and the deprecated Scatter (9-10), which is ScatterElements
// without reductions.
std::vector<at::Tensor> scatterElements(const OpContext& ctx) {
  const at::Tensor& data = ctx.input(0);
  const at::Tensor& indices = integerInput(ctx, 1, "indices");
  const at::Tensor& updates = ctx.input(2);
  if (data.dim() == 0) ctx.fail("data must have rank >= 1");
  if (updates.sizes() != indices.sizes()) {
    ctx.fail("updates of shape " + shapeString(updates.sizes()) + " must match indices " +
             shapeString(indices.sizes()));
  }
  if (updates.scalar_type() != data.scalar_type()) {
    ctx.fail(std::string("updates are ") + c10::toString(updates.scalar_type()) + ", data " +
             c10::toString(data.scalar_type()));
  }
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), data.dim());
  const at::Tensor index = elementIndices(ctx, data, indices, axis);
  const std::string reduce = scatterReduction(ctx);
  if (reduce.empty()) return {at::scatter(data, axis, index, updates)};
  // scatter_add is scatter_reduce's "sum" without its beta-API warning.
  if (reduce == "sum") return {at::scatter_add(data, axis, index, updates)};
  return {at::scatter_reduce(data, axis, index, updates, reduce, /*include_self=*/true)};
}

// ScatterND: data viewed as rows [prod(dims[:k]), rest], one update row per index row.
std::vector<at::Tensor> scatterNd(const OpContext& ctx) {
  const at::Tensor& data = ctx.input(0);
  const at::Tensor& indices = integerInput(ctx, 1, "indices");
  const at::Tensor& updates = ctx.input(2);
  const int64_t r = data.dim(), q = indices.dim();
  if (r < 1 || q < 1) ctx.fail("data and indices must have rank >= 1");
  const int64_t k = indices.size(-1);
  if (k < 1 || k > r) ctx.fail("indices' last dimension " + std::to_string(k) + " exceeds rank");
  std::vector<int64_t> expected(indices.sizes().begin(), indices.sizes().end() - 1);
  expected.insert(expected.end(), data.sizes().begin() + k, data.sizes().end());
  if (updates.sizes() != at::IntArrayRef(expected)) {
    ctx.fail("updates of shape " + shapeString(updates.sizes()) + " must have shape " +
             shapeString(expected));
  }
  if (updates.scalar_type() != data.scalar_type()) {
    ctx.fail(std::string("updates are ") + c10::toString(updates.scalar_type()) + ", data " +
             c10::toString(data.scalar_type()));
  }
  const int64_t row_size = product(data.sizes().slice(k));
  const int64_t count = product(indices.sizes().slice(0, q - 1));
  const at::Tensor rows = rowIndices(ctx, data.sizes(), indices.reshape({count, k}));
  at::Tensor table = data.reshape({product(data.sizes().slice(0, k)), row_size}).clone();
  const at::Tensor rows_of_updates = updates.reshape({count, row_size});
  const std::string reduce = scatterReduction(ctx);
  if (reduce.empty()) {
    table.index_put_({rows}, rows_of_updates);
  } else if (reduce == "sum") {
    table.index_add_(0, rows, rows_of_updates);
  } else {
    table.scatter_reduce_(0, rows.unsqueeze(1).expand({count, row_size}), rows_of_updates, reduce,
                          /*include_self=*/true);
  }
  return {table.reshape(data.sizes())};
}

// OneHot: negative indices count from the end from opset 11. Non-integer indices and depth are
// truncated to int64, as ONNX says.
std::vector<at::Tensor> oneHot(const OpContext& ctx) {
  const at::Tensor& indices = ctx.input(0);
  const at::Tensor& depth_input = ctx.input(1);
  const at::Tensor& values = ctx.input(2);
  if (depth_input.numel() != 1) {
    ctx.fail("depth must hold one value, got shape " + shapeString(depth_input.sizes()));
  }
  if (values.numel() != 2) {
    ctx.fail("values must hold [off_value, on_value], got shape " + shapeString(values.sizes()));
  }
  const auto depth = static_cast<int64_t>(depth_input.to(at::kDouble).item<double>());
  if (depth < 1) ctx.fail("depth " + std::to_string(depth) + " must be at least 1");
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), indices.dim() + 1);
  at::Tensor index = indices.to(at::kLong);
  if (ctx.opset() >= 11) index = at::where(index < 0, index + depth, index);
  // Indices outside [0, depth) match no class and give all off_value.
  const at::Tensor hot = index.unsqueeze(-1) == at::arange(depth, at::kLong);
  const at::Tensor off_on = values.reshape({2});
  return {at::where(hot.movedim(-1, axis), off_on[1], off_on[0])};
}

std::vector<at::Tensor> reverseSequence(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& lengths = integerInput(ctx, 1, "sequence_lens");
  if (x.dim() < 2) ctx.fail("input must have rank >= 2, got " + shapeString(x.sizes()));
  const int64_t batch_axis = ctx.attrInt("batch_axis", 1), time_axis = ctx.attrInt("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) ||
      batch_axis == time_axis) {
    ctx.fail("batch_axis and time_axis must be 0 and 1 in some order, got " +
             std::to_string(batch_axis) + " and " + std::to_string(time_axis));
  }
  const int64_t batch = x.size(batch_axis), steps = x.size(time_axis);
  if (lengths.dim() != 1 || lengths.size(0) != batch) {
    ctx.fail("sequence_lens of shape " + shapeString(lengths.sizes()) + " must list " +
             std::to_string(batch) + " lengths");
  }
  const at::Tensor length = lengths.to(at::kLong).unsqueeze(1);  // [batch, 1]
  if (((length < 0) | (length > steps)).any().item<bool>()) {
    ctx.fail("sequence_lens must lie in [0, " + std::to_string(steps) + "]");
  }
  // Source step of each (batch, step): reversed within the sequence, unchanged after it.
  const at::Tensor t = at::arange(steps, at::kLong).unsqueeze(0);  // [1, steps]
  at::Tensor source = at::where(t < length, length - 1 - t, t);    // [batch, steps]
  if (batch_axis == 1) source = source.t();
  std::vector<int64_t> shape{source.size(0), source.size(1)};
  shape.resize(x.dim(), 1);
  return {at::gather(x, time_axis, source.reshape(shape).expand(x.sizes()))};
}

OpInfo gathersData(OpInfo info) {
  return ops::withSign(ops::movesData(std::move(info)), OutputSign::OfDataInput);
}

}  // namespace

void registerScatterGatherOps(OpRegistry& r) {
  r.add(gathersData(op("GatherElements", 11, kLatestOpset, gatherElements)));
  r.add(gathersData(op("GatherND", 11, kLatestOpset, gatherNd)));
  // Scatter's values come from data or updates. ScatterElements and ScatterND may add or multiply
  // (opset 16+), and facts are per op, so they do not count as data movement.
  r.add(ops::movesData(op("Scatter", 9, 10, scatterElements)));
  r.add(op("ScatterElements", 11, kLatestOpset, scatterElements));
  r.add(op("ScatterND", 11, kLatestOpset, scatterNd));
  // OneHot's output is made of its constant on/off values, placed by integer indices.
  r.add(ops::shapeComputation(op("OneHot", 9, kLatestOpset, oneHot)));
  r.add(ops::layoutOnly(op("ReverseSequence", 10, kLatestOpset, reverseSequence)));
}

}  // namespace qforge
