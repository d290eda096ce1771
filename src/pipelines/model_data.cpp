#include "pipelines/model_data.h"

#include "algos/calibrate.h"
#include "algos/model_feeds.h"
#include "core/error.h"

namespace qforge::pipelines {

std::vector<int64_t> sampleShape(const Value& input) {
  std::vector<int64_t> shape;
  if (!input.type.shape || input.type.shape->empty()) return shape;
  for (size_t i = 1; i < input.type.shape->size(); ++i) {
    shape.push_back((*input.type.shape)[i].isKnown() ? (*input.type.shape)[i].value : -1);
  }
  return shape;
}

std::shared_ptr<data::Dataset> openDatasetFor(const std::string& spec, const Graph& graph) {
  data::DataOptions options;
  options.inputs = algos::modelInputs(graph);
  // Images take the channels of the first input that looks like one (per-input sources take
  // their own input's).
  for (const data::InputSpec& in : options.inputs) {
    if (in.shape.size() == 3 && at::isFloatingType(in.dtype)) {
      if (in.shape[0] > 0) options.image.channels = in.shape[0];
      break;
    }
  }
  return data::openDataset(spec, options);
}

std::shared_ptr<data::Dataset> openSource(const DataSource& source, const Graph& graph) {
  if (source.dataset) return source.dataset;
  require(!source.spec.empty(), "no data given: name a data source or pass an opened dataset");
  return openDatasetFor(source.spec, graph);
}

data::LoaderOptions loaderOptionsFor(const Graph& graph, int64_t batch, int64_t limit) {
  data::LoaderOptions o;
  o.batch_size = batch;
  o.limit = limit;
  o.inputs = algos::modelInputs(graph);
  const int64_t fixed = algos::fixedBatch(graph);
  if (fixed > 0) o.batch_multiple = fixed;
  return o;
}

}  // namespace qforge::pipelines
