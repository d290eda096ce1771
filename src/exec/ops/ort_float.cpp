// Float kernels of ONNX Runtime whose rounding the emulation must follow because quantizers read
// their outputs.
//
// ReduceMean over the innermost axis (LayerNorm's mean and variance): Eigen's vectorized sum
// keeps 8 float lanes, adds the axis in packets of 8, folds the lanes in halves (4+4, 2+2, 1+1)
// and ORT divides by the count; measured equal to onnxruntime-node on every element of a
// [64, 49, 48] tensor of mixed magnitudes. Other shapes run the built-in reduction.
//
// MatMul: MLAS's SGEMM kernels keep one accumulator per output element and add
// the K products in order with fused multiply-adds (for K up to its 256-wide K stride, which
// covers the transformer dims here); ATen's BLAS splits and reorders K, which changes the last
// bit and, where a quantizer sits on a rounding boundary, one level. Products of two float32
// values are exact in float64, so acc = float32(float64(acc) + a*b) is a fused multiply-add
// except in rare double-rounding cases.
//
// Softmax and Erf need nothing here: the built-in lowerings already compute them with MLAS's
// kernels (exec/ops/mlas_ops.h).
#include <ATen/ATen.h>

#include "exec/op_info.h"
#include "exec/ops/common.h"
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

}  // namespace

void registerOrtFloatOps(OpRegistry& registry) {
  // Only the arithmetic changes: the ops keep their facts (MatMul's weight slot and layout).
  registry.replaceLowering("", "MatMul", sequentialMatMul);
  registry.replaceLowering("", "ReduceMean", laneReduceMean);
}

}  // namespace qforge
