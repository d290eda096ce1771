#include "support/onnx_validity.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {

std::string onnxCheckerError(const std::string& path) {
  try {
    onnx::checker::check_model(path);
    onnx::ModelProto model;
    std::ifstream in(path, std::ios::binary);
    if (!model.ParseFromIstream(&in)) return path + ": not a ModelProto";
    onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*error_mode=*/1);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool ortAvailable(const std::string& what) {
  const std::string dir = testOrtDir();
  if (std::filesystem::exists(std::filesystem::path(dir) / "node_modules" / "onnxruntime-node")) {
    return true;
  }
  std::cout << "[ SKIPPED  ] ONNX Runtime half of " << what << ": onnxruntime-node is not in "
            << dir << " (set QFORGE_ORT_DIR or run scripts/install-ort.sh)\n";
  return false;
}

TensorMap runInOrt(const std::string& path, const TensorMap& feeds,
                   verify::OrtOptimization optimization) {
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  options.optimization = optimization;
  return verify::OrtRunner(options).run(path, feeds);
}

}  // namespace qforge::testing
