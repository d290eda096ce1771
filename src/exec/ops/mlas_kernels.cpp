// Scalar re-statements of MLAS's x86-64 softmax and erf kernels. Every step is the float32
// operation the assembly performs, in its order: std::fmaf where it uses VFMADD (one rounding),
// plain float arithmetic elsewhere, integer bit operations where it builds exponents.
#include "exec/ops/mlas_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "exec/ops/vector_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFORGE_MLAS_X86 1
#endif

namespace qforge::mlas {
namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t toBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// MlasExpConstants.
constexpr float kExpLowerRange = -103.9720840454f;          // AVX512F kernel's clamp
constexpr float kExpLowerRangeSumExp = -88.3762626647949f;  // FMA3 kernel's clamp
constexpr float kRoundingBias = 12582912.0f;                // 1.5 * 2^23: rounds to an integer
constexpr float kLog2Reciprocal = 1.44269504088896341f;
constexpr float kLog2High = -6.93145752e-1f;
constexpr float kLog2Low = -1.42860677e-6f;
constexpr float kExpPoly[] = {0x1.694000p-10f, 0x1.125edcp-7f, 0x1.555b5ap-5f,
                              0x1.555450p-3f,  0x1.fffff6p-2f, 0x1.000000p+0f};
constexpr uint32_t kOneBits = 0x3F800000u;  // 1.0f: the exponent bias in place

// exp(v) for v = x - max <= 0, as one lane of MlasComputeSumExpF32Kernel{Fma3,Avx512F}.
float sumExpLane(float v, SumExpKernel kernel) {
  const float lower = kernel == SumExpKernel::kAvx512F ? kExpLowerRange : kExpLowerRangeSumExp;
  v = lower > v ? lower : v;  // VMAXPS(lower, v)
  const float biased = std::fmaf(kLog2Reciprocal, v, kRoundingBias);
  const float m = biased - kRoundingBias;
  v = std::fmaf(m, kLog2High, v);
  v = std::fmaf(m, kLog2Low, v);
  float p = kExpPoly[0];
  for (int i = 1; i < 6; ++i)
    p = std::fmaf(p, v, kExpPoly[i]);
  p = std::fmaf(p, v, kExpPoly[5]);  // the merged last term (poly_56) is applied twice
  if (kernel == SumExpKernel::kAvx512F) return std::ldexp(p, static_cast<int>(m));  // VSCALEFPS
  // FMA3: the integer bits of `biased` hold m in their low bits; shifted into the exponent field
  // and biased by 127 they are 2^m (wrapping exactly as VPSLLD/VPADDD do).
  return p * fromBits((toBits(biased) << 23) + kOneBits);
}

// MlasErfConstants.
constexpr float kErfUpperAbsRange = 3.925f;
constexpr float kErfSplitBoundary = 0.921875f;
constexpr float kErfSmall[] = {-5.99104969e-4f, 4.99339588e-3f,  -2.67667342e-2f,
                               1.12818025e-1f,  -3.76124859e-1f, 1.28379151e-1f};
constexpr float kErfBig[] = {1.72948930e-5f, -3.83208680e-4f, 3.88393435e-3f, -2.42545605e-2f,
                             1.06777847e-1f, 6.34846687e-1f,  1.28717512e-1f};
constexpr float kErfExpLowerRange = -88.3762626647949f;
constexpr float kErfExpC = 1.25829120e+7f;
constexpr float kErfExpPoly[] = {1.38319808e-3f, 8.37550033e-3f, 4.16689515e-2f, 1.66664466e-1f,
                                 4.99999851e-1f, 1.00000000e+0f, 1.00000000e+0f};
constexpr uint32_t kSignBit = 0x80000000u;
// GELU's erf argument, x * (float)M_SQRT1_2 (onnxruntime/contrib_ops/cpu/bert/bias_gelu.cc).
constexpr float kSqrtHalf = static_cast<float>(M_SQRT1_2);

// MlasLogisticConstants: the input clamp and the odd/even rational polynomial (Eigen's).
constexpr float kLogisticRange = 18.0f;
constexpr float kLogisticP[] = {4.37031012579801e-11f, 1.15627324459942e-07f, 6.08574864600143e-05f,
                                8.51377133304701e-03f, 2.48287947061529e-01f};
constexpr float kLogisticQ[] = {6.10247389755681e-13f, 5.76102136993427e-09f,
                                6.29106785017040e-06f, 1.70198817374094e-03f,
                                1.16817656904453e-01f, 9.93151921023180e-01f};

}  // namespace

SumExpKernel sumExpKernelOfThisCpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const SumExpKernel kernel =
      __builtin_cpu_supports("avx512f") ? SumExpKernel::kAvx512F : SumExpKernel::kFma3;
  return kernel;
#else
  return SumExpKernel::kFma3;
#endif
}

void softmaxRow(const float* in, float* out, int64_t count, SumExpKernel kernel) {
  float maximum = std::numeric_limits<float>::lowest();
  for (int64_t j = 0; j < count; ++j)
    maximum = in[j] > maximum ? in[j] : maximum;
  const float negative_maximum = -maximum;
  // One accumulator per vector lane; element j always lands in lane j % width, in order.
  const int width = kernel == SumExpKernel::kAvx512F ? 16 : 8;
  float lanes[16] = {};
  for (int64_t j = 0; j < count; ++j) {
    const float e = sumExpLane(in[j] + negative_maximum, kernel);
    out[j] = e;
    lanes[j % width] += e;
  }
  // AVX512F first folds the upper 8 lanes onto the lower 8; both kernels then add pairs twice
  // (VHADDPS within each 128-bit half) and add the two halves.
  float a[8];
  for (int i = 0; i < 8; ++i)
    a[i] = width == 16 ? lanes[i + 8] + lanes[i] : lanes[i];
  const float sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  const float scale = 1.0f / sum;
  for (int64_t j = 0; j < count; ++j)
    out[j] = scale * out[j];
}

float erf(float x) {
  const uint32_t sign = toBits(x) & kSignBit;
  float a = fromBits(toBits(x) & ~kSignBit);
  a = a < kErfUpperAbsRange ? a : kErfUpperAbsRange;
  const bool big = kErfSplitBoundary <= a;

  // |x| < split: an odd polynomial, r = a + a * P(a^2).
  const float square = a * a;
  float small = kErfSmall[0];
  for (int i = 1; i < 6; ++i)
    small = std::fmaf(small, square, kErfSmall[i]);
  small = std::fmaf(small, a, a);
  const uint32_t small_bits = big ? 0u : toBits(small);

  // |x| >= split: 1 - exp(-(a + a * Q(a))), with the kernel's own exp. Lanes below the split run
  // it on 0 and yield +0, which the final OR leaves harmless.
  const float b = big ? a : 0.0f;
  float r = kErfBig[0];
  for (int i = 1; i < 7; ++i)
    r = std::fmaf(r, b, kErfBig[i]);
  r = std::fmaf(r, b, b);
  r = fromBits(toBits(r) ^ kSignBit);
  r = r > kErfExpLowerRange ? r : kErfExpLowerRange;  // VMAXPS(r, lower)
  const float m = std::fmaf(kLog2Reciprocal, r, kErfExpC) - kErfExpC;
  float f = std::fmaf(kLog2High, m, r);
  f = std::fmaf(m, kLog2Low, f);
  float y = kErfExpPoly[0];
  for (int i = 1; i < 7; ++i)
    y = std::fmaf(y, f, kErfExpPoly[i]);
  const int32_t exponent = static_cast<int32_t>(m);  // VCVTTPS2DQ
  y = y * fromBits(static_cast<uint32_t>(exponent + 127) << 23);
  y = 1.0f - y;
  return fromBits(toBits(y) | small_bits | sign);
}

