// Where the tests find onnxruntime-node: $QFORGE_ORT_DIR, else the build tree's ort/ (installed
// by scripts/install-ort.sh).
#pragma once

#include <cstdlib>
#include <string>

namespace qforge::testing {

inline std::string testOrtDir() {
  const char* dir = std::getenv("QFORGE_ORT_DIR");
  return dir && *dir ? dir : std::string(QFORGE_BINARY_DIR) + "/ort";
}

// The environment assignment that points a CLI run (runCli's `env`) at that directory.
inline std::string ortEnv() {
  return "QFORGE_ORT_DIR=" + testOrtDir();
}

}  // namespace qforge::testing
