// The slices follow MLAS's sgemm.cpp; the arithmetic of one slice is std::fmaf per product, or
// 8 such lanes at once with AVX2's FMA, which rounds each lane exactly as fmaf does.
#include "exec/ops/mlas_sgemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "exec/ops/vector_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFORGE_SGEMM_X86 1
#endif

namespace qforge::mlas {
namespace {

constexpr int64_t kStrideN = 128;  // MLAS_SGEMM_STRIDEN
constexpr int64_t kStrideK = 128;  // MLAS_SGEMM_STRIDEK

// acc[j] += a * row[j] for j < count, one rounding each.
void fmaRowScalar(float a, const float* row, float* acc, int64_t count) {
  for (int64_t j = 0; j < count; ++j)
    acc[j] = std::fmaf(a, row[j], acc[j]);
}

#ifdef QFORGE_SGEMM_X86
__attribute__((target("avx2,fma"))) void fmaRowAvx2(float a, const float* row, float* acc,
                                                    int64_t count) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t j = 0;
  for (; j + 8 <= count; j += 8)
    _mm256_storeu_ps(acc + j,
                     _mm256_fmadd_ps(av, _mm256_loadu_ps(row + j), _mm256_loadu_ps(acc + j)));
  fmaRowScalar(a, row + j, acc + j, count - j);
}
#endif

}  // namespace

void partitionWork(int64_t index, int64_t count, int64_t total, int64_t* start, int64_t* size) {
  const int64_t per_thread = total / count;
  const int64_t extra = total % count;
  if (index < extra) {
    *size = per_thread + 1;
    *start = index * *size;
  } else {
    *size = per_thread;
    *start = per_thread * index + extra;
  }
}

namespace {

// The product in slices of stride_n columns and stride_k rows of K.
void slicedProduct(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate,
                   int64_t stride_n, int64_t stride_k) {
  void (*fmaRow)(float, const float*, float*, int64_t) = fmaRowScalar;
#ifdef QFORGE_SGEMM_X86
  if (ops::vectorKernelsUsable(ops::VectorKernels::kAvx2)) fmaRow = fmaRowAvx2;
#endif
  std::vector<float> panel;  // B's slice as rows of k: what the packed panel holds
  std::vector<float> acc;
  for (int64_t n0 = 0; n0 < n; n0 += stride_n) {
    const int64_t count_n = std::min(stride_n, n - n0);
    bool first = !accumulate;
    for (int64_t k0 = 0; k0 < k; k0 += stride_k) {
      const int64_t count_k = std::min(stride_k, k - k0);
      panel.resize(static_cast<size_t>(count_k * count_n));
      for (int64_t kk = 0; kk < count_k; ++kk) {
        for (int64_t j = 0; j < count_n; ++j) {
          panel[kk * count_n + j] =
              trans_b ? b[(n0 + j) * ldb + k0 + kk] : b[(k0 + kk) * ldb + n0 + j];
        }
      }
      acc.resize(static_cast<size_t>(count_n));
      for (int64_t i = 0; i < m; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        const float* a_row = a + i * lda + k0;
        for (int64_t kk = 0; kk < count_k; ++kk)
          fmaRow(a_row[kk], panel.data() + kk * count_n, acc.data(), count_n);
        float* c_row = c + i * ldc + n0;
        for (int64_t j = 0; j < count_n; ++j)
          c_row[j] = first ? acc[j] : c_row[j] + acc[j];
      }
      first = false;
    }
  }
}

// MlasSgemmKernelM1Avx (one row of A, B not transposed): each output adds the products of four
// rows of K in k order, each product and sum rounded (AVX has no fused multiply-add), and adds
// that group's sum to the output; a remainder of two rows, then of one, likewise.
void kernelM1(int64_t n, int64_t k, const float* a, const float* b, int64_t ldb, float* c,
              bool accumulate) {
  if (!accumulate) std::fill(c, c + n, 0.0f);
  for (int64_t k0 = 0; k0 < k;) {
    const int64_t rows = k - k0 >= 4 ? 4 : k - k0 >= 2 ? 2 : 1;
    for (int64_t j = 0; j < n; ++j) {
      float group = a[k0] * b[k0 * ldb + j];
      for (int64_t r = 1; r < rows; ++r)
        group = group + a[k0 + r] * b[(k0 + r) * ldb + j];
      c[j] = group + c[j];
    }
    k0 += rows;
  }
}

// MlasSgemmKernelM1TransposeBAvx: output j is the dot product of a with row j of b, summed in 8
// lanes (lane l takes every k = l mod 8, products and sums rounded); the lanes are reduced in an
// order that depends on whether the row fell in a block of 4, 2 or 1 rows (blocks of 4 first,
// counted from this call's first row), and the result is added to the output.
void kernelM1TransposeB(int64_t n, int64_t k, const float* a, const float* b, int64_t ldb, float* c,
                        bool accumulate) {
  const auto lanes = [&](int64_t j, float* l) {
    std::fill(l, l + 8, 0.0f);
    const float* row = b + j * ldb;
    for (int64_t kk = 0; kk < k; ++kk)
      l[kk % 8] = l[kk % 8] + a[kk] * row[kk];
  };
  float l[8];
  int64_t j = 0;
  const auto store = [&](float sum) {
    c[j] = accumulate ? sum + c[j] : sum;
    ++j;
  };
  const int64_t in_fours = n - n % 4;
  while (j < in_fours) {
    lanes(j, l);
    store((((l[0] + l[1]) + l[2]) + l[3]) + (((l[4] + l[5]) + l[6]) + l[7]));
  }
  if (n - j >= 2) {
    for (int r = 0; r < 2; ++r) {
      lanes(j, l);
      store(((l[0] + l[2]) + (l[4] + l[6])) + ((l[1] + l[3]) + (l[5] + l[7])));
    }
  }
  if (n - j == 1) {
    lanes(j, l);
    store(((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])));
  }
}

