// Helpers shared by the custom autograd functions of the fake quantizers.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include "quant/affine_kernels.h"

namespace qforge {
namespace quant {

// An AffineGrid travels through the autograd context as IValues.
void saveGrid(torch::autograd::AutogradContext* ctx, const AffineGrid& grid);
AffineGrid loadGrid(torch::autograd::AutogradContext* ctx);

// Per-channel sums as a tensor shaped and typed like `like`.
at::Tensor sumsAsTensor(const std::vector<double>& sums, const at::Tensor& like);

// Values of a small tensor (scales, zero points) as doubles.
std::vector<double> toDoubles(const at::Tensor& t);

}  // namespace quant
}  // namespace qforge
