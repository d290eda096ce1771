// Runs ONNX models in ONNX Runtime, the runtime `qforge verify` checks exported models against.
// ONNX Runtime comes as the npm package onnxruntime-node, driven by a small Node.js script
// (tools/ort/run_model.js) that is embedded in qforge at build time and written to a temporary
// directory for each run, so an installed qforge needs no source tree. Tensors cross as .npy
// files; node is spawned without a shell.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/executor.h"  // TensorMap

namespace qforge {
class TempDir;
}  // namespace qforge

namespace qforge::verify {

// The onnxruntime-node version qforge is tested with; tools/ort/package.json pins the same.
inline constexpr const char* kOnnxRuntimeNodeVersion = "1.30.0";

// ONNX Runtime's graph optimization levels (SessionOptions.graphOptimizationLevel).
enum class OrtOptimization { Disabled, Basic, Extended, All };

// "disabled", "basic", "extended", "all"; parse throws qforge::Error listing them.
const char* toString(OrtOptimization level);
OrtOptimization parseOrtOptimization(const std::string& name);

struct OrtRunnerOptions {
  // npm prefix holding node_modules/onnxruntime-node. Empty: $QFORGE_ORT_DIR, else
  // ${XDG_CACHE_HOME:-~/.cache}/qforge/ort.
  std::string ort_dir;
  OrtOptimization optimization = OrtOptimization::All;
  int threads = 0;    // ONNX Runtime intra-op threads; 0 lets it choose
  int64_t batch = 0;  // rows per session run (outputs concatenated); 0: all rows in one run
  // The Node.js executable: a path, or a name looked up on PATH.
  std::string node = "node";
  // Node is killed after this long and run() throws; 0 waits as long as it takes.
  double timeout_seconds = 0;
};

class OrtRunner {
 public:
  // Finds node and the ORT directory; throws qforge::Error with the command that installs
  // whichever is missing.
  explicit OrtRunner(OrtRunnerOptions options = {});

  // Runs `model_path` on `feeds` (graph input name -> tensor; CPU tensors of float32/64, int8/16/
  // 32/64, uint8 or bool) and returns `outputs` (every graph output when empty). Throws
  // qforge::Error with ONNX Runtime's message and the model path when ORT refuses the model or a
  // feed, and when node fails, is killed or runs past the timeout.
  TensorMap run(const std::string& model_path, const TensorMap& feeds,
                const std::vector<std::string>& outputs = {}) const;

  // Writes to `out_path` the graph ONNX Runtime runs for `model_path` after its optimizations at
  // this runner's level (QDQ fusions, int8 -> uint8 conversion, layout changes). Run with
  // optimization disabled it computes what the model does, bit for bit, and exposing its tensors
  // as outputs changes nothing, which exposing them in `model_path` can (ORT does not fuse a
  // QuantizeLinear whose output is a graph output). Throws qforge::Error as run() does.
  void saveOptimized(const std::string& model_path, const std::string& out_path) const;
  // That graph, read back.
  onnx::ModelProto optimizedModel(const std::string& model_path) const;

  const OrtRunnerOptions& options() const { return options_; }
  const std::string& ortDir() const { return options_.ort_dir; }
  const std::string& nodePath() const { return node_path_; }

 private:
  void runScript(const TempDir& dir, const std::string& model_path,
                 const std::vector<std::string>& args) const;

  OrtRunnerOptions options_;  // ort_dir resolved and absolute
  std::string node_path_;
};

// The ONNX model in `path`, as protobuf; throws qforge::Error naming the file when it is none.
onnx::ModelProto readModelProto(const std::string& path);

// The ORT directory an OrtRunner uses: `explicit_dir` when not empty, else $QFORGE_ORT_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/qforge/ort.
std::string resolveOrtDir(const std::string& explicit_dir = "");

// "npm install --ignore-scripts --prefix DIR onnxruntime-node@VERSION": installs ORT for qforge.
std::string ortInstallCommand(const std::string& ort_dir);

// The embedded runner script (tools/ort/run_model.js).
const char* ortRunnerScript();

}  // namespace qforge::verify
