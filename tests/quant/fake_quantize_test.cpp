#include "quant/fake_quantize.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ir/onnx_tensor.h"
#include "quant/affine_kernels.h"

namespace qforge::quant {
namespace {

QScheme atenScheme(int64_t bits, bool is_unsigned, int64_t axis = -1) {
  QScheme s;
  s.bits = static_cast<int>(bits);
  s.symmetric = false;
  s.is_unsigned = is_unsigned;
  s.axis = axis;
  s.division = ScaleDivision::MultiplyByReciprocal;  // what ATen's kernels compute
  return s;
}

// Random values plus exact half-way points of the grid, where rounding decisions differ. Values
// beyond int64 after scaling are left out: ATen casts them to int64 (undefined behaviour, in
// practice INT64_MIN, so +1e30 comes out as qmin); saturation is tested against ONNX instead.
at::Tensor probeValues(float scale, int64_t zero_point, int64_t n, uint64_t seed,
                       bool with_extremes = false) {
  at::manual_seed(seed);
  at::Tensor x = at::randn({n}) * (scale * 100.0f);
  at::Tensor ties = (at::arange(-300, 300).to(at::kFloat) + 0.5f - zero_point) * scale;
  at::Tensor specials = at::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 1e6f, -1e6f});
  if (with_extremes) specials = at::cat({specials, at::tensor({1e30f, -1e30f, 3e38f})});
  return at::cat({x, ties, specials});
}

TEST(FakeQuantizeTest, PerTensorBitIdenticalToATen) {
  const float scales[] = {0.1f, 0.0123f, 3.7f, 1.0f / 255.0f, 0x1.85d2d2p-10f};
  const int64_t zero_points[] = {0, 7, 128, 250, 3};
  // Both builds of the forward loop: AVX2 (when the CPU has it) and the SSE2 baseline.
  for (bool avx2 : {true, false}) {
    const bool previous = setAvx2Allowed(avx2);
    for (bool is_unsigned : {true, false}) {
      for (float scale : scales) {
        for (int64_t zp : zero_points) {
          const QScheme s = atenScheme(8, is_unsigned);
          if (zp < s.qmin() || zp > s.qmax()) continue;
          const at::Tensor x = probeValues(scale, zp, 5000, 7);
          const at::Tensor ours = fakeQuantize(x, makeQParams({scale}, {zp}), s);
          const at::Tensor aten =
              at::fake_quantize_per_tensor_affine(x, scale, zp, s.qmin(), s.qmax());
          EXPECT_TRUE(at::equal(ours, aten))
              << "scale " << scale << " zp " << zp << " " << s.str() << " avx2 " << avx2;
        }
      }
    }
    setAvx2Allowed(previous);
  }
}

TEST(FakeQuantizeTest, PerChannelBitIdenticalToATen) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({4, 3, 5, 6}) * 2.0f;
  for (int64_t axis : {0, 1, 3}) {
    const int64_t c = x.size(axis);
    const QScheme s = atenScheme(4, false, axis);
    const at::Tensor scale = at::rand({c}) * 0.5f + 0.05f;
    const at::Tensor zp = at::randint(-8, 8, {c}, at::kLong);
    QParams params{scale, zp};
    const at::Tensor ours = fakeQuantize(x, params, s);
    const at::Tensor aten =
        at::fake_quantize_per_channel_affine(x, scale, zp.to(at::kInt), axis, -8, 7);
    EXPECT_TRUE(at::equal(ours, aten)) << "axis " << axis;
  }
}

