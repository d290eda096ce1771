#include "algos/model_feeds.h"

#include <ATen/ATen.h>

#include "algos/calibrate.h"
#include "core/error.h"

namespace qforge::algos {

std::vector<data::InputSpec> modelInputs(const Graph& graph) {
  std::vector<data::InputSpec> out;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer()) continue;
    data::InputSpec in;
    in.name = v->name();
    if (hasScalarType(v->type.dtype)) in.dtype = toScalarType(v->type.dtype);
    if (v->type.shape) {
      in.batched = !v->type.shape->empty();
      for (size_t i = 1; i < v->type.shape->size(); ++i) {
        const Dim& d = (*v->type.shape)[i];
        in.shape.push_back(d.isKnown() ? d.value : -1);
      }
    }
    out.push_back(in);
  }
  require(!out.empty(), "the model has no inputs to feed data to");
  return out;
}

int64_t fixedBatch(const Graph& graph) {
  int64_t fixed = 0;
  std::string by;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || !v->type.shape || v->type.shape->empty()) continue;
    const Dim& d = v->type.shape->front();
    if (!d.isKnown()) continue;
    require(fixed == 0 || fixed == d.value, "the model inputs fix different batch sizes: '" + by +
                                                "' " + std::to_string(fixed) + ", '" + v->name() +
                                                "' " + std::to_string(d.value));
    fixed = d.value;
    by = v->name();
  }
  return fixed;
}

TensorMap feedsOf(const data::Batch& batch, const Graph& graph) {
  if (!batch.feeds.empty()) return TensorMap(batch.feeds.begin(), batch.feeds.end());
  return {{dataInput(graph).name(), batch.inputs}};
}

TensorMap runInBatches(Executor& executor, const TensorMap& feeds,
                       const std::vector<std::string>& outputs, int64_t fixed_batch,
                       const TensorMap& constants) {
  int64_t rows = -1;
  for (const auto& [name, t] : feeds) {
    if (t.dim() > 0) rows = std::max(rows, t.size(0));
  }
  if (fixed_batch <= 0 || rows <= fixed_batch) {
    TensorMap all = constants;
    for (const auto& [name, t] : feeds)
      all[name] = t;
    return executor.run(all, outputs);
  }
  require(rows % fixed_batch == 0, "a batch of " + std::to_string(rows) +
                                       " rows does not split into the model's fixed batch of " +
                                       std::to_string(fixed_batch));
  std::map<std::string, std::vector<at::Tensor>> parts;
  for (int64_t begin = 0; begin < rows; begin += fixed_batch) {
    TensorMap run = constants;
    for (const auto& [name, t] : feeds)
      run[name] = t.dim() > 0 && t.size(0) == rows ? t.narrow(0, begin, fixed_batch) : t;
    for (auto& [name, t] : executor.run(run, outputs))
      parts[name].push_back(t);
  }
  TensorMap out;
  for (auto& [name, list] : parts)
    out[name] = list.front().dim() > 0 ? at::cat(list, 0) : list.front();
  return out;
}

}  // namespace qforge::algos
