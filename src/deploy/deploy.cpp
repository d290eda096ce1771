#include "deploy/deploy.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "core/output_dir.h"
#include "core/strings.h"
#include "deploy/qdq_onnx.h"
#include "deploy/qoperator_onnx.h"
#include "ir/onnx_export.h"

namespace qforge::deploy {

namespace {

// "; most often: <why> (N nodes, e.g. 'conv1')" over the nodes the QOperator rewrite left in
// float, or "" when it left none.
std::string commonestReason(const std::map<std::string, std::string>& not_fused) {
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const auto& [node, why] : not_fused)
    by_reason[why].push_back(node);
  const auto most = std::max_element(
      by_reason.begin(), by_reason.end(),
      [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  if (most == by_reason.end()) return "";
  return "; most often: " + most->first + " (" + std::to_string(most->second.size()) +
         " nodes, e.g. '" + most->second.front() + "')";
}

std::string fileIn(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

nlohmann::json encodingJson(const TensorEncoding& e) {
  nlohmann::json j = {{"tensor", e.tensor}, {"quantizer", e.quantizer}, {"role", toString(e.role)},
                      {"bits", e.bits},     {"symmetric", e.symmetric}, {"unsigned", e.is_unsigned},
                      {"axis", e.axis},     {"qmin", e.qmin},           {"qmax", e.qmax},
                      {"affine", e.affine}};
  if (e.affine) {
    j["scale"] = e.scale;
    j["zero_point"] = e.zero_point;
  } else {
    j["state"] = e.state;
  }
  return j;
}

bool allEightBit(const QuantTable& table) {
  return std::all_of(table.tensors.begin(), table.tensors.end(), [](const TensorEncoding& e) {
    return e.role == TensorRole::Bias || e.bits == 8;
  });
}

}  // namespace

void checkBackendConstraints(const QuantTable& table, const backends::BackendConfig& backend) {
  if (!backend.constraints.zero_point_zero) return;
  for (const TensorEncoding& e : table.tensors) {
    if (!e.affine) continue;
    for (size_t c = 0; c < e.zero_point.size(); ++c) {
      require(e.zero_point[c] == 0,
              "tensor '" + e.tensor + "' (quantizer '" + e.quantizer + "') has zero point " +
                  std::to_string(e.zero_point[c]) + ", but " + backend.name +
                  " needs zero point 0 (symmetric quantization): remove the asymmetric override "
                  "from the quantization config and calibrate again");
    }
  }
}

namespace {

// How each quantization unit of the prepared model runs in model.qoperator.onnx: the integer
// kernel that took its anchor, or why it stays float. Units the QDQ lowering left without any
// dequantized input (e.g. skipped ones) say so.
nlohmann::json qoperatorUnits(const passes::PreparedModel& model, const QOperatorSummary& summary) {
  nlohmann::json units = nlohmann::json::array();
  for (const passes::UnitSummary& u : model.units()) {
    nlohmann::json entry = {{"unit", u.name}, {"ops", u.ops}};
    auto kernel = summary.kernel_of.find(u.name);
    auto reason = summary.not_fused.find(u.name);
    if (kernel != summary.kernel_of.end()) {
      entry["kernel"] = kernel->second;
    } else {
      entry["kernel"] = nullptr;
      entry["why"] = reason != summary.not_fused.end()
                         ? reason->second
                         : std::string(u.skipped ? "skipped by the configuration"
                                                 : "it reads no quantized value");
    }
    units.push_back(entry);
  }
  return units;
}

// Every deploy file of `model`, written into `out_dir`.
DeployResult writeFormats(passes::PreparedModel& model, const DeployModel& deployable,
                          const std::string& out_dir, const WriterRegistry& writers) {
  DeployResult result;
  nlohmann::json& m = result.manifest;
  m["backend"] = model.backend().name;
  m["deploy_format"] = model.backend().deploy_format;
  m["models"] = nlohmann::json::object();

  // NNIE's log grid is written as arithmetic (qdq_onnx.h); any other grid without scale and
  // zero point has no ONNX form.
  const auto not_affine =
      std::find_if(deployable.table.tensors.begin(), deployable.table.tensors.end(),
                   [](const TensorEncoding& e) { return !e.affine && !e.state.count("data_max"); });
  if (not_affine == deployable.table.tensors.end()) {
    QdqDetails details;
    Graph qdq = toQdqGraph(model, &details);
    const std::string qdq_path = fileIn(out_dir, "model.qdq.onnx");
    exportOnnxFile(qdq, qdq_path);
    result.files.push_back(qdq_path);
    m["models"]["qdq"] = "model.qdq.onnx";
    m["quantized_values"] = details.quantized_values;
    if (!details.weights_in_float.empty()) {
      m["weights_in_float"] = details.weights_in_float;
      result.notes.push_back(
          "model.qdq.onnx stores the weights of " +
          std::to_string(details.weights_in_float.size()) +
          " MatMul/Gemm nodes whose activation is not 8-bit QDQ (e.g. '" +
          details.weights_in_float.front() +
          "') as float grid values: ONNX Runtime would run DequantizeLinear -> MatMul as "
          "MatMulNBits, which quantizes the activation to int8");
    }

    if (!details.retyped_pairs.empty()) {
      m["retyped_pairs"] = details.retyped_pairs;
      result.notes.push_back(
          "model.qdq.onnx writes " + std::to_string(details.retyped_pairs.size()) +
          " QuantizeLinear/DequantizeLinear pairs that follow a pair of other parameters in the "
          "other 8-bit type (e.g. '" +
          details.retyped_pairs.front() +
          "'), on the same grid: ONNX Runtime would merge the two pairs into one rounding");
    }

    QOperatorSummary summary;
    Graph qop = toQOperatorGraph(qdq, &summary);
    if (!summary.integer_ops.empty()) {
      const std::string qop_path = fileIn(out_dir, "model.qoperator.onnx");
      exportOnnxFile(qop, qop_path);
      result.files.push_back(qop_path);
      m["models"]["qoperator"] = "model.qoperator.onnx";
      m["qoperator"] = {{"integer_ops", summary.integer_ops},
                        {"fused_nodes", summary.fused_nodes},
                        {"float_ops", summary.float_ops},
                        {"units", qoperatorUnits(model, summary)}};
      if (!allEightBit(deployable.table)) {
        result.notes.push_back(
            "model.qoperator.onnx runs only the 8-bit groups as integer kernels; the others stay "
            "float in it");
      }
      if (!summary.not_fused.empty()) m["qoperator"]["not_fused"] = summary.not_fused;
    } else {
      result.notes.push_back(
          "no model.qoperator.onnx: no group maps to an integer kernel of ONNX Runtime" +
          commonestReason(summary.not_fused));
    }
  } else {
    result.notes.push_back("no QDQ or QOperator ONNX: quantizer '" + not_affine->quantizer +
                           "' has no affine grid for QuantizeLinear");
  }

  const std::string& format = model.backend().deploy_format;
  // The ONNX forms above are what these formats write.
  if (format != "qdq" && format != "qoperator" && format != "onnx_qnn") {
    if (writers.has(format)) {
      for (const std::string& f : writers.get(format)(model, deployable, out_dir)) {
        if (std::find(result.files.begin(), result.files.end(), f) == result.files.end())
          result.files.push_back(f);
      }
    } else {
      result.notes.push_back("no '" + format +
                             "' writer is registered (known: " + join(writers.formats()) + ")");
    }
  }

  m["tensors"] = nlohmann::json::array();
  for (const TensorEncoding& e : deployable.table.tensors)
    m["tensors"].push_back(encodingJson(e));
  m["notes"] = result.notes;
  const std::string manifest_path = fileIn(out_dir, "deploy.json");
  result.files.push_back(manifest_path);
  m["files"] = nlohmann::json::array();
  for (const std::string& f : result.files)
    m["files"].push_back(std::filesystem::path(f).filename().string());
  writeFileAtomically(manifest_path, m.dump(2) + "\n");
  return result;
}

}  // namespace

DeployResult writeDeployFiles(passes::PreparedModel& model, const std::string& dir,
                              const WriterRegistry& writers) {
  DeployModel deployable = buildDeployModel(model);
  checkBackendConstraints(deployable.table, model.backend());
  std::filesystem::create_directories(dir);
  return writeFormats(model, deployable, dir, writers);
}

DeployResult writeDeployFiles(passes::PreparedModel& model, const std::string& dir) {
  WriterRegistry writers;
  registerBuiltinWriters(writers);
  return writeDeployFiles(model, dir, writers);
}

DeployResult deployPreparedModel(passes::PreparedModel& model, const std::string& out_dir,
                                 const WriterRegistry& writers) {
  // A format writer may still refuse the model after others wrote their files (TensorRT's 8-bit
  // activations, say): written into the staging directory, a refusal leaves nothing behind.
  OutputDirectory out(out_dir, OutputDirectory::kDeployRole, {OutputDirectory::kDeployRole});
  DeployResult result = writeDeployFiles(model, out.staging(), writers);
  for (std::string& f : result.files)
    f = out.finalPath(f);
  out.commit();
  return result;
}

DeployResult deployPreparedModel(passes::PreparedModel& model, const std::string& out_dir) {
  WriterRegistry writers;
  registerBuiltinWriters(writers);
  return deployPreparedModel(model, out_dir, writers);
}

nlohmann::json readDeployManifest(const std::string& dir) {
  const std::string path = fileIn(dir, "deploy.json");
  require(std::filesystem::exists(path),
          dir + ": no deploy.json; run `qforge deploy PREPARED_DIR --out " + dir +
              "` (or `qforge quantize ... --out " + dir + "`) first");
  return parseJson(readFile(path), path);
}

}  // namespace qforge::deploy
