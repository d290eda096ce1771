// MLAS's erf, GELU and softmax kernels: the vector builds (AVX2/FMA, AVX512F) against the scalar
// statements bit for bit, on every tail length and on the values where the branches, clamps and
// exponent tricks act; and both against the float64 closed forms. (Against ONNX Runtime itself:
// tests/verify/ort_float_emulation_test.cpp.)
#include "exec/ops/mlas_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "exec/ops/vector_kernels.h"

namespace qforge::mlas {
namespace {

using ops::setWidestVectorKernels;
using ops::VectorKernels;

#if defined(__x86_64__) && defined(__GNUC__)
bool cpuHasAvx2Fma() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool cpuHasAvx512F() {
  return __builtin_cpu_supports("avx512f");
}
#else
bool cpuHasAvx2Fma() {
  return false;
}
bool cpuHasAvx512F() {
  return false;
}
#endif

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Values where erf's branches, clamp and exponent arithmetic act, then a sweep and random ones.
std::vector<float> erfInputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          0.921875f,
                          std::nextafter(0.921875f, 0.0f),
                          3.925f,
                          std::nextafter(3.925f, 0.0f),
                          std::nextafter(3.925f, 10.0f),
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(),
                          1e-20f,
                          -1e-3f};
  for (int i = 0; i <= 20000; ++i)
    v.push_back(-6.0f + 12.0f * static_cast<float>(i) / 20000.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int i = 0; i < 5003; ++i)  // not a multiple of 8: the last vector is partial
    v.push_back(normal(rng));
  return v;
}

bool cpuHas(VectorKernels kernels) {
  return kernels == VectorKernels::kAvx512 ? cpuHasAvx512F() : cpuHasAvx2Fma();
}

const char* nameOf(VectorKernels kernels) {
  return kernels == VectorKernels::kAvx512 ? "AVX512F"
         : kernels == VectorKernels::kAvx2 ? "AVX2"
                                           : "scalar";
}

// `array` (limited to `widest` vectors) against `scalar` on every input, bit for bit, then on
// every tail length: the partial last vector must not disturb its neighbours.
void expectArrayEqualsScalar(VectorKernels widest, void (*array)(const float*, float*, int64_t),
                             float (*scalar)(float)) {
  SCOPED_TRACE(nameOf(widest));
  const VectorKernels previous = setWidestVectorKernels(widest);
  const std::vector<float> x = erfInputs();
  std::vector<float> vector_out(x.size());
  array(x.data(), vector_out.data(), static_cast<int64_t>(x.size()));
  int64_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i)
    differ += bitsOf(vector_out[i]) != bitsOf(scalar(x[i]));
  EXPECT_EQ(differ, 0) << "of " << x.size();
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<float> out(n + 1, 42.0f);
    array(x.data() + 20, out.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(bitsOf(out[i]), bitsOf(scalar(x[20 + i]))) << "length " << n << ", element " << i;
    EXPECT_EQ(out[n], 42.0f) << "length " << n << " wrote past its end";
  }
  setWidestVectorKernels(previous);
}

TEST(MlasKernels, ErfVectorKernelsEqualTheScalarStatementBitForBit) {
  if (!cpuHasAvx2Fma()) GTEST_SKIP() << "this CPU has no vector kernel";
  for (VectorKernels kernels : {VectorKernels::kAvx2, VectorKernels::kAvx512}) {
    if (!cpuHas(kernels)) {
      std::cout << "[ NOTE     ] this CPU has no " << nameOf(kernels) << " kernel\n";
      continue;
    }
    expectArrayEqualsScalar(kernels, erfArray, erf);
  }
}

TEST(MlasKernels, GeluVectorKernelsEqualTheScalarStatementBitForBit) {
  if (!cpuHasAvx2Fma()) GTEST_SKIP() << "this CPU has no vector kernel";
  for (VectorKernels kernels : {VectorKernels::kAvx2, VectorKernels::kAvx512}) {
    if (!cpuHas(kernels)) {
      std::cout << "[ NOTE     ] this CPU has no " << nameOf(kernels) << " kernel\n";
      continue;
    }
    expectArrayEqualsScalar(kernels, geluArray, gelu);
  }
}

// GELU's closed form, 0.5 x (1 + erf(x / sqrt 2)), in double: the float kernel rounds x / sqrt 2
// and erf's result (each within a few float ulps), so the bound scales with |x|.
TEST(MlasKernels, GeluIsGeluWithinFloatPrecisionOnEveryPath) {
  const std::vector<float> x = erfInputs();
  for (VectorKernels kernels :
       {VectorKernels::kScalar, VectorKernels::kAvx2, VectorKernels::kAvx512}) {
    const VectorKernels previous = setWidestVectorKernels(kernels);
    std::vector<float> out(x.size());
    geluArray(x.data(), out.data(), static_cast<int64_t>(x.size()));
    setWidestVectorKernels(previous);
    for (size_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(x[i])) continue;
      const double v = x[i];
      const double exact = 0.5 * v * (1.0 + std::erf(v * M_SQRT1_2));
      EXPECT_NEAR(out[i], exact, 4e-7 * std::abs(v) + 1e-30)
          << "x = " << x[i] << ", " << nameOf(kernels);
    }
  }
}

