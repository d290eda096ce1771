#include "deploy/formats/nnie.h"

#include <set>

#include "core/error.h"
#include "deploy/formats/format_support.h"

namespace qforge::deploy::formats {

namespace {

bool excludedLayer(const Node& node) {
  static const std::set<std::string> kExcluded = {
      "Flatten", "Relu",         "PRelu", "Sigmoid",           "Reshape",
      "Softmax", "CaffeSoftmax", "Clip",  "GlobalAveragePool", "Mul"};
  if (kExcluded.count(node.opType()) > 0) return true;
  // NNIE's layer parameters have no group size: grouped convolutions are not listed.
  if (node.opType() == "Conv") {
    const Attribute* group = node.attributes.find("group");
    if (group != nullptr && group->i != 1) return true;
  }
  return false;
}

bool isUpsample(const Node& node) {
  return node.opType() == "Resize" || node.opType() == "Upsample" ||
         node.opType() == "DynamicUpsample";
}

std::string layerName(const Node& node) {
  return node.name().empty() ? node.output(0)->name() : node.name();
}

// The activations a layer's list describes, in order.
std::vector<const Value*> listedInputs(const Node& node) {
  std::vector<const Value*> out;
  for (const Value* v : node.inputs()) {
    if (v != nullptr && !v->isInitializer()) out.push_back(v);
    if (isUpsample(node)) break;
  }
  return out;
}

double dataMax(const TensorEncoding& e) {
  auto it = e.state.find("data_max");
  require(!e.affine && it != e.state.end() && it->second.size() == 1,
          "NNIE needs the data_max of an NNIE quantizer but " + tensorLabel(e) +
              " has none (quantized with an affine scheme): use the NNIE backend");
  return it->second[0];
}

}  // namespace

std::string nnieGfpqParams(const DeployModel& model) {
  for (const TensorEncoding& e : model.table.tensors) {
    if (e.role == TensorRole::Activation) dataMax(e);
  }
  OrderedJson params = OrderedJson::object();
  int permute_count = 0;
  for (const Node* node : model.graph.topologicalOrder()) {
    if (excludedLayer(*node)) continue;
    std::vector<double> values;
    for (const Value* v : listedInputs(*node)) {
      const TensorEncoding* e = model.table.find(v->name());
      if (e != nullptr && e->role == TensorRole::Activation) values.push_back(dataMax(*e));
    }
    if (values.empty()) continue;
    params[layerName(*node)] = values;
    if (isUpsample(*node)) {
      params[layerName(*node) + "_permute_" + std::to_string(permute_count++)] = values;
    }
  }
  OrderedJson document;
  document["nnie"]["gfpq_param_dict"] = params;
  return dumpJson(document);
}

std::map<std::string, std::vector<double>> parseNnieGfpqDict(const std::string& text,
                                                             const std::string& where) {
  const OrderedJson document = parseOrderedJson(text, where);
  const OrderedJson& nnie = objectAt(member(document, "nnie", where, ""), where, "nnie");
  const OrderedJson& dict =
      objectAt(member(nnie, "gfpq_param_dict", where, "nnie"), where, "nnie.gfpq_param_dict");
  std::map<std::string, std::vector<double>> out;
  for (const auto& [layer, list] : dict.items()) {
    const std::string path = "nnie.gfpq_param_dict." + layer;
    arrayAt(list, where, path);
    std::vector<double> values;
    for (size_t i = 0; i < list.size(); ++i) {
      const double v = numberAt(list[i], where, path + "[" + std::to_string(i) + "]");
      if (v <= 0.0) {
        throw Error(where + ": key '" + path + "[" + std::to_string(i) +
                    "]': data_max must be positive");
      }
      values.push_back(v);
    }
    out[layer] = values;
  }
  return out;
}

QuantTable parseNnieGfpqParams(const std::string& text, const std::string& where,
                               const Graph& graph) {
  const std::map<std::string, std::vector<double>> dict = parseNnieGfpqDict(text, where);
  std::map<std::string, const Node*> layers;
  for (const Node* node : graph.topologicalOrder())
    layers[layerName(*node)] = node;
  QuantTable table;
  for (const auto& [layer, values] : dict) {
    auto it = layers.find(layer);
    if (it == layers.end()) {
      if (layer.find("_permute_") != std::string::npos) continue;  // Upsample's twin
      throw Error(where + ": key 'nnie.gfpq_param_dict." + layer +
                  "': no such layer in the model; pass the model the file was written for");
    }
    const std::vector<const Value*> inputs = listedInputs(*it->second);
    if (inputs.size() != values.size()) {
      throw Error(where + ": key 'nnie.gfpq_param_dict." + layer +
                  "': " + std::to_string(values.size()) + " values for " +
                  std::to_string(inputs.size()) + " activation inputs");
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (table.find(inputs[i]->name()) != nullptr) continue;
      TensorEncoding e;
      e.tensor = inputs[i]->name();
      e.affine = false;
      e.state["data_max"] = {values[i]};
      table.tensors.push_back(std::move(e));
    }
  }
  return table;
}

}  // namespace qforge::deploy::formats
