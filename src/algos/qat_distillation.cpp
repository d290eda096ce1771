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

// The float model and its executor, alive as long as the losses that read them. One run serves
// every loss of a step: the values are kept with the inputs they were computed from (held, so
// that no later batch can reuse their storage and pass for them).
struct Teacher {
  Teacher(const Graph& g, std::vector<std::string> value_names)
      : graph(g.clone()),
        executor(graph),
        input(dataInput(graph).name()),
        names(std::move(value_names)) {
    for (const std::string& name : names) {
      require(graph.findValue(name) != nullptr,
              "distillation: the float model has no value '" + name + "'");
    }
  }
  Graph graph;
  Executor executor;
  std::string input;
  std::vector<std::string> names;
  at::Tensor inputs_seen;
  TensorMap seen;

  const at::Tensor& valueFor(const at::Tensor& inputs, const std::string& name) {
    if (!inputs_seen.defined() || !inputs_seen.is_same(inputs)) {
      at::NoGradGuard no_grad;
      seen = executor.run({{input, inputs}}, names);
      inputs_seen = inputs;
    }
    return seen.at(name);
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

at::Tensor intermediateDistillation(const std::vector<at::Tensor>& student,
                                    const std::vector<at::Tensor>& teacher,
                                    const std::vector<std::string>& names) {
  require(!student.empty() && student.size() == teacher.size() && names.size() == student.size(),
          "distillation: intermediate values need one float value per student value");
  at::Tensor sum;
  for (size_t i = 0; i < student.size(); ++i) {
    require(student[i].is_floating_point(), "distillation: intermediate value '" + names[i] +
                                                "' is " + c10::toString(student[i].scalar_type()) +
                                                ", not a float tensor");
    require(student[i].sizes() == teacher[i].sizes(),
            "distillation: intermediate value '" + names[i] + "' has shape " +
                c10::str(student[i].sizes()) + " in the quantized model but " +
                c10::str(teacher[i].sizes()) + " in the float model");
    // An fp16 model's float run gives fp16 values; the student computes in float.
    const at::Tensor reference = teacher[i].detach().to(student[i].scalar_type());
    // An all-zero float value has no power to be relative to: its plain MSE stands.
    const at::Tensor power = reference.square().mean().clamp_min(1e-12);
    const at::Tensor term = at::mse_loss(student[i], reference) / power;
    sum = sum.defined() ? sum + term : term;
  }
  return sum / static_cast<double>(student.size());
}

DistillationLosses distillationLosses(const Graph& teacher_graph,
                                      std::optional<DistillationKind> kind, double temperature,
                                      std::vector<std::string> values, double weight) {
  std::optional<DistillationTarget> target;
  std::vector<std::string> names;
  if (kind) {
    target = distillationTarget(teacher_graph, *kind);
    names.push_back(target->value);
  }
  names.insert(names.end(), values.begin(), values.end());
  require(!names.empty(), "distillation: nothing to distil (no output loss, no values)");
  require(weight >= 0, "distillation: the weight of intermediate values must be at least 0");
  auto teacher = std::make_shared<Teacher>(teacher_graph, names);
  DistillationLosses losses;
  if (kind) {
    losses.output = [teacher, kind = *kind, temperature, target = *target](
                        const at::Tensor& output, const data::Batch& batch) {
      const at::Tensor& reference = teacher->valueFor(batch.inputs, target.value);
      return kind == DistillationKind::Mse ? mseDistillation(output, reference)
                                           : klDistillation(output, reference, temperature, target);
    };
  }
  if (!values.empty()) {
    losses.values = [teacher, values, weight](const std::vector<at::Tensor>& student,
                                              const data::Batch& batch) {
      std::vector<at::Tensor> reference;
      for (const std::string& name : values)
        reference.push_back(teacher->valueFor(batch.inputs, name));
      return intermediateDistillation(student, reference, values) * weight;
    };
  }
  return losses;
}

QatLoss distillationLoss(const Graph& teacher_graph, DistillationKind kind, double temperature) {
  return distillationLosses(teacher_graph, kind, temperature, {}, 0).output;
}

}  // namespace qforge::algos
