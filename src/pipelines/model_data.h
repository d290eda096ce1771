// The data a pipeline feeds a model: a source the CLI names ("fashion-mnist:train", a folder, a
// .npy file) or a dataset a caller opened itself, read with the channels the model's data input
// declares and batched in its shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "ir/graph.h"

namespace qforge::pipelines {

// A dataset by source string (data::openDataset's), or one already open (which wins).
struct DataSource {
  std::string spec;
  std::shared_ptr<data::Dataset> dataset;

  DataSource() = default;
  DataSource(std::string source) : spec(std::move(source)) {}  // NOLINT: options read as strings
  DataSource(const char* source) : spec(source) {}             // NOLINT
  template <typename OpenedDataset,
            typename = std::enable_if_t<std::is_base_of_v<data::Dataset, OpenedDataset>>>
  DataSource(std::shared_ptr<OpenedDataset> opened)  // NOLINT: any dataset type
      : dataset(std::move(opened)) {}
  bool empty() const { return !dataset && spec.empty(); }
};

// The per-sample shape the model input declares (batch axis dropped, unknown dims -1).
std::vector<int64_t> sampleShape(const Value& input);

// The dataset `spec` names for the model's inputs (random:, const: and NAME=SPEC sources shaped
// by them), images read with as many channels as the model's image input declares.
std::shared_ptr<data::Dataset> openDatasetFor(const std::string& spec, const Graph& graph);

// `source`'s dataset: the opened one, else openDatasetFor(spec). Throws when it is empty.
std::shared_ptr<data::Dataset> openSource(const DataSource& source, const Graph& graph);

// Batches of `batch` samples (the first `limit`; 0 = all) for every model input, checked against
// its shape and dtype; a fixed batch dim rounds `batch` down to its multiple.
data::LoaderOptions loaderOptionsFor(const Graph& graph, int64_t batch, int64_t limit);

}  // namespace qforge::pipelines