// MlasLogisticKernelFma3: clamp to [-18, 18] (a NaN passes), p = x * P(x^2) and q = Q(x^2) by
// multiply-adds, p / q + 0.5, then only the lower clamp at 0.
float logistic(float x) {
  x = -kLogisticRange > x ? -kLogisticRange : x;  // VMAXPS(lower, x)
  x = kLogisticRange < x ? kLogisticRange : x;    // VMINPS(upper, x)
  const float square = x * x;
  float p = std::fmaf(square, kLogisticP[0], kLogisticP[1]);
  for (int i = 2; i < 5; ++i)
    p = std::fmaf(square, p, kLogisticP[i]);
  float q = std::fmaf(square, kLogisticQ[0], kLogisticQ[1]);
  for (int i = 2; i < 6; ++i)
    q = std::fmaf(square, q, kLogisticQ[i]);
  const float y = x * p / q + 0.5f;
  return 0.0f > y ? 0.0f : y;  // VMAXPS(0, y): a NaN passes
}

// The vector kernels: the scalar functions above with one float per lane. Each intrinsic is the
// scalar step of the same name (fmaf: VFMADD; a < b ? a : b: VMINPS; bit operations as integers).
namespace {

#ifdef QFORGE_MLAS_X86

// The per-vector steps are lambdas returning vectors, always inlined into functions built for
// the same instructions; GCC still warns that such a return would change the ABI of a call.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

#define QFORGE_AVX2 __attribute__((target("avx2,fma")))
#define QFORGE_AVX512 __attribute__((target("avx512f")))
// For the per-vector steps: a call would pass each vector through memory.
#define QFORGE_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline))
#define QFORGE_AVX512_INLINE __attribute__((target("avx512f"), always_inline))

QFORGE_AVX2 inline __m256 bitsAsFloat(__m256i bits) {
  return _mm256_castsi256_ps(bits);
}

QFORGE_AVX2_INLINE inline __m256 erf8(__m256 x) {
  const __m256 sign_bit = bitsAsFloat(_mm256_set1_epi32(static_cast<int>(kSignBit)));
  const __m256 sign = _mm256_and_ps(x, sign_bit);
  __m256 a = _mm256_andnot_ps(sign_bit, x);
  a = _mm256_min_ps(a, _mm256_set1_ps(kErfUpperAbsRange));
  const __m256 big = _mm256_cmp_ps(_mm256_set1_ps(kErfSplitBoundary), a, _CMP_LE_OQ);

  const __m256 square = _mm256_mul_ps(a, a);
  __m256 small = _mm256_set1_ps(kErfSmall[0]);
  for (int i = 1; i < 6; ++i)
    small = _mm256_fmadd_ps(small, square, _mm256_set1_ps(kErfSmall[i]));
  small = _mm256_fmadd_ps(small, a, a);
  const __m256 small_bits = _mm256_andnot_ps(big, small);

  const __m256 b = _mm256_and_ps(big, a);
  __m256 r = _mm256_set1_ps(kErfBig[0]);
  for (int i = 1; i < 7; ++i)
    r = _mm256_fmadd_ps(r, b, _mm256_set1_ps(kErfBig[i]));
  r = _mm256_fmadd_ps(r, b, b);
  r = _mm256_xor_ps(r, sign_bit);
  r = _mm256_max_ps(r, _mm256_set1_ps(kErfExpLowerRange));
  const __m256 c = _mm256_set1_ps(kErfExpC);
  const __m256 m = _mm256_sub_ps(_mm256_fmadd_ps(_mm256_set1_ps(kLog2Reciprocal), r, c), c);
  __m256 f = _mm256_fmadd_ps(_mm256_set1_ps(kLog2High), m, r);
  f = _mm256_fmadd_ps(m, _mm256_set1_ps(kLog2Low), f);
  __m256 y = _mm256_set1_ps(kErfExpPoly[0]);
  for (int i = 1; i < 7; ++i)
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(kErfExpPoly[i]));
  const __m256i exponent = _mm256_cvttps_epi32(m);
  const __m256i power = _mm256_slli_epi32(_mm256_add_epi32(exponent, _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, bitsAsFloat(power));
  y = _mm256_sub_ps(_mm256_set1_ps(1.0f), y);
  return _mm256_or_ps(_mm256_or_ps(y, small_bits), sign);
}

// erf8 is one long chain of dependent multiply-adds: four vectors at a time give the core four
// independent chains to interleave, as MLAS's assembly does (twice as fast as one at a time).
template <typename Lanes>
QFORGE_AVX2 void overVectorsOf8(const float* in, float* out, int64_t count, Lanes lanes_of) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m256 y0 = lanes_of(_mm256_loadu_ps(in + i));
    const __m256 y1 = lanes_of(_mm256_loadu_ps(in + i + 8));
    const __m256 y2 = lanes_of(_mm256_loadu_ps(in + i + 16));
    const __m256 y3 = lanes_of(_mm256_loadu_ps(in + i + 24));
    _mm256_storeu_ps(out + i, y0);
    _mm256_storeu_ps(out + i + 8, y1);
    _mm256_storeu_ps(out + i + 16, y2);
    _mm256_storeu_ps(out + i + 24, y3);
  }
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i, lanes_of(_mm256_loadu_ps(in + i)));
  if (i == count) return;
  float lanes[8] = {};
  std::memcpy(lanes, in + i, (count - i) * sizeof(float));
  _mm256_storeu_ps(lanes, lanes_of(_mm256_loadu_ps(lanes)));
  std::memcpy(out + i, lanes, (count - i) * sizeof(float));
}

