// Detection ops: NonMaxSuppression and RoiAlign, following ONNX's reference semantics (which
// are ONNX Runtime's): NMS keeps boxes greedily by score, ties to the lower index; RoiAlign
// averages (or takes the largest weighted tap of) bilinear samples on a regular grid per bin.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::op;
using ops::shapeString;

// `x` as float unless it is double: the 16-bit floats lack some CPU kernels (sort, matmul).
at::Tensor widened(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
}

// An optional one-element input; undefined when it is omitted or empty.
at::Tensor oneValueInput(const OpContext& ctx, size_t i, const char* name) {
  if (!ctx.hasInput(i) || ctx.input(i).numel() == 0) return at::Tensor();
  if (ctx.input(i).numel() != 1) {
    ctx.fail(std::string(name) + " must hold one value, got shape " +
             shapeString(ctx.input(i).sizes()));
  }
  return ctx.input(i);
}

// An optional one-element input as a double, or `fallback` when it is omitted or empty.
double scalarInput(const OpContext& ctx, size_t i, const char* name, double fallback) {
  const at::Tensor t = oneValueInput(ctx, i, name);
  return t.defined() ? t.to(at::kDouble).item<double>() : fallback;
}

// Boxes [..., 4] as corners [ymin, xmin, ymax, xmax]: from [y1, x1, y2, x2] with either
// diagonal (center_point_box 0), or from [x_center, y_center, width, height] (1).
at::Tensor boxCorners(const at::Tensor& boxes, bool center_point) {
  const at::Tensor a = boxes.select(-1, 0), b = boxes.select(-1, 1), c = boxes.select(-1, 2),
                   d = boxes.select(-1, 3);
  if (center_point) return at::stack({b - d / 2, a - c / 2, b + d / 2, a + c / 2}, -1);
  return at::stack({at::minimum(a, c), at::minimum(b, d), at::maximum(a, c), at::maximum(b, d)},
                   -1);
}

// Whether boxes i and j (corner rows) overlap with IoU above the threshold; boxes of no area or
// no overlap never suppress. Computed pair by pair as greedy selection asks, in the boxes' own
// precision: a precomputed [N, N] matrix is N^2 bytes, 729 MB for the 27000 candidates of
// torchvision's SSDlite.
template <typename T>
bool suppresses(const T* a, const T* b, T iou_threshold) {
  const T dy = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const T dx = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  if (!(dx > 0) || !(dy > 0)) return false;
  const T intersection = dx * dy;
  const T area_a = (a[3] - a[1]) * (a[2] - a[0]);
  const T area_b = (b[3] - b[1]) * (b[2] - b[0]);
  const T union_area = area_a + area_b - intersection;
  if (!(area_a > 0) || !(area_b > 0) || !(union_area > 0)) return false;
  return intersection / union_area > iou_threshold;
}

// Boxes of one class in score order (descending, ties by index), kept unless a kept box
// suppresses them, at most `limit`. `corners` is [N, 4], contiguous.
template <typename T>
std::vector<int64_t> keepGreedily(const at::Tensor& scores, const at::Tensor& corners,
                                  double iou_threshold, int64_t limit,
                                  const c10::optional<double>& score_threshold) {
  at::Tensor order = std::get<1>(at::sort(scores, /*stable=*/true, 0, /*descending=*/true));
  if (score_threshold)
    order = order.masked_select(scores.index_select(0, order) > *score_threshold);
  const T* box = corners.data_ptr<T>();
  const auto threshold = static_cast<T>(iou_threshold);
  std::vector<int64_t> kept;
  for (const int64_t candidate : ops::toInt64Vector(order)) {
    if (static_cast<int64_t>(kept.size()) >= limit) break;
    bool free = true;
    for (size_t k = 0; k < kept.size() && free; ++k)
      free = !suppresses(box + 4 * kept[k], box + 4 * candidate, threshold);
    if (free) kept.push_back(candidate);
  }
  return kept;
}

