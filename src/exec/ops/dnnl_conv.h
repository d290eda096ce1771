// Float 2-D convolution through oneDNN's own API, the library ATen's mkldnn_convolution calls:
// the weight is reordered once into the layout the kernel wants and kept between runs, the
// primitive is kept per input shape, and what follows the convolution in the graph (an inference
// BatchNormalization, an activation) is computed inside the same kernel, as ONNX Runtime's Conv
// fusions do. Through ATen, every call reordered the weight again and the activation read and
// wrote the whole output once more.
#pragma once

#include <ATen/core/Tensor.h>

#include <any>
#include <cstdint>
#include <optional>

#include "exec/ops/conv_geometry.h"

namespace qforge::ops {

// An elementwise function computed on the convolution's output inside its kernel.
struct ConvActivation {
  enum class Kind {
    Relu,         // max(x, 0) + alpha * min(x, 0): Relu (alpha 0) and LeakyRelu
    Clip,         // min(max(x, alpha), beta)
    Sigmoid,      // 1 / (1 + exp(-x))
    HardSigmoid,  // min(max(alpha * x + beta, 0), 1)
    HardSwish,    // x * HardSigmoid(x) with alpha 1/6, beta 1/2
    Swish,        // x * Sigmoid(x): SiLU, written out as Sigmoid and a Mul by x
  };
  Kind kind = Kind::Relu;
  float alpha = 0;
  float beta = 0;

  bool operator==(const ConvActivation& o) const {
    return kind == o.kind && alpha == o.alpha && beta == o.beta;
  }
};

// An inference BatchNormalization after the convolution: folded into its weight and bias,
// (w * s, (b - mean) * s + bias) with s = scale / sqrt(var + epsilon) per output channel. Every
// tensor is 1-D of the output channel count.
struct ConvBatchNorm {
  at::Tensor scale, bias, mean, var;
  double epsilon = 1e-5;
};

struct ConvEpilogue {
  std::optional<ConvBatchNorm> batch_norm;
  std::optional<ConvActivation> activation;
};

// True when dnnlConv2d computes this convolution: float32, a 4-D non-empty input, no gradient
// wanted through it, and a non-empty output.
bool dnnlConvApplies(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                     const WindowGeometry& g);

// The convolution of x (N, C, H, W) by w (M, C / group, kH, kW) plus `bias` (undefined: none)
// with the window geometry `g`, then `epilogue`. The result has the logical NCHW shape in
// channels-last layout. `state` is the node's slot kept between runs (OpContext::nodeState), or
// null to keep nothing. Throws dnnl::error when oneDNN has no kernel for the case.
at::Tensor dnnlConv2d(std::any* state, const at::Tensor& x, const at::Tensor& w,
                      const at::Tensor& bias, const WindowGeometry& g, int64_t group,
                      const ConvEpilogue& epilogue);

}  // namespace qforge::ops