QFORGE_AVX2 void logisticAvx2(const float* in, float* out, int64_t count) {
  overVectorsOf8(in, out, count, [](__m256 x) QFORGE_AVX2_INLINE {
    x = _mm256_max_ps(_mm256_set1_ps(-kLogisticRange), x);
    x = _mm256_min_ps(_mm256_set1_ps(kLogisticRange), x);
    const __m256 square = _mm256_mul_ps(x, x);
    __m256 p =
        _mm256_fmadd_ps(square, _mm256_set1_ps(kLogisticP[0]), _mm256_set1_ps(kLogisticP[1]));
    for (int i = 2; i < 5; ++i)
      p = _mm256_fmadd_ps(square, p, _mm256_set1_ps(kLogisticP[i]));
    __m256 q =
        _mm256_fmadd_ps(square, _mm256_set1_ps(kLogisticQ[0]), _mm256_set1_ps(kLogisticQ[1]));
    for (int i = 2; i < 6; ++i)
      q = _mm256_fmadd_ps(square, q, _mm256_set1_ps(kLogisticQ[i]));
    const __m256 y = _mm256_add_ps(_mm256_div_ps(_mm256_mul_ps(x, p), q), _mm256_set1_ps(0.5f));
    return _mm256_max_ps(_mm256_setzero_ps(), y);
  });
}

QFORGE_AVX2 void erfAvx2(const float* in, float* out, int64_t count) {
  overVectorsOf8(in, out, count, [](__m256 x) QFORGE_AVX2_INLINE { return erf8(x); });
}

QFORGE_AVX2 void geluAvx2(const float* in, float* out, int64_t count) {
  overVectorsOf8(in, out, count, [](__m256 x) QFORGE_AVX2_INLINE {
    const __m256 e = erf8(_mm256_mul_ps(x, _mm256_set1_ps(kSqrtHalf)));
    return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)),
                         _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
  });
}

// sumExpLane on 8 and on 16 lanes. Written once per width: a function built for one instruction
// set cannot call another's intrinsics through a template.
QFORGE_AVX2 __m256 sumExpFma3(__m256 v) {
  v = _mm256_max_ps(_mm256_set1_ps(kExpLowerRangeSumExp), v);
  const __m256 bias = _mm256_set1_ps(kRoundingBias);
  const __m256 biased = _mm256_fmadd_ps(_mm256_set1_ps(kLog2Reciprocal), v, bias);
  const __m256 m = _mm256_sub_ps(biased, bias);
  v = _mm256_fmadd_ps(m, _mm256_set1_ps(kLog2High), v);
  v = _mm256_fmadd_ps(m, _mm256_set1_ps(kLog2Low), v);
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i)
    p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(kExpPoly[i]));
  p = _mm256_fmadd_ps(p, v, _mm256_set1_ps(kExpPoly[5]));
  const __m256i power = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(biased), 23),
                                         _mm256_set1_epi32(static_cast<int>(kOneBits)));
  return _mm256_mul_ps(p, bitsAsFloat(power));
}

