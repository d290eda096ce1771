#include "exec/ops/vector_kernels.h"

#include <atomic>

namespace qforge::ops {

namespace {

std::atomic<VectorKernels> widest_allowed{VectorKernels::kAvx512};

bool cpuRuns(VectorKernels width) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512f = __builtin_cpu_supports("avx512f");
  switch (width) {
    case VectorKernels::kScalar:
      return true;
    case VectorKernels::kAvx2:
      return avx2_fma;
    case VectorKernels::kAvx512:
      return avx512f;
  }
  return false;
#else
  return width == VectorKernels::kScalar;
#endif
}

}  // namespace

VectorKernels setWidestVectorKernels(VectorKernels widest) {
  return widest_allowed.exchange(widest);
}

bool vectorKernelsUsable(VectorKernels width) {
  return widest_allowed.load(std::memory_order_relaxed) >= width && cpuRuns(width);
}

}  // namespace qforge::ops
