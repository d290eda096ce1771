// Distillation losses for QAT without labels: MSE and temperature-scaled KL checked against
// closed forms and PyTorch's own kl_div, the float teacher run on the batch inputs, gradients
// reaching the student, and the errors for mismatched outputs and unknown kinds.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "algos/qat_distillation.h"
#include "pipelines/tiny_classifier.h"
#include "support/checks.h"

namespace qforge::testing {
namespace {

TEST(QatDistillation, MseIsTheMeanSquaredDifference) {
  const at::Tensor student = at::tensor({1.0f, 2.0f, -1.0f, 0.0f}).view({2, 2});
  const at::Tensor teacher = at::zeros({2, 2});
  EXPECT_FLOAT_EQ(algos::mseDistillation(student, teacher).item<float>(), (1 + 4 + 1 + 0) / 4.0);
}

TEST(QatDistillation, KlMatchesTheClosedFormForTwoClasses) {
  // Student p = (1/2, 1/2), teacher q = (3/4, 1/4): KL(q || p) = 3/4 ln(3/2) + 1/4 ln(1/2).
  const at::Tensor student = at::zeros({1, 2});
  const at::Tensor teacher = at::tensor({std::log(3.0f), 0.0f}).view({1, 2});
  const double want = 0.75 * std::log(1.5) + 0.25 * std::log(0.5);
  EXPECT_NEAR(algos::klDistillation(student, teacher, 1.0).item<double>(), want, 1e-6);
}

TEST(QatDistillation, KlWithTemperatureMatchesPyTorchsKlDivPerPosition) {
  // Scores [batch 2, classes 5, 3x3 pixels]: the class axis is 1, every pixel a distribution.
  at::manual_seed(1);
  const at::Tensor student = at::randn({2, 5, 3, 3});
  const at::Tensor teacher = at::randn({2, 5, 3, 3});
  const double t = 2.5;
  const at::Tensor log_p = at::log_softmax(student / t, 1);
  const at::Tensor q = at::softmax(teacher / t, 1);
  const double want = at::kl_div(log_p, q, at::Reduction::Sum).item<double>() / (2 * 3 * 3) * t * t;
  EXPECT_NEAR(algos::klDistillation(student, teacher, t).item<double>(), want, 1e-5);
}

TEST(QatDistillation, TheTeacherIsTheFloatModelOnTheSameInputs) {
  const Graph teacher = linearClassifier();  // y = x W^T + b
  const at::Tensor w = teacher.value("w")->initializer();
  const at::Tensor b = teacher.value("b")->initializer();
  at::manual_seed(2);
  data::Batch batch;
  batch.inputs = at::randn({6, 4});
  const at::Tensor student = at::randn({6, 3}).requires_grad_(true);
  const algos::QatLoss loss = algos::distillationLoss(teacher, algos::DistillationKind::Mse);
  const at::Tensor value = loss(student, batch);
  const at::Tensor target = at::addmm(b, batch.inputs, w.t());
  EXPECT_NEAR(value.item<double>(), at::mse_loss(student, target).item<double>(), 1e-6);
  value.backward();
  // d/ds mean((s - t)^2) = 2 (s - t) / n: gradients reach the student, not the teacher.
  expectClose(student.grad(), 2 * (student.detach() - target) / student.numel(), 1e-6);
}

TEST(QatDistillation, RefusesMismatchedOutputsAndUnknownKinds) {
  EXPECT_EQ(errorOf([] {
              algos::mseDistillation(at::zeros({2, 3}), at::zeros({2, 4}));
            }),
            "distillation: the quantized model's output has shape [2, 3] but the float model's "
            "has [2, 4]");
  EXPECT_NE(errorOf([] {
              algos::klDistillation(at::zeros({4}), at::zeros({4}), 1.0);
            }).find("needs a class axis 1"),
            std::string::npos);
  EXPECT_EQ(errorOf([] { algos::parseDistillationKind("l1"); }),
            "unknown distillation loss 'l1'; known: mse, kl");
}

}  // namespace
}  // namespace qforge::testing
