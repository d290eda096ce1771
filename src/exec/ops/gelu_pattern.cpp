#include "exec/ops/gelu_pattern.h"

#include <ATen/ATen.h>

#include <cmath>

#include "exec/ops/mlas_ops.h"
#include "exec/ops/tail_operands.h"

namespace qforge::ops {

namespace {

// A one-element constant of x's type whose value is `expected` to float precision.
bool isScalar(const std::optional<at::Tensor>& t, const at::Tensor& x, double expected) {
  if (!t || t->numel() != 1 || t->scalar_type() != x.scalar_type() || t->dim() > x.dim()) {
    return false;
  }
  return std::abs(scalarValue(*t) - expected) <= 1e-6 * std::abs(expected);
}

}  // namespace

const std::vector<std::string>& geluFollowers() {
  static const std::vector<std::string> kOps = {"Erf", "Add", "Mul"};
  return kOps;
}

std::optional<at::Tensor> geluOfTail(const OpContext& div, const at::Tensor& x,
                                     const at::Tensor& divisor) {
  const std::vector<OpContext>& tail = div.tail();
  if (tail.size() < 4 || !at::isFloatingType(x.scalar_type()) || x.scalar_type() == at::kHalf) {
    return std::nullopt;
  }
  const std::optional<at::Tensor> factor = operandBesidePrevious(div, 2);
  const bool matches = isScalar(divisor, x, std::sqrt(2.0)) && tail[0].node().opType() == "Erf" &&
                       div.followerReads(0, 0, 0) && tail[1].node().opType() == "Add" &&
                       isScalar(operandBesidePrevious(div, 1), x, 1.0) &&
                       tail[2].node().opType() == "Mul" && factor && factor->is_same(x) &&
                       tail[3].node().opType() == "Mul" &&
                       isScalar(operandBesidePrevious(div, 3), x, 0.5);
  if (!matches || !div.mayStopAfter(4)) return std::nullopt;
  div.absorb(4);
  // In float32 inference, as ONNX Runtime's fused kernel computes it (exec/ops/mlas_ops.h).
  return mlasKernelsApply(x) ? mlasGelu(x) : at::gelu(x);
}

}  // namespace qforge::ops
