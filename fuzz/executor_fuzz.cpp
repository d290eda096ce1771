// An ONNX model run on sample inputs, as `qforge run` does without data: import, build an
// Executor, run it on sampleInputs. Inputs whose declared size is above a small cap are skipped
// so the fuzzer explores the executor's logic rather than the allocator (run-time tensor sizes are
// the resource limits' business, src/exec/executor.cpp).
#include <cstddef>
#include <cstdint>

#include "exec/executor.h"
#include "exec/sample_inputs.h"
#include "fuzz/fuzz_support.h"
#include "ir/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string path = fuzz::writeScratch("model.onnx", fuzz::text(data, size));
  return fuzz::refusalsOnly([&] {
    Graph graph = importOnnxFile(path);
    if (!fuzz::smallSampleInputs(graph)) return;
    Executor executor(graph);
    const TensorMap feeds = sampleInputs(graph, 1, /*override_batch=*/true, /*seed=*/0);
    (void)executor.run(feeds);
  });
}
