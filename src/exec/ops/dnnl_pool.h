// Float 2-D max pooling of a channels-last activation through oneDNN. A MaxPool usually reads a
// convolution's output, which the executor leaves channels-last (exec/ops/dnnl_conv.h); ATen's
// channels-last max pooling took three times as long as ONNX Runtime's on ShuffleNet's stem
// (bench/README.md). The primitive is kept per input shape in the node's state.
#pragma once

#include <ATen/core/Tensor.h>

#include <any>
#include <cstdint>
#include <vector>

namespace qforge::ops {

// Two entries each (height, width); no dilation.
struct MaxPoolWindow {
  std::vector<int64_t> kernel, strides, pads_begin;
  std::vector<int64_t> output;  // the pooled sizes, ceil_mode already applied
};

// True when dnnlMaxPool2d takes this case: x float32, 4-D, non-empty, stored channels-last (and
// not also NCHW-contiguous, where ATen's kernel reads in order), no gradient; and every window
// overlaps the input (pads on either side smaller than the kernel).
bool dnnlMaxPoolApplies(const at::Tensor& x, const MaxPoolWindow& window);

// The max pooling of x (N, C, H, W) over `window`; padded cells never win, as ONNX specifies.
// The result is channels-last. Throws dnnl::error when oneDNN has no kernel for the case.
at::Tensor dnnlMaxPool2d(std::any* state, const at::Tensor& x, const MaxPoolWindow& window);

}  // namespace qforge::ops