// GCC 12 reports the placeholder (_mm512_undefined_ps) inside its own AVX512F intrinsics as
// maybe uninitialized; the warning is about the header, not this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

QFORGE_AVX512 __m512 sumExpAvx512(__m512 v) {
  v = _mm512_max_ps(_mm512_set1_ps(kExpLowerRange), v);
  const __m512 bias = _mm512_set1_ps(kRoundingBias);
  const __m512 m = _mm512_sub_ps(_mm512_fmadd_ps(_mm512_set1_ps(kLog2Reciprocal), v, bias), bias);
  v = _mm512_fmadd_ps(m, _mm512_set1_ps(kLog2High), v);
  v = _mm512_fmadd_ps(m, _mm512_set1_ps(kLog2Low), v);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i)
    p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(kExpPoly[i]));
  p = _mm512_fmadd_ps(p, v, _mm512_set1_ps(kExpPoly[5]));
  return _mm512_scalef_ps(p, m);
}

// erf8 on 16 lanes: the same operation per lane, with the split as a lane mask.
QFORGE_AVX512_INLINE inline __m512 erf16(__m512 x) {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(kSignBit));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), sign_bit);
  __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign_bit, _mm512_castps_si512(x)));
  a = _mm512_min_ps(a, _mm512_set1_ps(kErfUpperAbsRange));
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_set1_ps(kErfSplitBoundary), a, _CMP_LE_OQ);

  const __m512 square = _mm512_mul_ps(a, a);
  __m512 small = _mm512_set1_ps(kErfSmall[0]);
  for (int i = 1; i < 6; ++i)
    small = _mm512_fmadd_ps(small, square, _mm512_set1_ps(kErfSmall[i]));
  small = _mm512_fmadd_ps(small, a, a);
  const __m512i small_bits = _mm512_castps_si512(_mm512_maskz_mov_ps(_knot_mask16(big), small));

  const __m512 b = _mm512_maskz_mov_ps(big, a);
  __m512 r = _mm512_set1_ps(kErfBig[0]);
  for (int i = 1; i < 7; ++i)
    r = _mm512_fmadd_ps(r, b, _mm512_set1_ps(kErfBig[i]));
  r = _mm512_fmadd_ps(r, b, b);
  r = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(r), sign_bit));
  r = _mm512_max_ps(r, _mm512_set1_ps(kErfExpLowerRange));
  const __m512 c = _mm512_set1_ps(kErfExpC);
  const __m512 m = _mm512_sub_ps(_mm512_fmadd_ps(_mm512_set1_ps(kLog2Reciprocal), r, c), c);
  __m512 f = _mm512_fmadd_ps(_mm512_set1_ps(kLog2High), m, r);
  f = _mm512_fmadd_ps(m, _mm512_set1_ps(kLog2Low), f);
  __m512 y = _mm512_set1_ps(kErfExpPoly[0]);
  for (int i = 1; i < 7; ++i)
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(kErfExpPoly[i]));
  const __m512i exponent = _mm512_cvttps_epi32(m);
  const __m512i power = _mm512_slli_epi32(_mm512_add_epi32(exponent, _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(power));
  y = _mm512_sub_ps(_mm512_set1_ps(1.0f), y);
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_or_si512(_mm512_castps_si512(y), small_bits), sign));
}

