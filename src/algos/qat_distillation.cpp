#include "algos/qat_distillation.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>

#include "algos/calibrate.h"
#include "core/error.h"
#include "exec/executor.h"
#include "ir/node_attributes.h"

namespace qforge::algos {

namespace {

// The float model and its executor, alive as long as the loss that reads them.
struct Teacher {
  Teacher(const Graph& g, DistillationKind kind)
      : graph(g.clone()),
        executor(graph),
        input(dataInput(graph).name()),
        target(distillationTarget(graph, kind)) {}
  Graph graph;
  Executor executor;
  std::string input;
  DistillationTarget target;

  at::Tensor outputFor(const at::Tensor& inputs) {
    at::NoGradGuard no_grad;
    return executor.run({{input, inputs}}, {target.value}).at(target.value);
  }
};

void requireSameShape(const at::Tensor& student, const at::Tensor& teacher) {
  require(student.sizes() == teacher.sizes(),
          "distillation: the quantized model's output has shape " + c10::str(student.sizes()) +
              " but the float model's has " + c10::str(teacher.sizes()));
}

// `scores` as [positions, classes]: one row per distribution.
at::Tensor classRows(const at::Tensor& scores, const DistillationTarget& where) {
  const int64_t rank = scores.dim();
  const int64_t axis = where.class_axis < 0 ? where.class_axis + rank : where.class_axis;
  require(axis >= 0 && axis < rank, "distillation (kl): the output needs a class axis " +
                                        std::to_string(where.class_axis) + "; it has shape " +
                                        c10::str(scores.sizes()));
  if (where.classes_from_axis) {
    int64_t rows = 1;
    for (int64_t d = 0; d < axis; ++d)
      rows *= scores.size(d);
    return scores.reshape({rows, rows == 0 ? 0 : scores.numel() / rows});
  }
  return at::movedim(scores, axis, rank - 1).reshape({-1, scores.size(axis)});
}

}  // namespace

DistillationTarget distillationTarget(const Graph& graph, DistillationKind kind) {
  const Value* output = graph.outputs().front();
  DistillationTarget target;
  target.value = output->name();
  const Node* softmax = output->producer();
  if (kind != DistillationKind::Kl || softmax == nullptr || !softmax->domain().empty() ||
      (softmax->opType() != "Softmax" && softmax->opType() != "LogSoftmax"))
    return target;
  // Before opset 13 Softmax flattens from `axis` (default 1); since, it runs along `axis` (-1).
  const bool one_axis = graph.model.opsetFor("") >= 13;
  target.value = softmax->input(0)->name();
  target.before_softmax = true;
  target.class_axis = intAttr(*softmax, "axis", one_axis ? -1 : 1);
  target.classes_from_axis = !one_axis;
  return target;
}

DistillationKind parseDistillationKind(const std::string& name) {
  if (name == "mse") return DistillationKind::Mse;
  if (name == "kl") return DistillationKind::Kl;
  throw Error("unknown distillation loss '" + name + "'; known: mse, kl");
}

const char* toString(DistillationKind kind) {
  return kind == DistillationKind::Mse ? "mse" : "kl";
}

at::Tensor mseDistillation(const at::Tensor& student, const at::Tensor& teacher) {
  requireSameShape(student, teacher);
  return at::mse_loss(student, teacher.detach());
}

at::Tensor klDistillation(const at::Tensor& student, const at::Tensor& teacher, double temperature,
                          const DistillationTarget& where) {
  requireSameShape(student, teacher);
  require(temperature > 0, "distillation temperature must be positive");
  const at::Tensor p_scores = classRows(student, where) / temperature;
  const at::Tensor q_scores = classRows(teacher.detach(), where) / temperature;
  const at::Tensor log_p = at::log_softmax(p_scores, 1);
  const at::Tensor log_q = at::log_softmax(q_scores, 1);
  // KL(q || p) summed over classes, averaged over every other position (batch, pixels, steps).
  const auto positions = static_cast<double>(std::max<int64_t>(p_scores.size(0), 1));
  return (log_q.exp() * (log_q - log_p)).sum() / positions * temperature * temperature;
}

QatLoss distillationLoss(const Graph& teacher_graph, DistillationKind kind, double temperature) {
  auto teacher = std::make_shared<Teacher>(teacher_graph, kind);
  return [teacher, kind, temperature](const at::Tensor& output, const data::Batch& batch) {
    const at::Tensor target = teacher->outputFor(batch.inputs);
    return kind == DistillationKind::Mse
               ? mseDistillation(output, target)
               : klDistillation(output, target, temperature, teacher->target);
  };
}

}  // namespace qforge::algos