std::vector<at::Tensor> nonMaxSuppression(const OpContext& ctx) {
  // ATen's CPU sort skips 16-bit floats; float holds them exactly.
  const at::Tensor boxes = widened(ops::floatInput(ctx, 0));
  const at::Tensor scores = widened(ops::floatInput(ctx, 1));
  if (boxes.dim() != 3 || boxes.size(2) != 4) {
    ctx.fail("boxes must be [batches, boxes, 4], got " + shapeString(boxes.sizes()));
  }
  if (scores.dim() != 3 || scores.size(0) != boxes.size(0) || scores.size(2) != boxes.size(1)) {
    ctx.fail("scores of shape " + shapeString(scores.sizes()) +
             " must be [batches, classes, boxes] for boxes " + shapeString(boxes.sizes()));
  }
  const int64_t center_point = ctx.attrInt("center_point_box", 0);
  if (center_point != 0 && center_point != 1) ctx.fail("center_point_box must be 0 or 1");
  // Read as an integer: exporters write "no limit" as INT64_MAX, which a double cannot carry
  // back (it would wrap to a negative limit and keep nothing).
  const at::Tensor limit_input = oneValueInput(ctx, 2, "max_output_boxes_per_class");
  const int64_t limit = limit_input.defined() ? limit_input.to(at::kLong).item<int64_t>() : 0;
  const double iou_threshold = scalarInput(ctx, 3, "iou_threshold", 0);
  c10::optional<double> score_threshold;
  if (const at::Tensor t = oneValueInput(ctx, 4, "score_threshold"); t.defined()) {
    score_threshold = t.to(at::kDouble).item<double>();
  }
  const at::Tensor corners = boxCorners(boxes, center_point == 1);
  std::vector<int64_t> triples;
  for (int64_t b = 0; b < boxes.size(0) && limit > 0; ++b) {
    const at::Tensor batch_corners = corners[b].contiguous();
    for (int64_t c = 0; c < scores.size(1); ++c) {
      const std::vector<int64_t> kept =
          batch_corners.scalar_type() == at::kDouble
              ? keepGreedily<double>(scores[b][c], batch_corners, iou_threshold, limit,
                                     score_threshold)
              : keepGreedily<float>(scores[b][c], batch_corners, iou_threshold, limit,
                                    score_threshold);
      for (const int64_t box : kept)
        triples.insert(triples.end(), {b, c, box});
    }
  }
  const auto count = static_cast<int64_t>(triples.size() / 3);
  return {at::tensor(triples, at::kLong).reshape({count, 3})};
}

// RoiAlign's bilinear taps along one axis of `size` pixels for sample positions `pos`: the two
// neighbouring rows and their weights, clamped to the edge; samples outside [-1, size] weigh 0.
struct Taps {
  at::Tensor low, high, w_low, w_high;
};

Taps bilinearTaps(const at::Tensor& pos, int64_t size) {
  const at::Tensor outside = (pos < -1.0) | (pos > static_cast<double>(size));
  at::Tensor p = pos.clamp_min(0);
  at::Tensor low = p.floor().to(at::kLong);
  const at::Tensor at_edge = low >= size - 1;
  low = low.clamp_max(size - 1);
  const at::Tensor high = at::where(at_edge, low, low + 1);
  p = at::where(at_edge, low.to(p.scalar_type()), p);
  const at::Tensor frac = p - low;
  return {low, high, (1 - frac).masked_fill(outside, 0), frac.masked_fill(outside, 0)};
}

struct RoiGeometry {
  double start = 0, bin = 0;  // in input pixels
  int64_t grid = 0;           // samples per bin
};

// Sample positions of `bins` bins, `grid` samples each, bin-major: [bins * grid].
at::Tensor samplePositions(const RoiGeometry& g, int64_t bins) {
  const at::Tensor bin = at::arange(bins, at::kDouble).repeat_interleave(g.grid);
  const at::Tensor sample = at::arange(g.grid, at::kDouble).repeat({bins});
  return g.start + bin * g.bin + (sample + 0.5) * g.bin / static_cast<double>(g.grid);
}

// [bins, size]: the summed bilinear weight of every pixel over each bin's samples.
at::Tensor binWeights(const Taps& t, int64_t bins, int64_t grid, int64_t size) {
  at::Tensor w = at::zeros({bins * grid, size}, at::kDouble);
  w.scatter_add_(1, t.low.unsqueeze(1), t.w_low.unsqueeze(1));
  w.scatter_add_(1, t.high.unsqueeze(1), t.w_high.unsqueeze(1));
  return w.reshape({bins, grid, size}).sum(1);
}

// One RoI of `feature` [C, H, W] pooled to [C, out_h, out_w].
at::Tensor alignOne(const at::Tensor& feature, const RoiGeometry& gy, const RoiGeometry& gx,
                    int64_t out_h, int64_t out_w, bool max_mode) {
  const int64_t h = feature.size(1), w = feature.size(2);
  if (gy.grid <= 0 || gx.grid <= 0)
    return at::zeros({feature.size(0), out_h, out_w}, feature.options());
  const Taps ty = bilinearTaps(samplePositions(gy, out_h), h);
  const Taps tx = bilinearTaps(samplePositions(gx, out_w), w);
  const auto type = feature.scalar_type();
  if (!max_mode) {
    // Averaging is linear: one weight matrix per axis, applied as two matrix products.
    const at::Tensor wy = binWeights(ty, out_h, gy.grid, h).to(type);
    const at::Tensor wx = binWeights(tx, out_w, gx.grid, w).to(type);
    return at::matmul(at::matmul(wy, feature), wx.t()) / static_cast<double>(gy.grid * gx.grid);
  }
  // Max mode takes, per sample, the largest of the four weighted taps (ONNX Runtime's rule).
  auto tap = [&](const at::Tensor& rows, const at::Tensor& cols, const at::Tensor& wr,
                 const at::Tensor& wc) {
    const at::Tensor weight = (wr.unsqueeze(1) * wc.unsqueeze(0)).to(type);
    return feature.index_select(1, rows).index_select(2, cols) * weight;
  };
  const at::Tensor best = at::maximum(at::maximum(tap(ty.low, tx.low, ty.w_low, tx.w_low),
                                                  tap(ty.low, tx.high, ty.w_low, tx.w_high)),
                                      at::maximum(tap(ty.high, tx.low, ty.w_high, tx.w_low),
                                                  tap(ty.high, tx.high, ty.w_high, tx.w_high)));
  return best.reshape({feature.size(0), out_h, gy.grid, out_w, gx.grid}).amax({2, 4});
}

