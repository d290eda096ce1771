// A prepared model directory (`qforge deploy|verify|eval DIR`): prepared.json and prepared.onnx,
// given as one input split at fuzz::kPreparedSeparator (the JSON first). A model that loads runs
// quantized on a small sample input, as verify and eval do.
#include <cstddef>
#include <cstdint>

#include "exec/sample_inputs.h"
#include "fuzz/fuzz_support.h"
#include "passes/prepared_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const auto [json, onnx] = fuzz::splitAt(fuzz::text(data, size), fuzz::kPreparedSeparator);
  fuzz::writeScratch("prepared.json", json);
  fuzz::writeScratch("prepared.onnx", onnx);
  return fuzz::refusalsOnly([&] {
    std::unique_ptr<passes::PreparedModel> model =
        passes::loadPreparedModel(fuzz::scratch().path());
    if (!fuzz::smallSampleInputs(model->graph())) return;
    (void)model->executor().run(sampleInputs(model->graph(), 1, true, 0));
  });
}
