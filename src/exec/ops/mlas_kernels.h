// ONNX Runtime's x86-64 MLAS kernels for softmax and erf, written as scalar code that rounds
// exactly as the vector kernels do, so the emulation can predict ORT's float outputs bit for bit
// where a quantizer reads them. The facts come from MLAS's x86_64 assembly (TransKernelFma3,
// TransKernelAvx512F, ErfKernelFma3): the constants, the order of every fused multiply-add and
// the lane layout of the sums.
#pragma once

#include <cstdint>

namespace qforge::mlas {

// Which kernel MLAS dispatches to on this CPU: the AVX512F softmax sums 16 lanes and scales with
// VSCALEFPS; the FMA3 one sums 8 lanes and scales by building 2^m in the exponent field.
enum class SumExpKernel { kFma3, kAvx512F };
SumExpKernel sumExpKernelOfThisCpu();

// Softmax of one contiguous row of `count` floats into `out` (which may alias `in`), as
// MlasComputeSoftmax does: max, exp(x - max) with the lane-wise sum, then exp * (1 / sum).
void softmaxRow(const float* in, float* out, int64_t count, SumExpKernel kernel);

// erf(x) as MlasErfKernelFma3 computes it (the kernel x86-64 uses with or without AVX512F).
float erf(float x);

}  // namespace qforge::mlas
