#include "deploy/openvino_onnx.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "ir/verifier.h"
#include "passes/fake_quantize_node.h"

namespace qforge::deploy {

namespace {

// The bounds of one encoding, shaped to broadcast against a tensor of rank `rank`.
std::pair<at::Tensor, at::Tensor> bounds(const TensorEncoding& e, int64_t rank) {
  std::vector<float> lo, hi;
  for (size_t c = 0; c < e.channels(); ++c) {
    lo.push_back(static_cast<float>(e.min(c)));
    hi.push_back(static_cast<float>(e.max(c)));
  }
  at::Tensor low = at::tensor(lo, at::kFloat);
  at::Tensor high = at::tensor(hi, at::kFloat);
  if (e.perChannel()) {
    std::vector<int64_t> shape(std::max<int64_t>(rank, 1), 1);
    shape.at(e.axis) = static_cast<int64_t>(e.channels());
    return {low.reshape(shape), high.reshape(shape)};
  }
  return {low.reshape({}), high.reshape({})};
}

}  // namespace

Graph toOpenVinoGraph(const DeployModel& model) {
  Graph g = model.graph.clone();
  for (const TensorEncoding& e : model.table.tensors) {
    if (e.role == TensorRole::Bias) continue;
    require(e.affine, "tensor '" + e.tensor + "' (quantizer '" + e.quantizer +
                          "') has no scale and zero point for OpenVINO's FakeQuantize");
    Value* v = g.findValue(e.tensor);
    require(v != nullptr,
            "tensor '" + e.tensor + "' of the quantization table is not in the graph");
    const int64_t rank = v->isInitializer() ? v->initializer().dim() : -1;
    require(!e.perChannel() || rank > e.axis,
            "tensor '" + e.tensor + "': per-channel ranges need a constant of known rank");
    const auto [low, high] = bounds(e, rank);
    Value* lo = g.addInitializer(g.uniqueName(e.tensor + "_low"), low);
    Value* hi = g.addInitializer(g.uniqueName(e.tensor + "_high"), high);
    const bool is_output = g.isGraphOutput(v);
    Node* fq = g.insertOnValue(v, "FakeQuantize", {},
                               passes::uniqueNodeName(g, e.tensor + "/FakeQuantize"), is_output,
                               kOpenVinoDomain);
    for (Value* bound : {lo, hi, lo, hi})
      g.setInput(fq, fq->inputs().size(), bound);
    fq->attributes.set(Attribute::makeInt("levels", e.qmax - e.qmin + 1));
    if (is_output) {
      // The declared output keeps its name: the quantized value takes it over.
      const std::string name = v->name();
      g.renameValue(v, g.uniqueName(name + "_float"));
      g.renameValue(fq->output(0), name);
    }
  }
  g.model.opset_imports[kOpenVinoDomain] = 1;
  verifyGraph(g);
  return g;
}

}  // namespace qforge::deploy