TEST(FakeQuantizeTest, LearnablePerTensorMatchesATenForwardAndGradients) {
  const QScheme s = atenScheme(8, true);
  const at::Tensor x0 = probeValues(0.05f, 100, 4000, 11);
  const double grad_factor = 1.0 / std::sqrt(x0.numel() * 255.0);
  for (float zp_value : {100.0f, 99.6f, 0.2f, 254.7f}) {
    at::Tensor x_ours = x0.clone().requires_grad_(true);
    at::Tensor x_aten = x0.clone().requires_grad_(true);
    at::Tensor s_ours = at::full({1}, 0.05f).requires_grad_(true);
    at::Tensor s_aten = at::full({1}, 0.05f).requires_grad_(true);
    at::Tensor z_ours = at::full({1}, zp_value).requires_grad_(true);
    at::Tensor z_aten = at::full({1}, zp_value).requires_grad_(true);
    const at::Tensor y_ours = learnableFakeQuantize(x_ours, s_ours, z_ours, s, grad_factor);
    const at::Tensor y_aten =
        at::_fake_quantize_learnable_per_tensor_affine(x_aten, s_aten, z_aten, 0, 255, grad_factor);
    ASSERT_TRUE(at::equal(y_ours, y_aten)) << "zero point " << zp_value;
    // ATen's backward kernel rounds x/s + z where its forward rounds x/s and then adds z, so at
    // near-ties the two disagree with each other; compare gradients on the random part only.
    const int64_t n_random = 4000;
    const at::Tensor weights = at::linspace(-1.0, 2.0, n_random);
    torch::autograd::backward({(y_ours.slice(0, 0, n_random) * weights).sum()});
    torch::autograd::backward({(y_aten.slice(0, 0, n_random) * weights).sum()});
    EXPECT_TRUE(at::equal(x_ours.grad(), x_aten.grad()));
    EXPECT_NEAR(s_ours.grad().item<float>(), s_aten.grad().item<float>(),
                1e-4 * std::abs(s_aten.grad().item<float>()) + 1e-6);
    EXPECT_NEAR(z_ours.grad().item<float>(), z_aten.grad().item<float>(),
                1e-4 * std::abs(z_aten.grad().item<float>()) + 1e-6);
  }
}

// ATen's learnable per-channel kernel rounds x/s + z (float zero point) where the per-tensor one
// rounds x/s and adds z; with zero points of 0 (symmetric schemes) both define the same function.
TEST(FakeQuantizeTest, LearnablePerChannelMatchesATenForSymmetricSchemes) {
  QScheme s = QScheme::int8Symmetric();
  s.axis = 1;
  s.division = ScaleDivision::MultiplyByReciprocal;
  at::manual_seed(12);
  const at::Tensor x0 = at::randn({6, 4, 5}) * 3.0f;
  const at::Tensor scale0 = at::rand({4}) * 0.05f + 0.01f;
  at::Tensor x_ours = x0.clone().requires_grad_(true);
  at::Tensor x_aten = x0.clone().requires_grad_(true);
  at::Tensor s_ours = scale0.clone().requires_grad_(true);
  at::Tensor s_aten = scale0.clone().requires_grad_(true);
  at::Tensor z_ours = at::zeros({4}).requires_grad_(true);
  at::Tensor z_aten = at::zeros({4}).requires_grad_(true);
  const at::Tensor y_ours = learnableFakeQuantize(x_ours, s_ours, z_ours, s, 0.5);
  const at::Tensor y_aten =
      at::_fake_quantize_learnable_per_channel_affine(x_aten, s_aten, z_aten, 1, -127, 127, 0.5);
  ASSERT_TRUE(at::equal(y_ours, y_aten));
  const at::Tensor w = at::randn({6, 4, 5});
  torch::autograd::backward({(y_ours * w).sum()});
  torch::autograd::backward({(y_aten * w).sum()});
  EXPECT_TRUE(at::equal(x_ours.grad(), x_aten.grad()));
  EXPECT_TRUE(at::allclose(s_ours.grad(), s_aten.grad(), 1e-4, 1e-6));
  EXPECT_TRUE(at::allclose(z_ours.grad(), z_aten.grad(), 1e-4, 1e-6));
}

// ONNX QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point), written out here
// independently of the library; DequantizeLinear: (y - zero_point) * scale.
TEST(FakeQuantizeTest, QuantizeDequantizeFollowOnnxSemantics) {
  QScheme s;
  s.symmetric = false;
  s.is_unsigned = true;
  const float scale = 0.0371f;
  const int64_t zp = 37;
  const at::Tensor x = probeValues(scale, zp, 20000, 5, /*with_extremes=*/true);
  const QParams params = makeQParams({scale}, {zp});
  const at::Tensor levels = quantize(x, params, s);
  const at::Tensor fq = fakeQuantize(x, params, s);
  const float* xs = x.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float r = std::nearbyint(xs[i] / scale) + static_cast<float>(zp);
    const float expected = std::clamp(r, 0.0f, 255.0f);
    ASSERT_EQ(levels[i].item<int32_t>(), static_cast<int32_t>(expected)) << xs[i];
  }
  EXPECT_TRUE(at::equal(dequantize(levels, params, s), fq));
}