// overVectorsOf8 on 16 lanes; the last partial vector is loaded and stored under a mask.
template <typename Lanes>
QFORGE_AVX512 void overVectorsOf16(const float* in, float* out, int64_t count, Lanes lanes_of) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512 y0 = lanes_of(_mm512_loadu_ps(in + i));
    const __m512 y1 = lanes_of(_mm512_loadu_ps(in + i + 16));
    _mm512_storeu_ps(out + i, y0);
    _mm512_storeu_ps(out + i + 16, y1);
  }
  for (; i < count; i += 16) {
    const int64_t rest = count - i < 16 ? count - i : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << rest) - 1u);
    _mm512_mask_storeu_ps(out + i, mask, lanes_of(_mm512_maskz_loadu_ps(mask, in + i)));
  }
}

QFORGE_AVX512 void erfAvx512(const float* in, float* out, int64_t count) {
  overVectorsOf16(in, out, count, [](__m512 x) QFORGE_AVX512_INLINE { return erf16(x); });
}

QFORGE_AVX512 void geluAvx512(const float* in, float* out, int64_t count) {
  overVectorsOf16(in, out, count, [](__m512 x) QFORGE_AVX512_INLINE {
    const __m512 e = erf16(_mm512_mul_ps(x, _mm512_set1_ps(kSqrtHalf)));
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)),
                         _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
  });
}

// The row's maximum, ignoring NaN as the scalar comparison does; the order of a maximum does not
// change it.
float rowMaximum(const float* in, int64_t count) {
  float maximum = std::numeric_limits<float>::lowest();
  for (int64_t j = 0; j < count; ++j)
    maximum = in[j] > maximum ? in[j] : maximum;
  return maximum;
}

QFORGE_AVX2 float rowMaximumAvx2(const float* in, int64_t count) {
  __m256 lanes = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  int64_t j = 0;
  for (; j + 8 <= count; j += 8)
    lanes = _mm256_max_ps(_mm256_loadu_ps(in + j), lanes);
  float partial[8];
  _mm256_storeu_ps(partial, lanes);
  float maximum = rowMaximum(partial, 8);
  for (; j < count; ++j)
    maximum = in[j] > maximum ? in[j] : maximum;
  return maximum;
}

// The lane sums folded as the kernels fold them (see softmaxRow).
float foldLanes(const float* lanes, int width) {
  float a[8];
  for (int i = 0; i < 8; ++i)
    a[i] = width == 16 ? lanes[i + 8] + lanes[i] : lanes[i];
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

QFORGE_AVX2 void softmaxRowFma3(const float* in, float* out, int64_t count) {
  const __m256 negative_maximum = _mm256_set1_ps(-rowMaximumAvx2(in, count));
  __m256 sums = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256 e = sumExpFma3(_mm256_add_ps(_mm256_loadu_ps(in + j), negative_maximum));
    _mm256_storeu_ps(out + j, e);
    sums = _mm256_add_ps(sums, e);
  }
  if (j < count) {
    // The last partial vector: its missing lanes add +0, which leaves those sums unchanged.
    const int64_t rest = count - j;
    float lanes[8] = {};
    std::memcpy(lanes, in + j, rest * sizeof(float));
    const __m256 e = sumExpFma3(_mm256_add_ps(_mm256_loadu_ps(lanes), negative_maximum));
    _mm256_storeu_ps(lanes, e);
    std::memcpy(out + j, lanes, rest * sizeof(float));
    for (int64_t k = rest; k < 8; ++k)
      lanes[k] = 0.0f;
    sums = _mm256_add_ps(sums, _mm256_loadu_ps(lanes));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, sums);
  const __m256 scale = _mm256_set1_ps(1.0f / foldLanes(lanes, 8));
  for (j = 0; j + 8 <= count; j += 8)
    _mm256_storeu_ps(out + j, _mm256_mul_ps(scale, _mm256_loadu_ps(out + j)));
  const float scalar_scale = _mm256_cvtss_f32(scale);
  for (; j < count; ++j)
    out[j] = scalar_scale * out[j];
}

