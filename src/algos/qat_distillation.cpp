#include "algos/qat_distillation.h"

#include <ATen/ATen.h>

#include <memory>

#include "algos/calibrate.h"
#include "core/error.h"
#include "exec/executor.h"

namespace qforge::algos {

namespace {

// The float model and its executor, alive as long as the loss that reads them.
struct Teacher {
  explicit Teacher(const Graph& g)
      : graph(g.clone()),
        executor(graph),
        input(dataInput(graph).name()),
        output(graph.outputs().front()->name()) {}
  Graph graph;
  Executor executor;
  std::string input, output;

  at::Tensor outputFor(const at::Tensor& inputs) {
    at::NoGradGuard no_grad;
    return executor.run({{input, inputs}}, {output}).at(output);
  }
};

void requireSameShape(const at::Tensor& student, const at::Tensor& teacher) {
  require(student.sizes() == teacher.sizes(),
          "distillation: the quantized model's output has shape " + c10::str(student.sizes()) +
              " but the float model's has " + c10::str(teacher.sizes()));
}

}  // namespace

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

at::Tensor klDistillation(const at::Tensor& student, const at::Tensor& teacher,
                          double temperature) {
  requireSameShape(student, teacher);
  require(student.dim() >= 2, "distillation (kl): the output needs a class axis 1; it has shape " +
                                  c10::str(student.sizes()));
  require(temperature > 0, "distillation temperature must be positive");
  const at::Tensor log_p = at::log_softmax(student / temperature, 1);
  const at::Tensor q = at::softmax(teacher.detach() / temperature, 1);
  const at::Tensor log_q = at::log_softmax(teacher.detach() / temperature, 1);
  // KL(q || p) summed over classes, averaged over every other position (batch, pixels).
  const int64_t positions = student.numel() / student.size(1);
  return (q * (log_q - log_p)).sum() / static_cast<double>(positions) * temperature * temperature;
}

QatLoss distillationLoss(const Graph& teacher_graph, DistillationKind kind, double temperature) {
  auto teacher = std::make_shared<Teacher>(teacher_graph);
  return [teacher, kind, temperature](const at::Tensor& output, const data::Batch& batch) {
    const at::Tensor target = teacher->outputFor(batch.inputs);
    return kind == DistillationKind::Mse ? mseDistillation(output, target)
                                         : klDistillation(output, target, temperature);
  };
}

}  // namespace qforge::algos
