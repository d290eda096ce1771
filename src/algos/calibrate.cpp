#include "algos/calibrate.h"

#include <chrono>

#include "algos/model_feeds.h"
#include "core/error.h"
#include "core/strings.h"

namespace qforge::algos {

const Value& dataInput(const Graph& graph) {
  std::vector<const Value*> inputs;
  for (const Value* v : graph.inputs()) {
    if (!v->isInitializer()) inputs.push_back(v);
  }
  require(!inputs.empty(), "the model has no inputs to feed data to");
  if (inputs.size() > 1) {
    std::vector<std::string> names;
    for (const Value* v : inputs)
      names.push_back(v->name());
    throw Error("qforge feeds data to one input, the model has " + std::to_string(inputs.size()) +
                ": " + join(names));
  }
  return *inputs.front();
}

void requireCalibrated(passes::PreparedModel& model, const std::string& purpose) {
  for (quant::FakeQuantizer* q : model.quantizers()) {
    if (!q->affine()) continue;
    try {
      q->qparams();
    } catch (const Error&) {
      throw Error(purpose + " needs a calibrated model: quantizer '" + q->name() +
                  "' has no parameters yet; run calibration first");
    }
  }
}

CalibrationResult calibrate(passes::PreparedModel& model, data::BatchLoader& loader,
                            int64_t batches, const CalibrationProgress& progress) {
  require(batches > 0, "calibration needs at least one batch");
  const auto start = std::chrono::steady_clock::now();
  const int64_t fixed_batch = fixedBatch(model.graph());
  Executor& executor = model.executor();
  model.setMode(quant::FakeQuantMode::Calibration);
  CalibrationResult result;
  const int64_t planned = std::min(batches, loader.batches());
  while (result.batches < batches) {
    auto batch = loader.next();
    if (!batch) break;
    runInBatches(executor, feedsOf(*batch, model.graph()), {}, fixed_batch);
    ++result.batches;
    result.samples += static_cast<int64_t>(batch->indices.size());
    if (progress) progress(result.batches, planned, result.samples);
  }
  require(result.batches > 0,
          "calibration data " + loader.dataset().describe() + " yielded no batch");
  std::vector<std::string> unreached, empty;
  for (quant::FakeQuantizer* q : model.quantizers()) {
    const quant::Observer* o = q->observer();
    if (o == nullptr || o->hasData()) continue;
    (o->emptyTensors() > 0 ? empty : unreached).push_back(q->name());
  }
  require(empty.empty(), "these quantizers saw only empty tensors in " +
                             std::to_string(result.batches) +
                             " calibration batches: " + join(empty) +
                             " (a detector that found nothing above its score threshold?); "
                             "calibrate on data where they carry values");
  require(unreached.empty(), "calibration never reached these quantizers: " + join(unreached) +
                                 "; they are not on the path from the input to the outputs");
  model.setMode(quant::FakeQuantMode::Quantization);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace qforge::algos
