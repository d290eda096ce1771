// Dense tensors in the order their elements sit in memory. The executor keeps convolution
// outputs channels-last (NHWC in memory, NCHW in shape); code that walks a tensor's values where
// their position does not matter (per-tensor statistics, per-tensor fake quantization) reads them
// through these views instead of copying them back to NCHW.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace qforge {

// The dims of `x` from the slowest-varying in memory to the fastest: `x.permute(order)` is
// contiguous when `x` is non-overlapping and dense.
std::vector<int64_t> memoryOrder(const at::Tensor& x);

// `x` itself when it is non-overlapping and dense; otherwise a dense copy in the layout its
// strides suggest. A channel slice of a channels-last activation is copied channels-last: a
// copy of whole pixel rows rather than a transposition, and the layout a convolution reads.
at::Tensor denseInOwnLayout(const at::Tensor& x);

// `x` with its dims permuted into memory order: a contiguous view, no copy, of a dense tensor
// (any layout); a contiguous copy of anything else. Same elements, positions permuted.
at::Tensor inMemoryOrder(const at::Tensor& x);

// Undoes inMemoryOrder on a tensor computed elementwise from its result: `y` laid out like the
// view, returned with `like`'s dims (and so `like`'s strides when `like` was dense).
at::Tensor fromMemoryOrder(const at::Tensor& y, const at::Tensor& like);

}  // namespace qforge
