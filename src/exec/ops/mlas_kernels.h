// ONNX Runtime's x86-64 MLAS kernels for softmax, erf and the logistic function, written as scalar
// code that rounds exactly as the vector kernels do, so the emulation can predict ORT's float
// outputs bit for bit where a quantizer reads them. The facts come from MLAS's x86_64 assembly
// (TransKernelFma3, TransKernelAvx512F, ErfKernelFma3): the constants, the order of every fused
// multiply-add and the lane layout of the sums.
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

// The logistic function 1 / (1 + e^-x) as MlasLogisticKernelFma3 computes it for ORT's Sigmoid:
// a rational polynomial on x clamped to [-18, 18], never below 0 (and a few ulps above 1 near it).
float logistic(float x);

// GELU as ONNX Runtime's fused Gelu and BiasGelu kernels compute it in float32:
// (x * 0.5f) * (erf(x * (float)M_SQRT1_2) + 1), with the erf above.
float gelu(float x);

// The same kernels over arrays, as fast as MLAS's: 8 lanes at a time with AVX2 and FMA, 16 with
// AVX512F where this CPU has them, performing exactly the operations of the scalar functions
// above, so every output has the same bits. The FMA3 softmax runs on 8 lanes and the AVX512F one
// on 16, as they sum in those lanes; erf and GELU take the widest (lanes are independent there).
// Without those instructions, or narrowed by ops::setWidestVectorKernels
// (exec/ops/vector_kernels.h), they run the scalar functions.
void erfArray(const float* in, float* out, int64_t count);
void logisticArray(const float* in, float* out, int64_t count);
void geluArray(const float* in, float* out, int64_t count);
// `rows` contiguous rows of `width` floats, each as softmaxRow.
void softmaxRows(const float* in, float* out, int64_t rows, int64_t width, SumExpKernel kernel);

}  // namespace qforge::mlas
