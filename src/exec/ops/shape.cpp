// Shape and data-movement ops: Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Concat, Split,
// Shape, Constant, ConstantOfShape, Identity, Dropout, Expand, Tile, Range. Slice and Gather live
// in indexing.cpp. Shapes are always read from the tensors at run time, never from the declared
// value types, so a batch size different from the declared one just works.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "exec/ops/common.h"
#include "exec/ops/reshape_layout.h"

namespace qforge {

void registerIndexingOps(OpRegistry& registry);

namespace {

using ops::dimsText;
using ops::kLatestOpset;
using ops::normalizeAxis;
using ops::op;
using ops::toInt64Vector;

at::Tensor int64Tensor(const std::vector<int64_t>& values) {
  return at::tensor(at::IntArrayRef(values), at::kLong);
}

int64_t product(at::IntArrayRef dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

// Normalizes a list of axes against `rank`, rejecting duplicates.
std::vector<int64_t> normalizeAxes(const OpContext& ctx, const std::vector<int64_t>& axes,
                                   int64_t rank) {
  std::vector<int64_t> result;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    const int64_t n = normalizeAxis(ctx, a, rank);
    if (!seen.insert(n).second) ctx.fail("axis " + std::to_string(a) + " is listed twice");
    result.push_back(n);
  }
  return result;
}

std::vector<at::Tensor> flatten(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t rank = x.dim();
  int64_t axis = ctx.attrInt("axis", 1);
  // Unlike most axes, Flatten's may equal the rank (everything goes into the outer dimension).
  if (axis < -rank || axis > rank) {
    ctx.fail("axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
             std::to_string(rank));
  }
  if (axis < 0) axis += rank;
  const int64_t outer = product(x.sizes().slice(0, axis));
  const int64_t inner = product(x.sizes().slice(axis));
  return {x.reshape({outer, inner})};
}

// Resolves ONNX Reshape's target shape (0 copies the input dim unless allowzero, -1 is inferred).
std::vector<int64_t> reshapeTarget(const OpContext& ctx, at::IntArrayRef in,
                                   std::vector<int64_t> shape, bool allow_zero) {
  int64_t infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      if (i >= in.size()) {
        ctx.fail("shape " + dimsText(shape) + " copies dimension " + std::to_string(i) +
                 " (a 0) but the input " + dimsText(in) + " has only " + std::to_string(in.size()) +
                 " dimensions");
      }
      shape[i] = in[i];
    } else if (shape[i] == -1) {
      if (infer_at >= 0) ctx.fail("shape " + dimsText(shape) + " has more than one -1");
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < -1) {
      ctx.fail("shape " + dimsText(shape) + " has a negative dimension other than -1");
    }
    if (shape[i] == 0) has_zero = true;
  }
  const int64_t numel = product(in);
  if (infer_at >= 0) {
    if (allow_zero && has_zero) {
      ctx.fail("shape " + dimsText(shape) + " has both a 0 and a -1, which allowzero=1 forbids");
    }
    int64_t known = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (static_cast<int64_t>(i) != infer_at) known *= shape[i];
    }
    if (known == 0 || numel % known != 0) {
      ctx.fail("cannot reshape a tensor of shape " + dimsText(in) + " to " + dimsText(shape) +
               ": the -1 cannot be inferred");
    }
    shape[infer_at] = numel / known;
  }
  if (product(shape) != numel) {
    ctx.fail("cannot reshape a tensor of shape " + dimsText(in) + " (" + std::to_string(numel) +
             " elements) to " + dimsText(shape));
  }
  return shape;
}

std::vector<at::Tensor> reshape(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  // Reshape-1 took the shape as an attribute; from opset 5 it is an input.
  std::vector<int64_t> shape =
      ctx.opset() < 5 ? ctx.attrInts("shape", {}) : toInt64Vector(ctx.input(1));
  const bool allow_zero = ctx.opset() >= 14 && ctx.attrInt("allowzero", 0) != 0;
  return {
      ops::reshapeKeepingLayout(x, reshapeTarget(ctx, x.sizes(), std::move(shape), allow_zero))};
}

std::vector<at::Tensor> transpose(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t rank = x.dim();
  std::vector<int64_t> reversed(rank);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const std::vector<int64_t> perm = ctx.attrInts("perm", reversed);
  if (static_cast<int64_t>(perm.size()) != rank) {
    ctx.fail("perm " + dimsText(perm) + " has " + std::to_string(perm.size()) +
             " entries but the input has rank " + std::to_string(rank));
  }
  return {x.permute(normalizeAxes(ctx, perm, rank))};
}

