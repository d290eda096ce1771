#include "deploy/formats/stpu.h"

#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "deploy/formats/format_support.h"
#include "exec/op_traits.h"

namespace qforge::deploy::formats {

namespace {

const char* const kFormat = "STPU";

OrderedJson minMax(const TensorEncoding& e) {
  requireAffine(e, kFormat);
  requirePerTensor(e, kFormat);
  require(e.zero_point[0] == 0 && e.bits == 8,
          "STPU needs symmetric 8-bit quantization but " + tensorLabel(e) + " is " +
              std::to_string(e.bits) + "-bit with zero point " + std::to_string(e.zero_point[0]) +
              ": use a symmetric 8-bit scheme");
  return OrderedJson{{"min", -127.0 * e.scale[0]}, {"max", 127.0 * e.scale[0]}};
}

bool has(const OrderedJson& params, const std::string& key) {
  return params.contains(key) && params[key].contains("max");
}

}  // namespace

int stpuExponent(double v) {
  const double a = std::fabs(v);
  if (a == 0.0) return 0;
  if (a < std::ldexp(1.0, -126)) return 1;
  const int e = static_cast<int>(std::floor(std::log2(a))) + 127;
  return e > 253 ? 254 : e;
}

std::string stpuMinMax(const DeployModel& model) {
  const Graph& graph = model.graph;
  OrderedJson params = OrderedJson::object();
  for (const TensorEncoding& e : model.table.tensors) {
    if (e.role == TensorRole::Bias) continue;  // STPU derives biases (below)
    if (e.role == TensorRole::Activation) {
      params[e.tensor] = minMax(e);
      continue;
    }
    // Every weight the op table knows (Conv, Gemm, MatMul, PRelu's slope...) is its layer's
    // "<node>_weights", as deploy_stpu.py keys the layers of its LAYER_HAS_WEIGHT.
    const Value* w = graph.findValue(e.tensor);
    for (const Use& use : w == nullptr ? std::vector<Use>{} : w->uses()) {
      if (isWeightInput(opInfoFor(graph, *use.node), use.index))
        params[use.node->name() + "_weights"] = minMax(e);
    }
  }
  const std::vector<Node*> order = graph.topologicalOrder();
  for (const Node* node : order) {
    if (node->opType() != "Concat" || !params.contains(node->output(0)->name())) continue;
    for (const Value* in : node->inputs()) {
      if (in != nullptr) params[in->name()] = params[node->output(0)->name()];
    }
  }
  for (const Node* node : order) {
    const std::string weights = node->name() + "_weights";
    const Value* in = node->input(0);
    const OpInfo* info = opInfoFor(graph, *node);
    const bool has_bias = info != nullptr && info->bias_input >= 0 &&
                          node->input(static_cast<size_t>(info->bias_input)) != nullptr;
    if (has_bias && has(params, weights) && in != nullptr && has(params, in->name())) {
      // The grid steps of weight and input: (max - min) / 254 on [-127, 127].
      const double w_alpha =
          (params[weights]["max"].get<double>() - params[weights]["min"].get<double>()) / 254.0;
      const double i_alpha =
          (params[in->name()]["max"].get<double>() - params[in->name()]["min"].get<double>()) /
          254.0;
      params[node->name() + "_bias"] = OrderedJson{{"alpha", w_alpha * i_alpha}, {"zero_point", 0}};
    }
    if (node->opType() == "Sigmoid") {
      params[node->output(0)->name()] = OrderedJson{{"min", -1}, {"max", 1}};
    }
  }
  // Flatten/Reshape/Resize inputs, through the shared helper on a table view of the ranges.
  QuantTable ranges;
  for (const auto& [key, value] : params.items()) {
    if (graph.findValue(key) == nullptr || !value.contains("max")) continue;
    ranges.tensors.push_back(symmetricInt8FromAmax(key, value["max"].get<double>()));
  }
  const QuantTable passed = withReshapeInputRanges(ranges, graph);
  for (size_t i = ranges.tensors.size(); i < passed.tensors.size(); ++i) {
    const double amax = 127.0 * passed.tensors[i].scale[0];
    params[passed.tensors[i].tensor] = OrderedJson{{"min", -amax}, {"max", amax}};
  }
  // Conv + Relu run as one layer: the Conv's output takes the Relu's range.
  for (const Node* node : order) {
    if (node->opType() == "Relu" && params.contains(node->output(0)->name()) &&
        node->input(0) != nullptr) {
      params[node->input(0)->name()] = params[node->output(0)->name()];
    }
  }
  for (const Node* node : order) {
    const std::string out = node->output(0)->name();
    if (!has(params, out)) continue;
    const std::string& op = node->opType();
    if (op == "Resize" || op == "Upsample" || op == "DynamicUpsample") {
      params[out]["emin"] = stpuExponent(params[out]["max"].get<double>()) - (22 - 2);
    } else if ((op == "Conv" || op == "ConvTranspose") && node->input(1) != nullptr &&
               node->input(1)->isInitializer() && node->input(1)->initializer().dim() == 4 &&
               has(params, node->input(0)->name()) && has(params, node->name() + "_weights")) {
      const auto shape = node->input(1)->initializer().sizes();
      const double fan_in = std::sqrt(static_cast<double>(shape[1] * shape[2] * shape[3]));
      const double vmax = std::max(fan_in * params[node->input(0)->name()]["max"].get<double>() *
                                       params[node->name() + "_weights"]["max"].get<double>(),
                                   params[out]["max"].get<double>());
      params[out]["emin"] = stpuExponent(vmax) - (12 - 2);
    } else if (op == "Gemm") {
      params[out]["emin"] = 128;
    }
  }
  return dumpJson(params);
}

QuantTable parseStpuMinMax(const std::string& text, const std::string& where, const Graph& graph) {
  const OrderedJson document = parseOrderedJson(text, where);
  objectAt(document, where, "");
  QuantTable table;
  for (const auto& [key, entry] : document.items()) {
    objectAt(entry, where, key);
    if (entry.contains("alpha")) continue;  // "<node>_bias": derived from the others
    const double lo = numberAt(member(entry, "min", where, key), where, key + ".min");
    const double hi = numberAt(member(entry, "max", where, key), where, key + ".max");
    if (!(hi > 0.0) || lo != -hi) {
      throw Error(where + ": key '" + key + "': expected a symmetric range min = -max < 0");
    }
    std::string tensor = key;
    TensorRole role = TensorRole::Activation;
    const std::string suffix = "_weights";
    if (graph.findValue(key) == nullptr && endsWith(key, suffix)) {
      const Node* node = graph.findNode(key.substr(0, key.size() - suffix.size()));
      const OpInfo* info = node != nullptr ? opInfoFor(graph, *node) : nullptr;
      const Value* weight = info != nullptr && !info->weight_inputs.empty()
                                ? node->input(static_cast<size_t>(info->weight_inputs.front()))
                                : nullptr;
      if (weight == nullptr) {
        throw Error(where + ": key '" + key + "': no such layer with weights in the model");
      }
      tensor = weight->name();
      role = TensorRole::Weight;
    } else if (graph.findValue(key) == nullptr) {
      throw Error(where + ": key '" + key + "': no such tensor in the model");
    }
    TensorEncoding e = symmetricInt8FromAmax(tensor, hi);
    e.role = role;
    table.tensors.push_back(std::move(e));
  }
  return table;
}

}  // namespace qforge::deploy::formats
