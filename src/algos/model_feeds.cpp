#include "algos/model_feeds.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "algos/calibrate.h"
#include "core/error.h"

namespace qforge::algos {

namespace {

// The name the inputs give their batch dimension: the symbolic name most of them carry on axis 0
// ("batch", "N"); empty when none has one.
std::string batchDimName(const Graph& graph) {
  std::map<std::string, int> votes;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || !v->type.shape || v->type.shape->empty()) continue;
    const Dim& d = v->type.shape->front();
    if (!d.isKnown() && !d.param.empty()) ++votes[d.param];
  }
  std::string best;
  int most = 0;
  for (const auto& [name, count] : votes) {
    if (count > most) best = name, most = count;
  }
  return best;
}

}  // namespace

int64_t batchAxisOf(const Value& input, const std::string& batch_dim) {
  if (!input.type.shape || batch_dim.empty()) return 0;
  const std::vector<Dim>& dims = *input.type.shape;
  if (dims.empty() || !dims.front().isKnown()) return 0;
  for (size_t axis = 1; axis < dims.size(); ++axis) {
    if (!dims[axis].isKnown() && dims[axis].param == batch_dim) return static_cast<int64_t>(axis);
  }
  return 0;
}

std::map<std::string, int64_t> batchAxes(const Graph& graph) {
  const std::string batch_dim = batchDimName(graph);
  std::map<std::string, int64_t> axes;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer()) continue;
    const int64_t axis = batchAxisOf(*v, batch_dim);
    if (axis != 0) axes[v->name()] = axis;
  }
  return axes;
}

std::vector<data::InputSpec> modelInputs(const Graph& graph) {
  const std::string batch_dim = batchDimName(graph);
  std::vector<data::InputSpec> out;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer()) continue;
    data::InputSpec in;
    in.name = v->name();
    if (hasScalarType(v->type.dtype)) in.dtype = toScalarType(v->type.dtype);
    if (v->type.shape) {
      in.batched = !v->type.shape->empty();
      const auto batch_axis = static_cast<size_t>(batchAxisOf(*v, batch_dim));
      for (size_t i = 0; i < v->type.shape->size(); ++i) {
        if (i == batch_axis) continue;
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
  const std::string batch_dim = batchDimName(graph);
  int64_t fixed = 0;
  std::string by;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || !v->type.shape || v->type.shape->empty()) continue;
    // A recurrent state [layers, batch, hidden]: its first dim is not the batch.
    if (batchAxisOf(*v, batch_dim) != 0) continue;
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
  if (batch.feeds.empty()) return {{dataInput(graph).name(), batch.inputs}};
  TensorMap feeds(batch.feeds.begin(), batch.feeds.end());
  // Samples are stacked on axis 0; an input that takes its batch elsewhere gets it there.
  for (const auto& [name, axis] : batchAxes(graph)) {
    auto it = feeds.find(name);
    if (it != feeds.end() && it->second.dim() > axis) {
      it->second = it->second.movedim(0, axis).contiguous();
    }
  }
  return feeds;
}

int64_t rowsOf(const TensorMap& tensors) {
  int64_t rows = 0;
  for (const auto& [name, t] : tensors)
    rows = std::max<int64_t>(rows, t.dim() > 0 ? t.size(0) : 0);
  return rows;
}

int64_t batchRuns(const TensorMap& feeds, int64_t fixed_batch) {
  const int64_t rows = rowsOf(feeds);
  if (fixed_batch <= 0 || rows <= fixed_batch) return 1;
  require(rows % fixed_batch == 0, "a batch of " + std::to_string(rows) +
                                       " rows does not split into the model's fixed batch of " +
                                       std::to_string(fixed_batch));
  return rows / fixed_batch;
}

void forEachBatchRun(Executor& executor, const TensorMap& feeds,
                     const std::vector<std::string>& outputs, int64_t fixed_batch,
                     const TensorMap& constants, const BatchOutputs& each) {
  const int64_t runs = batchRuns(feeds, fixed_batch);
  if (runs == 1) {
    TensorMap all = constants;
    for (const auto& [name, t] : feeds)
      all[name] = t;
    each(0, 1, executor.run(all, outputs));
    return;
  }
  const int64_t rows = rowsOf(feeds);
  for (int64_t run_index = 0; run_index < runs; ++run_index) {
    TensorMap run = constants;
    for (const auto& [name, t] : feeds) {
      run[name] =
          t.dim() > 0 && t.size(0) == rows ? t.narrow(0, run_index * fixed_batch, fixed_batch) : t;
    }
    each(run_index, runs, executor.run(run, outputs));
  }
}

at::Tensor concatenateRuns(const std::vector<at::Tensor>& runs) {
  if (runs.size() == 1) return runs.front();
  if (runs.front().dim() > 0) return at::cat(runs, 0);
  // A scalar the runs share (computed from a rank-0 input) stands for all of them; scalars that
  // differ are one per run (a model without batch axis, run once per sample).
  const bool same = std::all_of(runs.begin(), runs.end(),
                                [&](const at::Tensor& t) { return at::equal(t, runs.front()); });
  return same ? runs.front() : at::stack(runs);
}

TensorMap runInBatches(Executor& executor, const TensorMap& feeds,
                       const std::vector<std::string>& outputs, int64_t fixed_batch,
                       const TensorMap& constants) {
  std::map<std::string, std::vector<at::Tensor>> parts;
  forEachBatchRun(executor, feeds, outputs, fixed_batch, constants,
                  [&parts](int64_t, int64_t, TensorMap&& got) {
                    for (auto& [name, t] : got)
                      parts[name].push_back(std::move(t));
                  });
  TensorMap out;
  for (auto& [name, list] : parts)
    out[name] = concatenateRuns(list);
  return out;
}

}  // namespace qforge::algos
