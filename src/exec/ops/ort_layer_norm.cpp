// ONNX Runtime's float32 normalization kernels, whose rounding the emulation must follow because
// quantizers read their outputs. Each is what ORT's fusions make of a LayerNorm written out in
// primitive ops, measured against onnxruntime-node 1.30 (x86-64, AVX2) on rows of 3 to 100
// elements with and without bias, every output bit for bit:
//
// - LayerNormalization (LayerNormFusion; ORT puts it in the ONNX domain at any opset). Rows of 8
//   or more run MLAS's AVX2 kernel: the mean from a float64 sum in 4 lanes (lanes folded (0+2) +
//   (1+3), the remainder added in order) rounded to float32 after dividing; the centred squares
//   (x - mean)^2 summed in 8 float32 lanes with fused multiply-adds, lanes folded in halves, the
//   remainder added one by one (multiply, then add); 1 / sqrt(sum / n + eps); then
//   (x - mean) * inverse, and with a bias one fused multiply-add of scale and bias. Shorter rows
//   run layer_norm_impl.cc's Welford loop (below).
// - SkipLayerNormalization (com.microsoft, SkipLayerNormFusion of Add + LayerNormalization):
//   input + skip (+ bias), then Welford's running mean and sum of squared deviations in float32
//   for every row length, and (v - mean) / sqrt(M2 / n + eps) * gamma + beta, each operation
//   rounded.
// - SimplifiedLayerNormalization (SimplifiedLayerNormFusion of Pow(x, 2) -> ReduceMean -> Add(eps)
//   -> Sqrt -> Div(x, .) -> Mul(scale)): rows of 8 or more sum x * x in 8 float32 lanes with fused
//   multiply-adds, fold the lanes in halves, add the remaining squares one by one, and scale x by
//   the inverse 1 / sqrt(sum / n + eps); shorter rows add the squares in order, then divide x by
//   sqrt(sum / n + eps). Then times the scale.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/ort_integer_common.h"
#include "exec/ort_emulation.h"

