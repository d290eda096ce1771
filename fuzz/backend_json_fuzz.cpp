// A backend file (`--backend my_chip.json`): loadBackend reads it, resolves its "extends" chain
// and checks every key; a backend that parses then prepares, calibrates and runs a small model.
#include <cstddef>
#include <cstdint>

#include "backends/backend_config.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string path = fuzz::writeScratch("backend.json", fuzz::text(data, size));
  return fuzz::refusalsOnly([&] {
    const backends::BackendConfig backend = backends::loadBackend(path);
    for (const auto& f : backend.fusions)
      (void)f.str();
    fuzz::prepareAndRun(backend, passes::QuantConfig{});
  });
}
