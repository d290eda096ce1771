#include "verify/ort_runner.h"

#include <ATen/ATen.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/process.h"
#include "data/npy.h"

namespace qforge::verify {

namespace fs = std::filesystem;

namespace {

const char kRunnerScript[] =
#include "ort_run_model_js.inc"
    ;

constexpr const char* kNodeMissing =
    "Node.js not found (needed to run ONNX Runtime): apt install nodejs npm";

std::string getEnv(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The last non-empty line of the child's stderr, without the script's "error: " prefix.
std::string scriptMessage(const std::string& err) {
  std::string line = lastLine(err);
  const std::string prefix = "error: ";
  if (line.compare(0, prefix.size(), prefix) == 0) line.erase(0, prefix.size());
  return line;
}

// One line saying why node failed running `model_path`: the script's own message when it exited
// with one, else how node ended.
std::string failureMessage(const ProcessResult& result, const std::string& model_path,
                           double timeout_seconds) {
  const std::string said = scriptMessage(result.err);
  const bool signalled = !result.timed_out && WIFSIGNALED(result.status);
  if (!result.timed_out && !signalled && !said.empty()) return said;
  std::string message = "node " + exitDescription(result, timeout_seconds) +
                        " running ONNX Runtime on '" + model_path + "'";
  if (result.timed_out) message += "; it was killed";
  if (signalled && !said.empty()) message += ": " + said;
  return message;
}

}  // namespace

const char* toString(OrtOptimization level) {
  switch (level) {
    case OrtOptimization::Disabled:
      return "disabled";
    case OrtOptimization::Basic:
      return "basic";
    case OrtOptimization::Extended:
      return "extended";
    case OrtOptimization::All:
      return "all";
  }
  return "all";
}

OrtOptimization parseOrtOptimization(const std::string& name) {
  for (auto level : {OrtOptimization::Disabled, OrtOptimization::Basic, OrtOptimization::Extended,
                     OrtOptimization::All}) {
    if (name == toString(level)) return level;
  }
  throw Error("unknown ONNX Runtime optimization level '" + name +
              "' (disabled, basic, extended, all)");
}

std::string resolveOrtDir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  const std::string from_env = getEnv("QFORGE_ORT_DIR");
  if (!from_env.empty()) return from_env;
  std::string cache = getEnv("XDG_CACHE_HOME");
  if (cache.empty()) {
    const std::string home = getEnv("HOME");
    require(!home.empty(),
            "cannot find a directory for ONNX Runtime: set QFORGE_ORT_DIR (HOME is not set)");
    cache = home + "/.cache";
  }
  return cache + "/qforge/ort";
}

std::string ortInstallCommand(const std::string& ort_dir) {
  // Quoted for the shell only when it needs it, so the usual hint stays copy-paste plain.
  const bool plain = ort_dir.find_first_not_of(
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-+") ==
                     std::string::npos;
  std::string quoted = "'";
  for (char c : ort_dir)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  return std::string("npm install --ignore-scripts --prefix ") + (plain ? ort_dir : quoted) +
         " onnxruntime-node@" + kOnnxRuntimeNodeVersion;
}

const char* ortRunnerScript() {
  return kRunnerScript;
}

OrtRunner::OrtRunner(OrtRunnerOptions options) : options_(std::move(options)) {
  require(options_.threads >= 0, "ONNX Runtime threads must be >= 0");
  require(options_.batch >= 0, "ONNX Runtime batch size must be >= 0");
  require(options_.timeout_seconds >= 0, "ONNX Runtime timeout must be >= 0");
  node_path_ = findExecutable(options_.node);
  if (node_path_.empty()) {
    throw Error(options_.node == "node"
                    ? kNodeMissing
                    : std::string(kNodeMissing) + " (no executable '" + options_.node + "')");
  }
  options_.ort_dir = fs::absolute(resolveOrtDir(options_.ort_dir)).lexically_normal().string();
  std::error_code ec;
  if (!fs::is_regular_file(
          fs::path(options_.ort_dir) / "node_modules" / "onnxruntime-node" / "package.json", ec)) {
    throw Error(
        "onnxruntime-node not found in '" + options_.ort_dir +
        "' (needed to run ONNX Runtime); install it with: " + ortInstallCommand(options_.ort_dir) +
        " (or set QFORGE_ORT_DIR to a directory that has it)");
  }
}

// The runner script, written into `dir`, on `model_path` with this runner's ORT directory,
// optimization level and threads, then `args`; throws qforge::Error when node fails.
void OrtRunner::runScript(const TempDir& dir, const std::string& model_path,
                          const std::vector<std::string>& args) const {
  const std::string script = dir.file("run_model.js");
  writeFileAtomically(script, kRunnerScript);
  std::vector<std::string> argv = {node_path_,       script,
                                   "--ort-dir",      options_.ort_dir,
                                   "--model",        model_path,
                                   "--optimization", toString(options_.optimization),
                                   "--threads",      std::to_string(options_.threads)};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult result = runProcess(argv, options_.timeout_seconds);
  if (result.timed_out || !WIFEXITED(result.status) || WEXITSTATUS(result.status) != 0) {
    throw Error(failureMessage(result, model_path, options_.timeout_seconds));
  }
}

void OrtRunner::saveOptimized(const std::string& model_path, const std::string& out_path) const {
  std::error_code ec;
  require(fs::is_regular_file(model_path, ec), "'" + model_path + "': no such model file");
  TempDir dir("ort");
  runScript(dir, model_path, {"--save-optimized", out_path});
  require(fs::is_regular_file(out_path, ec),
          "ONNX Runtime wrote no optimized model for '" + model_path + "'");
}

onnx::ModelProto OrtRunner::optimizedModel(const std::string& model_path) const {
  TempDir dir("ort-optimized");
  const std::string path = dir.file("optimized.onnx");
  saveOptimized(model_path, path);
  return readModelProto(path);
}

onnx::ModelProto readModelProto(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto model;
  require(in && model.ParseFromIstream(&in), "'" + path + "': cannot read it as an ONNX model");
  return model;
}

TensorMap OrtRunner::run(const std::string& model_path, const TensorMap& feeds,
                         const std::vector<std::string>& outputs) const {
  std::error_code ec;
  require(fs::is_regular_file(model_path, ec), "'" + model_path + "': no such model file");
  TempDir dir("ort");
  std::vector<std::string> args = {"--out-dir",  dir.file("out"),
                                   "--manifest", dir.file("manifest.json"),
                                   "--batch",    std::to_string(options_.batch)};
  int index = 0;
  for (const auto& [name, tensor] : feeds) {
    require(tensor.defined(), "feed '" + name + "' for ONNX Runtime is an undefined tensor");
    const std::string file = dir.file("input_" + std::to_string(index++) + ".npy");
    try {
      data::writeNpy(file, tensor);
    } catch (const Error& e) {
      throw e.within("feed '" + name + "' for ONNX Runtime");
    }
    args.insert(args.end(), {"--input", name, file});
  }
  for (const auto& name : outputs)
    args.insert(args.end(), {"--output", name});
  runScript(dir, model_path, args);

  TensorMap out;
  const std::string manifest_path = dir.file("manifest.json");
  try {
    const auto manifest = nlohmann::json::parse(readFile(manifest_path));
    for (const auto& entry : manifest.at("outputs")) {
      data::NpyFile file(entry.at("file").get<std::string>());
      out[entry.at("name").get<std::string>()] = file.readAll();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("ONNX Runtime runner wrote a malformed manifest '" + manifest_path +
                "': " + e.what());
  }
  return out;
}

}  // namespace qforge::verify