constexpr int64_t kPackedStrideN = 128;  // MLAS_SGEMM_PACKED_STRIDEN
constexpr int64_t kPackedStrideK = 256;  // MLAS_SGEMM_PACKED_STRIDEK

}  // namespace

void sliceWidths(int64_t n, int64_t k, int64_t* stride_n, int64_t* stride_k, bool widen_k) {
  *stride_n = kStrideN;
  *stride_k = kStrideK;
  if (n >= k) {
    while (*stride_k / 2 >= k) {
      *stride_n *= 2;
      *stride_k /= 2;
    }
  } else if (widen_k) {
    while (*stride_n > 16 && *stride_n / 2 >= n) {
      *stride_k *= 2;
      *stride_n /= 2;
    }
  }
}

void sgemmOperation(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                    int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate) {
  // MlasSgemmOperation's kernels for one row of A, and for one column of B and C (then A's rows
  // are the transposed B of the same kernel).
  if (m == 1) {
    if (trans_b) {
      kernelM1TransposeB(n, k, a, b, ldb, c, accumulate);
    } else {
      kernelM1(n, k, a, b, ldb, c, accumulate);
    }
    return;
  }
  if (n == 1 && ldb == 1 && ldc == 1) {
    kernelM1TransposeB(m, k, b, a, lda, c, accumulate);
    return;
  }
  int64_t stride_n = 0, stride_k = 0;
  sliceWidths(n, k, &stride_n, &stride_k);
  slicedProduct(m, n, k, a, lda, b, ldb, trans_b, c, ldc, accumulate, stride_n, stride_k);
}

namespace {

// MlasGemmBatch's split of one product over `threads`: how many threads its size earns, then
// columns in blocks of 16 when N > M, else rows; `part(m0, rows, n0, cols)` is one thread's work.
template <typename Part>
void splitOverThreads(int64_t m, int64_t n, int64_t k, int threads, const Part& part) {
  const double complexity =
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  int64_t target = complexity < static_cast<double>(kSgemmThreadComplexity) * threads
                       ? static_cast<int64_t>(complexity / kSgemmThreadComplexity) + 1
                       : threads;
  target = std::min<int64_t>(target, std::max(threads, 1));
  if (n > m) {
    const int64_t blocked_n = (n + kStrideNThreadAlign - 1) / kStrideNThreadAlign;
    const int64_t count = std::min(target, blocked_n);
    for (int64_t t = 0; t < count; ++t) {
      int64_t start = 0, size = 0;
      partitionWork(t, count, blocked_n, &start, &size);
      start *= kStrideNThreadAlign;
      size = std::min(n - start, size * kStrideNThreadAlign);
      if (size > 0) part(0, m, start, size);
    }
    return;
  }
  // Each thread's rows see the whole of N, so only the kernels for one row or column of the
  // product see where a thread's rows start (blocks of 4 rows count from there).
  const int64_t count = std::min(target, m);
  for (int64_t t = 0; t < count; ++t) {
    int64_t start = 0, size = 0;
    partitionWork(t, count, m, &start, &size);
    if (size > 0) part(start, size, 0, n);
  }
}

// MlasSgemmOperation with A transposed (stored K x M): MLAS packs A's columns as rows and runs
// the same kernels, but never widens the K slices for a small N; one column of B and C takes the
// single-row kernel with A's storage as its B.
void operationTransposedA(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                          const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (n == 1 && ldb == 1 && ldc == 1) {
    kernelM1(m, k, b, a, lda, c, accumulate);
    return;
  }
  std::vector<float> rows(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk)
      rows[i * k + kk] = a[kk * lda + i];
  }
  int64_t stride_n = 0, stride_k = 0;
  sliceWidths(n, k, &stride_n, &stride_k, /*widen_k=*/false);
  slicedProduct(m, n, k, rows.data(), k, b, ldb, false, c, ldc, accumulate, stride_n, stride_k);
}

}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate, int threads,
           bool packed_b) {
  splitOverThreads(m, n, k, threads, [&](int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
    const float* a_part = a + m0 * lda;
    const float* b_part = trans_b ? b + n0 * ldb : b + n0;
    float* c_part = c + m0 * ldc + n0;
    // MlasSgemmPackedOperation has no kernels for one row or column: B lies packed.
    if (packed_b) {
      slicedProduct(rows, cols, k, a_part, lda, b_part, ldb, trans_b, c_part, ldc, accumulate,
                    kPackedStrideN, kPackedStrideK);
    } else {
      sgemmOperation(rows, cols, k, a_part, lda, b_part, ldb, trans_b, c_part, ldc, accumulate);
    }
  });
}

void sgemmTransposedA(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate, int threads) {
  splitOverThreads(m, n, k, threads, [&](int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
    operationTransposedA(rows, cols, k, a + m0, lda, b + n0, ldb, c + m0 * ldc + n0, ldc,
                         accumulate);
  });
}

}  // namespace qforge::mlas
