// What every ONNX file qforge writes must pass: ONNX's checker at the file's opset, strict shape
// and type inference, and loading in ONNX Runtime.
#pragma once

#include <string>

#include "exec/executor.h"
#include "verify/ort_runner.h"

namespace qforge::testing {

// "" when onnx::checker::check_model and strict type-checking shape inference accept the file,
// else their message.
std::string onnxCheckerError(const std::string& path);

// True when onnxruntime-node is installed where the tests look (support/ort_dir.h); otherwise
// prints why ONNX Runtime checks are skipped (once per `what`) and returns false.
bool ortAvailable(const std::string& what);

// The model's outputs in ONNX Runtime; by default with all optimizations off, so ORT computes
// what the graph says. At ORT's default level (All) its graph transformers run on load too, and
// may add nodes of their own (Round for a float bias), so a model must load at that level as well.
TensorMap runInOrt(const std::string& path, const TensorMap& feeds,
                   verify::OrtOptimization optimization = verify::OrtOptimization::Disabled);

}  // namespace qforge::testing
