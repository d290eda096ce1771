// QAT without labels: the loss is the distance from the float model's own output (knowledge
// distillation from the model before quantization), so any model can be fine-tuned on the images
// it will see. MSE compares outputs directly; KL compares class distributions along axis 1 (a
// classifier's or a segmenter's scores), scaled by T^2 as in Hinton et al. When the output is a
// Softmax (or LogSoftmax), KL compares the scores that op reads, along its axis: probabilities
// taken as scores give near-uniform distributions (a PaddleOCR recogniser's 6625 classes: no
// signal), and saturated probabilities pass back almost no gradient.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "algos/qat.h"
#include "ir/graph.h"

namespace qforge::algos {

enum class DistillationKind { Mse, Kl };

// The value a distillation loss reads, in the teacher and in the student alike, and where its
// class distributions lie.
struct DistillationTarget {
  std::string value;
  bool before_softmax = false;  // `value` is what the output's Softmax or LogSoftmax reads
  int64_t class_axis = 1;       // may be negative (from the end)
  // Softmax before opset 13: a distribution spans every axis from class_axis on.
  bool classes_from_axis = false;
};

// KL: the scores before a Softmax/LogSoftmax that writes the first output, else that output
// along axis 1. MSE: the first output.
DistillationTarget distillationTarget(const Graph& graph, DistillationKind kind);

// "mse" or "kl"; throws qforge::Error naming the known kinds.
DistillationKind parseDistillationKind(const std::string& name);
const char* toString(DistillationKind kind);

// The loss of the student's distillationTarget() value against the float `teacher`'s on the same
// batch inputs (run without autograd; the teacher graph is copied). The trainer must hand the
// loss that value (QatTrainer::readLossFrom). `temperature` > 0 softens both distributions for
// KL and is ignored by MSE.
QatLoss distillationLoss(const Graph& teacher, DistillationKind kind, double temperature = 1.0);

// Distillation of intermediate values too (the backbone's features, say): the losses of one step
// share one run of the float model.
struct DistillationLosses {
  QatLoss output;        // empty when the output is not distilled (labels train it, say)
  QatValuesTerm values;  // empty when no intermediate value is named
};
// `kind`: how the output is distilled (nullopt: it is not). `values`: value names the float model
// and the student both have; their term is intermediateDistillation() times `weight`. Throws
// naming a value the float model lacks.
DistillationLosses distillationLosses(const Graph& teacher, std::optional<DistillationKind> kind,
                                      double temperature, std::vector<std::string> values,
                                      double weight);

// The distances themselves, on values already computed.
at::Tensor mseDistillation(const at::Tensor& student, const at::Tensor& teacher);
at::Tensor klDistillation(const at::Tensor& student, const at::Tensor& teacher, double temperature,
                          const DistillationTarget& where = {});
// Each value's MSE divided by the float value's mean square (noise over signal power: values of
// any scale weigh alike), averaged over the values. `names` name them in errors.
at::Tensor intermediateDistillation(const std::vector<at::Tensor>& student,
                                    const std::vector<at::Tensor>& teacher,
                                    const std::vector<std::string>& names);

}  // namespace qforge::algos
