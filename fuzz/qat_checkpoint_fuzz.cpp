// A QAT checkpoint (`qforge qat --resume`): a torch pickle read by loadQatCheckpoint. One that
// loads is resumed from as the trainer does, on a small QAT model: settings compared, weights,
// quantizer and optimizer states restored, RNG state, epoch sums and metric history read back.
#include <cstddef>
#include <cstdint>

#include "algos/qat.h"
#include "algos/qat_checkpoint.h"
#include "backends/backend_config.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string path = fuzz::writeScratch("checkpoint.pt", fuzz::text(data, size));
  return fuzz::refusalsOnly([&] {
    // Most inputs are refused here; only those that load cost a model and a trainer.
    (void)algos::loadQatCheckpoint(path);
    static const backends::BackendConfig backend = backends::loadBackend("tensorrt");
    std::unique_ptr<passes::PreparedModel> model =
        algos::prepareForQat(fuzz::tinyModel().clone(), backend);
    fuzz::calibrateOn(*model);
    algos::QatTrainer trainer(*model, fuzz::tinyQatConfig());
    trainer.resume(path);
  });
}
