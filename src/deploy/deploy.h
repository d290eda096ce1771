// The deploy step: a calibrated or trained prepared model in, the files a toolchain takes out.
//   1. check the backend's constraints on every quantized tensor (naming the tensor that fails)
//   2. strip the quantizers into a DeployModel (BN already merged, weights on their grid)
//   3. write standard ONNX: model.qdq.onnx (when every grid is affine) and ONNX Runtime's
//      QOperator form model.qoperator.onnx (when some group maps to an integer kernel)
//   4. write the backend's own format (its "deploy_format" writer)
//   5. write deploy.json: the files, every tensor's encoding, and each quantizer's integer tensor
//      in the ONNX models (what `qforge verify` compares)
// deployPreparedModel writes the directory as one unit.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "deploy/writer_registry.h"
#include "passes/prepare.h"

namespace qforge::deploy {

struct DeployResult {
  std::vector<std::string> files;  // every file written, deploy.json last
  std::vector<std::string> notes;  // what was not written and why
  nlohmann::json manifest;         // the content of deploy.json
};

// Throws qforge::Error naming the tensor when the table breaks a constraint of `backend` (zero
// point 0, bit widths of the first/last layers are the user's business).
void checkBackendConstraints(const QuantTable& table, const backends::BackendConfig& backend);

// Writes the deploy files into `dir` as they come (a scratch or staging directory).
DeployResult writeDeployFiles(passes::PreparedModel& model, const std::string& dir,
                              const WriterRegistry& writers);
DeployResult writeDeployFiles(passes::PreparedModel& model, const std::string& dir);

// Writes the deploy files into `out_dir` as one unit (core/output_dir.h): the old deploy files
// there are replaced, other files stay, and a failure or a kill leaves `out_dir` as it was.
DeployResult deployPreparedModel(passes::PreparedModel& model, const std::string& out_dir,
                                 const WriterRegistry& writers);
// The same with every built-in format writer (registerBuiltinWriters).
DeployResult deployPreparedModel(passes::PreparedModel& model, const std::string& out_dir);

// Reads DIR/deploy.json (written by deployPreparedModel); throws naming the file when missing.
nlohmann::json readDeployManifest(const std::string& dir);

}  // namespace qforge::deploy