std::vector<at::Tensor> squeeze(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t rank = x.dim();
  // Axes are an attribute before opset 13 and an optional input from 13.
  std::optional<std::vector<int64_t>> axes;
  if (ctx.opset() < 13) {
    if (ctx.hasAttr("axes")) axes = ctx.attrInts("axes", {});
  } else if (ctx.hasInput(1)) {
    axes = toInt64Vector(ctx.input(1));
  }
  std::vector<bool> drop(rank, false);
  // An empty axes list squeezes everything, as an absent one does (what exporters and ORT do).
  if (axes && !axes->empty()) {
    for (int64_t a : normalizeAxes(ctx, *axes, rank)) {
      if (x.size(a) != 1) {
        ctx.fail("cannot squeeze axis " + std::to_string(a) + " of a tensor of shape " +
                 dimsText(x.sizes()) + ": its size is not 1");
      }
      drop[a] = true;
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      drop[d] = x.size(d) == 1;
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!drop[d]) shape.push_back(x.size(d));
  }
  return {x.reshape(shape)};
}

std::vector<at::Tensor> unsqueeze(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const std::vector<int64_t> axes =
      ctx.opset() < 13 ? ctx.attrInts("axes", {}) : toInt64Vector(ctx.input(1));
  if (axes.empty()) ctx.fail("axes is empty");
  // Axes index the output, whose rank includes the new dimensions.
  const int64_t out_rank = x.dim() + static_cast<int64_t>(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : normalizeAxes(ctx, axes, out_rank))
    inserted[a] = true;
  std::vector<int64_t> shape;
  int64_t next_in = 0;
  for (int64_t d = 0; d < out_rank; ++d)
    shape.push_back(inserted[d] ? 1 : x.size(next_in++));
  return {x.reshape(shape)};
}

std::vector<at::Tensor> concat(const OpContext& ctx) {
  if (ctx.inputCount() == 0) ctx.fail("Concat needs at least one input");
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < ctx.inputCount(); ++i)
    parts.push_back(ctx.input(i));
  const int64_t rank = parts[0].dim();
  // Concat-1 defaulted the axis to 1; from opset 4 it is required.
  const int64_t axis =
      normalizeAxis(ctx, ctx.opset() < 4 ? ctx.attrInt("axis", 1) : ctx.attrInt("axis"), rank);
  for (size_t i = 1; i < parts.size(); ++i) {
    bool compatible = parts[i].dim() == rank;
    for (int64_t d = 0; compatible && d < rank; ++d) {
      compatible = d == axis || parts[i].size(d) == parts[0].size(d);
    }
    if (!compatible) {
      ctx.fail("input " + std::to_string(i) + " has shape " + dimsText(parts[i].sizes()) +
               ", which cannot be concatenated with " + dimsText(parts[0].sizes()) + " on axis " +
               std::to_string(axis));
    }
  }
  return {at::cat(parts, axis)};
}

std::vector<at::Tensor> split(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), x.dim());
  const int64_t dim = x.size(axis);
  const int64_t n = static_cast<int64_t>(ctx.outputCount());
  if (n == 0) ctx.fail("Split needs at least one output");
  // The split sizes were an attribute (or Split-1's second input) before opset 13, an input
  // from 13.
  std::optional<std::vector<int64_t>> sizes;
  if (ctx.opset() < 13 && ctx.hasAttr("split")) sizes = ctx.attrInts("split", {});
  if ((ctx.opset() >= 13 || ctx.opset() < 2) && ctx.hasInput(1)) {
    sizes = toInt64Vector(ctx.input(1));
  }
  if (sizes) {
    if (static_cast<int64_t>(sizes->size()) != n) {
      ctx.fail("split " + dimsText(*sizes) + " has " + std::to_string(sizes->size()) +
               " entries but the node has " + std::to_string(n) + " outputs");
    }
    const bool negative =
        std::any_of(sizes->begin(), sizes->end(), [](int64_t s) { return s < 0; });
    if (negative || std::accumulate(sizes->begin(), sizes->end(), int64_t{0}) != dim) {
      ctx.fail("split " + dimsText(*sizes) + " does not add up to the size " + std::to_string(dim) +
               " of axis " + std::to_string(axis));
    }
  } else if (ctx.opset() >= 18 && ctx.hasAttr("num_outputs")) {
    // Split-18: chunks of ceil(dim / num_outputs), the last one smaller.
    const int64_t parts = ctx.attrInt("num_outputs");
    if (parts != n) ctx.fail("num_outputs does not match the number of outputs");
    const int64_t chunk = (dim + parts - 1) / parts;
    sizes.emplace();
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= chunk) {
      sizes->push_back(std::max<int64_t>(0, std::min(chunk, left)));
    }
  } else {
    if (dim % n != 0) {
      ctx.fail("axis " + std::to_string(axis) + " of size " + std::to_string(dim) +
               " cannot be split into " + std::to_string(n) + " equal parts");
    }
    sizes = std::vector<int64_t>(n, dim / n);
  }
  return at::split_with_sizes(x, *sizes, axis);
}

