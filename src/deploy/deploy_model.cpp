#include "deploy/deploy_model.h"

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ir/onnx_export.h"
#include "ir/verifier.h"
#include "passes/fake_quantize_node.h"
#include "quant/fake_quantizers/derived_bias.h"

namespace qforge::deploy {

const char* toString(TensorRole role) {
  switch (role) {
    case TensorRole::Activation:
      return "activation";
    case TensorRole::Weight:
      return "weight";
    case TensorRole::Bias:
      return "bias";
  }
  return "?";
}

double TensorEncoding::min(size_t c) const {
  return (static_cast<double>(qmin) - static_cast<double>(zero_point.at(c))) * scale.at(c);
}

double TensorEncoding::max(size_t c) const {
  return (static_cast<double>(qmax) - static_cast<double>(zero_point.at(c))) * scale.at(c);
}

double TensorEncoding::absMax(size_t c) const {
  return std::max(std::fabs(min(c)), max(c));
}

const TensorEncoding* QuantTable::find(const std::string& tensor) const {
  for (const TensorEncoding& t : tensors) {
    if (t.tensor == tensor) return &t;
  }
  return nullptr;
}

namespace {

std::vector<double> doubles(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

std::vector<int64_t> longs(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kLong).contiguous().reshape({-1});
  return std::vector<int64_t>(d.data_ptr<int64_t>(), d.data_ptr<int64_t>() + d.numel());
}

TensorRole roleOf(const passes::QuantPoint* point) {
  if (point == nullptr) return TensorRole::Activation;
  switch (point->kind) {
    case passes::PointKind::Weight:
      return TensorRole::Weight;
    case passes::PointKind::Bias:
      return TensorRole::Bias;
    default:
      return TensorRole::Activation;
  }
}

// The encoding of quantizer `q`, without the tensor name.
TensorEncoding encodingOf(quant::FakeQuantizer& q, TensorRole role) {
  TensorEncoding e;
  e.quantizer = q.name();
  e.role = role;
  if (auto* bias = dynamic_cast<quant::DerivedBiasFakeQuantizer*>(&q)) {
    const quant::QParams p = bias->qparams();
    e.bits = bias->bits();
    e.symmetric = true;
    e.qmax = (int64_t{1} << (e.bits - 1)) - 1;
    e.qmin = -e.qmax;
    e.axis = p.scale.numel() > 1 ? 0 : -1;
    e.scale = doubles(p.scale);
    e.zero_point.assign(e.scale.size(), 0);
    return e;
  }
  const quant::QScheme& s = q.scheme();
  e.bits = s.bits;
  e.symmetric = s.symmetric;
  e.is_unsigned = s.is_unsigned;
  e.power_of_two = s.power_of_two_scale;
  e.qmin = s.qmin();
  e.qmax = s.qmax();
  if (!q.affine()) {
    e.affine = false;
    for (const auto& [key, tensor] : q.state())
      e.state[key] = doubles(tensor);
    return e;
  }
  const quant::QParams p = q.qparams();
  e.axis = s.perChannel() && p.scale.numel() > 1 ? s.axis : -1;
  e.scale = doubles(p.scale);
  e.zero_point = longs(p.zero_point);
  return e;
}

}  // namespace

DeployModel buildDeployModel(passes::PreparedModel& model) {
  DeployModel out{model.graph().clone(), {}};
  out.table.backend = model.backend().name;
  Graph& graph = out.graph;
  std::map<std::string, const passes::QuantPoint*> point_of;
  for (const passes::QuantPoint& p : model.points())
    point_of[p.quantizer] = &p;

  // Encodings refer to Value objects until the end: renames below change names, not objects.
  std::vector<std::pair<const Value*, TensorEncoding>> found;
  std::vector<std::pair<Value*, std::string>> renames;
  for (Node* fq : graph.topologicalOrder()) {
    if (!passes::isFakeQuantize(fq)) continue;
    const std::string name = passes::quantizerOf(*fq);
    quant::FakeQuantizer* q = model.quantizer(name);
    require(q != nullptr, fq->describe() + ": no quantizer '" + name + "'");
    auto it = point_of.find(name);
    const TensorRole role = roleOf(it == point_of.end() ? nullptr : it->second);
    Value* x = fq->input(0);
    Value* y = fq->output(0);
    if (x->isInitializer() && role != TensorRole::Activation) {
      // The weight on its grid: clipped, and exactly what learned rounding chose.
      Value* baked = graph.addInitializer(graph.uniqueName(x->name() + "_quantized"),
                                          q->forward(x->initializer()).detach().contiguous());
      // Sole reader: the quantized weight takes the original name, which formats key on.
      if (x->uses().size() == 1) renames.emplace_back(baked, x->name());
      graph.setInput(fq, 0, baked);
      x = baked;
    }
    found.emplace_back(x, encodingOf(*q, role));
    const bool is_output = graph.isGraphOutput(y);
    const std::string y_name = y->name();
    graph.replaceAllUsesWith(y, x, true);
    graph.removeNode(fq);
    if (is_output && !x->isInitializer() && !graph.isGraphInput(x)) graph.renameValue(x, y_name);
  }
  graph.model.opset_imports.erase(passes::kQforgeDomain);
  graph.eliminateDeadCode();
  for (auto& [value, name] : renames) {
    if (graph.findValue(name) == nullptr) graph.renameValue(value, name);
  }
  verifyGraph(graph);
  for (auto& [value, encoding] : found) {
    encoding.tensor = value->name();
    out.table.tensors.push_back(std::move(encoding));
  }
  return out;
}

}  // namespace qforge::deploy