namespace qforge {
namespace {

constexpr int64_t kMlasFloatLanes = 8;   // an AVX2 register of float32
constexpr int64_t kMlasDoubleLanes = 4;  // an AVX2 register of float64

// A scalar as a tensor like `like`: ATen turns division by a scalar into multiplication by its
// reciprocal, which rounds differently.
at::Tensor scalarLike(const at::Tensor& like, double value) {
  return at::full_like(like, static_cast<float>(value));
}

// a * b + c with one rounding, as a fused multiply-add: the product of two float32 values is exact
// in float64 (the sum then rounds twice, which differs only in rare cases).
at::Tensor fusedMultiplyAdd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return (a.to(at::kDouble) * b.to(at::kDouble) + c.to(at::kDouble)).to(at::kFloat);
}

// Sums of [rows, n] kept in `lanes` consecutive columns, the remainder added after the lanes are
// folded in halves (4+4, then (0+2) + (1+3)): MLAS's horizontal reduction.
at::Tensor foldLanes(at::Tensor lanes) {
  for (int64_t width = lanes.size(1) / 2; width >= 1; width /= 2)
    lanes = lanes.narrow(1, 0, width) + lanes.narrow(1, width, width);
  return lanes;
}

// The sum of each row's squares [rows, 1] as MLAS's kernels add them: 8 float32 lanes of fused
// multiply-adds over the whole packets, folded, then the remaining squares one by one (multiply,
// then add).
at::Tensor sumOfSquaresInLanes(const at::Tensor& rows) {
  const int64_t n = rows.size(1);
  const int64_t packets = n / kMlasFloatLanes;
  at::Tensor sum = at::zeros({rows.size(0), 1}, rows.options());
  if (packets > 0) {
    at::Tensor lanes = at::zeros({rows.size(0), kMlasFloatLanes}, rows.options());
    for (int64_t p = 0; p < packets; ++p) {
      const at::Tensor v = rows.narrow(1, p * kMlasFloatLanes, kMlasFloatLanes);
      lanes = fusedMultiplyAdd(v, v, lanes);
    }
    sum = foldLanes(lanes);
  }
  for (int64_t h = packets * kMlasFloatLanes; h < n; ++h) {
    const at::Tensor v = rows.narrow(1, h, 1);
    sum = sum + v * v;
  }
  return sum;
}

// The statistics and output of a normalization over rows [rows, n].
struct Normalized {
  at::Tensor y;     // [rows, n]
  at::Tensor mean;  // [rows, 1]
  at::Tensor inverse_std_dev;
};

// Welford's loop in float32, every operation rounded: for the k-th value, d = v - mean,
// mean += d / k, m2 += d * (v - mean); then (v - mean) / sqrt(m2 / n + eps) * scale (+ bias).
Normalized welford(const at::Tensor& rows, const at::Tensor& scale, const at::Tensor& bias,
                   float epsilon) {
  at::Tensor mean = at::zeros({rows.size(0), 1}, rows.options());
  at::Tensor m2 = at::zeros_like(mean);
  for (int64_t k = 0; k < rows.size(1); ++k) {
    const at::Tensor v = rows.narrow(1, k, 1);
    const at::Tensor d = v - mean;
    mean = mean + d / scalarLike(mean, static_cast<double>(k + 1));
    m2 = m2 + d * (v - mean);
  }
  const at::Tensor std_dev =
      (m2 / scalarLike(m2, static_cast<double>(rows.size(1))) + scalarLike(m2, epsilon)).sqrt();
  at::Tensor y = (rows - mean) / std_dev * scale;
  if (bias.defined()) y = y + bias;
  return {y, mean, at::ones_like(std_dev) / std_dev};
}

// MLAS's AVX2 LayerNorm kernel (rows of 8 or more; see the top of the file).
Normalized mlasLayerNorm(const at::Tensor& rows, const at::Tensor& scale, const at::Tensor& bias,
                         float epsilon) {
  const int64_t n = rows.size(1);
  const at::Tensor wide = rows.to(at::kDouble);
  at::Tensor sum = at::zeros({rows.size(0), kMlasDoubleLanes}, wide.options());
  const int64_t quads = n / kMlasDoubleLanes;
  for (int64_t q = 0; q < quads; ++q)
    sum = sum + wide.narrow(1, q * kMlasDoubleLanes, kMlasDoubleLanes);
  sum = foldLanes(sum);
  for (int64_t h = quads * kMlasDoubleLanes; h < n; ++h)
    sum = sum + wide.narrow(1, h, 1);
  const at::Tensor mean = (sum / static_cast<double>(n)).to(at::kFloat);

  const at::Tensor centred = rows - mean;
  const at::Tensor squares = sumOfSquaresInLanes(centred);
  const at::Tensor inverse =
      at::ones_like(squares) /
      (squares / scalarLike(squares, static_cast<double>(n)) + scalarLike(squares, epsilon)).sqrt();
  const at::Tensor scaled = centred * inverse;
  const at::Tensor y = bias.defined() ? fusedMultiplyAdd(scaled, scale, bias) : scaled * scale;
  return {y, mean, inverse};
}

// X as the rows an op normalizes (the axes from `axis` on); fails on another element type than
// float32.
struct Rows {
  int64_t length = 1;
  at::Tensor x;                     // [rows, length]
  std::vector<int64_t> stat_shape;  // X's leading dims, 1 in each normalized dim
};

Rows rowsOf(const OpContext& ctx, const at::Tensor& x, int64_t axis) {
  if (x.scalar_type() != at::kFloat) {
    ctx.fail("the emulation computes ONNX Runtime's kernel in float32 only, X is " +
             std::string(at::toString(x.scalar_type())));
  }
  Rows r;
  for (int64_t d = axis; d < x.dim(); ++d)
    r.length *= x.size(d);
  r.x = x.contiguous().view({-1, r.length});
  r.stat_shape.assign(x.sizes().begin(), x.sizes().begin() + axis);
  r.stat_shape.resize(x.dim(), 1);
  return r;
}

// A float32 parameter of `length` values as one row [1, length], undefined when the input is
// absent; fails on another size or type.
at::Tensor parameter(const OpContext& ctx, size_t slot, int64_t length) {
  if (!ctx.hasInput(slot)) return {};
  const at::Tensor& p = ctx.input(slot);
  if (p.numel() != length || p.scalar_type() != at::kFloat) {
    ctx.fail("input " + std::to_string(slot) + " must hold " + std::to_string(length) +
             " float32 values (one per normalized element), got " + ops::shapeString(p.sizes()) +
             " " + std::string(at::toString(p.scalar_type())));
  }
  return p.contiguous().view({1, length});
}

// Y, then as many of the statistics as the node has outputs.
std::vector<at::Tensor> outputsOf(const OpContext& ctx, const Normalized& n, const at::Tensor& x,
                                  const Rows& rows) {
  std::vector<at::Tensor> out{n.y.view(x.sizes())};
  if (ctx.outputCount() > 1) out.push_back(n.mean.view(rows.stat_shape));
  if (ctx.outputCount() > 2) out.push_back(n.inverse_std_dev.view(rows.stat_shape));
  return out;
}

std::vector<at::Tensor> layerNorm(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const Rows rows = rowsOf(ctx, x, ops::normalizeAxis(ctx, ctx.attrInt("axis", -1), x.dim()));
  const at::Tensor scale = parameter(ctx, 1, rows.length);
  const at::Tensor bias = parameter(ctx, 2, rows.length);
  const float epsilon = static_cast<float>(ctx.attrFloat("epsilon", 1e-5));
  const Normalized n = rows.length >= kMlasFloatLanes ? mlasLayerNorm(rows.x, scale, bias, epsilon)
                                                      : welford(rows.x, scale, bias, epsilon);
  return outputsOf(ctx, n, x, rows);
}

// com.microsoft SkipLayerNormalization: input, skip, gamma, beta?, bias? -> output, mean?,
// inv_std_var?, input_skip_bias_sum?. The skip repeats over the input's leading elements.
std::vector<at::Tensor> skipLayerNorm(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& skip = ctx.input(1);
  if (x.dim() < 1 || skip.numel() < 1 || x.numel() % skip.numel() != 0 ||
      skip.size(-1) != x.size(-1)) {
    ctx.fail("skip of shape " + ops::shapeString(skip.sizes()) + " does not repeat over input " +
             ops::shapeString(x.sizes()));
  }
  at::Tensor sum =
      (x.contiguous().view({-1, skip.numel()}) + skip.contiguous().view({1, -1})).view(x.sizes());
  const int64_t hidden = x.size(-1);
  if (ctx.hasInput(4)) sum = sum + parameter(ctx, 4, hidden).view({hidden});
  const Rows rows = rowsOf(ctx, sum, x.dim() - 1);
  const Normalized n = welford(rows.x, parameter(ctx, 2, hidden), parameter(ctx, 3, hidden),
                               static_cast<float>(ctx.attrFloat("epsilon", 1e-12)));
  std::vector<at::Tensor> out = outputsOf(ctx, n, x, rows);
  if (ctx.outputCount() > 3) out.push_back(sum);
  return out;
}

std::vector<at::Tensor> simplifiedLayerNorm(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const Rows rows = rowsOf(ctx, x, ops::normalizeAxis(ctx, ctx.attrInt("axis", -1), x.dim()));
  const at::Tensor scale = parameter(ctx, 1, rows.length);
  const float epsilon = static_cast<float>(ctx.attrFloat("epsilon", 1e-5));
  const at::Tensor sum = sumOfSquaresInLanes(rows.x);
  const at::Tensor root =
      (sum / scalarLike(sum, static_cast<double>(rows.length)) + scalarLike(sum, epsilon)).sqrt();
  // Rows of a whole packet or more scale by the inverse; shorter ones divide.
  const at::Tensor normed =
      rows.length >= kMlasFloatLanes ? rows.x * (at::ones_like(root) / root) : rows.x / root;
  return {(normed * scale).view(x.sizes())};
}

}  // namespace

void registerOrtLayerNormOps(OpRegistry& registry) {
  // ORT's graphs hold LayerNormalization in the ONNX domain whatever the model's opset (its
  // kernel is registered from version 1), so the entry is widened to every opset, keeping the
  // built-in facts.
  const OpInfo* builtin = registry.find("", "LayerNormalization", kNewestOnnxOpset);
  if (builtin == nullptr) throw Error("internal: the op table has no LayerNormalization");
  OpInfo layer_norm = *builtin;
  registry.remove("", "LayerNormalization");
  layer_norm.since_version = 1;
  layer_norm.run = layerNorm;
  registry.add(layer_norm);

  OpInfo skip = ort_integer::microsoft(
      ops::op("SkipLayerNormalization", 1, ops::kLatestOpset, skipLayerNorm));
  skip.combines_activations = true;  // input and skip
  registry.add(skip);
  registry.add(ort_integer::microsoft(
      ops::op("SimplifiedLayerNormalization", 1, ops::kLatestOpset, simplifiedLayerNorm)));
  // ORT's own graphs put SimplifiedLayerNormalization in the ONNX domain.
  registry.add(ops::op("SimplifiedLayerNormalization", 1, ops::kLatestOpset, simplifiedLayerNorm));
}

}  // namespace qforge