// Start, bin size and samples per bin along one axis of a RoI from `low` to `high` (input
// coordinates before scaling).
RoiGeometry roiGeometry(double low, double high, double scale, bool half_pixel, int64_t bins,
                        int64_t sampling_ratio) {
  const double offset = half_pixel ? 0.5 : 0.0;
  RoiGeometry g;
  g.start = low * scale - offset;
  double extent = high * scale - offset - g.start;
  // The legacy output_half_pixel mode forces malformed RoIs to be at least one pixel.
  if (!half_pixel) extent = std::max(extent, 1.0);
  g.bin = extent / static_cast<double>(bins);
  g.grid = sampling_ratio > 0 ? sampling_ratio
                              : static_cast<int64_t>(std::ceil(extent / static_cast<double>(bins)));
  return g;
}

// RoiAlign: coordinate_transformation_mode from opset 16 (default half_pixel); opset 10 behaves
// as output_half_pixel.
std::vector<at::Tensor> roiAlign(const OpContext& ctx) {
  const at::Tensor x = widened(ops::floatInput(ctx, 0));
  const at::Tensor& rois = ops::floatInput(ctx, 1);
  const at::Tensor& batch_indices = ctx.input(2);
  if (x.dim() != 4) ctx.fail("X must be 4-D NCHW, got shape " + shapeString(x.sizes()));
  const int64_t count = batch_indices.numel();
  if (rois.dim() != 2 || rois.size(1) != 4 || rois.size(0) != count || batch_indices.dim() != 1) {
    ctx.fail("rois of shape " + shapeString(rois.sizes()) + " and batch_indices of shape " +
             shapeString(batch_indices.sizes()) + " must be [num_rois, 4] and [num_rois]");
  }
  const std::vector<int64_t> batch = ops::toInt64Vector(batch_indices);
  for (const int64_t b : batch) {
    if (b < 0 || b >= x.size(0)) {
      ctx.fail("batch index " + std::to_string(b) + " is outside [0, " + std::to_string(x.size(0)) +
               ")");
    }
  }
  const std::string mode = ctx.attrString("mode", "avg");
  if (mode != "avg" && mode != "max") ctx.fail("unknown mode '" + mode + "' (expected avg or max)");
  const std::string transform = ctx.opset() >= 16
                                    ? ctx.attrString("coordinate_transformation_mode", "half_pixel")
                                    : "output_half_pixel";
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    ctx.fail("unknown coordinate_transformation_mode '" + transform +
             "' (expected half_pixel or output_half_pixel)");
  }
  const int64_t out_h = ctx.attrInt("output_height", 1), out_w = ctx.attrInt("output_width", 1);
  const int64_t sampling_ratio = ctx.attrInt("sampling_ratio", 0);
  if (out_h < 1 || out_w < 1 || sampling_ratio < 0) {
    ctx.fail("output_height and output_width must be >= 1 and sampling_ratio >= 0");
  }
  const double scale = ctx.attrFloat("spatial_scale", 1.0);
  const bool half_pixel = transform == "half_pixel";
  const at::Tensor corners = rois.to(at::kDouble).contiguous();
  const auto c = corners.accessor<double, 2>();
  std::vector<at::Tensor> pooled;
  for (int64_t r = 0; r < count; ++r) {
    // rois hold [x1, y1, x2, y2].
    const RoiGeometry gx = roiGeometry(c[r][0], c[r][2], scale, half_pixel, out_w, sampling_ratio);
    const RoiGeometry gy = roiGeometry(c[r][1], c[r][3], scale, half_pixel, out_h, sampling_ratio);
    pooled.push_back(alignOne(x[batch[r]], gy, gx, out_h, out_w, mode == "max"));
  }
  const auto type = ctx.input(0).scalar_type();
  if (pooled.empty()) return {at::empty({0, x.size(1), out_h, out_w}, x.options().dtype(type))};
  return {at::stack(pooled).to(type)};
}

}  // namespace

void registerDetectionOps(OpRegistry& r) {
  // Its output is box indices, not activations.
  OpInfo nms = op("NonMaxSuppression", 10, kLatestOpset, nonMaxSuppression);
  nms.shape_computation = true;
  r.add(nms);
  // Averages or weighted picks of X's values: the sign of X.
  r.add(ops::withSign(op("RoiAlign", 10, kLatestOpset, roiAlign), OutputSign::OfDataInput));
}

}  // namespace qforge
