#include "algos/calibrate.h"

#include <chrono>

#include "algos/calibration_sync.h"
#include "algos/distributed.h"
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

namespace {

std::vector<quant::Observer*> observersOf(passes::PreparedModel& model) {
  std::vector<quant::Observer*> observers;
  for (quant::FakeQuantizer* q : model.quantizers()) {
    if (q->observer() != nullptr) observers.push_back(q->observer());
  }
  return observers;
}

// Runs this rank's batches of `planned`, round by round; returns {batches, samples} over all ranks.
std::pair<int64_t, int64_t> runRounds(passes::PreparedModel& model, data::BatchLoader& loader,
                                      int64_t planned, const CalibrationProgress& progress,
                                      ProcessGroup* group) {
  const int world = group ? group->worldSize() : 1;
  const int rank = group ? group->rank() : 0;
  const int64_t fixed_batch = fixedBatch(model.graph());
  const std::vector<quant::Observer*> observers = observersOf(model);
  const bool parallel = world > 1;
  if (parallel) holdObservations(observers, true);
  int64_t batches = 0, samples = 0;
  loader.skip(rank);
  for (int64_t first = 0; first < planned; first += world) {
    int64_t round_samples = 0;
    if (first + rank < planned) {
      if (auto batch = loader.next()) {
        runInBatches(model.executor(), feedsOf(*batch, model.graph()), {}, fixed_batch);
        round_samples = static_cast<int64_t>(batch->indices.size());
      }
      loader.skip(world - 1);
    }
    if (parallel) {
      foldObservationsOfAllRanks(group, observers);
      const at::Tensor counts = at::tensor(
          {round_samples > 0 ? 1.0 : 0.0, static_cast<double>(round_samples)}, at::kDouble);
      group->allReduceSum({counts});
      batches += static_cast<int64_t>(counts[0].item<double>());
      samples += static_cast<int64_t>(counts[1].item<double>());
    } else {
      if (round_samples == 0) break;
      ++batches;
      samples += round_samples;
    }
    if (progress) progress(batches, planned, samples);
  }
  if (parallel) holdObservations(observers, false);
  return {batches, samples};
}

}  // namespace

CalibrationResult calibrate(passes::PreparedModel& model, data::BatchLoader& loader,
                            int64_t batches, const CalibrationProgress& progress,
                            ProcessGroup* group) {
  require(batches > 0, "calibration needs at least one batch");
  const auto start = std::chrono::steady_clock::now();
  model.setMode(quant::FakeQuantMode::Calibration);
  CalibrationResult result;
  const int64_t planned = std::min(batches, loader.batches());
  std::tie(result.batches, result.samples) = runRounds(model, loader, planned, progress, group);
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
