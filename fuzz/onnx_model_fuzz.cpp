// An ONNX model file, as `qforge inspect --json --dump` reads it: load and import (ONNX shape
// inference and qforge's verifier run inside), the verifier again on the result, the inspect
// report serialized as the CLI prints it, and the graph dump.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "ir/dump.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "pipelines/inspect_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string path = fuzz::writeScratch("model.onnx", fuzz::text(data, size));
  return fuzz::refusalsOnly([&] {
    Graph graph = importOnnxFile(path);
    verifyGraph(graph);
    const nlohmann::json report = pipelines::inspectReport(graph, path);
    (void)report.dump(2);
    (void)dumpGraph(graph);
  });
}
