// Scalar re-statements of MLAS's x86-64 softmax and erf kernels. Every step is the float32
// operation the assembly performs, in its order: std::fmaf where it uses VFMADD (one rounding),
// plain float arithmetic elsewhere, integer bit operations where it builds exponents.
#include "exec/ops/mlas_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

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

}  // namespace qforge::mlas
