#include "verify/runtime_kernels.h"

#include <optional>

#include "exec/ops/ort_qlinear_softmax.h"
#include "ir/node_attributes.h"
#include "passes/fake_quantize_node.h"

namespace qforge::verify {

namespace {

// A per-tensor 8-bit grid written as constant scale and zero point inputs 1 and 2 of a
// DequantizeLinear or QuantizeLinear.
struct Grid {
  float scale;
  int64_t zero_point;
  at::ScalarType type;
};

std::optional<Grid> gridOf(const Node* n, const std::string& op_type) {
  if (n == nullptr || n->opType() != op_type || !n->domain().empty()) return std::nullopt;
  const Value* scale = n->input(1);
  const Value* zero_point = n->input(2);
  if (scale == nullptr || zero_point == nullptr || !scale->isInitializer() ||
      !zero_point->isInitializer() || scale->initializer().numel() != 1 ||
      zero_point->initializer().numel() != 1) {
    return std::nullopt;
  }
  const at::ScalarType type = zero_point->initializer().scalar_type();
  if (type != at::kByte && type != at::kChar) return std::nullopt;
  return Grid{scale->initializer().to(at::kFloat).item<float>(),
              zero_point->initializer().to(at::kLong).item<int64_t>(), type};
}

// The only node reading `v`, or nullptr.
const Node* onlyUser(const Graph& g, const Value* v) {
  if (v == nullptr || g.isGraphOutput(v) || v->uses().size() != 1) return nullptr;
  return v->uses().front().node;
}

}  // namespace

RuntimeKernels::RuntimeKernels(const Graph& prepared, const Graph& qdq) {
  const int64_t opset = ort_integer::softmaxOpset(qdq.model);
  for (const Node* n : prepared.topologicalOrder()) {
    if (n->opType() != "Softmax" || !n->domain().empty() || n->name().empty()) continue;
    // The prepared graph: fake quantizer -> Softmax -> its only reader, a fake quantizer.
    const Node* fq_in = n->input(0) != nullptr ? n->input(0)->producer() : nullptr;
    const Node* fq_out = onlyUser(prepared, n->output(0));
    if (fq_in == nullptr || fq_out == nullptr || !passes::isFakeQuantize(fq_in) ||
        !passes::isFakeQuantize(fq_out)) {
      continue;
    }
    // The QDQ model: DequantizeLinear -> Softmax -> its only reader, a QuantizeLinear, one 8-bit
    // type: what ORT's unary QDQ selector fuses.
    const Node* op = qdq.findNode(n->name());
    if (op == nullptr || op->opType() != "Softmax") continue;
    const auto x =
        gridOf(op->input(0) != nullptr ? op->input(0)->producer() : nullptr, "DequantizeLinear");
    const auto y = gridOf(onlyUser(qdq, op->output(0)), "QuantizeLinear");
    if (!x || !y || x->type != y->type) continue;
    Group g;
    g.node = n->name();
    g.input_value = fq_in->output(0)->name();
    g.output_value = fq_out->output(0)->name();
    g.x_scale = x->scale;
    g.x_zero_point = x->zero_point;
    g.y_scale = y->scale;
    g.y_zero_point = y->zero_point;
    g.type = x->type;
    g.flatten_from_axis = opset < 13;
    g.axis = intAttr(*op, "axis", opset < 13 ? 1 : -1);
    groups_.push_back(std::move(g));
  }
}

std::vector<std::string> RuntimeKernels::names() const {
  std::vector<std::string> out;
  for (const Group& g : groups_)
    out.push_back("Softmax '" + g.node + "'");
  return out;
}

void RuntimeKernels::install(HookScope& hooks) const {
  for (const Group& g : groups_) {
    hooks.addFinal(g.input_value,
                   [inputs = inputs_, name = g.input_value](const Value&, const at::Tensor& t) {
                     (*inputs)[name] = t;
                     return t;
                   });
    hooks.add(g.output_value, [inputs = inputs_, g](const Value&, const at::Tensor& t) {
      const auto it = inputs->find(g.input_value);
      if (it == inputs->end() || it->second.sizes() != t.sizes()) return t;
      // Where ORT's kernel overflows (deploy/qoperator_rules.cpp), the writer keeps the group
      // unfused; leave the simulation as it is there.
      int64_t d = 1;
      const int64_t axis = g.axis < 0 ? g.axis + t.dim() : g.axis;
      for (int64_t i = axis; i < (g.flatten_from_axis ? t.dim() : axis + 1); ++i)
        d *= t.size(i);
      if (ort_integer::qlinearSoftmaxOverflows(g.y_scale, d)) return t;
      const int64_t lowest = g.type == at::kByte ? 0 : -128;
      const int64_t highest = g.type == at::kByte ? 255 : 127;
      // The input quantizer's levels: its values are (level - zero point) * scale exactly.
      const at::Tensor x_levels =
          it->second.to(at::kFloat)
              .div(g.x_scale)
              .round_()
              .add_(static_cast<double>(g.x_zero_point))
              .clamp_(static_cast<double>(lowest), static_cast<double>(highest))
              .to(g.type);
      inputs->erase(it);
      const at::Tensor y_levels = ort_integer::qlinearSoftmaxLevels(
          x_levels, g.x_scale, g.y_scale, g.y_zero_point, g.axis, g.flatten_from_axis);
      return y_levels.to(at::kFloat)
          .sub_(static_cast<float>(g.y_zero_point))
          .mul_(g.y_scale)
          .to(t.scalar_type());
    });
  }
}

}  // namespace qforge::verify
