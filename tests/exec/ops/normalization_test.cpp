// BatchNormalization, LayerNormalization and InstanceNormalization against closed-form results.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

constexpr double kEps = 1e-5;  // ONNX's default epsilon

// --- BatchNormalization -------------------------------------------------------------------------

// Channel 0: x in {1, 3}, scale 2, B 0.5, mean 1, var 4. Channel 1: x in {2, 4}, scale 1, B -1,
// mean 2, var 0.25. y = (x - mean) / sqrt(var + eps) * scale + B.
std::vector<at::Tensor> bnInputs() {
  return {f32({1, 3, 2, 4}, {1, 2, 1, 2}), f32({2, 1}, {2}), f32({0.5, -1}, {2}), f32({1, 2}, {2}),
          f32({4, 0.25}, {2})};
}
std::vector<double> bnExpected() {
  const double s0 = std::sqrt(4 + kEps), s1 = std::sqrt(0.25 + kEps);
  return {0.5, 2 / s0 * 2 + 0.5, -1, 2 / s1 - 1};
}

TEST(BatchNormTest, InferenceAcrossOpsets) {
  for (int64_t opset : {6, 9, 14, 15}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    expectValuesNear(run1({"BatchNormalization", opset, bnInputs()}), {1, 2, 1, 2}, bnExpected());
  }
}

TEST(BatchNormTest, EpsilonAttribute) {
  auto out =
      runSingleOp({"BatchNormalization", 15, bnInputs(), {Attribute::makeFloat("epsilon", 0.75)}});
  const double s0 = std::sqrt(4.75), s1 = std::sqrt(1.0);
  expectValuesNear(out[0], {1, 2, 1, 2}, {0.5, 2 / s0 * 2 + 0.5, -1, 2 / s1 - 1});
}

TEST(BatchNormTest, PerActivationWhenSpatialIsZero) {
  // Opset 7 spatial=0: statistics per (C, H) position, parameters shaped (2, 2).
  const at::Tensor x = f32({1, 2, 3, 4}, {1, 2, 2});
  auto out = runSingleOp(
      {"BatchNormalization",
       7,
       {x, at::ones({2, 2}), at::zeros({2, 2}), at::ones({2, 2}), f32({1, 1, 4, 4}, {2, 2})},
       {Attribute::makeInt("spatial", 0)}});
  const double s1 = std::sqrt(1 + kEps), s4 = std::sqrt(4 + kEps);
  expectValuesNear(out[0], {1, 2, 2}, {0, 1 / s1, 2 / s4, 3 / s4});
}

TEST(BatchNormTest, TrainingModeUsesBatchStatistics) {
  // One channel holding 1, 2, 3, 6: mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5.
  const at::Tensor x = f32({1, 2, 3, 6}, {2, 1, 1, 2});
  auto out = runSingleOp({"BatchNormalization",
                          15,
                          {x, f32({2}, {1}), f32({1}, {1}), f32({0}, {1}), f32({1}, {1})},
                          {Attribute::makeInt("training_mode", 1)},
                          3});
  const double s = std::sqrt(3.5 + kEps);
  expectValuesNear(out[0], {2, 1, 1, 2}, {-2 / s * 2 + 1, -1 / s * 2 + 1, 1, 3 / s * 2 + 1});
  // momentum 0.9: running = 0.9 * input + 0.1 * batch.
  expectValuesNear(out[1], {1}, {0.3});
  expectValuesNear(out[2], {1}, {0.9 + 0.35});
}

TEST(BatchNormTest, BadInputsNameNode) {
  std::vector<at::Tensor> inputs = bnInputs();
  inputs[1] = f32({1, 1, 1}, {3});
  expectNodeError({"BatchNormalization", 15, inputs}, "scale must have shape [2]");
  // Legacy training outputs are refused rather than silently left uncomputed.
  expectNodeError({"BatchNormalization", 9, bnInputs(), {}, 3}, "training-mode outputs");
  expectNodeError({"BatchNormalization", 15, bnInputs(), {}, 3}, "training_mode=1");
}