QFORGE_AVX512 void softmaxRowAvx512(const float* in, float* out, int64_t count) {
  __m512 maxima = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  int64_t j = 0;
  for (; j + 16 <= count; j += 16)
    maxima = _mm512_max_ps(_mm512_loadu_ps(in + j), maxima);
  float partial[16];
  _mm512_storeu_ps(partial, maxima);
  float maximum = rowMaximum(partial, 16);
  for (; j < count; ++j)
    maximum = in[j] > maximum ? in[j] : maximum;

  const __m512 negative_maximum = _mm512_set1_ps(-maximum);
  __m512 sums = _mm512_setzero_ps();
  for (j = 0; j < count; j += 16) {
    const int64_t rest = count - j < 16 ? count - j : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << rest) - 1u);
    const __m512 x = _mm512_maskz_loadu_ps(mask, in + j);
    const __m512 e = sumExpAvx512(_mm512_add_ps(x, negative_maximum));
    _mm512_mask_storeu_ps(out + j, mask, e);
    sums = _mm512_mask_add_ps(sums, mask, sums, e);
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, sums);
  const __m512 scale = _mm512_set1_ps(1.0f / foldLanes(lanes, 16));
  for (j = 0; j < count; j += 16) {
    const int64_t rest = count - j < 16 ? count - j : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << rest) - 1u);
    _mm512_mask_storeu_ps(out + j, mask,
                          _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(mask, out + j)));
  }
}

#pragma GCC diagnostic pop
#pragma GCC diagnostic pop  // -Wpsabi

#endif  // QFORGE_MLAS_X86

}  // namespace

namespace {

using ArrayKernel = void (*)(const float*, float*, int64_t);

// An elementwise function on the widest lanes that may run here, else its scalar statement.
void onWidestLanes(const float* in, float* out, int64_t count, ArrayKernel avx512, ArrayKernel avx2,
                   float (*scalar)(float)) {
  if (avx512 != nullptr && ops::vectorKernelsUsable(ops::VectorKernels::kAvx512)) {
    avx512(in, out, count);
  } else if (avx2 != nullptr && ops::vectorKernelsUsable(ops::VectorKernels::kAvx2)) {
    avx2(in, out, count);
  } else {
    for (int64_t i = 0; i < count; ++i)
      out[i] = scalar(in[i]);
  }
}

}  // namespace

float gelu(float x) {
  return (x * 0.5f) * (erf(x * kSqrtHalf) + 1.0f);
}

void erfArray(const float* in, float* out, int64_t count) {
#ifdef QFORGE_MLAS_X86
  onWidestLanes(in, out, count, erfAvx512, erfAvx2, erf);
#else
  onWidestLanes(in, out, count, nullptr, nullptr, erf);
#endif
}

void logisticArray(const float* in, float* out, int64_t count) {
  // MLAS has no AVX512F logistic kernel: FMA3's 8 lanes run on those CPUs too.
#ifdef QFORGE_MLAS_X86
  onWidestLanes(in, out, count, nullptr, logisticAvx2, logistic);
#else
  onWidestLanes(in, out, count, nullptr, nullptr, logistic);
#endif
}

void geluArray(const float* in, float* out, int64_t count) {
#ifdef QFORGE_MLAS_X86
  onWidestLanes(in, out, count, geluAvx512, geluAvx2, gelu);
#else
  onWidestLanes(in, out, count, nullptr, nullptr, gelu);
#endif
}

void softmaxRows(const float* in, float* out, int64_t rows, int64_t width, SumExpKernel kernel) {
#ifdef QFORGE_MLAS_X86
  if (kernel == SumExpKernel::kFma3 && ops::vectorKernelsUsable(ops::VectorKernels::kAvx2)) {
    for (int64_t r = 0; r < rows; ++r)
      softmaxRowFma3(in + r * width, out + r * width, width);
    return;
  }
  if (kernel == SumExpKernel::kAvx512F && ops::vectorKernelsUsable(ops::VectorKernels::kAvx512)) {
    for (int64_t r = 0; r < rows; ++r)
      softmaxRowAvx512(in + r * width, out + r * width, width);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r)
    softmaxRow(in + r * width, out + r * width, width, kernel);
}

}  // namespace qforge::mlas
