// ONNX Runtime's float Conv and FusedConv on x86-64 (MLAS's MlasConv), restated so that every
// output has the bits ORT's has. MLAS lowers a convolution to SGEMMs (exec/ops/mlas_sgemm.h) in
// one of three ways, and each cuts K (input channels x kernel) where its own rules say:
// - pointwise (1 x 1 kernel, stride 1, no padding), or one input channel and a kernel as wide or
//   as tall as the input: one GEMM over the input as it lies;
// - more filters than output positions: the whole input unfolded (im2col), then one GEMM;
// - otherwise: unfolded and multiplied in slices of N and K sized from the output size (128 x 128,
//   K widened when the output is small), each K slice's sum added to the output in turn.
// The output starts from zero, or from FusedConv's Sum input (ORT fuses Conv + Add that way), so
// Sum is added before the bias; then bias and activation, one rounding each. Batches of one split
// the work over ORT's threads, which moves the slices: `threads` is ORT's intra-op thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace qforge::mlas {

struct ConvShape {
  int64_t batch = 1;
  int64_t groups = 1;
  int64_t in_channels = 0;  // per group
  int64_t filters = 0;      // output channels per group
  // Per spatial dim (1 or 2 of them): input, kernel, dilation, stride, output; pads as ONNX lists
  // them (all begins, then all ends).
  std::vector<int64_t> input, kernel, dilation, stride, output, pads;
};

// What follows the convolution in the same kernel (MlasActivation).
struct ConvActivation {
  enum class Kind { kIdentity, kRelu, kClip, kLeakyRelu };
  Kind kind = Kind::kIdentity;
  float minimum = 0, maximum = 0;  // kClip
  float alpha = 0;                 // kLeakyRelu
};

// y [batch, groups * filters, output...] from x [batch, groups * in_channels, input...] and w
// [groups * filters, in_channels, kernel...], all contiguous float32; y holds the Sum input when
// `has_sum`. False (y untouched) for 3-D convolutions, which MLAS computes with kernels not
// restated here.
bool conv(const ConvShape& shape, const float* x, const float* w, const float* bias, float* y,
          bool has_sum, const ConvActivation& activation, int threads);

}  // namespace qforge::mlas