// --- LayerNormalization -------------------------------------------------------------------------

TEST(LayerNormTest, LastAxisByDefault) {
  // [1 2 3 4]: mean 2.5, variance 1.25.
  auto out = runSingleOp({"LayerNormalization", 17, {f32({1, 2, 3, 4}, {1, 4}), at::ones({4})}});
  const double s = std::sqrt(1.25 + kEps);
  expectValuesNear(out[0], {1, 4}, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
}

TEST(LayerNormTest, Axis1WithBroadcastScaleAndStatistics) {
  // Two samples of 2x2, normalized over both dims. Sample 0: 1..4 (mean 2.5, variance 1.25).
  // Sample 1: 2 2 6 6 (mean 4, variance 4). Scale (1, 10) broadcasts along the last dim.
  const at::Tensor x = f32({1, 2, 3, 4, 2, 2, 6, 6}, {2, 2, 2});
  auto out = runSingleOp({"LayerNormalization",
                          17,
                          {x, f32({1, 10}, {2}), f32({0, 0, 1, 1}, {2, 2})},
                          {Attribute::makeInt("axis", 1)},
                          3});
  const double s0 = std::sqrt(1.25 + kEps), s1 = std::sqrt(4 + kEps);
  expectValuesNear(out[0], {2, 2, 2},
                   {-1.5 / s0, -0.5 / s0 * 10, 0.5 / s0 + 1, 1.5 / s0 * 10 + 1,  //
                    -2 / s1, -2 / s1 * 10, 2 / s1 + 1, 2 / s1 * 10 + 1});
  expectValuesNear(out[1], {2, 1, 1}, {2.5, 4});
  expectValuesNear(out[2], {2, 1, 1}, {1 / s0, 1 / s1});
}

TEST(LayerNormTest, NegativeAxisAndEpsilon) {
  const at::Tensor x = f32({0, 2, 4, 6}, {1, 2, 2});
  auto out = runSingleOp({"LayerNormalization",
                          17,
                          {x, at::ones({2, 2})},
                          {Attribute::makeInt("axis", -2), Attribute::makeFloat("epsilon", 0.75)}});
  // Mean 3, variance (9 + 1 + 1 + 9) / 4 = 5, plus epsilon 0.75.
  const double s = std::sqrt(5.75);
  expectValuesNear(out[0], {1, 2, 2}, {-3 / s, -1 / s, 1 / s, 3 / s});
}

TEST(LayerNormTest, BadInputsNameNode) {
  const at::Tensor x = f32({1, 2, 3, 4}, {2, 2});
  expectNodeError({"LayerNormalization", 17, {x, at::ones({2})}, {Attribute::makeInt("axis", 2)}},
                  "axis 2 is out of range");
  expectNodeError({"LayerNormalization", 17, {x, at::ones({3})}}, "does not broadcast");
}

// --- InstanceNormalization ----------------------------------------------------------------------

TEST(InstanceNormTest, PerSampleAndChannelStatistics) {
  // Channel 0: 1 3 (mean 2, variance 1); channel 1: 0 4 (mean 2, variance 4).
  auto out = runSingleOp({"InstanceNormalization",
                          6,
                          {f32({1, 3, 0, 4}, {1, 2, 2}), f32({1, 2}, {2}), f32({0, 1}, {2})}});
  const double s0 = std::sqrt(1 + kEps), s1 = std::sqrt(4 + kEps);
  expectValuesNear(out[0], {1, 2, 2}, {-1 / s0, 1 / s0, -2 / s1 * 2 + 1, 2 / s1 * 2 + 1});
}

TEST(InstanceNormTest, BadScaleNamesNode) {
  expectNodeError({"InstanceNormalization",
                   6,
                   {f32({1, 3, 0, 4}, {1, 2, 2}), f32({1, 1, 1}, {3}), f32({0, 0}, {2})}},
                  "scale must have shape [2]");
}

}  // namespace
}  // namespace qforge
