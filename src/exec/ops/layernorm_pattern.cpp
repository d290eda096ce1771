#include "exec/ops/layernorm_pattern.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "exec/ops/common.h"
#include "exec/ops/tail_operands.h"
#include "exec/ops/vector_kernels.h"

namespace qforge::ops {

namespace {

// Positions in the tail, after the first ReduceMean.
enum Follower : size_t {
  kSub,
  kPow,
  kMeanOfSquares,
  kAddEpsilon,
  kSqrt,
  kDiv,
  kMulGamma,
  kAddBeta
};

// Rows per thread chunk are sized so a batch-1 transformer's LayerNorm (50 rows of 96) stays on
// one thread: forking costs more than it saves there.
constexpr int64_t kElementsPerChunk = 16384;

// Kept (keepdims = 1) and over the last axis only, as the attribute or, from opset 18, input 1.
bool reducesLastAxisKept(const OpContext& node, int64_t rank) {
  if (node.attrInt("keepdims", 1) == 0) return false;
  std::vector<int64_t> axes;
  if (node.opset() >= 18) {
    if (!node.hasInput(1)) return false;
    axes = toInt64Vector(node.input(1));
  } else {
    axes = node.attrInts("axes", {});
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

bool isOp(const OpContext& head, size_t k, const char* op_type) {
  return head.tail()[k].node().opType() == op_type && head.tail()[k].node().domain().empty();
}

// A one-element float32 tensor's value.
std::optional<float> floatScalar(const std::optional<at::Tensor>& t, int64_t rank) {
  if (!t || t->numel() != 1 || t->scalar_type() != at::kFloat || t->dim() > rank) {
    return std::nullopt;
  }
  return static_cast<float>(scalarValue(*t));
}

// gamma or beta as `features` contiguous floats, when it broadcasts along the last axis only.
at::Tensor perFeature(const std::optional<at::Tensor>& t, int64_t features, int64_t rank) {
  if (!t || t->scalar_type() != at::kFloat || t->dim() > rank) return {};
  if (t->numel() == 1) return t->reshape({1}).expand({features}).contiguous();
  return valuesAlongLastAxis(*t, features);
}

// Sums in double over eight partial accumulators (vectorizable; the result is the float32 mean's
// source, rounded once). `square` sums float32(v * v), as Pow(d, 2) would have stored it.
template <bool square>
double sumInDouble(const float* v, int64_t n) {
  double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float term = square ? v[i + j] * v[i + j] : v[i + j];
      partial[j] += term;
    }
  }
  double sum = 0;
  for (; i < n; ++i) {
    const float term = square ? v[i] * v[i] : v[i];
    sum += term;
  }
  for (double p : partial)
    sum += p;
  return sum;
}

// One row normalized into `yr`: the Sub's d, the variance of d, then d / deviation, * gamma,
// + beta, each a float32 operation of its own, as the written-out nodes compute them.
void normalizeRow(const float* xr, float* yr, int64_t n, float epsilon, const float* g,
                  const float* b) {
  const float mean = static_cast<float>(sumInDouble<false>(xr, n) / static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i)
    yr[i] = xr[i] - mean;  // the Sub's d, kept in the output row
  const float variance = static_cast<float>(sumInDouble<true>(yr, n) / static_cast<double>(n));
  const float deviation = std::sqrt(variance + epsilon);
  for (int64_t i = 0; i < n; ++i) {
    float v = yr[i] / deviation;
    if (g != nullptr) v = v * g[i];
    if (b != nullptr) v = v + b[i];
    yr[i] = v;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define QFORGE_AVX512 __attribute__((target("avx512f")))

// GCC 12 reports the placeholder (_mm512_undefined_*) inside its own AVX512F intrinsics as maybe
// uninitialized; the warning is about the header, not this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The lanes of a 16-float vector that hold the `count` elements left, all 16 when as many remain.
QFORGE_AVX512 inline __mmask16 lanesFor(int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xffffu : (1u << count) - 1u);
}

// sumInDouble with its eight partial sums in the lanes of one register: lane j adds the same
// terms in the same order as partial[j], then the tail and the lanes are added as there.
template <bool square>
QFORGE_AVX512 double sumInDoubleAvx512(const float* v, int64_t n) {
  __m512d partial = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 terms = _mm256_loadu_ps(v + i);
    if (square) terms = _mm256_mul_ps(terms, terms);
    partial = _mm512_add_pd(partial, _mm512_cvtps_pd(terms));
  }
  double sum = 0;
  for (; i < n; ++i) {
    const float term = square ? v[i] * v[i] : v[i];
    sum += term;
  }
  double lanes[8];
  _mm512_storeu_pd(lanes, partial);
  for (double p : lanes)
    sum += p;
  return sum;
}

// normalizeRow 16 floats at a time: the same operations per element (the build does not fuse a
// multiply and an add), so the same bits.
QFORGE_AVX512 void normalizeRowAvx512(const float* xr, float* yr, int64_t n, float epsilon,
                                      const float* g, const float* b) {
  const float mean = static_cast<float>(sumInDoubleAvx512<false>(xr, n) / static_cast<double>(n));
  const __m512 mean_lanes = _mm512_set1_ps(mean);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = lanesFor(n - i);
    _mm512_mask_storeu_ps(yr + i, mask,
                          _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, xr + i), mean_lanes));
  }
  const float variance =
      static_cast<float>(sumInDoubleAvx512<true>(yr, n) / static_cast<double>(n));
  const __m512 deviation = _mm512_set1_ps(std::sqrt(variance + epsilon));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = lanesFor(n - i);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(mask, yr + i), deviation);
    if (g != nullptr) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mask, g + i));
    if (b != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, b + i));
    _mm512_mask_storeu_ps(yr + i, mask, v);
  }
}
#pragma GCC diagnostic pop
#endif

