// The user's quantization config (JSON or YAML): global changes to the backend's weight and
// activation specs, per-node overrides selected by node name, name regex or op type (bits,
// scheme, observer, fake quantizer, or skip), and extra op types to quantize.
//
//   weight: {bits: 4, observer: Mse}          # every unit
//   activation: {bits: 8}
//   extra_quantizable: [Mul]
//   overrides:
//     - {name: conv1, weight: {bits: 8}, activation: {bits: 8}}
//     - {name_regex: "head/.*", skip: true}
//     - {op_type: MatMul, activation: {observer: Percentile, observer_options: {percentile: 99.9}}}
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/graph.h"

namespace qforge::passes {

struct NodeOverride {
  std::string name;        // exact node name
  std::string name_regex;  // ECMAScript regex, full match
  std::string op_type;
  bool skip = false;
  nlohmann::json weight;  // partial spec objects, merged over the backend's
  nlohmann::json activation;
  std::string where;  // "config.yaml: overrides[2]" for errors
};

struct QuantConfig {
  nlohmann::json weight;  // partial spec objects applied to every unit
  nlohmann::json activation;
  std::vector<std::string> extra_quantizable;
  std::vector<NodeOverride> overrides;
  std::string where = "quantization config";
};

// Reads a .json, .yaml or .yml file; keys are checked (an unknown key names its path).
QuantConfig loadQuantConfig(const std::string& path);
QuantConfig parseQuantConfig(const nlohmann::json& document, const std::string& where);
// YAML text to JSON (scalars become booleans, numbers or strings as YAML 1.2's core schema reads).
nlohmann::json yamlToJson(const std::string& text, const std::string& where);

// `spec` with the partial object `patch` merged over it; keys are checked as in backend files.
backends::QuantSpec applySpecPatch(const backends::QuantSpec& spec, const nlohmann::json& patch,
                                   const std::string& where);

// Whether `override` selects `node`.
bool selects(const NodeOverride& override, const Node& node);

// Throws qforge::Error for an override whose name matches no node of `graph` (naming the closest
// node names), or whose regex or op type matches nothing.
void checkOverridesMatch(const QuantConfig& config, const Graph& graph);

}  // namespace qforge::passes
