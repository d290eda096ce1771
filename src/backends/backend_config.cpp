#include "backends/backend_config.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "core/strings.h"
#include "exec/op_info.h"

namespace qforge::backends {

const char* toString(OpRole role) {
  switch (role) {
    case OpRole::Quantizable:
      return "quantizable";
    case OpRole::SharesInput:
      return "shares_input";
    case OpRole::Fixed:
      return "fixed";
    case OpRole::Never:
      return "never";
  }
  return "?";
}

bool FusionStep::accepts(const std::string& op_type) const {
  return std::find(op_types.begin(), op_types.end(), op_type) != op_types.end();
}

std::string FusionPattern::str() const {
  std::string out;
  for (const FusionStep& step : steps) {
    if (!out.empty()) out += ", ";
    for (size_t i = 0; i < step.op_types.size(); ++i)
      out += (i ? "|" : "") + step.op_types[i];
    if (step.optional) out += "?";
  }
  return out;
}

const OpTrait* BackendConfig::trait(const std::string& op_type) const {
  auto it = ops.find(op_type);
  return it == ops.end() ? nullptr : &it->second;
}

namespace {

quant::RoundingMode parseRounding(JsonReader& r) {
  const std::string s = r.getString("rounding", "half_to_even");
  if (s == "half_to_even") return quant::RoundingMode::HalfToEven;
  if (s == "half_away_from_zero") return quant::RoundingMode::HalfAwayFromZero;
  if (s == "half_up") return quant::RoundingMode::HalfUp;
  if (s == "floor") return quant::RoundingMode::Floor;
  r.fail("rounding", "'" + s + "' is not one of half_to_even, half_away_from_zero, half_up, floor");
}

std::map<std::string, double> parseOptions(JsonReader& r, const std::string& key) {
  std::map<std::string, double> out;
  const nlohmann::json& v = r.get(key);
  if (v.is_null()) return out;
  if (!v.is_object()) r.fail(key, "must be an object of numeric options");
  for (const auto& item : v.items()) {
    if (item.value().is_boolean()) {
      out[item.key()] = item.value().get<bool>() ? 1.0 : 0.0;
    } else if (item.value().is_number()) {
      out[item.key()] = item.value().get<double>();
    } else {
      r.fail(key + "." + item.key(), "must be a number or a boolean");
    }
  }
  return out;
}

// The grid keys shared by weight, activation and bias specs.
quant::QScheme parseScheme(JsonReader& r, quant::QScheme s) {
  s.bits = static_cast<int>(r.getInt("bits", s.bits));
  s.symmetric = r.getBool("symmetric", s.symmetric);
  s.symmetric_range = r.getBool("symmetric_range", s.symmetric_range);
  s.full_range_clamp = r.getBool("full_range_clamp", s.full_range_clamp);
  s.is_unsigned = r.getBool("unsigned", s.is_unsigned);
  s.axis = r.getBool("per_channel", s.axis >= 0) ? 0 : -1;
  s.power_of_two_scale = r.getBool("power_of_two", s.power_of_two_scale);
  s.rounding = parseRounding(r);
  try {
    s.validate();
  } catch (const Error& e) {
    throw Error(r.where() + ": '" + r.keyPath("") + "': " + e.what());
  }
  return s;
}

QuantSpec parseSpec(JsonReader r) {
  QuantSpec spec;
  spec.scheme = parseScheme(r, spec.scheme);
  spec.observer = r.getString("observer", spec.observer);
  spec.observer_options = parseOptions(r, "observer_options");
  spec.fake_quantizer = r.getString("fake_quantizer", spec.fake_quantizer);
  spec.fake_quantizer_options = parseOptions(r, "fake_quantizer_options");
  r.finish();
  return spec;
}

OpRole parseRole(const std::string& s, JsonReader& r, const std::string& key) {
  if (s == "quantizable") return OpRole::Quantizable;
  if (s == "shares_input") return OpRole::SharesInput;
  if (s == "fixed") return OpRole::Fixed;
  if (s == "never") return OpRole::Never;
  r.fail(key, "role '" + s + "' is not one of quantizable, shares_input, fixed, never");
}

OpTrait parseTrait(JsonReader& ops, const std::string& op_type) {
  const nlohmann::json& v = ops.get(op_type);
  OpTrait trait;
  if (v.is_string()) {
    trait.role = parseRole(v.get<std::string>(), ops, op_type);
    if (trait.role == OpRole::Fixed) {
      ops.fail(op_type,
               "a fixed role needs its scale and zero_point: {\"role\": \"fixed\", "
               "\"scale\": ..., \"zero_point\": ...}");
    }
    return trait;
  }
  JsonReader r = ops.object(op_type);
  trait.role = parseRole(r.getString("role", ""), r, "role");
  if (r.has("inputs")) {
    const nlohmann::json& inputs = r.get("inputs");
    if (!inputs.is_array()) r.fail("inputs", "must be a list of input slots, e.g. [0, 1]");
    for (const auto& slot : inputs) {
      if (!slot.is_number_integer() || slot.get<int>() < 0) {
        r.fail("inputs", "must hold input slot numbers >= 0, found " + slot.dump());
      }
      trait.activation_inputs.push_back(slot.get<int>());
    }
  }
  if (trait.role == OpRole::Fixed) {
    trait.fixed_scale = r.getNumber("scale", 0);
    if (!(trait.fixed_scale > 0)) r.fail("scale", "a fixed role needs a positive scale");
    trait.fixed_zero_point = r.getInt("zero_point", 0);
    trait.fixed_unsigned = r.getBool("unsigned", false);
  }
  r.finish();
  return trait;
}

FusionPattern parseFusion(const nlohmann::json& v, JsonReader& r, size_t index) {
  const std::string key = "fusions[" + std::to_string(index) + "]";
  if (!v.is_array() || v.empty()) r.fail(key, "must be a non-empty list of steps like \"Conv\"");
  FusionPattern pattern;
  for (const auto& item : v) {
    if (!item.is_string()) r.fail(key, "steps must be strings like \"Relu|Clip?\"");
    std::string text = item.get<std::string>();
    FusionStep step;
    if (!text.empty() && text.back() == '?') {
      step.optional = true;
      text.pop_back();
    }
    std::stringstream ss(text);
    std::string op;
    while (std::getline(ss, op, '|')) {
      if (op.empty()) r.fail(key, "step '" + item.get<std::string>() + "' has an empty op type");
      step.op_types.push_back(op);
    }
    if (step.op_types.empty()) r.fail(key, "has an empty step");
    pattern.steps.push_back(step);
  }
  if (pattern.steps.front().optional) r.fail(key, "the first step (the anchor) cannot be optional");
  return pattern;
}

BiasRule parseBias(JsonReader r) {
  BiasRule bias;
  const std::string mode = r.getString("mode", "float");
  if (mode == "float") {
    bias.mode = BiasRule::Mode::Float;
  } else if (mode == "derived") {
    bias.mode = BiasRule::Mode::Derived;
    bias.bits = static_cast<int>(r.getInt("bits", 32));
    if (bias.bits < 8 || bias.bits > 32) r.fail("bits", "derived bias bits must be 8..32");
  } else if (mode == "own") {
    bias.mode = BiasRule::Mode::Own;
    bias.scheme = parseScheme(r, quant::QScheme{});
    bias.bits = bias.scheme.bits;
    bias.observer = r.getString("observer", bias.observer);
  } else {
    r.fail("mode", "'" + mode + "' is not one of float, derived, own");
  }
  r.finish();
  return bias;
}

// Objects merge key by key; everything else in `top` replaces `base`.
nlohmann::json mergeJson(nlohmann::json base, const nlohmann::json& top) {
  if (!base.is_object() || !top.is_object()) return top;
  for (const auto& item : top.items()) {
    if (item.value().is_null()) {  // null removes what the base set ("MatMul": null)
      base.erase(item.key());
      continue;
    }
    base[item.key()] =
        base.contains(item.key()) ? mergeJson(base[item.key()], item.value()) : item.value();
  }
  return base;
}

bool looksLikePath(const std::string& s) {
  return s.find('/') != std::string::npos || s.find('\\') != std::string::npos ||
         (s.size() > 5 && endsWith(toLower(s), ".json"));
}

// What every backend starts from, below the root of its "extends" chain: the op table's
// layout-only ops (Reshape, Transpose, Identity...) share their input's quantizer. A document
// overrides one with another role, or removes it with null (the op then stays float).
nlohmann::json tableDefaults() {
  nlohmann::json ops = nlohmann::json::object();
  for (const OpInfo& info : OpRegistry::builtin().entries()) {
    if (info.domain.empty() && info.layout_only) ops[info.op_type] = toString(OpRole::SharesInput);
  }
  return {{"ops", ops}};
}

// Reads a backend document and resolves its "extends" chain into one merged document.
nlohmann::json resolveDocument(const std::string& name_or_path, std::vector<std::string>& chain) {
  for (const auto& seen : chain) {
    require(toLower(seen) != toLower(name_or_path),
            "backend '" + chain.front() + "': 'extends' loops back to '" + name_or_path + "'");
  }
  chain.push_back(name_or_path);
  nlohmann::json doc;
  std::string where;
  std::filesystem::path dir;
  if (looksLikePath(name_or_path)) {
    where = name_or_path;
    doc = parseJson(readFile(name_or_path), where);
    dir = std::filesystem::path(name_or_path).parent_path();
  } else {
    const char* text = builtinBackendJson(name_or_path);
    require(text != nullptr, "unknown backend '" + name_or_path + "': use one of " +
                                 join(builtinBackendNames()) +
                                 ", or the path of a backend .json file");
    where = "built-in backend " + name_or_path;
    doc = parseJson(text, where);
  }
  require(doc.is_object(), where + ": a backend must be a JSON object");
  if (!doc.contains("extends")) return mergeJson(tableDefaults(), doc);
  require(doc["extends"].is_string(), where + ": key 'extends' must name a backend");
  std::string base = doc["extends"].get<std::string>();
  if (looksLikePath(base) && std::filesystem::path(base).is_relative() && !dir.empty()) {
    base = (dir / base).string();
  }
  nlohmann::json merged = mergeJson(resolveDocument(base, chain), doc);
  merged.erase("extends");
  return merged;
}

}  // namespace

QuantSpec parseQuantSpec(const nlohmann::json& object, const std::string& where,
                         const std::string& path) {
  return parseSpec(JsonReader(object, where, path));
}

nlohmann::json toJson(const QuantSpec& spec) {
  static const char* const kRounding[] = {"half_to_even", "half_away_from_zero", "half_up",
                                          "floor"};
  return {{"bits", spec.scheme.bits},
          {"symmetric", spec.scheme.symmetric},
          {"symmetric_range", spec.scheme.symmetric_range},
          {"full_range_clamp", spec.scheme.full_range_clamp},
          {"unsigned", spec.scheme.is_unsigned},
          {"per_channel", spec.scheme.axis >= 0},
          {"power_of_two", spec.scheme.power_of_two_scale},
          {"rounding", kRounding[static_cast<int>(spec.scheme.rounding)]},
          {"observer", spec.observer},
          {"observer_options", spec.observer_options},
          {"fake_quantizer", spec.fake_quantizer},
          {"fake_quantizer_options", spec.fake_quantizer_options}};
}

namespace {

std::vector<int> parseWidths(JsonReader& r, const std::string& key, int default_bits) {
  const nlohmann::json& list = r.get(key);
  std::vector<int> widths{default_bits};
  if (list.is_null()) return widths;
  if (!list.is_array()) r.fail(key, "must be a list of bit widths");
  for (const nlohmann::json& item : list) {
    if (!item.is_number_integer() || item.get<int64_t>() < 2 || item.get<int64_t>() > 16) {
      r.fail(key, "bit widths are whole numbers from 2 to 16, got " + item.dump());
    }
    widths.push_back(item.get<int>());
  }
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
  return widths;
}

Alternatives parseAlternatives(JsonReader r, const BackendConfig& config) {
  Alternatives a;
  a.weight_bits = parseWidths(r, "weight_bits", config.weight.scheme.bits);
  a.activation_bits = parseWidths(r, "activation_bits", config.activation.scheme.bits);
  a.per_channel_weights =
      r.getBool("per_channel_weights", false) || config.weight.scheme.perChannel();
  r.finish();
  return a;
}

}  // namespace

BackendConfig parseBackendConfig(const nlohmann::json& document, const std::string& where) {
  JsonReader r(document, where);
  BackendConfig config;
  config.name = r.getString("name", "");
  if (config.name.empty()) r.fail("name", "every backend needs a non-empty name");
  config.description = r.getString("description", "");
  config.notes = r.getStrings("notes");
  config.deploy_format = r.getString("deploy_format", config.deploy_format);
  config.weight = parseSpec(r.object("weight"));
  config.activation = parseSpec(r.object("activation"));

  JsonReader ops = r.object("ops");
  const nlohmann::json op_entries = document.value("ops", nlohmann::json::object());
  for (const auto& item : op_entries.items()) {
    config.ops[item.key()] = parseTrait(ops, item.key());
  }
  const nlohmann::json& fusions = r.get("fusions");
  if (!fusions.is_null() && !fusions.is_array()) r.fail("fusions", "must be a list of patterns");
  for (size_t i = 0; fusions.is_array() && i < fusions.size(); ++i) {
    config.fusions.push_back(parseFusion(fusions[i], r, i));
  }

  JsonReader placement = r.object("placement");
  Placement& p = config.placement;
  p.unit_inputs = placement.getBool("unit_inputs", p.unit_inputs);
  p.unit_outputs = placement.getBool("unit_outputs", p.unit_outputs);
  p.graph_inputs = placement.getBool("graph_inputs", p.graph_inputs);
  p.graph_outputs = placement.getBool("graph_outputs", p.graph_outputs);
  placement.finish();
  if (!p.unit_inputs && !p.unit_outputs) {
    placement.fail("unit_inputs", "a backend must quantize unit inputs, outputs, or both");
  }

  JsonReader constraints = r.object("constraints");
  Constraints& c = config.constraints;
  c.zero_point_zero = constraints.getBool("zero_point_zero", false);
  c.unsigned_after_relu = constraints.getBool("unsigned_after_relu", false);
  c.first_last_bits = static_cast<int>(constraints.getInt("first_last_bits", 0));
  c.concat_shared_scale = constraints.getBool("concat_shared_scale", false);
  c.bias = parseBias(constraints.object("bias"));
  constraints.finish();
  config.alternatives = parseAlternatives(r.object("alternatives"), config);
  r.finish({"extends"});

  if (c.zero_point_zero) {
    for (const auto* spec : {&config.weight, &config.activation}) {
      if (!spec->scheme.symmetric) {
        r.fail(spec == &config.weight ? "weight.symmetric" : "activation.symmetric",
               "constraints.zero_point_zero needs symmetric schemes");
      }
    }
  }
  return config;
}

nlohmann::json resolveBackendDocument(const std::string& name_or_path) {
  std::vector<std::string> chain;
  return resolveDocument(name_or_path, chain);
}

BackendConfig loadBackend(const std::string& name_or_path) {
  std::vector<std::string> chain;
  nlohmann::json doc = resolveDocument(name_or_path, chain);
  return parseBackendConfig(
      doc, looksLikePath(name_or_path) ? name_or_path : "built-in backend " + name_or_path);
}

}  // namespace qforge::backends
