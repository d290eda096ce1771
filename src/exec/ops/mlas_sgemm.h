// ONNX Runtime's float GEMM (MLAS's SGEMM on x86-64) restated so that every output has the bits
// ORT's has: what decides them is not the kernel's speed tricks but where it splits K. Each output
// element keeps one accumulator that adds its products in k order with fused multiply-adds; K is
// cut into slices whose width depends on N (MlasSgemmOperation's strides: 128 x 128, K widened up
// to 1024 when N is small, narrowed when K is small); the first slice's sum is the output (or is
// added to it when accumulating) and each later slice's sum is added to it. Threads split N in
// blocks of 16 when N > M (MlasGemmBatch), which changes the slices' widths; they split M
// otherwise, which matters only to the kernel for N = 1 (and a thread left one row takes M = 1's).
// Measured equal to onnxruntime-node 1.30 on every element of the zoo ResNet's convolutions and
// classifier (tests/verify/ort_float_emulation_test.cpp).
#pragma once

#include <cstdint>

namespace qforge::mlas {

// C[m, n] (row stride ldc) = sum over k of A[m, k] * B'[k, n], or C + that sum with
// `accumulate` (SGEMM's beta 1; alpha is 1). A is row-major with row stride lda; B' is B
// (row-major K x N, row stride ldb) or, with `trans_b`, B transposed (B row-major N x K).
// MlasSgemmOperation: one thread's work. One row of A (M = 1), or one column of B and C (N = 1,
// both contiguous), take MLAS's AVX kernels for them, which sum without fused multiply-adds:
// the first in groups of four rows of K, the second in eight lanes.
void sgemmOperation(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                    int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate);

// MlasGemm: the same product split over `threads` as ORT's thread pool of that size splits it.
// `packed_b`: B is a constant ORT packed when it loaded the model (Gemm's and MatMul's PrePack),
// whose slices are fixed at 128 columns and 256 rows of K (MlasSgemmPackedOperation).
void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate, int threads,
           bool packed_b = false);

// MLAS's GEMM with A transposed (CblasTrans): A is stored K x M with row stride lda. MLAS
// computes it as the product of A's columns, except that it never widens K for a small N, and
// one column of B and C (N = 1) takes the single-row kernel. ConvTranspose's GEMM.
void sgemmTransposedA(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate, int threads);

// MlasSgemmOperation's slice widths for an N x K product (128 x 128, N widened when K is small,
// else K widened when N is small, unless `widen_k` is false: A transposed); MlasConvOperation
// cuts its own slices by the same rule.
void sliceWidths(int64_t n, int64_t k, int64_t* stride_n, int64_t* stride_k, bool widen_k = true);

// MLAS's range of `total` work items for thread `index` of `count` (MlasPartitionWork): the
// first total % count threads take one item more.
void partitionWork(int64_t index, int64_t count, int64_t total, int64_t* start, int64_t* size);

constexpr int64_t kSgemmThreadComplexity = 64 * 1024;  // multiplies per thread
constexpr int64_t kMaximumThreadCount = 16;            // MLAS_MAXIMUM_THREAD_COUNT
constexpr int64_t kStrideNThreadAlign = 16;            // MLAS_SGEMM_STRIDEN_THREAD_ALIGN

}  // namespace qforge::mlas