std::vector<at::Tensor> shape(const OpContext& ctx) {
  const std::vector<int64_t> dims = ctx.input(0).sizes().vec();
  const int64_t rank = static_cast<int64_t>(dims.size());
  // Shape-15's start/end are clamped, never rejected.
  auto clampIndex = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
  int64_t start = 0, end = rank;
  if (ctx.opset() >= 15) {
    start = clampIndex(ctx.attrInt("start", 0));
    if (ctx.hasAttr("end")) end = clampIndex(ctx.attrInt("end"));
  }
  if (end < start) end = start;
  return {int64Tensor(std::vector<int64_t>(dims.begin() + start, dims.begin() + end))};
}

std::vector<at::Tensor> constant(const OpContext& ctx) {
  static const char* const kValueAttrs[] = {"value",         "value_float", "value_floats",
                                            "value_int",     "value_ints",  "value_string",
                                            "value_strings", "sparse_value"};
  int count = 0;
  for (const char* name : kValueAttrs)
    count += ctx.hasAttr(name) ? 1 : 0;
  if (count != 1)
    ctx.fail("exactly one value attribute must be set, found " + std::to_string(count));
  if (ctx.hasAttr("value")) return {ctx.attrTensor("value")};
  if (ctx.hasAttr("value_float")) {
    return {at::scalar_tensor(ctx.attrFloat("value_float", 0.0), at::kFloat)};
  }
  if (ctx.hasAttr("value_floats")) {
    const std::vector<double> v = ctx.attrFloats("value_floats", {});
    return {at::tensor(at::ArrayRef<double>(v), at::kDouble).to(at::kFloat)};
  }
  if (ctx.hasAttr("value_int")) return {at::scalar_tensor(ctx.attrInt("value_int"), at::kLong)};
  if (ctx.hasAttr("value_ints")) return {int64Tensor(ctx.attrInts("value_ints", {}))};
  if (ctx.hasAttr("sparse_value")) ctx.fail("sparse constants are not supported");
  ctx.fail("string constants are not supported (qforge holds numeric tensors only)");
}

std::vector<at::Tensor> constantOfShape(const OpContext& ctx) {
  const std::vector<int64_t> dims = toInt64Vector(ctx.input(0));
  if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) {
    ctx.fail("shape " + dimsText(dims) + " has a negative dimension");
  }
  if (!ctx.hasAttr("value")) return {at::zeros(dims, at::kFloat)};
  const at::Tensor value = ctx.attrTensor("value");
  if (value.numel() != 1) ctx.fail("value must hold exactly one element");
  return {at::full(dims, value.reshape({}).item(), value.options())};
}

std::vector<at::Tensor> identity(const OpContext& ctx) {
  return {ctx.input(0)};
}

std::vector<at::Tensor> dropout(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  // Dropout-12 moved ratio into an input and added training_mode. Training with a non-zero ratio
  // draws random numbers that no reference reproduces, so qforge runs inference only. Before
  // opset 12, Dropout-1/6's is_test=0 default is ignored like every runtime does.
  if (ctx.opset() >= 12 && ctx.hasInput(2) && ctx.input(2).item<bool>()) {
    const double ratio = ctx.hasInput(1) ? ctx.input(1).item<double>() : 0.5;
    if (ratio > 0) {
      std::ostringstream text;
      text << ratio;
      ctx.fail("training_mode=true with ratio " + text.str() +
               " is not supported: qforge runs Dropout in inference mode only");
    }
  }
  std::vector<at::Tensor> out{x};
  if (ctx.outputCount() > 1) {
    // The mask was of the input type before opset 10, bool from 10.
    out.push_back(ctx.opset() < 10 ? at::ones_like(x) : at::ones(x.sizes(), at::kBool));
  }
  return out;
}

std::vector<at::Tensor> expand(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const std::vector<int64_t> target = toInt64Vector(ctx.input(1));
  // Bidirectional broadcast: the target may hold 1 where the input is larger, or have lower rank.
  const int64_t rank = std::max<int64_t>(x.dim(), static_cast<int64_t>(target.size()));
  std::vector<int64_t> out(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t xi = i - (rank - x.dim());
    const int64_t ti = i - (rank - static_cast<int64_t>(target.size()));
    const int64_t a = xi >= 0 ? x.size(xi) : 1;
    const int64_t b = ti >= 0 ? target[ti] : 1;
    if (a != b && a != 1 && b != 1) {
      ctx.fail("cannot expand a tensor of shape " + dimsText(x.sizes()) + " to " +
               dimsText(target));
    }
    out[i] = a == 1 ? b : a;
  }
  return {x.expand(out)};
}

