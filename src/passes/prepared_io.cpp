#include "passes/prepared_io.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"

namespace qforge::passes {

namespace {

constexpr const char* kFormat = "qforge-prepared-model";
constexpr int kVersion = 1;

std::string pathIn(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

// --- JSON forms of the pieces ------------------------------------------------------------------

nlohmann::json specJson(const backends::QuantSpec& spec) {
  nlohmann::json j = backends::toJson(spec);
  j["axis"] = spec.scheme.axis;  // per_channel says whether; the axis was resolved per op
  return j;
}

backends::QuantSpec specFrom(const nlohmann::json& j, const std::string& where,
                             const std::string& path) {
  nlohmann::json copy = j;
  const int64_t axis = copy.value("axis", int64_t{-1});
  copy.erase("axis");
  backends::QuantSpec spec = backends::parseQuantSpec(copy, where, path);
  spec.scheme.axis = axis;
  return spec;
}

const char* kindName(PointKind kind) {
  return toString(kind);
}

PointKind kindFrom(const std::string& name, const std::string& where) {
  for (PointKind k :
       {PointKind::Weight, PointKind::Bias, PointKind::Activation, PointKind::FixedOutput}) {
    if (name == toString(k)) return k;
  }
  throw Error(where + ": unknown quantization point kind '" + name + "'");
}

nlohmann::json pointJson(const QuantPoint& p) {
  return {{"kind", kindName(p.kind)},
          {"quantizer", p.quantizer},
          {"value", p.value},
          {"unit", p.unit},
          {"spec", specJson(p.spec)},
          {"nodes", p.nodes},
          {"fixed_scale", p.fixed_scale},
          {"fixed_zero_point", p.fixed_zero_point},
          {"bias_input_quantizer", p.bias_input_quantizer},
          {"bias_weight_quantizer", p.bias_weight_quantizer},
          {"bias_bits", p.bias_bits}};
}

QuantPoint pointFrom(const nlohmann::json& j, const std::string& where) {
  QuantPoint p;
  p.kind = kindFrom(j.at("kind").get<std::string>(), where);
  p.quantizer = j.at("quantizer").get<std::string>();
  p.value = j.at("value").get<std::string>();
  p.unit = j.at("unit").get<std::string>();
  p.spec = specFrom(j.at("spec"), where, "points." + p.quantizer + ".spec");
  p.nodes = j.at("nodes").get<std::vector<std::string>>();
  p.fixed_scale = j.at("fixed_scale").get<double>();
  p.fixed_zero_point = j.at("fixed_zero_point").get<int64_t>();
  p.bias_input_quantizer = j.at("bias_input_quantizer").get<std::string>();
  p.bias_weight_quantizer = j.at("bias_weight_quantizer").get<std::string>();
  p.bias_bits = j.at("bias_bits").get<int>();
  return p;
}

nlohmann::json unitJson(const UnitSummary& u) {
  return {{"name", u.name},
          {"ops", u.ops},
          {"pattern", u.pattern},
          {"skipped", u.skipped},
          {"weight", specJson(u.settings.weight)},
          {"activation", specJson(u.settings.activation)}};
}

UnitSummary unitFrom(const nlohmann::json& j, const std::string& where) {
  UnitSummary u;
  u.name = j.at("name").get<std::string>();
  u.ops = j.at("ops").get<std::string>();
  u.pattern = j.at("pattern").get<std::string>();
  u.skipped = j.at("skipped").get<bool>();
  u.settings.skip = u.skipped;
  u.settings.weight = specFrom(j.at("weight"), where, "units." + u.name + ".weight");
  u.settings.activation = specFrom(j.at("activation"), where, "units." + u.name + ".activation");
  return u;
}

// Tensors as dtype, shape and values; doubles hold float32 and int64 values up to 2^53 exactly.
nlohmann::json tensorJson(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous().reshape({-1});
  return {{"dtype", std::string(c10::toString(t.scalar_type()))},
          {"shape", t.sizes().vec()},
          {"values", std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel())}};
}

at::Tensor tensorFrom(const nlohmann::json& j, const std::string& where) {
  const std::string dtype = j.at("dtype").get<std::string>();
  at::ScalarType type;
  if (dtype == "Float") {
    type = at::kFloat;
  } else if (dtype == "Double") {
    type = at::kDouble;
  } else if (dtype == "Long") {
    type = at::kLong;
  } else if (dtype == "Int") {
    type = at::kInt;
  } else {
    throw Error(where + ": unsupported state dtype '" + dtype + "'");
  }
  const auto values = j.at("values").get<std::vector<double>>();
  const auto shape = j.at("shape").get<std::vector<int64_t>>();
  at::Tensor t = at::tensor(values, at::kDouble);
  require(t.numel() == c10::multiply_integers(shape),
          where + ": state tensor has " + std::to_string(t.numel()) + " values for its shape");
  return t.reshape(shape).to(type);
}

}  // namespace

std::vector<std::string> savePreparedModel(PreparedModel& model,
                                           const nlohmann::json& backend_document,
                                           const std::string& dir) {
  std::filesystem::create_directories(dir);
  nlohmann::json doc;
  doc["format"] = kFormat;
  doc["version"] = kVersion;
  doc["backend"] = backend_document;
  doc["units"] = nlohmann::json::array();
  for (const UnitSummary& u : model.units())
    doc["units"].push_back(unitJson(u));
  doc["points"] = nlohmann::json::array();
  for (const QuantPoint& p : model.points())
    doc["points"].push_back(pointJson(p));
  doc["float_ops"] = model.floatOps();
  nlohmann::json states = nlohmann::json::object();
  for (quant::FakeQuantizer* q : model.quantizers()) {
    nlohmann::json state = nlohmann::json::object();
    for (const auto& [key, tensor] : q->state())
      state[key] = tensorJson(tensor);
    states[q->name()] = state;
  }
  doc["quantizers"] = states;
  // The graph first: a directory whose prepared.json exists is complete.
  exportOnnxFile(model.graph(), pathIn(dir, "prepared.onnx"));
  writeFileAtomically(pathIn(dir, "prepared.json"), doc.dump(1) + "\n");
  return {pathIn(dir, "prepared.onnx"), pathIn(dir, "prepared.json")};
}

bool isPreparedModelDir(const std::string& dir) {
  return std::filesystem::exists(pathIn(dir, "prepared.json")) &&
         std::filesystem::exists(pathIn(dir, "prepared.onnx"));
}

std::unique_ptr<PreparedModel> loadPreparedModel(const std::string& dir,
                                                 const PrepareOptions& options) {
  const std::string json_path = pathIn(dir, "prepared.json");
  require(isPreparedModelDir(dir),
          dir +
              ": not a prepared model directory (needs prepared.json and prepared.onnx, which "
              "`qforge quantize --out DIR` writes)");
  const nlohmann::json doc = parseJson(readFile(json_path), json_path);
  // Compared as JSON values: value() threw for a document that is not an object or a "format"
  // that is not a string (a fuzzed prepared.json, issue #22).
  const auto field = [&](const char* key) {
    return doc.is_object() && doc.contains(key) ? doc.at(key) : nlohmann::json();
  };
  require(field("format") == kFormat && field("version") == kVersion,
          json_path + ": not a qforge prepared model of version " + std::to_string(kVersion));
  std::unique_ptr<PreparedModel> model;
  try {
    backends::BackendConfig backend =
        backends::parseBackendConfig(doc.at("backend"), json_path + ": backend");
    std::vector<UnitSummary> units;
    for (const auto& u : doc.at("units"))
      units.push_back(unitFrom(u, json_path));
    std::vector<QuantPoint> points;
    for (const auto& p : doc.at("points"))
      points.push_back(pointFrom(p, json_path));
    Graph graph = importOnnxFile(pathIn(dir, "prepared.onnx"));

    // The graph's FakeQuantize nodes and the saved points must describe the same quantizers.
    std::set<std::string> in_graph, in_points;
    for (const Node* n : graph.nodes()) {
      if (isFakeQuantize(n)) in_graph.insert(quantizerOf(*n));
    }
    for (const QuantPoint& p : points)
      in_points.insert(p.quantizer);
    for (const std::string& name : in_graph) {
      require(in_points.count(name) > 0, json_path + ": prepared.onnx runs quantizer '" + name +
                                             "', which prepared.json does not describe");
    }
    model = assemblePreparedModel(std::move(graph), std::move(backend), std::move(units),
                                  std::move(points),
                                  doc.at("float_ops").get<std::vector<std::string>>(), options);
    const nlohmann::json& states = doc.at("quantizers");
    for (quant::FakeQuantizer* q : model->quantizers()) {
      require(states.contains(q->name()),
              json_path + ": no saved state for quantizer '" + q->name() + "'");
      std::map<std::string, at::Tensor> state;
      for (const auto& [key, tensor] : states.at(q->name()).items())
        state[key] = tensorFrom(tensor, json_path + ": quantizers." + q->name() + "." + key);
      q->loadState(state);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(json_path + ": malformed prepared model (" + e.what() +
                "); write it again with `qforge quantize`");
  }
  model->setMode(quant::FakeQuantMode::Quantization);
  return model;
}

}  // namespace qforge::passes
