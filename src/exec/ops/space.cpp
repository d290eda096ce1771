// Spatial rearrangement and sampling: DepthToSpace, SpaceToDepth, MaxUnpool and GridSample.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::op;
using ops::shapeString;

int64_t product(at::IntArrayRef dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

// The blocksize of DepthToSpace / SpaceToDepth on a 4-D NCHW input.
int64_t blockSize(const OpContext& ctx, const at::Tensor& x) {
  if (x.dim() != 4) ctx.fail("input must be 4-D NCHW, got shape " + shapeString(x.sizes()));
  const int64_t block = ctx.attrInt("blocksize");
  if (block < 1) ctx.fail("blocksize " + std::to_string(block) + " must be at least 1");
  return block;
}

// DepthToSpace: mode DCR (depth, column, row: the default and the only form before opset 11) or
// CRD (column, row, depth), as in the ONNX definition's reshape-transpose-reshape.
std::vector<at::Tensor> depthToSpace(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t b = blockSize(ctx, x);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  if (c % (b * b) != 0) {
    ctx.fail("channels " + std::to_string(c) +
             " are not a multiple of blocksize^2 = " + std::to_string(b * b));
  }
  const std::string mode = ctx.opset() >= 11 ? ctx.attrString("mode", "DCR") : "DCR";
  at::Tensor moved;
  if (mode == "DCR") {
    moved = x.reshape({n, b, b, c / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    moved = x.reshape({n, c / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
  } else {
    ctx.fail("unknown mode '" + mode + "' (expected DCR or CRD)");
  }
  return {moved.reshape({n, c / (b * b), h * b, w * b})};
}

std::vector<at::Tensor> spaceToDepth(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t b = blockSize(ctx, x);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  if (h % b != 0 || w % b != 0) {
    ctx.fail("height " + std::to_string(h) + " and width " + std::to_string(w) +
             " must be multiples of blocksize " + std::to_string(b));
  }
  return {x.reshape({n, c, h / b, b, w / b, b})
              .permute({0, 3, 5, 1, 2, 4})
              .reshape({n, c * b * b, h / b, w / b})};
}

// MaxUnpool: each X value goes to the flat position its index names in the output the pooling
// arithmetic implies (MaxPool's indices flatten the whole N, C, spatial tensor); everything else
// is zero. An output_shape input (opset 11+) may only grow that output, padding at the end of
// each axis, as ONNX's reference does.
std::vector<at::Tensor> maxUnpool(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& indices = ctx.input(1);
  const int64_t spatial = x.dim() - 2;
  if (spatial < 1) ctx.fail("X must have rank >= 3, got shape " + shapeString(x.sizes()));
  if (indices.sizes() != x.sizes()) {
    ctx.fail("indices of shape " + shapeString(indices.sizes()) + " must match X " +
             shapeString(x.sizes()));
  }
  const std::vector<int64_t> kernel = ctx.attrInts("kernel_shape", {});
  const std::vector<int64_t> strides = ctx.attrInts("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = ctx.attrInts("pads", std::vector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial) {
    ctx.fail("kernel_shape, strides and pads must have " + std::to_string(spatial) + ", " +
             std::to_string(spatial) + " and " + std::to_string(2 * spatial) + " entries");
  }
  std::vector<int64_t> shape{x.size(0), x.size(1)};
  for (int64_t d = 0; d < spatial; ++d) {
    shape.push_back((x.size(d + 2) - 1) * strides[d] + kernel[d] - pads[d] - pads[d + spatial]);
  }
  const int64_t total = product(shape);
  const at::Tensor flat_index = indices.to(at::kLong).reshape({-1});
  if (flat_index.numel() > 0 &&
      (flat_index.min().item<int64_t>() < 0 || flat_index.max().item<int64_t>() >= total)) {
    ctx.fail("indices must lie in [0, " + std::to_string(total) + ") for the unpooled shape " +
             shapeString(shape));
  }
  at::Tensor y = at::zeros({total}, x.options());
  y.index_put_({flat_index}, x.reshape({-1}));
  y = y.reshape(shape);
  if (ctx.opset() < 11 || !ctx.hasInput(2)) return {y};
  const std::vector<int64_t> wanted = ops::toInt64Vector(ctx.input(2));
  std::vector<int64_t> grow;  // ATen's pad list: (begin, end) from the last axis backwards
  for (int64_t d = x.dim() - 1; d >= 0 && wanted.size() == shape.size(); --d) {
    grow.insert(grow.end(), {0, wanted[d] - shape[d]});
  }
  if (wanted.size() != shape.size() || wanted[0] != shape[0] || wanted[1] != shape[1] ||
      std::any_of(grow.begin(), grow.end(), [](int64_t g) { return g < 0; })) {
    ctx.fail("output_shape " + shapeString(wanted) + " must keep N and C and not be smaller than " +
             shapeString(shape));
  }
  return {at::constant_pad_nd(y, grow, 0)};
}

// ATen's grid_sampler codes: interpolation bilinear 0, nearest 1, bicubic 2; padding zeros 0,
// border 1, reflection 2. GridSample-20 renamed bilinear/bicubic to linear/cubic.
int64_t interpolationCode(const OpContext& ctx) {
  const bool renamed = ctx.opset() >= 20;
  const std::string mode = ctx.attrString("mode", renamed ? "linear" : "bilinear");
  if (mode == (renamed ? "linear" : "bilinear")) return 0;
  if (mode == "nearest") return 1;
  if (mode == (renamed ? "cubic" : "bicubic")) return 2;
  ctx.fail("unknown mode '" + mode + "' (expected " +
           (renamed ? "linear, nearest or cubic)" : "bilinear, nearest or bicubic)"));
}

int64_t paddingCode(const OpContext& ctx) {
  const std::string padding = ctx.attrString("padding_mode", "zeros");
  if (padding == "zeros") return 0;
  if (padding == "border") return 1;
  if (padding == "reflection") return 2;
  ctx.fail("unknown padding_mode '" + padding + "' (expected zeros, border or reflection)");
}

// GridSample: 4-D input at opset 16; from 20 also 3-D (run as 4-D with one row) and 5-D
// (volumetric, linear or nearest: ATen has no tricubic sampler).
std::vector<at::Tensor> gridSample(const OpContext& ctx) {
  const at::Tensor& x = ops::floatInput(ctx, 0);
  const at::Tensor& grid = ops::floatInput(ctx, 1);
  const int64_t spatial = x.dim() - 2;
  const bool rank_ok = ctx.opset() >= 20 ? (spatial >= 1 && spatial <= 3) : spatial == 2;
  if (!rank_ok) {
    ctx.fail("X of shape " + shapeString(x.sizes()) + " is not supported (" +
             (ctx.opset() >= 20 ? "3-D, 4-D or 5-D" : "4-D") + " expected)");
  }
  if (grid.dim() != x.dim() || grid.size(0) != x.size(0) || grid.size(-1) != spatial) {
    ctx.fail("grid of shape " + shapeString(grid.sizes()) + " must be [N, out dims..., " +
             std::to_string(spatial) + "] for X of shape " + shapeString(x.sizes()));
  }
  const int64_t mode = interpolationCode(ctx), padding = paddingCode(ctx);
  const bool align = ctx.attrInt("align_corners", 0) != 0;
  if (spatial == 3 && mode == 2) ctx.fail("cubic mode is not supported on 5-D input");
  // ATen's CPU samplers take float or double, the same for X and grid.
  const auto type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor input = x.to(type), coords = grid.to(type);
  at::Tensor y;
  if (spatial == 3) {
    y = at::grid_sampler_3d(input, coords, mode, padding, align);
  } else if (spatial == 2) {
    y = at::grid_sampler_2d(input, coords, mode, padding, align);
  } else {
    // One row: its normalized y = 0 lands exactly on row 0 in every mode.
    const at::Tensor xy =
        at::stack({coords.select(-1, 0), at::zeros_like(coords.select(-1, 0))}, -1);
    y = at::grid_sampler_2d(input.unsqueeze(2), xy.unsqueeze(1), mode, padding, align).squeeze(2);
  }
  return {y.to(x.scalar_type())};
}

// Nearest and linear sampling pick or blend input values (zeros padding adds 0), so the output
// is >= 0 where X is; cubic overshoots.
OutputSign gridSampleSign(const Node& node) {
  const Attribute* mode = node.attributes.find("mode");
  const bool cubic = mode != nullptr && (mode->s == "cubic" || mode->s == "bicubic");
  return cubic ? OutputSign::Unknown : OutputSign::OfDataInput;
}

}  // namespace

void registerSpaceOps(OpRegistry& r) {
  r.add(ops::layoutOnly(op("DepthToSpace", 1, kLatestOpset, depthToSpace)));
  r.add(ops::layoutOnly(op("SpaceToDepth", 1, kLatestOpset, spaceToDepth)));
  // Input values or zeros: the sign of X.
  r.add(ops::withSign(op("MaxUnpool", 9, kLatestOpset, maxUnpool), OutputSign::OfDataInput));
  OpInfo grid_sample = op("GridSample", 16, kLatestOpset, gridSample);
  grid_sample.output_sign_of = gridSampleSign;
  r.add(grid_sample);
}

}  // namespace qforge
