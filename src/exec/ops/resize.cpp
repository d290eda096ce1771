// Resize (opset 10-17), Upsample (7-9) and Pad (1+).
//
// Resize is computed one axis at a time: nearest picks one input index per output position,
// n-linear blends two and cubic four, and all are separable, so an N-d resize is N 1-d passes.
// Coordinates are computed on the host in double precision, the data path stays in ATen
// (autograd-friendly).
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "exec/ops/common.h"
#include "exec/ops/ort_bilinear.h"

namespace qforge {

namespace {

using ops::dimsText;
using ops::kLatestOpset;
using ops::op;
using ops::toInt64Vector;

std::vector<double> toDoubleVector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous().reshape({-1});
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

// Everything a resize needs once inputs and attributes are resolved.
struct ResizePlan {
  std::string mode;             // "nearest", "linear" or "cubic"
  std::string coordinate_mode;  // coordinate_transformation_mode
  std::string nearest_mode;
  double extrapolation_value = 0.0;
  double cubic_coeff_a = -0.75;
  bool exclude_outside = false;
  std::vector<double> roi;             // [starts..., ends...], only for tf_crop_and_resize
  std::vector<double> scales;          // per axis
  std::vector<double> resized_length;  // per axis: in * scale, or the requested size
  std::vector<int64_t> output_sizes;
  bool from_sizes = false;  // the sizes input was given (scales derived from it)
};

// Maps output index `j` of an axis back to a (fractional) input coordinate.
double originalCoordinate(const ResizePlan& plan, size_t axis, int64_t j, int64_t in) {
  const std::string& m = plan.coordinate_mode;
  const double scale = plan.scales[axis];
  // ONNX's reference (which generated the conformance data) uses in * scale, not the rounded
  // output size, as the resized length when scales are given.
  const double length = plan.resized_length[axis];
  const double x = static_cast<double>(j);
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return length > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m == "align_corners") return length == 1 ? 0.0 : x * (in - 1) / (length - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize: the output spans the normalized region of interest.
  const size_t rank = plan.scales.size();
  const double start = plan.roi[axis], end = plan.roi[axis + rank];
  if (length > 1) return start * (in - 1) + x * (end - start) * (in - 1) / (length - 1);
  return 0.5 * (start + end) * (in - 1);
}

int64_t roundNearest(const std::string& nearest_mode, double x, double scale) {
  const double lower = std::floor(x);
  const double fraction = x - lower;
  // Resize-10 names no rounding; ONNX Runtime (its "simple" mode) floors when an axis grows and
  // takes the ceiling when it shrinks, and that is what models exported at opset 10 were run by.
  if (nearest_mode == "simple") return static_cast<int64_t>(scale < 1 ? std::ceil(x) : lower);
  if (nearest_mode == "floor") return static_cast<int64_t>(lower);
  if (nearest_mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (nearest_mode == "round_prefer_ceil")
    return static_cast<int64_t>(fraction < 0.5 ? lower : lower + 1);
  return static_cast<int64_t>(fraction <= 0.5 ? lower : lower + 1);  // round_prefer_floor
}

at::Tensor indexTensor(const std::vector<int64_t>& idx) {
  return at::tensor(at::IntArrayRef(idx), at::kLong);
}

// Shape [n, 1, ..., 1] so per-position values broadcast along `axis` of a rank-`rank` tensor.
std::vector<int64_t> alongAxis(int64_t n, int64_t axis, int64_t rank) {
  std::vector<int64_t> shape(rank - axis, 1);
  shape[0] = n;
  return shape;
}

// The four taps of cubic convolution (Keys, coefficient A) around coordinate x on an axis of
// `in` positions: input indices (clamped to the border, as ONNX pads by edge) and weights. As
// ONNX's reference, an integral x takes the taps x-2..x+1 with weights 0, 0, 1, 0; with
// exclude_outside the taps that fall off the input get weight 0 and the rest are renormalized.
void cubicTaps(double x, int64_t in, const ResizePlan& plan, int64_t index[4], double weight[4]) {
  double base = std::floor(x);
  if (base == x) base -= 1;
  const double r = x - base, A = plan.cubic_coeff_a;
  const double s = 1 - r;
  weight[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
  weight[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
  weight[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
  weight[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
  double total = 0;
  for (int t = 0; t < 4; ++t) {
    const int64_t i = static_cast<int64_t>(base) - 1 + t;
    if (plan.exclude_outside && (i < 0 || i >= in)) weight[t] = 0;
    total += weight[t];
    index[t] = std::clamp<int64_t>(i, 0, in - 1);
  }
  if (plan.exclude_outside && total != 0) {
    for (int t = 0; t < 4; ++t)
      weight[t] /= total;
  }
}

// One axis of a cubic resize: four gathers, each weighted per output position.
at::Tensor cubicAlongAxis(const at::Tensor& y, int64_t axis, const std::vector<double>& coords,
                          int64_t in, const ResizePlan& plan) {
  const auto out = static_cast<int64_t>(coords.size());
  std::vector<std::vector<int64_t>> index(4, std::vector<int64_t>(out));
  std::vector<std::vector<double>> weight(4, std::vector<double>(out));
  for (int64_t j = 0; j < out; ++j) {
    int64_t taps[4];
    double w[4];
    cubicTaps(coords[j], in, plan, taps, w);
    for (int t = 0; t < 4; ++t) {
      index[t][j] = taps[t];
      weight[t][j] = w[t];
    }
  }
  at::Tensor result;
  for (int t = 0; t < 4; ++t) {
    at::Tensor w = at::tensor(at::ArrayRef<double>(weight[t]), at::kDouble)
                       .to(y.scalar_type())
                       .reshape(alongAxis(out, axis, y.dim()));
    at::Tensor term = y.index_select(axis, indexTensor(index[t])) * w;
    result = result.defined() ? result + term : term;
  }
  return result;
}

bool isPowerOfTwo(double v) {
  int exponent = 0;
  return v > 0 && std::frexp(v, &exponent) == 0.5;
}

// The spatial resizes of an (N, C, H, W) float tensor computed in one pass (the per-axis blend
// below made six passes per axis: 15 of the zoo U-Net's 30 ms at batch 100).
// - linear, float32: ONNX Runtime's own bilinear kernel, bit for bit (ort_bilinear.h), for the
//   coordinate modes where ORT and ONNX map coordinates alike: all but tf_crop_and_resize, and
//   pytorch_half_pixel and align_corners only when the resized length is the output size;
// - linear, double: upsample_bilinear2d for half_pixel (and pytorch_half_pixel past one pixel),
//   which maps (x + 0.5) / scale - 0.5 and clamps to the border as ONNX's taps do, and for
//   align_corners when the resized length is the output size;
// - nearest, asymmetric, floor (Upsample, torch's nearest export) by a power of two, where
//   ATen's float 1/scale is exact.
std::optional<at::Tensor> resize2d(const at::Tensor& input, const ResizePlan& plan) {
  if (input.dim() != 4 || !at::isFloatingType(input.scalar_type()) || input.numel() == 0) {
    return std::nullopt;
  }
  // A channels-last image (N, H, W, C) resized over H and W, as ORT's layout transformer hands
  // Resize next to its channels-last integer convolutions: ORT's NHWC bilinear kernel weighs and
  // adds the four taps as its NCHW one does, so it is that kernel on a permuted view.
  const auto kept = [&](int64_t axis) {
    return plan.output_sizes[axis] == input.size(axis) && plan.scales[axis] == 1.0;
  };
  if (plan.mode == "linear" && input.scalar_type() == at::kFloat && kept(0) && kept(3) &&
      !kept(1)) {
    ResizePlan nchw = plan;
    for (int64_t axis = 0; axis < 4; ++axis) {
      const int64_t from = std::array<int64_t, 4>{0, 3, 1, 2}[axis];
      nchw.scales[axis] = plan.scales[from];
      nchw.resized_length[axis] = plan.resized_length[from];
      nchw.output_sizes[axis] = plan.output_sizes[from];
    }
    const std::optional<at::Tensor> y = resize2d(input.permute({0, 3, 1, 2}), nchw);
    if (!y) return std::nullopt;
    return y->permute({0, 2, 3, 1}).contiguous();
  }
  if (!kept(0) || !kept(1)) return std::nullopt;
  const std::vector<int64_t> out = {plan.output_sizes[2], plan.output_sizes[3]};
  const std::string& m = plan.coordinate_mode;
  const bool resized_to_output = plan.resized_length[2] == static_cast<double>(out[0]) &&
                                 plan.resized_length[3] == static_cast<double>(out[1]);
  if (plan.mode == "linear" && input.scalar_type() == at::kFloat && ops::ortBilinearCovers(m) &&
      (resized_to_output || (m != "pytorch_half_pixel" && m != "align_corners"))) {
    // ORT's float scales: the given ones, or out / in in float when sizes were given.
    const auto scale = [&](int64_t axis) {
      return plan.from_sizes
                 ? static_cast<float>(out[axis - 2]) / static_cast<float>(input.size(axis))
                 : static_cast<float>(plan.scales[axis]);
    };
    return ops::ortBilinear(input, out[0], out[1], scale(2), scale(3), m);
  }
  if (plan.mode == "linear") {
    const bool half_pixel =
        m == "half_pixel" || (m == "pytorch_half_pixel" && out[0] > 1 && out[1] > 1);
    const bool align_corners = m == "align_corners" && resized_to_output;
    if (!half_pixel && !align_corners) return std::nullopt;
    return at::upsample_bilinear2d(
        input, out, align_corners,
        align_corners ? c10::nullopt : c10::optional<double>(plan.scales[2]),
        align_corners ? c10::nullopt : c10::optional<double>(plan.scales[3]));
  }
  if (plan.mode == "nearest" && m == "asymmetric" && plan.nearest_mode == "floor" &&
      isPowerOfTwo(plan.scales[2]) && isPowerOfTwo(plan.scales[3])) {
    return at::upsample_nearest2d(input, out, plan.scales[2], plan.scales[3]);
  }
  return std::nullopt;
}

at::Tensor resample(const OpContext& ctx, const at::Tensor& input, const ResizePlan& plan) {
  if (std::optional<at::Tensor> y = resize2d(input, plan)) return *y;
  const bool linear = plan.mode == "linear";
  const bool cubic = plan.mode == "cubic";
  // Blending needs a floating type; integer inputs are blended in float and rounded back.
  const bool integral = (linear || cubic) && !at::isFloatingType(input.scalar_type());
  at::Tensor y = integral ? input.to(at::kFloat) : input;
  const int64_t rank = input.dim();
  const bool crop = plan.coordinate_mode == "tf_crop_and_resize";
  at::Tensor outside;  // positions whose coordinate falls off the input (tf_crop_and_resize)

  for (int64_t axis = 0; axis < rank; ++axis) {
    const int64_t in = input.size(axis), out = plan.output_sizes[axis];
    if (in == 0 && out > 0) ctx.fail("cannot resize axis " + std::to_string(axis) + " of size 0");
    std::vector<double> coords(out);
    bool identity = in == out;
    for (int64_t j = 0; j < out; ++j) {
      coords[j] = originalCoordinate(plan, axis, j, in);
      identity = identity && coords[j] == static_cast<double>(j);
    }
    if (identity) continue;

    if (crop) {
      std::vector<uint8_t> off(out);
      bool any = false;
      for (int64_t j = 0; j < out; ++j) {
        off[j] = coords[j] < 0 || coords[j] > in - 1;
        any = any || off[j];
      }
      if (any) {
        at::Tensor mask = at::tensor(at::ArrayRef<uint8_t>(off), at::kByte).to(at::kBool);
        mask = mask.reshape(alongAxis(out, axis, rank));
        outside = outside.defined() ? outside.logical_or(mask) : mask;
      }
    }

    auto clampIndex = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
    if (cubic) {
      y = cubicAlongAxis(y, axis, coords, in, plan);
      continue;
    }
    if (!linear) {
      std::vector<int64_t> idx(out);
      for (int64_t j = 0; j < out; ++j) {
        idx[j] = clampIndex(roundNearest(plan.nearest_mode, coords[j], plan.scales[axis]));
      }
      y = y.index_select(axis, indexTensor(idx));
      continue;
    }
    std::vector<int64_t> lower(out), upper(out);
    std::vector<double> weight(out);
    for (int64_t j = 0; j < out; ++j) {
      const double f = std::floor(coords[j]);
      lower[j] = clampIndex(static_cast<int64_t>(f));
      upper[j] = clampIndex(static_cast<int64_t>(f) + 1);
      weight[j] = coords[j] - f;
    }
    at::Tensor w = at::tensor(at::ArrayRef<double>(weight), at::kDouble)
                       .to(y.scalar_type())
                       .reshape(alongAxis(out, axis, rank));
    y = y.index_select(axis, indexTensor(lower)) * (1 - w) +
        y.index_select(axis, indexTensor(upper)) * w;
  }

  if (outside.defined()) {
    y = at::where(outside, at::scalar_tensor(plan.extrapolation_value, y.options()), y);
  }
  if (integral) y = y.round().to(input.scalar_type());
  return y;
}

void checkModes(const OpContext& ctx, const ResizePlan& plan) {
  if (plan.mode == "cubic" && ctx.opset() < 11) ctx.fail("mode 'cubic' needs Resize-11 or later");
  if (plan.mode != "nearest" && plan.mode != "linear" && plan.mode != "cubic") {
    ctx.fail("unknown mode '" + plan.mode + "' (expected nearest, linear or cubic)");
  }
  static const char* const kCoordinateModes[] = {"half_pixel",           "pytorch_half_pixel",
                                                 "align_corners",        "asymmetric",
                                                 "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoordinateModes), std::end(kCoordinateModes), plan.coordinate_mode) ==
      std::end(kCoordinateModes)) {
    ctx.fail("unknown coordinate_transformation_mode '" + plan.coordinate_mode + "'");
  }
  static const char* const kNearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                              "ceil"};
  const bool resize10 = ctx.opset() < 11 && plan.nearest_mode == "simple";  // set by us, not read
  if (!resize10 && std::find(std::begin(kNearestModes), std::end(kNearestModes),
                             plan.nearest_mode) == std::end(kNearestModes)) {
    ctx.fail("unknown nearest_mode '" + plan.nearest_mode + "'");
  }
}

// Fills scales, resized lengths and output sizes from either scales or sizes.
void planSizes(const OpContext& ctx, ResizePlan& plan, at::IntArrayRef in,
               const std::vector<double>* scales, const std::vector<int64_t>* sizes) {
  const size_t rank = in.size();
  const size_t given = scales ? scales->size() : sizes->size();
  if (given != rank) {
    ctx.fail(std::string(scales ? "scales" : "sizes") + " has " + std::to_string(given) +
             " entries but the input " + dimsText(in) + " has rank " + std::to_string(rank));
  }
  for (size_t i = 0; i < rank; ++i) {
    if (scales) {
      const double s = (*scales)[i];
      if (!(s > 0)) ctx.fail("scale " + std::to_string(s) + " must be positive");
      plan.scales.push_back(s);
      plan.resized_length.push_back(s * in[i]);
      plan.output_sizes.push_back(static_cast<int64_t>(std::floor(s * in[i])));
    } else {
      const int64_t n = (*sizes)[i];
      if (n < 0) ctx.fail("sizes " + dimsText(*sizes) + " has a negative entry");
      if (in[i] == 0 && n != 0) ctx.fail("cannot resize an axis of size 0");
      plan.scales.push_back(in[i] == 0 ? 1.0 : static_cast<double>(n) / in[i]);
      plan.resized_length.push_back(static_cast<double>(n));
      plan.output_sizes.push_back(n);
    }
  }
  plan.from_sizes = sizes != nullptr;
}

std::vector<at::Tensor> resize(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  ResizePlan plan;
  plan.mode = ctx.attrString("mode", "nearest");
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  if (ctx.opset() < 11) {
    // Resize-10 is Upsample with downscaling allowed: asymmetric coordinates.
    plan.coordinate_mode = "asymmetric";
    plan.nearest_mode = "simple";
    scales = toDoubleVector(ctx.input(1));
  } else {
    plan.coordinate_mode = ctx.attrString("coordinate_transformation_mode", "half_pixel");
    plan.nearest_mode = ctx.attrString("nearest_mode", "round_prefer_floor");
    plan.extrapolation_value = ctx.attrFloat("extrapolation_value", 0.0);
    plan.cubic_coeff_a = ctx.attrFloat("cubic_coeff_a", -0.75);
    // exclude_outside reweights the taps that fall off the input. For linear and nearest,
    // clamping those taps to the border gives the same values, so only cubic reads it.
    plan.exclude_outside = ctx.attrInt("exclude_outside", 0) != 0;
    if (ctx.hasInput(1) && ctx.input(1).numel() > 0) plan.roi = toDoubleVector(ctx.input(1));
    if (ctx.hasInput(2) && ctx.input(2).numel() > 0) scales = toDoubleVector(ctx.input(2));
    if (ctx.hasInput(3) && ctx.input(3).numel() > 0) sizes = toInt64Vector(ctx.input(3));
    if (scales.has_value() == sizes.has_value()) {
      ctx.fail("exactly one of scales and sizes must be given");
    }
  }
  checkModes(ctx, plan);
  if (plan.coordinate_mode == "tf_crop_and_resize" &&
      plan.roi.size() != 2 * static_cast<size_t>(x.dim())) {
    ctx.fail("tf_crop_and_resize needs a roi of " + std::to_string(2 * x.dim()) + " values, got " +
             std::to_string(plan.roi.size()));
  }
  planSizes(ctx, plan, x.sizes(), scales ? &*scales : nullptr, sizes ? &*sizes : nullptr);
  return {resample(ctx, x, plan)};
}

std::vector<at::Tensor> upsample(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  ResizePlan plan;
  plan.mode = ctx.attrString("mode", "nearest");
  // Upsample predates coordinate modes: it maps output to input by x / scale and floors.
  plan.coordinate_mode = "asymmetric";
  plan.nearest_mode = "floor";
  checkModes(ctx, plan);
  // Upsample-7 took scales as an attribute, Upsample-9 as an input.
  const std::vector<double> scales =
      ctx.opset() < 9 ? ctx.attrFloats("scales", {}) : toDoubleVector(ctx.input(1));
  planSizes(ctx, plan, x.sizes(), &scales, nullptr);
  return {resample(ctx, x, plan)};
}

// Index of the input element that padded position `j` (-pad_begin <= j < dim + pad_end) copies.
int64_t sourceIndex(const std::string& mode, int64_t j, int64_t dim) {
  if (mode == "edge") return std::clamp<int64_t>(j, 0, dim - 1);
  if (mode == "wrap") return ((j % dim) + dim) % dim;
  // reflect (mirror without repeating the border), periodic for pads longer than the axis.
  if (dim == 1) return 0;
  const int64_t period = 2 * (dim - 1);
  const int64_t m = ((j % period) + period) % period;
  return m < dim ? m : period - m;
}

std::vector<at::Tensor> pad(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t rank = x.dim();
  const std::string mode = ctx.attrString("mode", "constant");
  const bool wrap_allowed = ctx.opset() >= 19;
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      !(mode == "wrap" && wrap_allowed)) {
    ctx.fail("unknown mode '" + mode + "' (expected constant, reflect or edge)");
  }
  // Pad-1 named the attribute paddings, Pad-2 pads; Pad-11 moved pads and value to inputs and
  // Pad-18 added an optional axes input.
  std::vector<int64_t> pads;
  at::Scalar value = 0.0;
  if (ctx.opset() < 11) {
    pads = ctx.attrInts(ctx.opset() < 2 ? "paddings" : "pads", {});
    value = ctx.attrFloat("value", 0.0);
  } else {
    pads = toInt64Vector(ctx.input(1));
    if (ctx.hasInput(2) && ctx.input(2).numel() > 0) value = ctx.input(2).reshape({}).item();
    if (ctx.hasInput(3)) {
      const std::vector<int64_t> axes = toInt64Vector(ctx.input(3));
      if (pads.size() != 2 * axes.size()) ctx.fail("pads must have two entries per axis in axes");
      std::vector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = ops::normalizeAxis(ctx, axes[i], rank);
        full[a] = pads[i];
        full[a + rank] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank) {
    ctx.fail("pads " + dimsText(pads) + " must have 2 * rank = " + std::to_string(2 * rank) +
             " entries");
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (x.size(d) + pads[d] + pads[d + rank] < 0) {
      ctx.fail("pads " + dimsText(pads) + " remove more than the " + std::to_string(x.size(d)) +
               " elements of axis " + std::to_string(d));
    }
  }

  if (mode == "constant") {
    // ATen lists (begin, end) pairs from the last axis backwards; negative pads crop.
    std::vector<int64_t> aten_pads;
    for (int64_t d = rank - 1; d >= 0; --d) {
      aten_pads.push_back(pads[d]);
      aten_pads.push_back(pads[d + rank]);
    }
    return {at::constant_pad_nd(x, aten_pads, value)};
  }

  at::Tensor y = x;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t begin = pads[d], end = pads[d + rank];
    // Negative pads crop first; the rest gathers source indices along the axis.
    const int64_t crop_begin = std::max<int64_t>(0, -begin), crop_end = std::max<int64_t>(0, -end);
    if (crop_begin > 0 || crop_end > 0) {
      y = y.narrow(d, crop_begin, y.size(d) - crop_begin - crop_end);
    }
    begin = std::max<int64_t>(0, begin);
    end = std::max<int64_t>(0, end);
    if (begin == 0 && end == 0) continue;
    const int64_t dim = y.size(d);
    if (dim == 0) ctx.fail("cannot pad empty axis " + std::to_string(d) + " in mode " + mode);
    std::vector<int64_t> idx;
    for (int64_t j = -begin; j < dim + end; ++j)
      idx.push_back(sourceIndex(mode, j, dim));
    y = y.index_select(d, indexTensor(idx));
  }
  return {y};
}

// Nearest and linear resizing pick or blend input values, so the output is >= 0 where the input
// is; cubic resizing overshoots.
OutputSign resizeSign(const Node& node) {
  const Attribute* mode = node.attributes.find("mode");
  return mode != nullptr && mode->s == "cubic" ? OutputSign::Unknown : OutputSign::OfDataInput;
}

OpInfo resizing(OpInfo info) {
  info.output_sign_of = resizeSign;
  return info;
}

}  // namespace

void registerResizeOps(OpRegistry& r) {
  // Not moves_data_only: linear resizing blends values, and the flag is per op, not per mode
  // (nearest would qualify). Pad's constant mode inserts a value that may lie outside the input's
  // range, so Pad does not qualify either.
  r.add(
      resizing(op("Resize", 10, 17, resize)));  // Resize-18 adds antialias, axes, keep_aspect_ratio
  r.add(resizing(op("Upsample", 7, 9, upsample)));
  r.add(op("Pad", 1, kLatestOpset, pad));
}

}  // namespace qforge
