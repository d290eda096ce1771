// What QAT trains in a prepared Conv+BN classifier (weights, biases, BN's scale and shift, the
// quantizers' parameters; BN's running statistics apart), frozen weights, and the per-parameter
// gradient rules against their closed forms.
#include <gtest/gtest.h>

#include <algorithm>

#include "algos/calibrate.h"
#include "algos/qat.h"
#include "algos/qat_parameters.h"
#include "support/checks.h"
#include "support/classifier_graphs.h"
#include "support/quant_graphs.h"
#include "support/tensor_dataset.h"

namespace qforge::testing {
namespace {

backends::BackendConfig backendWith(const std::string& fake_quantizer) {
  return tinyBackend({{"weight", {{"bits", 4}, {"fake_quantizer", fake_quantizer}}},
                      {"activation",
                       {{"bits", 4},
                        {"symmetric", true},
                        {"unsigned", false},
                        {"fake_quantizer", fake_quantizer}}},
                      {"fusions", {{"Conv", "BatchNormalization?", "Relu?"}, {"Gemm"}}}});
}

std::unique_ptr<passes::PreparedModel> calibratedModel(const std::string& fake_quantizer) {
  auto m = algos::prepareForQat(convBnClassifier(3), backendWith(fake_quantizer));
  at::manual_seed(9);
  auto data =
      std::make_shared<TensorDataset>(at::randn({16, 1, 6, 6}), at::randint(0, 3, {16}, at::kLong));
  data::LoaderOptions lo;
  lo.batch_size = 8;
  data::BatchLoader loader(data, lo);
  algos::calibrate(*m, loader, 2);
  return m;
}

size_t indexOf(const algos::QatParameters& p, const std::string& name) {
  return static_cast<size_t>(std::find(p.names.begin(), p.names.end(), name) - p.names.begin());
}

TEST(QatParameters, WeightsBiasesAndBatchNormScaleTrainTheStatisticsDoNot) {
  auto m = calibratedModel("LSQ");
  const algos::QatParameters p = algos::collectQatParameters(*m, /*train_weights=*/true);
  ASSERT_EQ(p.names.size(), p.size());
  ASSERT_EQ(p.decays.size(), p.size());
  ASSERT_EQ(p.batch_scaled_grad.size(), p.size());
  const std::vector<std::string> initializers(p.names.begin(),
                                              p.names.begin() + p.initializer_count);
  std::vector<std::string> sorted = initializers;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{"beta", "cw", "fb", "fw", "gamma"}));
  std::vector<std::string> statistics = p.bn_statistics;
  std::sort(statistics.begin(), statistics.end());
  EXPECT_EQ(statistics, (std::vector<std::string>{"mean", "var"}));
  for (size_t i = 0; i < p.initializer_count; ++i) {
    // Weight decay on the weights of weighted ops only; the graph's own tensors, not copies.
    EXPECT_EQ(p.decays[i], p.names[i] == "cw" || p.names[i] == "fw") << p.names[i];
    EXPECT_FALSE(p.batch_scaled_grad[i]);
    EXPECT_TRUE(p.tensors[i].is_same(m->graph().value(p.names[i])->initializer())) << p.names[i];
  }
  // Then every quantizer's parameters: LSQ has one scale each.
  const auto quantizers = m->quantizers();
  EXPECT_EQ(p.size() - p.initializer_count, quantizers.size());
  int64_t activation_scales = 0;
  for (size_t i = p.initializer_count; i < p.size(); ++i) {
    EXPECT_FALSE(p.decays[i]);
    activation_scales += p.batch_scaled_grad[i];
    EXPECT_EQ(p.names[i].substr(p.names[i].size() - 2), ".0");
  }
  int64_t activation_points = 0;
  for (const auto& point : m->points())
    activation_points += point.kind == passes::PointKind::Activation;
  EXPECT_EQ(activation_scales, activation_points);
  for (const at::Tensor& t : p.tensors)
    EXPECT_TRUE(t.requires_grad());
  int64_t numel = 0, quantizer_numel = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    numel += p.tensors[i].numel();
    if (i >= p.initializer_count) quantizer_numel += p.tensors[i].numel();
  }
  EXPECT_EQ(p.numel(), numel);
  EXPECT_EQ(p.quantizerNumel(), quantizer_numel);
  EXPECT_GT(quantizer_numel, 0);
}

TEST(QatParameters, FrozenWeightsLeaveOnlyTheQuantizersAndNothingToTrainIsRefused) {
  auto m = calibratedModel("LSQ");
  const algos::QatParameters p = algos::collectQatParameters(*m, /*train_weights=*/false);
  EXPECT_EQ(p.initializer_count, 0u);
  EXPECT_EQ(p.size(), m->quantizers().size());
  EXPECT_EQ(p.bn_statistics.size(), 2u);

  auto fixed = calibratedModel("Fixed");  // no learnable quantizer parameters
  EXPECT_NE(errorOf([&] {
              algos::collectQatParameters(*fixed, false);
            }).find("nothing to train: the weights are frozen"),
            std::string::npos);
  EXPECT_GT(algos::collectQatParameters(*fixed, true).size(), 0u);
}

TEST(QatParameters, GradientRulesScaleQuantizerGradientsThenAddWeightDecay) {
  auto m = calibratedModel("LSQ");
  algos::QatParameters p = algos::collectQatParameters(*m, true);
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < p.size(); ++i) {
    at::manual_seed(static_cast<int64_t>(i));
    grads.push_back(at::randn(p.tensors[i].sizes()));
    p.tensors[i].mutable_grad() = grads.back().clone();
  }
  const size_t without_grad = indexOf(p, "fb");
  ASSERT_LT(without_grad, p.initializer_count);
  p.tensors[without_grad].mutable_grad() = at::Tensor();
  algos::adjustGradients(p, /*quantizer_lr_scale=*/0.25, /*weight_decay=*/0.01);
  for (size_t i = 0; i < p.size(); ++i) {
    if (i == without_grad) {
      EXPECT_FALSE(p.tensors[i].grad().defined());
      continue;
    }
    at::Tensor expected = grads[i];
    if (i >= p.initializer_count) expected = expected * 0.25;
    if (p.decays[i]) expected = expected + 0.01 * p.tensors[i].detach();
    EXPECT_TRUE(at::allclose(p.tensors[i].grad(), expected, 1e-6, 1e-7)) << p.names[i];
  }
  // Neither rule set: the gradients stay as they are.
  const std::vector<at::Tensor> before = [&] {
    std::vector<at::Tensor> copies;
    for (const at::Tensor& t : p.tensors)
      copies.push_back(t.grad().defined() ? t.grad().clone() : at::Tensor());
    return copies;
  }();
  algos::adjustGradients(p, 1.0, 0.0);
  for (size_t i = 0; i < p.size(); ++i) {
    if (before[i].defined()) {
      EXPECT_TRUE(at::equal(p.tensors[i].grad(), before[i]));
    }
  }
}

}  // namespace
}  // namespace qforge::testing
