#include "algos/qat_parameters.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/error.h"
#include "exec/op_info.h"
#include "ir/node_attributes.h"
#include "passes/fake_quantize_node.h"
#include "passes/qat_batchnorm.h"

namespace qforge::algos {

namespace {

// Normalisation ops whose scale and bias (slots 1 and 2) train.
bool isNormalization(const Node& node) {
  return isDefaultDomain(node) &&
         (node.opType() == "BatchNormalization" || node.opType() == "LayerNormalization" ||
          node.opType() == "InstanceNormalization");
}

// The real readers of a value: FakeQuantize nodes and simulated BN folding's W * factor are
// looked through (the weight of a Conv is still a weight when BN's factor scales it).
void collectReaders(const Value* v, std::vector<Use>& uses) {
  for (const Use& u : v->uses()) {
    const bool scales_weight =
        passes::isSimulatedBatchNormHelper(*u.node) && u.node->opType() == "Mul" && u.index == 0;
    if (passes::isFakeQuantize(u.node) || scales_weight) {
      collectReaders(u.node->output(0), uses);
    } else {
      uses.push_back(u);
    }
  }
}

struct InitializerRole {
  bool trainable = false;
  bool weight = false;      // read at a weight slot: weight decay applies
  bool statistics = false;  // a normalisation's running mean or variance
};

InitializerRole roleOf(const Value& v, int64_t opset) {
  InitializerRole role;
  std::vector<Use> readers;
  collectReaders(&v, readers);
  for (const Use& u : readers) {
    const Node& node = *u.node;
    const OpInfo* info = OpRegistry::builtin().find(node.domain(), node.opType(), opset);
    const int slot = static_cast<int>(u.index);
    if (info && std::count(info->weight_inputs.begin(), info->weight_inputs.end(), slot)) {
      role.trainable = role.weight = true;
    } else if (info && info->bias_input == slot) {
      role.trainable = true;
    } else if (isNormalization(node)) {
      if (slot == 1 || slot == 2) role.trainable = true;
      if (slot >= 3) role.statistics = true;
    } else if (v.initializer().numel() > 1 && isDefaultDomain(node) &&
               (node.opType() == "Add" || node.opType() == "Sub" || node.opType() == "Mul" ||
                node.opType() == "Div")) {
      // Learned elementwise terms: positional embeddings, LayerNorm written as Mul/Add.
      role.trainable = true;
    }
  }
  return role;
}

}  // namespace

int64_t QatParameters::numel() const {
  int64_t n = 0;
  for (const at::Tensor& t : tensors)
    n += t.numel();
  return n;
}

int64_t QatParameters::quantizerNumel() const {
  int64_t n = 0;
  for (size_t i = initializer_count; i < tensors.size(); ++i)
    n += tensors[i].numel();
  return n;
}

QatParameters collectQatParameters(passes::PreparedModel& model, bool train_weights) {
  QatParameters params;
  Graph& graph = model.graph();
  const int64_t opset = graph.model.opsetFor("");
  std::set<const Value*> seen;
  for (Value* v : graph.initializers()) {
    const at::Tensor& t = v->initializer();
    if (!t.is_floating_point() || t.numel() == 0) continue;
    const InitializerRole role = roleOf(*v, opset);
    if (role.statistics) {
      params.bn_statistics.push_back(v->name());
    } else if (role.trainable && train_weights && seen.insert(v).second) {
      params.tensors.push_back(t);
      params.names.push_back(v->name());
      params.decays.push_back(role.weight);
      params.batch_scaled_grad.push_back(false);
    }
  }
  params.initializer_count = params.tensors.size();
  require(!params.tensors.empty() || !train_weights,
          "nothing to train: no float initializer feeds a weight, bias or "
          "normalisation of the prepared model");
  refreshQuantizerParameters(model, params);
  require(!params.tensors.empty(),
          "nothing to train: the weights are frozen and no quantizer has "
          "learnable parameters (use LSQ, PACT, DSQ or TQT)");
  return params;
}

void refreshQuantizerParameters(passes::PreparedModel& model, QatParameters& params) {
  const size_t n = params.initializer_count;
  params.tensors.resize(n);
  params.names.resize(n);
  params.decays.resize(n);
  params.batch_scaled_grad.resize(n);
  std::map<std::string, passes::PointKind> kinds;
  for (const auto& p : model.points())
    kinds[p.quantizer] = p.kind;
  for (quant::FakeQuantizer* q : model.quantizers()) {
    // LSQ's gradient scale 1/sqrt(numel * qmax) counts the batch for activations.
    const bool batch_scaled = (q->kind() == "LSQ" || q->kind() == "LSQ+") &&
                              kinds[q->name()] == passes::PointKind::Activation;
    int index = 0;
    for (const at::Tensor& p : q->parameters()) {
      params.tensors.push_back(p);
      params.names.push_back(q->name() + "." + std::to_string(index++));
      params.decays.push_back(false);
      params.batch_scaled_grad.push_back(batch_scaled);
    }
  }
  at::NoGradGuard no_grad;
  for (at::Tensor& p : params.tensors)
    p.requires_grad_(true);
}

void adjustGradients(QatParameters& params, double quantizer_lr_scale, double weight_decay) {
  at::NoGradGuard no_grad;
  // With SGD, scaling a gradient scales that parameter's learning rate (momentum included).
  if (quantizer_lr_scale != 1.0) {
    for (size_t i = params.initializer_count; i < params.size(); ++i) {
      if (params.tensors[i].grad().defined())
        params.tensors[i].mutable_grad().mul_(quantizer_lr_scale);
    }
  }
  if (weight_decay != 0) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (params.decays[i] && params.tensors[i].grad().defined())
        params.tensors[i].mutable_grad().add_(params.tensors[i], weight_decay);
    }
  }
}

}  // namespace qforge::algos
