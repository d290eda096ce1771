// Distillation losses for QAT without labels: MSE and temperature-scaled KL checked against
// closed forms and PyTorch's own kl_div, the float teacher run on the batch inputs, gradients
// reaching the student, KL on the scores a final Softmax reads (along its axis, or flattened
// before opset 13), intermediate values weighed by their float power with one float run serving a
// step's losses, and the errors for mismatched outputs and values and unknown kinds.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

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

// linearClassifier() with Softmax(axis) after its scores, at `opset`.
Graph softmaxClassifier(int64_t opset, std::optional<int64_t> axis) {
  Graph g = linearClassifier();
  g.model.opset_imports[""] = opset;
  Value* scores = g.outputs().front();
  Node* softmax = g.addNode("Softmax", {scores}, {"probabilities"}, "softmax");
  if (axis) softmax->attributes.set(Attribute::makeInt("axis", *axis));
  g.setOutputs({softmax->output(0)});
  return g;
}

// KL(q || p) of one distribution's scores, written out.
double klOfScores(const std::vector<double>& student, const std::vector<double>& teacher) {
  double zp = 0, zq = 0;
  for (size_t i = 0; i < student.size(); ++i) {
    zp += std::exp(student[i]);
    zq += std::exp(teacher[i]);
  }
  double kl = 0;
  for (size_t i = 0; i < student.size(); ++i) {
    const double q = std::exp(teacher[i]) / zq;
    kl += q * (std::log(q) - (student[i] - std::log(zp)));
  }
  return kl;
}

// The mean of klOfScores over the rows of [rows, classes] scores, read one value at a time.
double meanKlOfRows(const at::Tensor& student, const at::Tensor& teacher) {
  const at::Tensor p = student.to(at::kDouble).contiguous(),
                   q = teacher.to(at::kDouble).contiguous();
  double sum = 0;
  for (int64_t r = 0; r < p.size(0); ++r) {
    std::vector<double> pr, qr;
    for (int64_t c = 0; c < p.size(1); ++c) {
      pr.push_back(p[r][c].item<double>());
      qr.push_back(q[r][c].item<double>());
    }
    sum += klOfScores(pr, qr);
  }
  return sum / static_cast<double>(p.size(0));
}

TEST(QatDistillation, KlReadsTheScoresBeforeAFinalSoftmaxAlongItsAxis) {
  const algos::DistillationTarget kl =
      algos::distillationTarget(softmaxClassifier(13, 1), algos::DistillationKind::Kl);
  EXPECT_EQ(kl.value, "y");
  EXPECT_TRUE(kl.before_softmax);
  EXPECT_EQ(kl.class_axis, 1);
  EXPECT_FALSE(kl.classes_from_axis);
  // Opset 13 defaults to the last axis; before 13 Softmax flattens from axis 1.
  EXPECT_EQ(
      algos::distillationTarget(softmaxClassifier(13, {}), algos::DistillationKind::Kl).class_axis,
      -1);
  const algos::DistillationTarget old =
      algos::distillationTarget(softmaxClassifier(11, {}), algos::DistillationKind::Kl);
  EXPECT_EQ(old.class_axis, 1);
  EXPECT_TRUE(old.classes_from_axis);
  // MSE compares what the model outputs; so does KL without a Softmax at the end.
  EXPECT_EQ(algos::distillationTarget(softmaxClassifier(13, 1), algos::DistillationKind::Mse).value,
            "probabilities");
  const algos::DistillationTarget plain =
      algos::distillationTarget(linearClassifier(), algos::DistillationKind::Kl);
  EXPECT_EQ(plain.value, "y");
  EXPECT_FALSE(plain.before_softmax);
  EXPECT_EQ(plain.class_axis, 1);
}

TEST(QatDistillation, KlAlongTheLastAxisAveragesOverEveryOtherPosition) {
  // A recogniser's [batch 2, steps 3, classes 4]: every step is a distribution.
  at::manual_seed(3);
  const at::Tensor student = at::randn({2, 3, 4}, at::kDouble);
  const at::Tensor teacher = at::randn({2, 3, 4}, at::kDouble);
  algos::DistillationTarget last;
  last.class_axis = -1;
  EXPECT_NEAR(algos::klDistillation(student, teacher, 1.0, last).item<double>(),
              meanKlOfRows(student.reshape({6, 4}), teacher.reshape({6, 4})), 1e-9);

  // Flattened from axis 1 (Softmax before opset 13): one distribution of 12 per sample.
  algos::DistillationTarget flat;
  flat.classes_from_axis = true;
  EXPECT_NEAR(algos::klDistillation(student, teacher, 1.0, flat).item<double>(),
              meanKlOfRows(student.reshape({2, 12}), teacher.reshape({2, 12})), 1e-9);
}

