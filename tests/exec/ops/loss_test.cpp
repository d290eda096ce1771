// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: closed-form values and PyTorch's own
// losses (ONNX's node tests cover the rest), and the errors that name the node.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

Attribute reduction(const std::string& r) {
  return Attribute::makeString("reduction", r);
}

TEST(LossTest, NllPicksTheTargetClassWeighsItAndSkipsTheIgnoredIndex) {
  // Rows pick classes 2, 0 and (ignored) 1: losses -(-0.3) * 2, -(-1.0) * 0.5 and 0.
  const at::Tensor input = f32({-1, -2, -0.3, -1.0, -0.1, -4, -2, -0.7, -3}, {3, 3});
  const at::Tensor target = i64({2, 0, 1});
  const at::Tensor weight = f32({0.5, 3, 2}, {3});
  const Attribute ignore = Attribute::makeInt("ignore_index", 1);
  expectTensorNear(
      run1({"NegativeLogLikelihoodLoss", 13, {input, target, weight}, {reduction("none"), ignore}}),
      f32({0.6, 0.5, 0}, {3}));
  expectTensorNear(
      run1({"NegativeLogLikelihoodLoss", 13, {input, target, weight}, {reduction("sum"), ignore}}),
      f32({1.1}, {}));
  // The mean divides by the weights that counted: 2 + 0.5.
  expectTensorNear(run1({"NegativeLogLikelihoodLoss", 13, {input, target, weight}, {ignore}}),
                   f32({1.1 / 2.5}, {}));
}

TEST(LossTest, SoftmaxCrossEntropyEqualsPyTorchsCrossEntropyOverSpatialAxes) {
  at::manual_seed(4);
  const at::Tensor scores = at::randn({2, 5, 3, 4});
  const at::Tensor labels = at::randint(0, 5, {2, 3, 4}, at::kLong);
  const at::Tensor weight = at::rand({5}) + 0.5;
  const auto out = runSingleOp({"SoftmaxCrossEntropyLoss", 13, {scores, labels, weight}, {}, 2});
  expectTensorNear(out[0], at::cross_entropy_loss(scores, labels, weight));
  expectTensorNear(out[1], at::log_softmax(scores, 1));
}

TEST(LossTest, BadInputsNameTheNode) {
  const at::Tensor input = f32({-1, -2, -3, -4}, {2, 2});
  expectNodeError({"NegativeLogLikelihoodLoss", 13, {input, i64({0})}},
                  "target of shape [1] does not match input of shape [2,2]");
  expectNodeError({"NegativeLogLikelihoodLoss", 13, {input, i64({0, 2})}},
                  "a target is outside [0, 2) and is not ignore_index");
  expectNodeError({"NegativeLogLikelihoodLoss", 13, {input, i64({0, 1}), f32({1}, {1})}},
                  "weight must have shape [2], got [1]");
  expectNodeError({"NegativeLogLikelihoodLoss", 13, {input, i64({0, 1})}, {reduction("avg")}},
                  "unknown reduction 'avg'");
  expectNodeError({"SoftmaxCrossEntropyLoss", 13, {f32({1, 2}, {2}), i64({0})}},
                  "scores must be [N, C, ...], got rank 1");
}

}  // namespace
}  // namespace qforge