// TensorRT's activation quantize, roundWithTiesToEven(clip(x / s, -128, 127)) with s = amax / 127,
// written out: values past -127.5 s reach -128, as an int8 QuantizeLinear gives them.
TEST(FakeQuantizeTest, AFullRangeClampReachesTheLowestLevelAsTensorRTsQuantize) {
  QScheme s = QScheme::int8Symmetric();
  s.full_range_clamp = true;
  const float amax = 3.0f;
  const QParams params = qparamsFromMinMax(-amax, amax, s);
  const float scale = params.scaleValue();
  const at::Tensor x = probeValues(scale, 0, 20000, 11, /*with_extremes=*/true);
  const at::Tensor levels = quantize(x, params, s);
  const float* xs = x.data_ptr<float>();
  int64_t at_lowest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float expected = std::nearbyint(std::clamp(xs[i] / (amax / 127.0f), -128.0f, 127.0f));
    ASSERT_EQ(levels[i].item<int32_t>(), static_cast<int32_t>(expected)) << xs[i];
    at_lowest += expected == -128.0f;
  }
  EXPECT_GT(at_lowest, 100);
  EXPECT_TRUE(at::equal(fakeQuantize(x, params, s), dequantize(levels, params, s)));
}

TEST(FakeQuantizeTest, OnnxConformanceData) {
  const std::string root = "/usr/share/libonnx-testdata/data/node/";
  for (const std::string& name :
       {std::string("test_quantizelinear"), std::string("test_quantizelinear_axis")}) {
    const std::string dir = root + name + "/test_data_set_0/";
    const at::Tensor x = readTensorProtoFile(dir + "input_0.pb");
    const at::Tensor scale = readTensorProtoFile(dir + "input_1.pb");
    const at::Tensor zp = readTensorProtoFile(dir + "input_2.pb");
    const at::Tensor expected = readTensorProtoFile(dir + "output_0.pb");
    QScheme s;
    s.symmetric = false;
    s.is_unsigned = expected.scalar_type() == at::kByte;
    s.axis = scale.numel() > 1 ? 1 : -1;
    const QParams params{scale.reshape({-1}), zp.reshape({-1}).to(at::kLong)};
    EXPECT_TRUE(at::equal(quantize(x, params, s).to(expected.scalar_type()), expected)) << name;
  }
  for (const std::string& name :
       {std::string("test_dequantizelinear"), std::string("test_dequantizelinear_axis")}) {
    const std::string dir = root + name + "/test_data_set_0/";
    const at::Tensor q = readTensorProtoFile(dir + "input_0.pb");
    const at::Tensor scale = readTensorProtoFile(dir + "input_1.pb");
    const at::Tensor zp = readTensorProtoFile(dir + "input_2.pb");
    const at::Tensor expected = readTensorProtoFile(dir + "output_0.pb");
    QScheme s;
    s.symmetric = false;
    s.is_unsigned = true;
    s.axis = scale.numel() > 1 ? 1 : -1;
    const QParams params{scale.reshape({-1}), zp.reshape({-1}).to(at::kLong)};
    EXPECT_TRUE(at::allclose(dequantize(q.to(at::kInt), params, s), expected)) << name;
  }
}

TEST(FakeQuantizeTest, RoundingModesOnTheGrid) {
  QScheme s;
  s.symmetric = true;
  const at::Tensor x = at::tensor({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 126.5f, -128.5f});
  const QParams unit = makeQParams({1.0f}, {0});
  const std::pair<RoundingMode, std::vector<float>> expected[] = {
      {RoundingMode::HalfToEven, {-2, -2, 0, 0, 2, 2, 126, -128}},
      {RoundingMode::HalfAwayFromZero, {-3, -2, -1, 1, 2, 3, 127, -128}},
      {RoundingMode::HalfUp, {-2, -1, 0, 1, 2, 3, 127, -128}},
      {RoundingMode::Floor, {-3, -2, -1, 0, 1, 2, 126, -128}},
  };
  for (const auto& [mode, values] : expected) {
    s.rounding = mode;
    EXPECT_TRUE(at::equal(fakeQuantize(x, unit, s), at::tensor(values))) << toString(mode);
  }
}