TEST(QatDistillation, TheTeacherGivesItsScoresBeforeTheSoftmaxAndItsAxis) {
  // A recogniser's shape: x [N, 2 steps, 4] -> MatMul W^T [4, 3] -> Softmax over the last axis.
  Graph teacher;
  Value* x = teacher.addValue("x");
  x->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(2), Dim::known(4)}};
  teacher.addInput(x);
  Node* matmul = teacher.addNode(
      "MatMul", {x, teacher.addInitializer("wt", classifierWeight().t().contiguous())}, {"scores"},
      "fc");
  Node* softmax = teacher.addNode("Softmax", {matmul->output(0)}, {"p"}, "softmax");
  teacher.addOutput(softmax->output(0));
  at::manual_seed(4);
  data::Batch batch;
  batch.inputs = at::randn({5, 2, 4});
  const at::Tensor student = at::randn({5, 2, 3});
  const at::Tensor value =
      algos::distillationLoss(teacher, algos::DistillationKind::Kl)(student, batch);
  const at::Tensor scores = at::matmul(batch.inputs, classifierWeight().t()).to(at::kDouble);
  EXPECT_NEAR(value.item<double>(), meanKlOfRows(student.reshape({10, 3}), scores.reshape({10, 3})),
              1e-5);
}

TEST(QatDistillation, IntermediateValuesWeighTheirErrorsByTheFloatValuesPower) {
  // a: MSE 1/4 over a mean square of 39/4 -> 1/39. b: MSE (9 + 16) / 2 over the same -> 1.
  const at::Tensor a = at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({2, 2}).requires_grad_(true);
  const at::Tensor b = at::zeros({1, 2}).requires_grad_(true);
  const std::vector<at::Tensor> teacher{at::tensor({1.0f, 2.0f, 3.0f, 5.0f}).view({2, 2}),
                                        at::tensor({3.0f, 4.0f}).view({1, 2})};
  const at::Tensor value = algos::intermediateDistillation({a, b}, teacher, {"a", "b"});
  EXPECT_NEAR(value.item<double>(), (1.0 / 39 + 1.0) / 2, 1e-6);
  value.backward();
  // d/da of mean((a - t)^2) / p / 2 = (a - t) / (n p): only a's last element moves.
  EXPECT_NEAR(a.grad()[1][1].item<double>(), -1.0 / (4 * 39.0 / 4), 1e-6);
  EXPECT_EQ(a.grad()[0][0].item<float>(), 0.0f);
  EXPECT_NEAR(b.grad()[0][1].item<double>(), -4.0 / (2 * 12.5), 1e-6);
}

// softmaxClassifier(13, 1) from `x`: its scores y = x W^T + b, an intermediate value.
at::Tensor scoresOf(const at::Tensor& x) {
  return at::addmm(classifierBias(), x, classifierWeight().t());
}

TEST(QatDistillation, OneFloatRunServesTheOutputAndTheValuesOfTheSameBatch) {
  const Graph teacher = softmaxClassifier(13, 1);
  algos::DistillationLosses losses =
      algos::distillationLosses(teacher, algos::DistillationKind::Mse, 1.0, {"y"}, /*weight=*/3.0);
  ASSERT_TRUE(losses.output && losses.values);
  at::manual_seed(5);
  data::Batch first, second;
  first.inputs = at::randn({6, 4});
  second.inputs = at::randn({6, 4});
  const at::Tensor student = at::randn({6, 3});
  const auto relative = [](const at::Tensor& s, const at::Tensor& t) {
    return (s - t).square().mean().item<double>() / t.square().mean().item<double>();
  };
  // The output, then the values, of one batch; then another batch's values alone: each read of
  // the float model is of the batch it is given, never the previous one kept.
  const at::Tensor probabilities = at::softmax(scoresOf(first.inputs), 1);
  EXPECT_NEAR(losses.output(student, first).item<double>(),
              (student - probabilities).square().mean().item<double>(), 1e-6);
  EXPECT_NEAR(losses.values({student}, first).item<double>(),
              3 * relative(student, scoresOf(first.inputs)), 1e-5);
  EXPECT_NEAR(losses.values({student}, second).item<double>(),
              3 * relative(student, scoresOf(second.inputs)), 1e-5);

  // Values without an output loss (labels train the output).
  losses = algos::distillationLosses(teacher, std::nullopt, 1.0, {"y"}, 1.0);
  EXPECT_FALSE(losses.output);
  EXPECT_NEAR(losses.values({student}, second).item<double>(),
              relative(student, scoresOf(second.inputs)), 1e-5);
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
  EXPECT_EQ(errorOf([] {
              algos::distillationLosses(linearClassifier(), std::nullopt, 1.0, {"nope"}, 1.0);
            }),
            "distillation: the float model has no value 'nope'");
  EXPECT_EQ(errorOf([] {
              algos::intermediateDistillation({at::zeros({2, 3})}, {at::zeros({3, 2})}, {"h"});
            }),
            "distillation: intermediate value 'h' has shape [2, 3] in the quantized model but "
            "[3, 2] in the float model");
  EXPECT_EQ(errorOf([] {
              algos::intermediateDistillation({at::zeros({2}, at::kLong)},
                                              {at::zeros({2}, at::kLong)}, {"shape"});
            }),
            "distillation: intermediate value 'shape' is Long, not a float tensor");
}

}  // namespace
}  // namespace qforge::testing