std::vector<at::Tensor> tile(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  std::vector<int64_t> repeats;
  if (ctx.opset() < 6) {
    // Tile-1: a scalar count of tiles along one axis.
    repeats.assign(x.dim(), 1);
    const int64_t axis = normalizeAxis(ctx, ctx.input(2).item<int64_t>(), x.dim());
    repeats[axis] = ctx.input(1).item<int64_t>();
  } else {
    repeats = toInt64Vector(ctx.input(1));
  }
  if (static_cast<int64_t>(repeats.size()) != x.dim()) {
    ctx.fail("repeats " + dimsText(repeats) + " must have one entry per input dimension (" +
             std::to_string(x.dim()) + ")");
  }
  if (std::any_of(repeats.begin(), repeats.end(), [](int64_t r) { return r < 0; })) {
    ctx.fail("repeats " + dimsText(repeats) + " has a negative entry");
  }
  return {x.dim() == 0 ? x.clone() : x.repeat(repeats)};
}

std::vector<at::Tensor> range(const OpContext& ctx) {
  const at::Tensor& start = ctx.input(0);
  const at::ScalarType type = start.scalar_type();
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.input(i).numel() != 1) ctx.fail("input " + std::to_string(i) + " must be a scalar");
  }
  int64_t count = 0;
  if (at::isFloatingType(type)) {
    const double s = start.item<double>(), limit = ctx.input(1).item<double>(),
                 delta = ctx.input(2).item<double>();
    if (delta == 0) ctx.fail("delta must not be 0");
    count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - s) / delta)));
    return {(at::arange(count, at::kDouble) * delta + s).to(type)};
  }
  const int64_t s = start.item<int64_t>(), limit = ctx.input(1).item<int64_t>(),
                delta = ctx.input(2).item<int64_t>();
  if (delta == 0) ctx.fail("delta must not be 0");
  const int64_t span = limit - s;
  // Integer ceil((limit - start) / delta) without going through floating point.
  count = span / delta + ((span % delta != 0 && (span > 0) == (delta > 0)) ? 1 : 0);
  count = std::max<int64_t>(0, count);
  return {(at::arange(count, at::kLong) * delta + s).to(type)};
}

// A layout-only op that also runs on 8-bit integers in the QOperator export (ONNX takes int8 and
// uint8 for these from opset 9 or earlier, before QuantizeLinear exists at 10).
OpInfo layoutOnInt8(OpInfo info) {
  info = ops::layoutOnly(std::move(info));
  info.moves_int8 = true;
  return info;
}

}  // namespace

void registerShapeOps(OpRegistry& r) {
  r.add(layoutOnInt8(op("Flatten", 1, kLatestOpset, flatten)));
  r.add(layoutOnInt8(op("Reshape", 1, kLatestOpset, reshape)));
  r.add(layoutOnInt8(op("Transpose", 1, kLatestOpset, transpose)));
  r.add(layoutOnInt8(op("Squeeze", 1, kLatestOpset, squeeze)));
  r.add(layoutOnInt8(op("Unsqueeze", 1, kLatestOpset, unsqueeze)));
  r.add(layoutOnInt8(op("Identity", 1, kLatestOpset, identity)));
  // qforge runs Dropout in inference mode only, where it is Identity; ONNX types it float only.
  r.add(ops::layoutOnly(op("Dropout", 1, kLatestOpset, dropout)));
  r.add(ops::combinesActivations(ops::movesData(op("Concat", 1, kLatestOpset, concat))));
  r.add(ops::movesData(op("Split", 1, kLatestOpset, split)));
  r.add(ops::movesData(op("Expand", 8, kLatestOpset, expand)));
  r.add(ops::movesData(op("Tile", 1, kLatestOpset, tile)));
  // These produce new values (shapes, constants, sequences) rather than moving their inputs.
  r.add(ops::shapeComputation(op("Shape", 1, kLatestOpset, shape)));
  r.add(ops::shapeComputation(op("Constant", 1, kLatestOpset, constant)));
  r.add(ops::shapeComputation(op("ConstantOfShape", 9, kLatestOpset, constantOfShape)));
  r.add(op("Range", 11, kLatestOpset, range));
  registerIndexingOps(r);
}

}  // namespace qforge
