// A quantization config (`--config`), JSON or YAML: the first byte picks the syntax (even: JSON,
// odd: YAML), the rest is the file. A config that parses is matched against a small model and
// used to prepare, calibrate and run it on the TensorRT backend.
#include <cstddef>
#include <cstdint>

#include "backends/backend_config.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"
#include "passes/quant_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  if (size < 1) return 0;
  const bool yaml = data[0] % 2 == 1;
  const std::string path =
      fuzz::writeScratch(yaml ? "config.yaml" : "config.json", fuzz::text(data + 1, size - 1));
  return fuzz::refusalsOnly([&] {
    const passes::QuantConfig config = passes::loadQuantConfig(path);
    passes::checkOverridesMatch(config, fuzz::tinyModel());
    static const backends::BackendConfig backend = backends::loadBackend("tensorrt");
    fuzz::prepareAndRun(backend, config);
  });
}
