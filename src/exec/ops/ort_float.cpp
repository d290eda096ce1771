// Float kernels of ONNX Runtime whose rounding the emulation must follow because quantizers read
// their outputs.
//
// ReduceMean over the innermost axis (LayerNorm's mean and variance): Eigen's vectorized sum
// keeps 8 float lanes, adds the axis in packets of 8, folds the lanes in halves (4+4, 2+2, 1+1)
// and ORT divides by the count; measured equal to onnxruntime-node on every element of a
// [64, 49, 48] tensor of mixed magnitudes. Over one middle axis (a ViT's mean over its tokens) ORT
// sums with MLAS's GEMM of a row of ones (MLAS's single-row kernel: four rows at a time, each
// group's sum added to the total), over the leading axis it adds the rows in order; then it
// divides. Other reductions run the built-in one.
//
// MatMul: MLAS's SGEMM kernels keep one accumulator per output element and add
// the K products in order with fused multiply-adds (for K up to its 256-wide K stride, which
// covers the transformer dims here); ATen's BLAS splits and reorders K, which changes the last
// bit and, where a quantizer sits on a rounding boundary, one level. Products of two float32
// values are exact in float64, so acc = float32(float64(acc) + a*b) is a fused multiply-add
// except in rare double-rounding cases.
//
// The normalizations ORT's fusions make (LayerNormalization, SkipLayerNormalization,
// SimplifiedLayerNormalization) are in exec/ops/ort_layer_norm.cpp.
//
// Softmax and Erf need nothing here: the built-in lowerings already compute them with MLAS's
// kernels (exec/ops/mlas_ops.h).
#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/mlas_ops.h"
#include "exec/ops/mlas_sgemm.h"
#include "exec/ops/ort_integer_common.h"
#include "exec/ort_emulation.h"

