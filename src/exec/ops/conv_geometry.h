// Window geometry shared by Conv, ConvTranspose's forward-style attributes, pooling and the
// quantized convolutions: strides, dilations and the pads implied by `pads` or `auto_pad`.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "exec/op_info.h"

namespace qforge::ops {

struct WindowGeometry {
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;

  bool symmetric() const { return pads_begin == pads_end; }
};

// Resolves the attributes of a windowed op (Conv, MaxPool, AveragePool, QLinearConv...) for an
// input whose spatial sizes are `input_spatial` and a kernel of `kernel_spatial`. Handles
// auto_pad NOTSET / VALID / SAME_UPPER / SAME_LOWER (ONNX: SAME_UPPER puts the odd pad at the
// end). `ceil_mode` affects SAME output sizes only through the caller.
WindowGeometry resolveWindowGeometry(const OpContext& ctx, at::IntArrayRef input_spatial,
                                     at::IntArrayRef kernel_spatial);

// Pads `x` (N, C, spatial...) explicitly by `g`'s begin/end pads with `value` and returns it, so
// that ATen can then be called with zero padding. Used only when the pads are asymmetric, which
// ATen's kernels cannot express.
at::Tensor padSpatial(const at::Tensor& x, const WindowGeometry& g, double value);

}  // namespace qforge::ops
