#include "deploy/writer_registry.h"

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "deploy/format_writers.h"
#include "deploy/openvino_onnx.h"
#include "deploy/qdq_onnx.h"
#include "deploy/qoperator_onnx.h"
#include "ir/onnx_export.h"

namespace qforge::deploy {

void WriterRegistry::add(const std::string& format, DeployWriter writer) {
  require(!format.empty() && writer != nullptr, "a deploy writer needs a name and a function");
  writers_[format] = std::move(writer);
}

const DeployWriter& WriterRegistry::get(const std::string& format) const {
  auto it = writers_.find(format);
  if (it != writers_.end()) return it->second;
  throw Error("no deploy writer for format '" + format + "' (known: " + join(formats()) + ")");
}

std::vector<std::string> WriterRegistry::formats() const {
  std::vector<std::string> out;
  for (const auto& [name, writer] : writers_)
    out.push_back(name);
  return out;
}

void registerBuiltinWriters(WriterRegistry& registry) {
  registry.add("qdq",
               [](passes::PreparedModel& model, const DeployModel&, const std::string& out_dir) {
                 const std::filesystem::path dir(out_dir);
                 const std::string model_path = (dir / "model.qdq.onnx").string();
                 exportOnnxFile(toQdqGraph(model), model_path);
                 return std::vector<std::string>{model_path};
               });
  const DeployWriter qoperator = [](passes::PreparedModel& model, const DeployModel&,
                                    const std::string& out_dir) {
    const std::string model_path =
        (std::filesystem::path(out_dir) / "model.qoperator.onnx").string();
    exportOnnxFile(toQOperatorGraph(toQdqGraph(model)), model_path);
    return std::vector<std::string>{model_path};
  };
  registry.add("qoperator", qoperator);
  registry.add("onnx_qnn", qoperator);  // MQBench's name: ONNX QLinear operators for TVM's QNN
  registry.add("openvino",
               [](passes::PreparedModel&, const DeployModel& deploy, const std::string& out_dir) {
                 const std::string model_path =
                     (std::filesystem::path(out_dir) / "model.openvino.onnx").string();
                 exportOnnxFile(toOpenVinoGraph(deploy), model_path);
                 return std::vector<std::string>{model_path};
               });
  registerFormatWriters(registry);
}

}  // namespace qforge::deploy
