#include "passes/sample_run.h"

#include "core/error.h"
#include "exec/sample_inputs.h"

namespace qforge::passes {

SampleRun runOnSample(const Graph& graph, const std::vector<std::string>& wanted) {
  SampleRun out;
  if (wanted.empty()) return out;
  try {
    Executor executor(graph);
    out.values = executor.run(
        sampleInputs(graph, /*batch=*/1, /*override_batch=*/false, /*seed=*/0), wanted);
  } catch (const std::exception& e) {
    out.values.clear();
    out.failure = e.what();
  }
  return out;
}

}  // namespace qforge::passes
