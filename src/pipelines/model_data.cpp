#include "pipelines/model_data.h"

#include "algos/calibrate.h"
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
  const std::vector<int64_t> shape = sampleShape(algos::dataInput(graph));
  if (shape.size() == 3 && shape[0] > 0) options.image.channels = shape[0];
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
  const Value& input = algos::dataInput(graph);
  o.expected_shape = sampleShape(input);
  o.expected_by = "the model input '" + input.name() + "'";
  return o;
}

}  // namespace qforge::pipelines
