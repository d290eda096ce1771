// Deploy writers by name: a backend's "deploy_format" picks the writer that turns a calibrated
// model into the files its toolchain reads. Registration is explicit: registerBuiltinWriters()
// adds "qdq"; a new backend adds its own writer with add().
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deploy/deploy_model.h"
#include "passes/prepare.h"

namespace qforge::deploy {

// Writes the deployable files for `model` into the existing directory `out_dir` and returns
// their paths. `deploy` is the model with its quantizers stripped (deploy_model.h), which most
// formats describe. Writers must write each file atomically (core/files.h).
using DeployWriter = std::function<std::vector<std::string>(
    passes::PreparedModel& model, const DeployModel& deploy, const std::string& out_dir)>;

class WriterRegistry {
 public:
  void add(const std::string& format, DeployWriter writer);
  bool has(const std::string& format) const { return writers_.count(format) > 0; }
  // Throws qforge::Error naming the known formats for an unknown one.
  const DeployWriter& get(const std::string& format) const;
  std::vector<std::string> formats() const;

 private:
  std::map<std::string, DeployWriter> writers_;
};

// "qdq": model.qdq.onnx (see qdq_onnx.h); "qoperator" and "onnx_qnn": model.qoperator.onnx
// (qoperator_onnx.h); "openvino": model.openvino.onnx (openvino_onnx.h); and the vendor formats
// (format_writers.h).
void registerBuiltinWriters(WriterRegistry& registry);

}  // namespace qforge::deploy
