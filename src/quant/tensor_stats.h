// Single-pass statistics of float buffers that observers need on every batch.
#pragma once

#include <ATen/ATen.h>

namespace qforge {
namespace quant {

struct MinMax {
  float min = 0.0f;
  float max = 0.0f;
  bool finite = true;  // false when any value is NaN or +-Inf
};

// Min, max and finiteness of a non-overlapping, dense float32 tensor (any layout: its values fill
// numel() consecutive floats) in one parallel pass (empty: finite, 0, 0).
MinMax finiteMinMax(const at::Tensor& x);

// Number of NaN/Inf values (only computed for error messages).
int64_t countNonFinite(const at::Tensor& x);

// Per-channel [C] min and max of `x` along `axis` (the other dimensions reduced).
std::pair<at::Tensor, at::Tensor> channelMinMax(const at::Tensor& x, int64_t axis);

// `x` viewed as [C, N/C] with the channel axis first (copies only when needed).
at::Tensor channelRows(const at::Tensor& x, int64_t axis);

}  // namespace quant
}  // namespace qforge
