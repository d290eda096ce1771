#include "pipelines/verify_pipeline.h"

#include <algorithm>

#include "algos/model_feeds.h"
#include "core/error.h"
#include "data/loader.h"
#include "exec/ort_emulation.h"
#include "passes/prepared_io.h"
#include "pipelines/progress.h"

namespace qforge::pipelines {

namespace {

// Samples per streamed step: `batch`, cut so that one step's inputs stay within 4 MiB (the
// activations of every path scale with it), in whole multiples of a fixed batch dim.
int64_t boundedBatch(const Graph& graph, data::Dataset& dataset, int64_t batch) {
  constexpr int64_t kStepBytes = 4 << 20;
  const data::Sample first = dataset.get(0);
  int64_t bytes = first.input.defined() ? first.input.numel() * 4 : 0;
  for (const auto& [name, t] : first.inputs)
    bytes += t.numel() * static_cast<int64_t>(t.element_size());
  int64_t fixed = std::max<int64_t>(algos::fixedBatch(graph), 1);
  // Samples of an input's whole shape (no batch axis) are one run each: no multiple to keep.
  for (const data::InputSpec& in : algos::modelInputs(graph)) {
    const auto it = first.inputs.find(in.name);
    if (data::hasWholeShape(in, it != first.inputs.end() ? it->second : first.input, fixed))
      fixed = 1;
  }
  const int64_t fits = std::max<int64_t>(1, kStepBytes / std::max<int64_t>(bytes, 1));
  return std::max(fixed, std::min(batch, fits) / fixed * fixed);
}

}  // namespace

VerifyPipelineResult runVerify(const VerifyPipelineOptions& o) {
  require(o.batch > 0, "--batch must be positive");
  require(o.limit >= 0, "--limit must be 0 (all) or a number of samples");
  auto model = passes::loadPreparedModel(o.prepared.empty() ? o.dir : o.prepared);
  auto dataset = openSource(o.data, model->graph());
  data::BatchLoader loader(
      dataset,
      loaderOptionsFor(model->graph(), boundedBatch(model->graph(), *dataset, o.batch), o.limit));
  const auto start = Clock::now();
  verify::VerifyOptions options = o.verify;
  if (!options.emulation) options.emulation = &ortEmulationRegistry();
  VerifyPipelineResult result;
  result.report = verify::verifyDeployment(*model, o.dir, loader, options);
  result.json = verify::toJson(result.report);
  result.json["data"] = dataset->describe();
  result.json["seconds"] = secondsSince(start);
  return result;
}

}  // namespace qforge::pipelines
