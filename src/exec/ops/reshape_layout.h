// Reshape's copy, when it cannot be a view: laid out channels-last where the data already runs
// channel by channel. A channel shuffle (Reshape to N,g,C/g,H,W, Transpose of g and C/g, Reshape
// back) transposes a channels-last activation; ATen's copy writes NCHW, and the Concat, Slice and
// convolution after it each transpose it back. Written channels-last, each pixel's channels are a
// gather from one small block of the input, and what follows reads it as the convolutions left it.
#pragma once

#include <ATen/ATen.h>

namespace qforge::ops {

// `x` reshaped to `target` (its element count already checked): a view when strides allow, a
// channels-last copy for a rank-4 target whose batch, height and width are each one dim of `x`
// and whose channels are not `x`'s fastest dim, ATen's contiguous copy otherwise.
at::Tensor reshapeKeepingLayout(const at::Tensor& x, at::IntArrayRef target);

}  // namespace qforge::ops
