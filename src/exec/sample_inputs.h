// Deterministic inputs shaped after a graph's declared inputs, for smoke runs and benchmarks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace qforge {

// Input name -> the dims of one sample (all but the batch), for inputs with open dims.
using SampleShapes = std::map<std::string, std::vector<int64_t>>;

// One tensor per runtime graph input (initializers excluded). Symbolic or unknown leading dims
// become `batch`, other unknown dims `open_dim`; a known leading dim is replaced by `batch` when
// `override_batch`. An input named in `sample_shapes` takes those dims after the batch instead;
// they must agree with every dim the model declares. Floats are standard normal, integers zero,
// from a generator seeded by `seed`.
TensorMap sampleInputs(const Graph& graph, int64_t batch, bool override_batch, uint64_t seed,
                       int64_t open_dim = 1, const SampleShapes& sample_shapes = {});

// A runtime input with a dim other than the leading one unknown, and its declared shape as
// "[?,3,?,?]".
struct OpenInput {
  std::string name;
  std::string declared;
};
std::vector<OpenInput> inputsWithOpenDims(const Graph& graph);

}  // namespace qforge
