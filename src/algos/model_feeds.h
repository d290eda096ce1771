// What a model's runtime inputs take and how batches reach them: every non-initializer input
// as the data layer checks it (name, per-sample shape, dtype), the batch size a fixed batch dim
// imposes, and runs that split a batch into runs of that size.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "exec/executor.h"
#include "ir/graph.h"

namespace qforge::algos {

// Where `input` holds the batch: axis 0, unless its first dim is fixed and a later one carries
// `batch_dim`, the symbolic name the model's inputs give their batch (a recurrent state
// [layers, batch, hidden] next to an input [batch, time]).
int64_t batchAxisOf(const Value& input, const std::string& batch_dim);
// The runtime inputs whose batch axis is not 0, with that axis.
std::map<std::string, int64_t> batchAxes(const Graph& graph);

// The graph's inputs that are not initializers, in order: per-sample shape (batch axis dropped,
// open dims -1), dtype, and whether they have a batch axis (rank >= 1).
std::vector<data::InputSpec> modelInputs(const Graph& graph);

// The batch size the inputs fix (the known first dim of those batched on axis 0), or 0 when any
// batch size goes. Throws when two inputs fix different sizes.
int64_t fixedBatch(const Graph& graph);

// The batch's feeds by input name: batch.feeds, or its `inputs` for the model's one input.
TensorMap feedsOf(const data::Batch& batch, const Graph& graph);

// Runs `feeds` through `executor` in runs of `fixed_batch` rows (all at once when 0 or when the
// batch has that many rows), concatenating `outputs` along the batch axis. Inputs without batch
// axis, and `constants` (initializer overrides), go to every run whole. Throws when the rows are
// not a multiple of `fixed_batch`.
TensorMap runInBatches(Executor& executor, const TensorMap& feeds,
                       const std::vector<std::string>& outputs, int64_t fixed_batch,
                       const TensorMap& constants = {});

// One output of several runs as one tensor: concatenated along axis 0; scalars stacked into
// [runs], or the one value when every run gives the same (it then came from a rank-0 input).
at::Tensor concatenateRuns(const std::vector<at::Tensor>& runs);

// The largest first dimension among `tensors` (0 when none has one): the rows of a batch of feeds
// or of its outputs.
int64_t rowsOf(const TensorMap& tensors);

// How many runs runInBatches makes of `feeds` for a model whose fixed batch is `fixed_batch` (one
// when it has none, or when the feeds have no more rows than that). Throws when the rows are not
// a multiple of `fixed_batch`.
int64_t batchRuns(const TensorMap& feeds, int64_t fixed_batch);

// What runInBatches runs, handed over one run at a time instead of concatenated: `each` gets the
// run's index, how many runs there are, and its `outputs`; nothing is kept between runs.
using BatchOutputs = std::function<void(int64_t run, int64_t runs, TensorMap&& outputs)>;
void forEachBatchRun(Executor& executor, const TensorMap& feeds,
                     const std::vector<std::string>& outputs, int64_t fixed_batch,
                     const TensorMap& constants, const BatchOutputs& each);

}  // namespace qforge::algos
