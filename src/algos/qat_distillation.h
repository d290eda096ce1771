// QAT without labels: the loss is the distance from the float model's own output (knowledge
// distillation from the model before quantization), so any model can be fine-tuned on the images
// it will see. MSE compares outputs directly; KL compares class distributions along axis 1 (a
// classifier's or a segmenter's scores), scaled by T^2 as in Hinton et al.
#pragma once

#include <string>

#include "algos/qat.h"
#include "ir/graph.h"

namespace qforge::algos {

enum class DistillationKind { Mse, Kl };

// "mse" or "kl"; throws qforge::Error naming the known kinds.
DistillationKind parseDistillationKind(const std::string& name);
const char* toString(DistillationKind kind);

// The loss of a student output against the float `teacher`'s first output on the same batch
// inputs (run without autograd; the teacher graph is copied). `temperature` > 0 softens both
// distributions for KL and is ignored by MSE.
QatLoss distillationLoss(const Graph& teacher, DistillationKind kind, double temperature = 1.0);

// The two distances themselves, on outputs already computed.
at::Tensor mseDistillation(const at::Tensor& student, const at::Tensor& teacher);
at::Tensor klDistillation(const at::Tensor& student, const at::Tensor& teacher, double temperature);

}  // namespace qforge::algos
