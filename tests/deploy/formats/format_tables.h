// Hand-made quantization tables for the deploy-format tests. Scales are powers of two so every
// number in the expected files is exact.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "deploy/deploy_model.h"

namespace qforge::testing {

inline deploy::TensorEncoding encoding(const std::string& tensor, deploy::TensorRole role,
                                       int64_t qmin, int64_t qmax, std::vector<double> scale,
                                       std::vector<int64_t> zero_point) {
  deploy::TensorEncoding e;
  e.tensor = tensor;
  e.role = role;
  e.bits = 8;
  e.qmin = qmin;
  e.qmax = qmax;
  e.is_unsigned = qmin >= 0;
  e.axis = scale.size() > 1 ? 0 : -1;
  e.symmetric = true;
  for (int64_t zp : zero_point)
    e.symmetric = e.symmetric && zp == 0;
  e.scale = std::move(scale);
  e.zero_point = std::move(zero_point);
  return e;
}

// "x": signed symmetric activation on [-127, 127], scale 2^-7 (amax 0.9921875).
inline deploy::TensorEncoding symmetricActivation(const std::string& name = "x",
                                                  double scale = 0.0078125) {
  return encoding(name, deploy::TensorRole::Activation, -127, 127, {scale}, {0});
}

// "y": unsigned asymmetric activation on [0, 255], scale 1/16, zero point 16: [-1, 14.9375].
inline deploy::TensorEncoding asymmetricActivation(const std::string& name = "y") {
  return encoding(name, deploy::TensorRole::Activation, 0, 255, {0.0625}, {16});
}

// "w": per-channel symmetric weight on [-128, 127], scales 1/2 and 1/4.
inline deploy::TensorEncoding perChannelWeight(const std::string& name = "w") {
  return encoding(name, deploy::TensorRole::Weight, -128, 127, {0.5, 0.25}, {0, 0});
}

inline deploy::QuantTable tableOf(std::vector<deploy::TensorEncoding> tensors) {
  deploy::QuantTable t;
  t.tensors = std::move(tensors);
  return t;
}

// Expects qforge::Error whose message contains every one of `parts`.
inline void expectErrorWith(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected qforge::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

// Field-by-field equality of what a format carries.
inline void expectSameEncoding(const deploy::TensorEncoding& a, const deploy::TensorEncoding& b) {
  EXPECT_EQ(a.tensor, b.tensor);
  EXPECT_EQ(a.role, b.role) << a.tensor;
  EXPECT_EQ(a.bits, b.bits) << a.tensor;
  EXPECT_EQ(a.qmin, b.qmin) << a.tensor;
  EXPECT_EQ(a.qmax, b.qmax) << a.tensor;
  EXPECT_EQ(a.symmetric, b.symmetric) << a.tensor;
  EXPECT_EQ(a.is_unsigned, b.is_unsigned) << a.tensor;
  EXPECT_EQ(a.perChannel(), b.perChannel()) << a.tensor;
  EXPECT_EQ(a.scale, b.scale) << a.tensor;
  EXPECT_EQ(a.zero_point, b.zero_point) << a.tensor;
}

}  // namespace qforge::testing
