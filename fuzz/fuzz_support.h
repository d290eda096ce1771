// Shared by the fuzz targets (fuzz/*_fuzz.cpp): the product's rule for bad input is a qforge::Error
// with one clear line, so a target catches qforge::Error (an expected refusal) and nothing else.
// Any other exception (c10::Error, nlohmann's, std::bad_alloc ...) reaches the user as an internal
// error (exit 3 in src/cli/main.cpp) and is a finding: it escapes LLVMFuzzerTestOneInput and
// libFuzzer reports the input as a crash, as it does for ASan and UBSan reports.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/files.h"
#include "core/resource_limits.h"
#include "ir/graph.h"

namespace qforge::fuzz {

// Runs `body`, treating qforge::Error as the expected outcome of bad input. (Its message may quote
// the input, newlines included: the CLI and the Python module print it through printable(), which
// escapes control characters, so it is still one line.)
// QFORGE_FUZZ_VERBOSE=1 prints each refusal (to check that seeds get past the parsers).
// The resource limits under fuzzing: scripts/fuzz.sh gives each target 2 GiB of memory, so a
// tensor or model a quarter of that is refused as the product refuses one above its defaults. An
// out-of-memory report then means an allocation the limits do not see, which is a finding.
inline void setFuzzingLimits() {
  ResourceLimits limits;
  limits.max_model_bytes = int64_t{512} << 20;
  limits.max_tensor_bytes = int64_t{256} << 20;
  setResourceLimits(limits);
}

template <typename Body>
int refusalsOnly(Body&& body) {
  static const bool limits_set = (setFuzzingLimits(), true);
  (void)limits_set;
  try {
    body();
  } catch (const qforge::Error& e) {
    static const bool verbose = std::getenv("QFORGE_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}

// The fuzz input as a string.
inline std::string text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// One scratch directory per process (readers that take a path get the input written there).
inline const TempDir& scratch() {
  static const TempDir dir("fuzz");
  return dir;
}

// Writes `content` to `name` in the scratch directory and returns its path.
inline std::string writeScratch(const std::string& name, const std::string& content) {
  const std::string path = scratch().file(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (!content.empty() && std::fwrite(content.data(), 1, content.size(), f) != content.size())
    __builtin_trap();
  std::fclose(f);
  return path;
}

// The prepared_model target's input: prepared.json, this line, prepared.onnx.
inline constexpr const char* kPreparedSeparator = "\n--- prepared.onnx ---\n";

// Splits an input at the first `separator` (multi-file inputs: prepared.json then prepared.onnx).
// Without one, everything is the first part.
inline std::pair<std::string, std::string> splitAt(const std::string& input,
                                                   const std::string& separator) {
  const size_t at = input.find(separator);
  if (at == std::string::npos) return {input, std::string()};
  return {input.substr(0, at), input.substr(at + separator.size())};
}

// Whether sampleInputs(graph, 1, true, ...) stays small: the leading dim and unknown dims become 1.
// Targets that run a model skip the others, so the fuzzer explores the executor's logic rather
// than the allocator (run-time tensor sizes are the resource limits' business).
inline bool smallSampleInputs(const Graph& graph, int64_t max_elements = int64_t{1} << 16) {
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || !v->type.shape) continue;
    const auto& dims = *v->type.shape;
    int64_t elements = 1;
    for (size_t i = 1; i < dims.size(); ++i) {
      const int64_t n = dims[i].isKnown() ? dims[i].value : 1;
      if (n > max_elements) return false;
      elements *= std::max<int64_t>(n, 1);
      if (elements > max_elements) return false;
    }
  }
  return true;
}

}  // namespace qforge::fuzz
