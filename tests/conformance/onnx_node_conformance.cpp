// Runs every ONNX backend node test (libonnx-testdata) whose ops are all in qforge's OpInfo table
// and compares qforge's outputs to the stored ones: rtol 1e-3, atol 1e-5 for floats, exact for
// integers and booleans. Prints one line per failure and "N passed, M failed".
//
// Usage: onnx_conformance [substring]   (only test directories whose name contains substring)
// QFORGE_ONNX_TESTDATA overrides the data directory.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include "core/error.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "ir/onnx_tensor.h"

namespace fs = std::filesystem;
using namespace qforge;

namespace {

// Cases of supported ops that qforge deliberately does not pass, each with its reason. A listed
// case that starts passing is reported, so this list cannot go stale silently.
// Each op family keeps its own list.
const std::map<std::string, std::string> kKnownExceptions = {
#include "conformance/known_exceptions/elementwise.inc"
#include "conformance/known_exceptions/math.inc"
#include "conformance/known_exceptions/nn.inc"
#include "conformance/known_exceptions/quantized.inc"
#include "conformance/known_exceptions/shape.inc"
};

std::vector<fs::path> sortedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  }
  // input_10.pb sorts after input_9.pb.
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) {
    auto index = [&](const fs::path& p) {
      std::string stem = p.stem().string();
      return std::stoi(stem.substr(prefix.size()));
    };
    return index(a) < index(b);
  });
  return files;
}

// Returns an empty string when `actual` matches `expected`, else what differs.
std::string compare(const at::Tensor& expected, const at::Tensor& actual) {
  if (!actual.defined()) return "output not computed";
  if (expected.sizes() != actual.sizes()) {
    std::ostringstream out;
    out << "shape " << actual.sizes() << " != expected " << expected.sizes();
    return out.str();
  }
  if (expected.scalar_type() != actual.scalar_type()) {
    return std::string("dtype ") + c10::toString(actual.scalar_type()) + " != expected " +
           c10::toString(expected.scalar_type());
  }
  if (expected.numel() == 0) return "";
  if (at::isFloatingType(expected.scalar_type())) {
    at::Tensor e = expected.to(at::kDouble), a = actual.to(at::kDouble);
    at::Tensor both_nan = e.isnan() & a.isnan();
    at::Tensor same_inf = (e == a);
    at::Tensor close = ((a - e).abs() <= 1e-5 + 1e-3 * e.abs()) | both_nan | same_inf;
    if (close.all().item<bool>()) return "";
    at::Tensor diff = (a - e).abs().masked_fill(close, 0).nan_to_num(1e30);
    std::ostringstream out;
    out << "max abs diff " << diff.max().item<double>() << " (" << (~close).sum().item<int64_t>()
        << " of " << e.numel() << " elements off)";
    return out.str();
  }
  if (at::equal(expected, actual)) return "";
  return std::to_string((expected != actual).sum().item<int64_t>()) + " of " +
         std::to_string(expected.numel()) + " elements differ";
}

// Runs one test directory; returns "" on success, else the reason.
std::string runCase(const fs::path& dir) {
  Graph graph = importOnnxFile((dir / "model.onnx").string());
  Executor executor(graph);
  std::vector<const Value*> inputs;
  for (const Value* v : graph.inputs()) {
    if (!v->isInitializer()) inputs.push_back(v);
  }
  for (const auto& data_dir : sortedFiles(dir, "test_data_set_")) {
    TensorMap feeds;
    auto input_files = sortedFiles(data_dir, "input_");
    // Optional inputs may be omitted from the test data at the end.
    for (size_t i = 0; i < input_files.size() && i < inputs.size(); ++i) {
      feeds[inputs[i]->name()] = readTensorProtoFile(input_files[i].string());
    }
    TensorMap out = executor.run(feeds);
    auto output_files = sortedFiles(data_dir, "output_");
    for (size_t i = 0; i < output_files.size(); ++i) {
      const std::string& name = graph.outputs().at(i)->name();
      std::string diff = compare(readTensorProtoFile(output_files[i].string()), out.at(name));
      if (!diff.empty()) {
        return data_dir.filename().string() + ", output '" + name + "': " + diff;
      }
    }
  }
  return "";
}

bool allOpsInTable(const fs::path& model_path) {
  try {
    Graph graph = importOnnxFile(model_path.string(), ImportOptions{false, false});
    return Executor::unsupportedOps(graph).empty();
  } catch (const std::exception&) {
    return false;  // e.g. string tensors, which qforge does not hold
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("QFORGE_ONNX_TESTDATA");
  const fs::path root = env ? env : "/usr/share/libonnx-testdata/data/node";
  const std::string filter = argc > 1 ? argv[1] : "";
  if (!fs::is_directory(root)) {
    std::cerr << "onnx_conformance: " << root
              << " not found; install Debian's libonnx-testdata (scripts/install-deps.sh does)\n";
    return 1;
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());

  int passed = 0, failed = 0, expected_failures = 0, out_of_table = 0;
  for (const auto& dir : dirs) {
    const std::string name = dir.filename().string();
    if (!allOpsInTable(dir / "model.onnx")) {
      ++out_of_table;
      continue;
    }
    std::string reason;
    try {
      reason = runCase(dir);
    } catch (const std::exception& e) {
      std::string what = e.what();
      reason = what.substr(0, what.find('\n'));
    }
    auto known = kKnownExceptions.find(name);
    if (known != kKnownExceptions.end()) {
      if (reason.empty()) {
        ++failed;
        std::cout << "UNEXPECTED PASS " << name << " (remove it from kKnownExceptions)\n";
      } else {
        ++expected_failures;
        std::cout << "known exception " << name << ": " << known->second << "\n";
      }
      continue;
    }
    if (reason.empty()) {
      ++passed;
    } else {
      ++failed;
      std::cout << "FAIL " << name << ": " << reason << "\n";
    }
  }
  std::cout << "onnx node tests: " << dirs.size() << " cases, " << out_of_table
            << " use ops outside qforge's table, " << expected_failures << " known exceptions\n";
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