TEST(MlasKernels, ErfIsErfWithinFloatPrecisionOnEveryPath) {
  const std::vector<float> x = erfInputs();
  for (VectorKernels kernels :
       {VectorKernels::kScalar, VectorKernels::kAvx2, VectorKernels::kAvx512}) {
    const VectorKernels previous = setWidestVectorKernels(kernels);
    std::vector<float> out(x.size());
    erfArray(x.data(), out.data(), static_cast<int64_t>(x.size()));
    setWidestVectorKernels(previous);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) continue;
      worst = std::max(worst, std::abs(out[i] - std::erf(static_cast<double>(x[i]))));
    }
    EXPECT_LT(worst, 4e-7) << nameOf(kernels);
  }
  // MLAS's clamp answers +-1 beyond 3.925, infinities included, with the input's sign.
  float out[2];
  const float inf[2] = {std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  erfArray(inf, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -1.0f);
}

// Rows of logits with a spread that reaches exp's lower clamp, and -inf (masked attention).
std::vector<float> softmaxInputs(int64_t rows, int64_t width, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  std::vector<float> v(rows * width);
  for (float& f : v)
    f = normal(rng);
  if (v.size() > 3) {
    v[1] = -std::numeric_limits<float>::infinity();
    v[2] = 120.0f;  // the others fall below exp's clamp after subtracting it
  }
  return v;
}

void expectVectorEqualsScalar(SumExpKernel kernel) {
  for (int64_t width = 1; width <= 70; ++width) {
    const int64_t rows = 5;
    const std::vector<float> x = softmaxInputs(rows, width, static_cast<unsigned>(width));
    std::vector<float> vector_out(x.size()), scalar_out(x.size());
    softmaxRows(x.data(), vector_out.data(), rows, width, kernel);
    for (int64_t r = 0; r < rows; ++r)
      softmaxRow(x.data() + r * width, scalar_out.data() + r * width, width, kernel);
    int64_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i)
      differ += bitsOf(vector_out[i]) != bitsOf(scalar_out[i]);
    EXPECT_EQ(differ, 0) << "width " << width;
  }
}

TEST(MlasKernels, Fma3SoftmaxVectorKernelEqualsTheScalarStatementBitForBit) {
  if (!cpuHasAvx2Fma()) GTEST_SKIP() << "this CPU has no AVX2/FMA kernel";
  expectVectorEqualsScalar(SumExpKernel::kFma3);
}

TEST(MlasKernels, Avx512SoftmaxVectorKernelEqualsTheScalarStatementBitForBit) {
  if (!cpuHasAvx512F()) GTEST_SKIP() << "this CPU has no AVX512F kernel";
  expectVectorEqualsScalar(SumExpKernel::kAvx512F);
}

TEST(MlasKernels, SoftmaxIsSoftmaxWithinFloatPrecisionForBothKernelsAndPaths) {
  const int64_t rows = 7, width = 197;
  const std::vector<float> x = softmaxInputs(rows, width, 9);
  for (SumExpKernel kernel : {SumExpKernel::kFma3, SumExpKernel::kAvx512F}) {
    for (bool vector : {true, false}) {
      const VectorKernels previous =
          setWidestVectorKernels(vector ? VectorKernels::kAvx512 : VectorKernels::kScalar);
      std::vector<float> out(x.size());
      softmaxRows(x.data(), out.data(), rows, width, kernel);
      setWidestVectorKernels(previous);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * width;
        double maximum = -INFINITY, sum = 0;
        for (int64_t j = 0; j < width; ++j)
          maximum = std::max(maximum, static_cast<double>(row[j]));
        for (int64_t j = 0; j < width; ++j)
          sum += std::exp(row[j] - maximum);
        for (int64_t j = 0; j < width; ++j) {
          const double exact = std::exp(row[j] - maximum) / sum;
          // float32 rounds x - max itself by up to |x - max| * 2^-24, which exp turns into that
          // relative error: the bound grows with the distance from the maximum.
          const double distance = std::isinf(row[j]) ? 0.0 : maximum - row[j];
          EXPECT_NEAR(out[r * width + j], exact, (1e-6 + 1.2e-7 * distance) * exact + 1e-30)
              << "row " << r << ", column " << j << (vector ? ", vector" : ", scalar");
        }
      }
    }
  }
}

}  // namespace
}  // namespace qforge::mlas
