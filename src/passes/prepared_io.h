// A prepared model saved to a directory and loaded back, so that deploy, verify and later
// algorithms start from what calibration or training produced, in another process:
//   DIR/prepared.onnx   the graph with its qforge.FakeQuantize nodes (current weights included)
//   DIR/prepared.json   the backend document, units, quantization points and every quantizer's
//                       state (scale, zero point, learned parameters)
// Loading rebuilds the quantizers from the saved specs and loads their state; no pass runs again.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "passes/prepare.h"

namespace qforge::passes {

// `backend_document` is the backend's resolved JSON (backends::resolveBackendDocument). Files
// are written atomically; `dir` is created when missing.
// Returns the two paths written.
std::vector<std::string> savePreparedModel(PreparedModel& model,
                                           const nlohmann::json& backend_document,
                                           const std::string& dir);

// Throws qforge::Error naming the file and entry for a missing or inconsistent directory. The
// model comes back in Quantization mode. `options` supplies custom observer / fake quantizer
// registries (its config is not used: the saved points already carry the user's settings).
std::unique_ptr<PreparedModel> loadPreparedModel(const std::string& dir,
                                                 const PrepareOptions& options = {});

// Whether `dir` holds a saved prepared model.
bool isPreparedModelDir(const std::string& dir);

}  // namespace qforge::passes
