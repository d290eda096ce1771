// Deterministic inputs shaped after a graph's declared inputs, for smoke runs and benchmarks.
#pragma once

#include <cstdint>

#include "exec/executor.h"

namespace qforge {

// One tensor per runtime graph input (initializers excluded). Symbolic or unknown leading dims
// become `batch`, other unknown dims `open_dim`; a known leading dim is replaced by `batch` when
// `override_batch`. Floats are standard normal, integers zero, from a generator seeded by `seed`.
TensorMap sampleInputs(const Graph& graph, int64_t batch, bool override_batch, uint64_t seed,
                       int64_t open_dim = 1);

}  // namespace qforge