// The straight-through mask: gradient 1 where round(x/s) + z stays on the grid, 0 where clipped,
// decided after rounding (127.5 rounds to 128 and is clipped; -128.5 rounds to -128 and is not).
TEST(FakeQuantizeTest, StraightThroughMaskAtClipEdges) {
  QScheme s;
  s.symmetric = true;
  const at::Tensor x =
      at::tensor({127.0, 127.49, 127.5, 128.0, -128.0, -128.5, -128.51, -300.0, 0.3}, at::kDouble)
          .requires_grad_(true);
  const at::Tensor y = fakeQuantize(x, makeQParams({1.0f}, {0}), s);
  EXPECT_TRUE(at::equal(
      y.detach(),
      at::tensor({127.0, 127.0, 127.0, 127.0, -128.0, -128.0, -128.0, -128.0, 0.0}, at::kDouble)));
  torch::autograd::backward({(y * at::arange(1, 10, at::kDouble)).sum()});
  EXPECT_TRUE(
      at::equal(x.grad(), at::tensor({1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 9.0}, at::kDouble)));
}

// Finite differences of the straight-through surrogate (round(v) frozen as v + c) in double:
// inside the grid the output moves with x, outside it does not.
TEST(FakeQuantizeTest, InputGradientMatchesFiniteDifferencesOfSurrogate) {
  QScheme s;
  s.bits = 4;
  s.symmetric = false;
  s.is_unsigned = true;
  const double scale = 0.25;
  const int64_t zp = 3;
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({200}, at::kDouble) * 2.0;
  const at::Tensor x = x0.clone().requires_grad_(true);
  const at::Tensor w = at::randn({200}, at::kDouble);
  torch::autograd::backward({(fakeQuantize(x, makeQParams({0.25f}, {zp}), s) * w).sum()});
  const double* xs = x0.data_ptr<double>();
  const double* ws = w.data_ptr<double>();
  const double h = 1e-7;
  int64_t checked = 0;
  for (int64_t i = 0; i < x0.numel(); ++i) {
    const double r = std::nearbyint(xs[i] / scale);
    // On the first and last level the surrogate has a kink; the mask test covers those edges.
    if (r + zp == 0 || r + zp == 15) continue;
    ++checked;
    const double c = r - xs[i] / scale;
    auto surrogate = [&](double xi) {
      return std::clamp(xi / scale + c + zp, 0.0, 15.0) * scale - zp * scale;
    };
    const double fd = ws[i] * (surrogate(xs[i] + h) - surrogate(xs[i] - h)) / (2 * h);
    EXPECT_NEAR(x.grad()[i].item<double>(), fd, 1e-6) << xs[i];
  }
  EXPECT_GT(checked, 150);
}

TEST(FakeQuantizeTest, OutAndInPlaceVariantsMatchAllocatingCall) {
  QScheme s = QScheme::int8Symmetric(true);
  at::manual_seed(2);
  const at::Tensor x = at::randn({8, 16, 3, 3});
  const QParams params{at::rand({8}) * 0.02f + 0.001f, at::zeros({8}, at::kLong)};
  const at::Tensor expected = fakeQuantize(x, params, s);
  at::Tensor out = at::empty_like(x);
  fakeQuantizeOut(x, params, s, out);
  EXPECT_TRUE(at::equal(out, expected));
  at::Tensor inplace = x.clone();
  fakeQuantizeInPlace(inplace, params, s);
  EXPECT_TRUE(at::equal(inplace, expected));
}

TEST(FakeQuantizeTest, NonContiguousInputKeepsShape) {
  QScheme s = QScheme::int8Symmetric();
  const at::Tensor x = at::randn({6, 4}).t();
  const QParams params = makeQParams({0.05f}, {0});
  const at::Tensor y = fakeQuantize(x, params, s);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(at::equal(y, fakeQuantize(x.contiguous(), params, s)));
}