// The square of the Sub's d: Pow(d, 2), or Mul(d, d) as tf2onnx and Paddle2ONNX write it.
bool squares(const OpContext& head, const std::optional<at::Tensor>& exponent) {
  if (isOp(head, kPow, "Pow")) {
    return head.followerReads(kPow, 0, kPow) && exponent && exponent->numel() == 1 &&
           scalarValue(*exponent) == 2.0;
  }
  return isOp(head, kPow, "Mul") && head.tail()[kPow].inputCount() == 2 &&
         head.followerReads(kPow, 0, kPow) && head.followerReads(kPow, 1, kPow);
}

}  // namespace

const std::vector<std::string>& layerNormFollowers() {
  static const std::vector<std::string> kOps = {"Sub",  "Pow", "ReduceMean", "Add",
                                                "Sqrt", "Div", "Mul"};
  return kOps;
}

std::optional<at::Tensor> layerNormOfTail(const OpContext& reduce_mean, const at::Tensor& x) {
  const std::vector<OpContext>& tail = reduce_mean.tail();
  if (tail.size() <= kDiv || !float32WithoutGrad({x}) || x.dim() < 1 ||
      !reducesLastAxisKept(reduce_mean, x.dim())) {
    return std::nullopt;
  }
  const int64_t rank = x.dim();
  const std::optional<at::Tensor> exponent = operandBesidePrevious(reduce_mean, kPow);
  const std::optional<float> epsilon =
      floatScalar(operandBesidePrevious(reduce_mean, kAddEpsilon), rank);
  const bool normalizes =
      isOp(reduce_mean, kSub, "Sub") && reduce_mean.followerReads(kSub, 1, 0) &&
      tail[kSub].node().inputs()[0] == reduce_mean.node().inputs()[0] &&
      squares(reduce_mean, exponent) && isOp(reduce_mean, kMeanOfSquares, "ReduceMean") &&
      reduce_mean.followerReads(kMeanOfSquares, 0, kMeanOfSquares) &&
      reducesLastAxisKept(tail[kMeanOfSquares], rank) && isOp(reduce_mean, kAddEpsilon, "Add") &&
      epsilon && isOp(reduce_mean, kSqrt, "Sqrt") && reduce_mean.followerReads(kSqrt, 0, kSqrt) &&
      isOp(reduce_mean, kDiv, "Div") && reduce_mean.followerReads(kDiv, 0, kSub + 1) &&
      reduce_mean.followerReads(kDiv, 1, kDiv);
  if (!normalizes) return std::nullopt;

  const int64_t features = x.size(-1);
  at::Tensor gamma;
  at::Tensor beta;
  size_t count = kDiv + 1;
  if (tail.size() > kMulGamma && isOp(reduce_mean, kMulGamma, "Mul")) {
    gamma = perFeature(operandBesidePrevious(reduce_mean, kMulGamma), features, rank);
  }
  if (gamma.defined()) {
    count = kMulGamma + 1;
    if (tail.size() > kAddBeta && isOp(reduce_mean, kAddBeta, "Add")) {
      beta = perFeature(operandBesidePrevious(reduce_mean, kAddBeta), features, rank);
    }
    if (beta.defined()) count = kAddBeta + 1;
  }
  // Stop earlier where a value inside is also read elsewhere (a Div or Mul output read twice).
  while (count > kDiv + 1 && !reduce_mean.mayStopAfter(count))
    --count;
  if (!reduce_mean.mayStopAfter(count)) return std::nullopt;
  if (count <= kMulGamma) gamma = at::Tensor();
  if (count <= kAddBeta) beta = at::Tensor();
  reduce_mean.absorb(count);
  return layerNormRows(x, *epsilon, gamma, beta);
}

at::Tensor layerNormRows(const at::Tensor& x_in, float epsilon, const at::Tensor& gamma,
                         const at::Tensor& beta) {
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / n;
  const float* xs = x.data_ptr<float>();
  float* ys = y.data_ptr<float>();
  const float* g = gamma.defined() ? gamma.data_ptr<float>() : nullptr;
  const float* b = beta.defined() ? beta.data_ptr<float>() : nullptr;
  const int64_t grain = std::max<int64_t>(1, kElementsPerChunk / n);
  auto row = normalizeRow;
#if defined(__x86_64__) && defined(__GNUC__)
  if (vectorKernelsUsable(VectorKernels::kAvx512)) row = normalizeRowAvx512;
#endif
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      row(xs + r * n, ys + r * n, n, epsilon, g, b);
  });
  return y;
}

}  // namespace qforge::ops
