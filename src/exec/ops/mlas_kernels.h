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

// The same kernels over arrays, as fast as MLAS's: 8 lanes at a time with AVX2 and FMA (erf, the
// FMA3 softmax) or 16 with AVX512F (its softmax) where this CPU has them, performing exactly the
// operations of the scalar functions above, so every output has the same bits. Without those
// instructions they run the scalar functions.
void erfArray(const float* in, float* out, int64_t count);
// `rows` contiguous rows of `width` floats, each as softmaxRow.
void softmaxRows(const float* in, float* out, int64_t rows, int64_t width, SumExpKernel kernel);

// Tests compare both paths on one machine: false makes erfArray and softmaxRows run the scalar
// functions. Returns the previous setting.
bool setVectorKernelsAllowed(bool allowed);

}  // namespace qforge::mlas
