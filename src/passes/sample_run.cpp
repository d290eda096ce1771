#include "passes/sample_run.h"

#include "core/error.h"
#include "exec/sample_inputs.h"

namespace qforge::passes {

namespace {

// Whether some input leaves a dim other than the leading one open (an image's height and width).
bool hasOpenInnerDims(const Graph& graph) {
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || !v->type.shape) continue;
    for (size_t i = 1; i < v->type.shape->size(); ++i) {
      if (!(*v->type.shape)[i].isKnown()) return true;
    }
  }
  return false;
}

}  // namespace

SampleRun runOnSample(const Graph& graph, const std::vector<std::string>& wanted) {
  SampleRun out;
  if (wanted.empty()) return out;
  // Open dims are 1 first (cheapest); a network that downsamples an image of open size needs
  // more: 64, then 224 pixels. The first size that runs gives the facts (ranks and types do not
  // depend on it).
  const std::vector<int64_t> sizes =
      hasOpenInnerDims(graph) ? std::vector<int64_t>{1, 64, 224} : std::vector<int64_t>{1};
  for (const int64_t open_dim : sizes) {
    try {
      Executor executor(graph);
      out.values = executor.run(
          sampleInputs(graph, /*batch=*/1, /*override_batch=*/false, /*seed=*/0, open_dim), wanted);
      out.failure.clear();
      return out;
    } catch (const std::exception& e) {
      out.values.clear();
      if (out.failure.empty()) out.failure = e.what();
    }
  }
  return out;
}

}  // namespace qforge::passes
