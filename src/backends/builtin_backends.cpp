// The built-in backends: backends/*.json embedded at build time (cmake/embed_backends.cmake).
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "core/strings.h"

namespace qforge::backends {

namespace {

struct EmbeddedFile {
  const char* stem;  // file name without .json, lower case
  const char* json;
};

const EmbeddedFile kFiles[] = {
#include "builtin_backends_data.inc"
};

// The order docs and `qforge quantize --help` list them in; any other embedded file follows.
const char* const kCanonicalOrder[] = {"Academic", "TensorRT", "TensorRT_NLP", "Academic_NLP",
                                       "SNPE",     "PPLW8A16", "PPLCUDA",      "NNIE",
                                       "Vitis",    "ONNX_QNN", "OpenVINO",     "Tengine_u8",
                                       "STPU",     "QDQ",      "ONNXRuntime",  "QNN"};

}  // namespace

std::vector<std::string> builtinBackendNames() {
  std::vector<std::string> names;
  for (const char* name : kCanonicalOrder) {
    if (builtinBackendJson(name)) names.push_back(name);
  }
  for (const EmbeddedFile& f : kFiles) {
    bool listed = false;
    for (const auto& n : names)
      listed = listed || toLower(n) == f.stem;
    if (!listed) names.push_back(f.stem);
  }
  return names;
}

const char* builtinBackendJson(const std::string& name) {
  const std::string key = toLower(name);
  for (const EmbeddedFile& f : kFiles) {
    if (key == f.stem) return f.json;
  }
  return nullptr;
}

}  // namespace qforge::backends
