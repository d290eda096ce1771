// oneDNN's prepacked, fused convolution against PyTorch's own ops run one after another:
// at::convolution (on an explicitly padded input), at::batch_norm, then the activation.
#include "exec/ops/dnnl_conv.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <any>
#include <string>
#include <vector>

#include "support/op_test_helpers.h"

namespace qforge::ops {
namespace {

using testing::expectTensorNear;

struct Geometry {
  const char* what;
  std::vector<int64_t> x_shape, w_shape;
  int64_t stride, dilation, group;
  std::vector<int64_t> pads;  // top, left, bottom, right
};

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> kCases = {
      {"1x1 at batch 1", {1, 16, 5, 5}, {24, 16, 1, 1}, 1, 1, 1, {0, 0, 0, 0}},
      {"3x3 stride 2", {2, 8, 9, 9}, {12, 8, 3, 3}, 2, 1, 1, {1, 1, 1, 1}},
      {"depthwise dilated", {2, 8, 9, 9}, {8, 1, 3, 3}, 1, 2, 8, {2, 2, 2, 2}},
      {"grouped asymmetric pads", {1, 6, 7, 6}, {4, 3, 3, 2}, 1, 1, 2, {0, 1, 2, 0}},
  };
  return kCases;
}

WindowGeometry windowOf(const Geometry& c) {
  return WindowGeometry{{c.stride, c.stride},
                        {c.dilation, c.dilation},
                        {c.pads[0], c.pads[1]},
                        {c.pads[2], c.pads[3]}};
}

// The convolution as PyTorch computes it in NCHW, padding made explicit.
at::Tensor referenceConv(const Geometry& c, const at::Tensor& x, const at::Tensor& w,
                         const at::Tensor& b) {
  const at::Tensor padded = at::constant_pad_nd(x, {c.pads[1], c.pads[3], c.pads[0], c.pads[2]});
  return at::convolution(padded, w, b, {c.stride, c.stride}, {0, 0}, {c.dilation, c.dilation},
                         false, {0, 0}, c.group);
}

ConvBatchNorm randomBatchNorm(int64_t channels) {
  return ConvBatchNorm{at::randn({channels}), at::randn({channels}), at::randn({channels}),
                       at::rand({channels}) + 0.1, 1e-3};
}

at::Tensor referenceBatchNorm(const at::Tensor& y, const ConvBatchNorm& bn) {
  return at::batch_norm(y, bn.scale, bn.bias, bn.mean, bn.var, false, 0.0, bn.epsilon, false);
}

struct ActivationCase {
  const char* what;
  ConvActivation activation;
  at::Tensor (*reference)(const at::Tensor&);
};

const std::vector<ActivationCase>& activations() {
  using Kind = ConvActivation::Kind;
  static const std::vector<ActivationCase> kCases = {
      {"Relu", {Kind::Relu, 0.f, 0.f}, [](const at::Tensor& y) { return at::relu(y); }},
      {"LeakyRelu 0.1",
       {Kind::Relu, 0.1f, 0.f},
       [](const at::Tensor& y) { return at::leaky_relu(y, 0.1); }},
      {"Clip [0, 6]",
       {Kind::Clip, 0.f, 6.f},
       [](const at::Tensor& y) { return at::clamp(y, 0.0, 6.0); }},
      {"Clip [-0.5, 0.25]",
       {Kind::Clip, -0.5f, 0.25f},
       [](const at::Tensor& y) { return at::clamp(y, -0.5, 0.25); }},
      {"Sigmoid", {Kind::Sigmoid, 0.f, 0.f}, [](const at::Tensor& y) { return at::sigmoid(y); }},
      {"HardSigmoid 0.25, 0.4",
       {Kind::HardSigmoid, 0.25f, 0.4f},
       [](const at::Tensor& y) { return at::clamp(y * 0.25 + 0.4, 0.0, 1.0); }},
      {"HardSwish",
       {Kind::HardSwish, 0.f, 0.f},
       [](const at::Tensor& y) { return at::hardswish(y); }},
      {"SiLU", {Kind::Swish, 0.f, 0.f}, [](const at::Tensor& y) { return y * at::sigmoid(y); }},
  };
  return kCases;
}

TEST(DnnlConvTest, PlainConvolutionEqualsAtenInChannelsLastLayout) {
  for (const Geometry& c : geometries()) {
    SCOPED_TRACE(c.what);
    at::manual_seed(3);
    const at::Tensor x = at::randn(c.x_shape), w = at::randn(c.w_shape),
                     b = at::randn({c.w_shape[0]});
    ASSERT_TRUE(dnnlConvApplies(x, w, b, windowOf(c)));
    for (const at::Tensor& bias : {b, at::Tensor()}) {
      const at::Tensor y = dnnlConv2d(nullptr, x, w, bias, windowOf(c), c.group, {});
      EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
      expectTensorNear(y, referenceConv(c, x, w, bias), 1e-4, 1e-4);
    }
  }
}

TEST(DnnlConvTest, BatchNormAndEveryActivationEqualTheOpsRunOneAfterAnother) {
  for (const Geometry& c : geometries()) {
    for (const ActivationCase& a : activations()) {
      for (bool with_bn : {false, true}) {
        SCOPED_TRACE(std::string(c.what) + ", " + a.what + (with_bn ? " after BatchNorm" : ""));
        at::manual_seed(5);
        const at::Tensor x = at::randn(c.x_shape), w = at::randn(c.w_shape),
                         b = at::randn({c.w_shape[0]});
        ConvEpilogue epilogue;
        epilogue.activation = a.activation;
        at::Tensor expected = referenceConv(c, x, w, b);
        if (with_bn) {
          epilogue.batch_norm = randomBatchNorm(c.w_shape[0]);
          expected = referenceBatchNorm(expected, *epilogue.batch_norm);
        }
        expected = a.reference(expected);
        expectTensorNear(dnnlConv2d(nullptr, x, w, b, windowOf(c), c.group, epilogue), expected,
                         1e-4, 1e-4);
      }
    }
  }
}

// A node keeps the reordered weight and its kernels between runs: a weight or a BatchNorm
// statistic updated in place, a new weight tensor, and input shapes that come and go (more of
// them than a node keeps) must each give what a fresh computation gives.
TEST(DnnlConvTest, KeptWeightsAndKernelsFollowEveryChange) {
  const Geometry& c = geometries()[1];
  at::manual_seed(11);
  at::Tensor w = at::randn(c.w_shape);
  const at::Tensor b = at::randn({c.w_shape[0]});
  ConvEpilogue epilogue;
  epilogue.batch_norm = randomBatchNorm(c.w_shape[0]);
  std::any state;
  auto check = [&](const at::Tensor& x) {
    const at::Tensor expected = referenceBatchNorm(referenceConv(c, x, w, b), *epilogue.batch_norm);
    expectTensorNear(dnnlConv2d(&state, x, w, b, windowOf(c), c.group, epilogue), expected, 1e-4,
                     1e-4);
  };
  const at::Tensor x = at::randn(c.x_shape);
  check(x);
  check(x);
  w.mul_(-0.5);  // in place: a new version of the same tensor
  check(x);
  epilogue.batch_norm->var.add_(2.0);
  check(x);
  w = at::randn(c.w_shape);  // another tensor
  check(x);
  for (int64_t batch : {1, 3, 4, 5, 6, 7, 1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    check(at::randn({batch, c.x_shape[1], c.x_shape[2], c.x_shape[3]}));
  }
  check(x.contiguous(at::MemoryFormat::ChannelsLast));
}

TEST(DnnlConvTest, AppliesOnlyToFloatInference2dConvolutions) {
  const Geometry& c = geometries()[1];
  const WindowGeometry g = windowOf(c);
  const at::Tensor x = at::randn(c.x_shape), w = at::randn(c.w_shape);
  EXPECT_TRUE(dnnlConvApplies(x, w, {}, g));
  EXPECT_FALSE(dnnlConvApplies(x.to(at::kDouble), w.to(at::kDouble), {}, g));
  EXPECT_FALSE(dnnlConvApplies(x.to(at::kHalf), w, {}, g));
  EXPECT_FALSE(dnnlConvApplies(x, w, at::zeros({c.w_shape[0]}, at::kDouble), g));
  EXPECT_FALSE(dnnlConvApplies(at::randn({0, 8, 9, 9}), w, {}, g));
  // An output with no pixels: ATen's convolution reports it.
  EXPECT_FALSE(dnnlConvApplies(at::randn({1, 8, 1, 1}), w, {},
                               WindowGeometry{{1, 1}, {1, 1}, {0, 0}, {0, 0}}));
  {
    at::AutoGradMode grad(true);
    EXPECT_FALSE(dnnlConvApplies(x, w.clone().requires_grad_(), {}, g));
    EXPECT_TRUE(dnnlConvApplies(x, w, {}, g));
  }
}

}  // namespace
}  // namespace qforge::ops
