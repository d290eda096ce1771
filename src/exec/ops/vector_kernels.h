// Which of qforge's hand-written vector kernels may run (MLAS's kernels restated in
// exec/ops/mlas_kernels.h, LayerNorm's rows). Each computes exactly what its scalar statement
// computes, lane by lane; tests compare every width on one machine by narrowing this setting.
#pragma once

namespace qforge::ops {

enum class VectorKernels { kScalar, kAvx2, kAvx512 };

// The widest kernels allowed from now on (default kAvx512); returns the previous setting.
VectorKernels setWidestVectorKernels(VectorKernels widest);

// True when kernels of `width` are allowed and this CPU runs them (kAvx2: AVX2 with FMA;
// kAvx512: AVX512F). kScalar is always usable.
bool vectorKernelsUsable(VectorKernels width);

}  // namespace qforge::ops