// Convolution outputs arrive channels-last. Per-tensor quantization reads them in place and keeps
// their layout; per-channel quantization on axis 1 finds each channel where the shape says it is.
// Both equal ATen's kernels on the same logical tensor.
TEST(FakeQuantizeTest, ChannelsLastInputsEqualATenAndKeepTheirLayout) {
  at::manual_seed(5);
  const at::Tensor x = (at::randn({2, 3, 4, 5}) * 3.0f).contiguous(at::MemoryFormat::ChannelsLast);
  const QScheme per_tensor = atenScheme(8, false);
  const at::Tensor y = fakeQuantize(x, makeQParams({0.04f}, {3}), per_tensor);
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(
      at::equal(y, at::fake_quantize_per_tensor_affine(x.contiguous(), 0.04f, 3, -128, 127)));

  const QScheme per_channel = atenScheme(4, false, 1);
  const at::Tensor scale = at::tensor({0.3f, 0.1f, 0.5f});
  const at::Tensor zp = at::tensor({-2, 0, 5}, at::kLong);
  EXPECT_TRUE(at::equal(
      fakeQuantize(x, QParams{scale, zp}, per_channel),
      at::fake_quantize_per_channel_affine(x.contiguous(), scale, zp.to(at::kInt), 1, -8, 7)));
}

TEST(FakeQuantizeTest, LearnableOnChannelsLastInputsHasATensGradients) {
  at::manual_seed(6);
  const QScheme s = atenScheme(8, true);
  const at::Tensor x0 = at::randn({2, 4, 3, 3}) * 2.0f;
  at::Tensor x_ours = x0.contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  at::Tensor x_aten = x0.clone().requires_grad_(true);
  at::Tensor s_ours = at::full({1}, 0.03f).requires_grad_(true);
  at::Tensor s_aten = at::full({1}, 0.03f).requires_grad_(true);
  at::Tensor z_ours = at::full({1}, 120.0f).requires_grad_(true);
  at::Tensor z_aten = at::full({1}, 120.0f).requires_grad_(true);
  const at::Tensor y_ours = learnableFakeQuantize(x_ours, s_ours, z_ours, s, 1.0);
  const at::Tensor y_aten =
      at::_fake_quantize_learnable_per_tensor_affine(x_aten, s_aten, z_aten, 0, 255, 1.0);
  ASSERT_TRUE(at::equal(y_ours, y_aten));
  const at::Tensor w = at::randn({2, 4, 3, 3});
  torch::autograd::backward({(y_ours * w).sum()});
  torch::autograd::backward({(y_aten * w).sum()});
  EXPECT_TRUE(at::equal(x_ours.grad(), x_aten.grad()));
  EXPECT_NEAR(s_ours.grad().item<float>(), s_aten.grad().item<float>(),
              1e-4 * std::abs(s_aten.grad().item<float>()) + 1e-6);
}

TEST(FakeQuantizeTest, RefusesBadParameters) {
  QScheme s = QScheme::int8Symmetric();
  const at::Tensor x = at::randn({4, 3});
  EXPECT_THROW(fakeQuantize(x, makeQParams({0.0f}, {0}), s), Error);
  EXPECT_THROW(fakeQuantize(x, makeQParams({-1.0f}, {0}), s), Error);
  EXPECT_THROW(fakeQuantize(x, makeQParams({0.1f}, {200}), s), Error);
  EXPECT_THROW(fakeQuantize(x, makeQParams({0.1f, 0.2f}, {0, 0}), s), Error);
  EXPECT_THROW(fakeQuantize(x.to(at::kInt), makeQParams({0.1f}, {0}), s), Error);
  EXPECT_THROW(fakeQuantize(x, QParams{}, s), Error);
  s.axis = 1;
  EXPECT_THROW(fakeQuantize(x, makeQParams({0.1f, 0.2f}, {0, 0}), s), Error);  // 3 channels
  s.axis = 2;
  try {
    fakeQuantize(x, makeQParams({0.1f}, {0}), s);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("axis 2 is out of range"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge::quant
