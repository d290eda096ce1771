#include "passes/quant_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>
#include <stdexcept>

#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "core/strings.h"
#include "core/utf8.h"

namespace qforge::passes {

namespace {

nlohmann::json scalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex number("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  // Past int64_t an integer is read as a float; past double's range it is refused (std::stoll and
  // std::stod threw std::out_of_range, an internal error: found by fuzzing, issue #22).
  try {
    if (std::regex_match(text, integer)) {
      try {
        return std::stoll(text);
      } catch (const std::out_of_range&) {
        return std::stod(text);
      }
    }
    if (std::regex_match(text, number)) return std::stod(text);
  } catch (const std::out_of_range&) {
    throw Error("line " + std::to_string(node.Mark().line + 1) + ": the number " + text +
                " is out of range");
  }
  return text;
}

nlohmann::json nodeToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalarToJson(node);
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node)
        out.push_back(nodeToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node)
        out[item.first.as<std::string>()] = nodeToJson(item.second);
      return out;
    }
  }
  return nullptr;
}

nlohmann::json partialSpec(JsonReader& r, const std::string& key) {
  const nlohmann::json& v = r.get(key);
  if (!v.is_null() && !v.is_object()) r.fail(key, "must be an object such as {bits: 4}");
  return v;
}

}  // namespace

nlohmann::json yamlToJson(const std::string& text, const std::string& where) {
  // Strings from YAML end up in JSON (and in messages that dump it), which needs UTF-8; yaml-cpp
  // does not check (a fuzzed config's string made nlohmann's dump throw, issue #22).
  const size_t bad = invalidUtf8Offset(text);
  if (bad != std::string::npos) {
    throw Error(where + ": not UTF-8 text (byte " + std::to_string(bad + 1) + ")");
  }
  try {
    return nodeToJson(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    throw Error(where + ": not valid YAML at line " + std::to_string(e.mark.line + 1) + ": " +
                e.msg);
  } catch (const Error& e) {
    throw e.within(where);
  }
}

backends::QuantSpec applySpecPatch(const backends::QuantSpec& spec, const nlohmann::json& patch,
                                   const std::string& where) {
  if (patch.is_null() || patch.empty()) return spec;
  nlohmann::json merged = backends::toJson(spec);
  // Leaving a signed symmetric grid drops the narrow-range flag unless the patch sets it, and
  // leaving the narrow range drops its full-range clamp.
  const bool leaves_signed_symmetric =
      (patch.contains("symmetric") && patch["symmetric"] == false) ||
      (patch.contains("unsigned") && patch["unsigned"] == true);
  if (leaves_signed_symmetric && !patch.contains("symmetric_range")) {
    merged["symmetric_range"] = false;
  }
  const nlohmann::json& narrow =
      patch.contains("symmetric_range") ? patch["symmetric_range"] : merged["symmetric_range"];
  if (narrow == false && !patch.contains("full_range_clamp")) {
    merged["full_range_clamp"] = false;
  }
  // Another algorithm does not inherit the previous one's options.
  if (patch.contains("observer") && !patch.contains("observer_options")) {
    merged["observer_options"] = nlohmann::json::object();
  }
  if (patch.contains("fake_quantizer") && !patch.contains("fake_quantizer_options")) {
    merged["fake_quantizer_options"] = nlohmann::json::object();
  }
  for (const auto& item : patch.items())
    merged[item.key()] = item.value();
  return backends::parseQuantSpec(merged, where, "");
}

QuantConfig parseQuantConfig(const nlohmann::json& document, const std::string& where) {
  QuantConfig config;
  config.where = where;
  JsonReader r(document, where);
  config.weight = partialSpec(r, "weight");
  config.activation = partialSpec(r, "activation");
  config.extra_quantizable = r.getStrings("extra_quantizable");
  const nlohmann::json& overrides = r.get("overrides");
  if (!overrides.is_null() && !overrides.is_array()) {
    r.fail("overrides", "must be a list of {name|name_regex|op_type, weight, activation, skip}");
  }
  for (size_t i = 0; overrides.is_array() && i < overrides.size(); ++i) {
    JsonReader o(overrides[i], where, "overrides[" + std::to_string(i) + "]");
    NodeOverride n;
    n.where = where + ": overrides[" + std::to_string(i) + "]";
    n.name = o.getString("name", "");
    n.name_regex = o.getString("name_regex", "");
    n.op_type = o.getString("op_type", "");
    n.skip = o.getBool("skip", false);
    n.weight = partialSpec(o, "weight");
    n.activation = partialSpec(o, "activation");
    o.finish();
    const int selectors = !n.name.empty() + !n.name_regex.empty() + !n.op_type.empty();
    if (selectors != 1) o.fail("name", "give exactly one of name, name_regex, op_type");
    if (!n.name_regex.empty()) {
      try {
        std::regex check(n.name_regex);
      } catch (const std::regex_error&) {
        o.fail("name_regex", "'" + n.name_regex + "' is not a valid regular expression");
      }
    }
    // Check the partial specs now, so a typo fails before the model is even loaded.
    applySpecPatch(backends::QuantSpec{}, n.weight, n.where + ".weight");
    applySpecPatch(backends::QuantSpec{}, n.activation, n.where + ".activation");
    config.overrides.push_back(std::move(n));
  }
  r.finish();
  applySpecPatch(backends::QuantSpec{}, config.weight, where + ": weight");
  applySpecPatch(backends::QuantSpec{}, config.activation, where + ": activation");
  return config;
}

QuantConfig loadQuantConfig(const std::string& path) {
  const std::string text = readFile(path);
  if (endsWith(path, ".yaml") || endsWith(path, ".yml")) {
    return parseQuantConfig(yamlToJson(text, path), path);
  }
  return parseQuantConfig(parseJson(text, path), path);
}

bool selects(const NodeOverride& o, const Node& node) {
  if (!o.name.empty()) return node.name() == o.name;
  if (!o.op_type.empty()) return node.opType() == o.op_type;
  return std::regex_match(node.name(), std::regex(o.name_regex));
}

void checkOverridesMatch(const QuantConfig& config, const Graph& graph) {
  const std::vector<Node*> nodes = graph.nodes();
  for (const NodeOverride& o : config.overrides) {
    const bool any =
        std::any_of(nodes.begin(), nodes.end(), [&](const Node* n) { return selects(o, *n); });
    if (any) continue;
    if (!o.name.empty()) {
      // Suggest names sharing the longest prefix: the usual mistake is a path typo.
      std::vector<std::pair<size_t, std::string>> near;
      for (const Node* n : nodes) {
        size_t k = 0;
        while (k < n->name().size() && k < o.name.size() && n->name()[k] == o.name[k])
          ++k;
        near.emplace_back(k, n->name());
      }
      std::sort(near.begin(), near.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      std::string hint;
      for (size_t i = 0; i < near.size() && i < 3; ++i)
        hint += (i ? ", " : "") + near[i].second;
      throw Error(o.where + ": no node is named '" + o.name + "'" +
                  (hint.empty() ? "" : "; nearest names: " + hint));
    }
    throw Error(
        o.where + ": " +
        (o.op_type.empty() ? "name_regex '" + o.name_regex + "'" : "op_type '" + o.op_type + "'") +
        " matches no node of the model");
  }
}

}  // namespace qforge::passes
