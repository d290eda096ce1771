#include "passes/fold_batchnorm.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_traits.h"
#include "ir/node_attributes.h"
#include "quant/qparams.h"

namespace qforge::passes {

namespace {

// The initializer holding `v`'s value: `v` itself, or the initializer behind a chain of Identity
// nodes (PyTorch's exporter writes one per duplicate of a deduplicated initializer). nullptr
// when `v` is not fixed: computed, not floating point, or an initializer that a graph input of
// the same name can override at run time.
const Value* constantSource(const Graph& graph, const Value* v) {
  while (v != nullptr && v->producer() != nullptr) {
    const Node* p = v->producer();
    if (p->opType() != "Identity" || !isDefaultDomain(*p) || p->inputs().size() != 1) {
      return nullptr;
    }
    v = p->input(0);
  }
  if (v == nullptr || !v->isInitializer() || graph.isGraphInput(v)) return nullptr;
  return at::isFloatingType(v->initializer().scalar_type()) ? v : nullptr;
}

bool isFixed(const Graph& graph, const Value* v) {
  return constantSource(graph, v) != nullptr;
}

const at::Tensor& fixedTensor(const Graph& graph, const Value* v) {
  return constantSource(graph, v)->initializer();
}

// BN as y = s * x + t per channel, in double so the fold loses nothing before the final cast.
struct ChannelAffine {
  at::Tensor s;  // [C]
  at::Tensor t;  // [C]
  int64_t channels() const { return s.size(0); }
};

// The affine map of an inference-mode BN whose parameters are fixed initializers of shape [C].
std::optional<ChannelAffine> foldableBatchNorm(const Graph& graph, const Node& bn) {
  if (bn.opType() != "BatchNormalization" || !isDefaultDomain(bn)) return std::nullopt;
  if (bn.inputs().size() != 5 || bn.input(0) == nullptr) return std::nullopt;
  if (intAttr(bn, "training_mode", 0) != 0) return std::nullopt;
  // Before opset 9, spatial=0 meant statistics per activation rather than per channel.
  if (graph.model.opsetFor(bn.domain()) < 9 && intAttr(bn, "spatial", 1) == 0) return std::nullopt;
  // Outputs past Y (running or saved statistics) must not be read: they vanish with the node.
  for (size_t i = 1; i < bn.outputs().size(); ++i) {
    if (!bn.output(i)->uses().empty() || graph.isGraphOutput(bn.output(i))) return std::nullopt;
  }
  std::vector<at::Tensor> p;  // scale, B, mean, var
  for (size_t slot = 1; slot <= 4; ++slot) {
    const Value* v = bn.input(slot);
    if (!isFixed(graph, v) || fixedTensor(graph, v).dim() != 1) return std::nullopt;
    p.push_back(fixedTensor(graph, v).to(at::kDouble));
    if (p.back().size(0) != p.front().size(0)) return std::nullopt;
  }
  const double epsilon = floatAttr(bn, "epsilon", 1e-5);
  at::Tensor s = p[0] / at::sqrt(p[3] + epsilon);
  at::Tensor t = p[1] - p[2] * s;
  return ChannelAffine{s, t};
}

// New weight and bias for the producer (and, for Gemm, that beta becomes 1).
struct FoldedParams {
  at::Tensor weight;
  at::Tensor bias;
  bool set_beta_to_one = false;
};

// Conv and ConvTranspose: bias b (absent: 0) becomes b * s + t; nullopt when b is not [C].
std::optional<at::Tensor> foldedConvBias(const Graph& graph, const Node& producer,
                                         const ChannelAffine& bn, at::ScalarType weight_type) {
  const Value* b = producer.input(2);
  if (b == nullptr) return bn.t.to(weight_type);
  if (!isFixed(graph, b)) return std::nullopt;
  const at::Tensor& bias = fixedTensor(graph, b);
  if (bias.dim() != 1 || bias.size(0) != bn.channels()) return std::nullopt;
  return (bias.to(at::kDouble) * bn.s + bn.t).to(bias.scalar_type());
}

// Conv weight [C_out, C_in/groups, k...]: output channel oc is row oc.
std::optional<FoldedParams> foldIntoConv(const Graph& graph, const Node& conv,
                                         const ChannelAffine& bn) {
  const at::Tensor& w = fixedTensor(graph, conv.input(1));
  if (w.dim() < 3 || w.size(0) != bn.channels()) return std::nullopt;
  std::optional<at::Tensor> bias = foldedConvBias(graph, conv, bn, w.scalar_type());
  if (!bias) return std::nullopt;
  at::Tensor weight = (w.to(at::kDouble) * quant::alongAxis(bn.s, 0, w.dim())).to(w.scalar_type());
  return FoldedParams{weight, *bias};
}

// ConvTranspose weight [C_in, C_out/groups, k...]: output channel g * (C_out/groups) + j is
// column j of the rows of group g, W[g * C_in/groups : (g+1) * C_in/groups, j, ...].
std::optional<FoldedParams> foldIntoConvTranspose(const Graph& graph, const Node& deconv,
                                                  const ChannelAffine& bn) {
  const at::Tensor& w = fixedTensor(graph, deconv.input(1));
  const int64_t groups = intAttr(deconv, "group", 1);
  if (w.dim() < 3 || groups < 1 || w.size(0) % groups != 0) return std::nullopt;
  const int64_t out_per_group = w.size(1);
  if (out_per_group * groups != bn.channels()) return std::nullopt;
  std::optional<at::Tensor> bias = foldedConvBias(graph, deconv, bn, w.scalar_type());
  if (!bias) return std::nullopt;

  std::vector<int64_t> grouped = {groups, w.size(0) / groups, out_per_group};
  std::vector<int64_t> s_shape = {groups, 1, out_per_group};
  for (int64_t d = 2; d < w.dim(); ++d) {
    grouped.push_back(w.size(d));
    s_shape.push_back(1);
  }
  at::Tensor weight = (w.to(at::kDouble).reshape(grouped) * bn.s.reshape(s_shape))
                          .reshape(w.sizes())
                          .to(w.scalar_type());
  return FoldedParams{weight, *bias};
}

// Gemm Y = alpha * A' B' + beta * C, with BN over Y's columns (axis 1 of [M, N]): B' scales per
// column, and beta * C becomes beta * C * s + t, written as the new C with beta = 1. C must not
// vary along M, or the fold would have to produce a [M, N] bias for one batch size.
std::optional<FoldedParams> foldIntoGemm(const Graph& graph, const Node& gemm,
                                         const ChannelAffine& bn) {
  const at::Tensor& w = fixedTensor(graph, gemm.input(1));
  const bool trans_b = intAttr(gemm, "transB", 0) != 0;
  if (w.dim() != 2) return std::nullopt;
  const int64_t n = trans_b ? w.size(0) : w.size(1);
  if (n != bn.channels()) return std::nullopt;
  at::Tensor weight =
      (w.to(at::kDouble) * quant::alongAxis(bn.s, trans_b ? 0 : 1, 2)).to(w.scalar_type());

  const Value* c = gemm.input(2);
  if (c == nullptr) return FoldedParams{weight, bn.t.to(w.scalar_type()), true};
  if (!isFixed(graph, c)) return std::nullopt;
  const at::Tensor& bias = fixedTensor(graph, c);
  const bool row_shaped = bias.dim() <= 1 || (bias.dim() == 2 && bias.size(0) == 1);
  const int64_t last = bias.dim() == 0 ? 1 : bias.size(-1);
  if (!row_shaped || (last != 1 && last != n)) return std::nullopt;
  const double beta = floatAttr(gemm, "beta", 1.0);
  at::Tensor folded = bn.t.clone();
  if (beta != 0) folded = bias.to(at::kDouble).reshape({-1}) * beta * bn.s + bn.t;
  if (bias.dim() == 2) folded = folded.reshape({1, n});
  return FoldedParams{weight, folded.to(bias.scalar_type()), true};
}

// The op table says which ops absorb BN and how their weight holds the output channels; the fold
// reads the weight in slot 1 and writes the bias into slot 2, as those ops have them.
std::optional<FoldedParams> foldInto(const Graph& graph, const Node& producer,
                                     const ChannelAffine& bn) {
  const OpInfo* info = opInfoFor(graph, producer);
  if (info == nullptr || !info->absorbs_batchnorm || producer.outputs().size() != 1) {
    return std::nullopt;
  }
  if (info->weight_inputs != std::vector<int>{1} || info->bias_input != 2) return std::nullopt;
  if (producer.inputs().size() < 2 || !isFixed(graph, producer.input(1))) {
    return std::nullopt;
  }
  switch (info->weight_layout) {
    case WeightLayout::OutputFirst:
      return foldIntoConv(graph, producer, bn);
    case WeightLayout::GroupedOutputSecond:
      return foldIntoConvTranspose(graph, producer, bn);
    case WeightLayout::GemmB:
      return foldIntoGemm(graph, producer, bn);
    case WeightLayout::None:
    case WeightLayout::LastAxis:
      break;
  }
  return std::nullopt;
}

// Stores `tensor` as input `slot` of `node`: in place when the slot holds an initializer that only
// this node reads, else (shared, behind an Identity, or the slot is empty) as a new initializer
// named after `base`.
void writeParam(Graph& graph, Node* node, size_t slot, at::Tensor tensor, const std::string& base) {
  Value* v = node->input(slot);
  if (v != nullptr && v->isInitializer() && v->uses().size() == 1 && !graph.isGraphOutput(v)) {
    v->setInitializer(std::move(tensor));
    return;
  }
  Value* fresh = graph.addInitializer(graph.uniqueName(base), std::move(tensor));
  graph.setInput(node, slot, fresh);
  removeIfUnused(graph, v);
}

bool foldOne(Graph& graph, Node* bn, const std::function<bool(const Node&)>& may_fold) {
  std::optional<ChannelAffine> affine = foldableBatchNorm(graph, *bn);
  if (!affine) return false;
  Value* x = bn->input(0);
  Node* producer = x->producer();
  if (producer == nullptr || x->uses().size() != 1 || graph.isGraphOutput(x)) return false;
  if (may_fold && !may_fold(*producer)) return false;
  std::optional<FoldedParams> folded = foldInto(graph, *producer, *affine);
  if (!folded) return false;

  const std::string label = producer->name().empty() ? x->name() : producer->name();
  Value* weight = producer->input(1);
  writeParam(graph, producer, 1, folded->weight, weight->name() + "_bn_folded");
  Value* bias = producer->input(2);
  writeParam(graph, producer, 2, folded->bias,
             bias != nullptr ? bias->name() + "_bn_folded" : label + "_bias");
  if (folded->set_beta_to_one) producer->attributes.set(Attribute::makeFloat("beta", 1.0));

  Value* y = bn->output(0);
  const bool y_is_graph_output = graph.isGraphOutput(y);
  const std::string y_name = y->name();
  const TensorType y_type = y->type;
  const std::string y_doc = y->doc_string;
  // By name: removing one parameter's Identity chain may remove another parameter's value.
  std::vector<std::string> params;
  for (size_t slot = 1; slot <= 4; ++slot)
    params.push_back(bn->input(slot)->name());
  graph.replaceAllUsesWith(y, x);
  graph.removeNode(bn);
  if (y_is_graph_output) {
    // The model's interface keeps the BN output's name and declared type.
    graph.renameValue(x, y_name);
    x->type = y_type;
    x->doc_string = y_doc;
  }
  for (const std::string& name : params)
    removeIfUnused(graph, graph.findValue(name));
  return true;
}

}  // namespace

void removeIfUnused(Graph& graph, Value* v) {
  while (v != nullptr && v->uses().empty() && !graph.isGraphInput(v) && !graph.isGraphOutput(v)) {
    Node* p = v->producer();
    if (p == nullptr) {
      if (v->isInitializer()) graph.removeValue(v);
      return;
    }
    if (p->opType() != "Identity" || !isDefaultDomain(*p)) return;
    Value* source = p->input(0);
    graph.removeNode(p);
    v = source;
  }
}

size_t foldBatchNorm(Graph& graph, const std::function<bool(const Node& producer)>& may_fold) {
  size_t folded = 0;
  // In topological order, so Conv -> BN -> BN folds both (the second sees the Conv after the
  // first fold).
  for (Node* node : graph.topologicalOrder()) {
    if (node->opType() == "BatchNormalization" && foldOne(graph, node, may_fold)) ++folded;
  }
  return folded;
}

}  // namespace qforge::passes
