// Float kernels of ONNX Runtime whose rounding the emulation must follow because quantizers read
// their outputs: MatMul. MLAS's SGEMM kernels keep one accumulator per output element and add
// the K products in order with fused multiply-adds (for K up to its 256-wide K stride, which
// covers the transformer dims here); ATen's BLAS splits and reorders K, which changes the last
// bit and, where a quantizer sits on a rounding boundary, one level. Products of two float32
// values are exact in float64, so acc = float32(float64(acc) + a*b) is a fused multiply-add
// except in rare double-rounding cases.
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

}  // namespace

void registerOrtFloatOps(OpRegistry& registry) {
  OpInfo info = ops::op("MatMul", 1, ops::kLatestOpset, sequentialMatMul);
  info.weight_inputs = {1};
  info.weight_channel_axis = 1;
  registry.add(info);
}

}  // namespace qforge