namespace qforge {
namespace {

constexpr int64_t kMlasStrideK = 256;

std::vector<at::Tensor> sequentialMatMul(const OpContext& ctx) {
  at::Tensor a = ctx.input(0);
  at::Tensor b = ctx.input(1);
  if (a.scalar_type() != at::kFloat || b.scalar_type() != at::kFloat || a.dim() < 2 ||
      b.dim() < 2 || a.size(-1) != b.size(-2) || a.size(-1) > kMlasStrideK) {
    return {at::matmul(a, b)};  // outside what the sequential rule describes
  }
  const int64_t k_count = a.size(-1);
  const at::Tensor a64 = a.to(at::kDouble);
  const at::Tensor b64 = b.to(at::kDouble);
  at::Tensor acc;
  for (int64_t k = 0; k < k_count; ++k) {
    const at::Tensor product = a64.narrow(-1, k, 1) * b64.narrow(-2, k, 1);  // exact
    acc = k == 0 ? product.to(at::kFloat) : (acc.to(at::kDouble) + product).to(at::kFloat);
  }
  return {acc};
}

constexpr int64_t kEigenLanes = 8;

// ReduceAggregatorMean over one axis that is not the innermost, as [outer, count, inner]: over a
// middle axis (outer and inner > 1, ORT's FastReduceKRK) each outer slice is a row of ones times
// the [count, inner] matrix, one GEMM; over the leading axis (FastReduceRK) the rows are added in
// order. Then the sums are divided by the count. Undefined for the other shapes.
at::Tensor meanOverOuterAxis(const at::Tensor& x, int64_t axis) {
  if (axis < 0 || axis >= x.dim()) return {};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.size(d);
  for (int64_t d = axis + 1; d < x.dim(); ++d)
    inner *= x.size(d);
  const int64_t count = x.size(axis);
  if (inner <= 1 || count < 1 || (axis > 0 && outer <= 1)) return {};
  const at::Tensor xc = x.contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape[axis] = 1;
  at::Tensor sum = at::empty(shape, x.options());
  const float* in = xc.data_ptr<float>();
  float* out = sum.data_ptr<float>();
  if (axis == 0) {
    std::copy(in, in + inner, out);
    for (int64_t r = 1; r < count; ++r) {
      for (int64_t j = 0; j < inner; ++j)
        out[j] = out[j] + in[r * inner + j];
    }
  } else {
    const std::vector<float> ones(static_cast<size_t>(count), 1.0f);
    for (int64_t o = 0; o < outer; ++o) {
      mlas::sgemm(1, inner, count, ones.data(), count, in + o * count * inner, inner, false,
                  out + o * inner, inner, false, 1);
    }
  }
  return sum / at::full_like(sum, static_cast<float>(count));
}

std::vector<at::Tensor> laneReduceMean(const OpContext& ctx) {
  const OpInfo* builtin = OpRegistry::builtin().find("", "ReduceMean", ctx.opset());
  const at::Tensor& x = ctx.input(0);
  std::vector<int64_t> axes;
  if (ctx.opset() < 18) {
    axes = ctx.attrInts("axes", {});
  } else if (ctx.hasInput(1)) {
    const at::Tensor a = ctx.input(1).to(at::kLong).contiguous();
    axes.assign(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + a.numel());
  }
  const bool innermost = axes.size() == 1 && (axes[0] == -1 || axes[0] == x.dim() - 1);
  if (x.scalar_type() == at::kFloat && axes.size() == 1 && !innermost) {
    at::Tensor mean = meanOverOuterAxis(x, axes[0] < 0 ? axes[0] + x.dim() : axes[0]);
    if (mean.defined()) {
      if (ctx.attrInt("keepdims", 1) == 0) mean = mean.squeeze(axes[0]);
      return {mean};
    }
  }
  if (x.scalar_type() != at::kFloat || x.dim() < 1 || !innermost || x.size(-1) % kEigenLanes != 0) {
    // Without the followers: the built-in would compute a LayerNorm written out in one kernel,
    // whose rounding is not ONNX Runtime's.
    OpContext alone = ctx;
    alone.setTail({}, {});
    return builtin->run(alone);
  }
  const int64_t n = x.size(-1);
  std::vector<int64_t> packets_shape = x.sizes().vec();
  packets_shape.back() = n / kEigenLanes;
  packets_shape.push_back(kEigenLanes);
  const at::Tensor packets = x.contiguous().view(packets_shape);
  at::Tensor lanes = packets.select(-2, 0).clone();
  for (int64_t p = 1; p < n / kEigenLanes; ++p)
    lanes = lanes + packets.select(-2, p);
  for (int64_t width = kEigenLanes / 2; width >= 1; width /= 2)
    lanes = lanes.narrow(-1, 0, width) + lanes.narrow(-1, width, width);
  // A tensor divisor: ATen turns division by a scalar into multiplication by its reciprocal.
  at::Tensor mean = lanes / at::full_like(lanes, static_cast<float>(n));
  if (ctx.attrInt("keepdims", 1) == 0) mean = mean.squeeze(-1);
  return {mean};
}

// com.microsoft BiasGelu, what ORT's BiasGeluFusion makes of Add(bias) -> the written-out GELU:
// the sum, then GELU as its fused kernels compute it (exec/ops/mlas_ops.h).
std::vector<at::Tensor> biasGelu(const OpContext& ctx) {
  const at::Tensor sum = ctx.input(0) + ctx.input(1);
  if (!ops::mlasKernelsApply(sum)) {
    ctx.fail("the emulation computes BiasGelu in float32 only, the input is " +
             std::string(at::toString(sum.scalar_type())));
  }
  return {ops::mlasGelu(sum)};
}

// com.microsoft QuickGelu, what ORT's QuickGeluFusion makes of x * Sigmoid(alpha * x) (SiLU at
// alpha 1): x times MLAS's logistic of alpha * x, each product one float32 rounding.
std::vector<at::Tensor> quickGelu(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (!ops::mlasKernelsApply(x)) {
    ctx.fail("the emulation computes QuickGelu in float32 only, the input is " +
             std::string(at::toString(x.scalar_type())));
  }
  const float alpha = static_cast<float>(ctx.attrFloat("alpha", 1.702));
  return {x * ops::mlasLogistic(x * at::full({}, alpha, x.options()))};
}

}  // namespace

void registerOrtFloatOps(OpRegistry& registry) {
  // Only the arithmetic changes: the ops keep their facts (MatMul's weight slot and layout).
  registry.replaceLowering("", "MatMul", sequentialMatMul);
  registry.replaceLowering("", "ReduceMean", laneReduceMean);
  registry.add(ort_integer::microsoft(ops::op("BiasGelu", 1, ops::kLatestOpset, biasGelu)));
  registry.add(ort_integer::microsoft(ops::op("QuickGelu", 1, ops::kLatestOpset, quickGelu)));
}

}  // namespace qforge
