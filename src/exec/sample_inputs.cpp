#include "exec/sample_inputs.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "core/resource_limits.h"

namespace qforge {

TensorMap sampleInputs(const Graph& graph, int64_t batch, bool override_batch, uint64_t seed,
                       int64_t open_dim) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  TensorMap feeds;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer()) continue;
    require(v->type.shape.has_value(), "input '" + v->name() + "' has no declared shape; qforge " +
                                           "cannot make a sample for it");
    std::vector<int64_t> shape;
    for (size_t i = 0; i < v->type.shape->size(); ++i) {
      const Dim& d = (*v->type.shape)[i];
      if (i == 0 && (!d.isKnown() || override_batch)) {
        shape.push_back(batch);
      } else {
        shape.push_back(d.isKnown() ? d.value : open_dim);
      }
    }
    const auto type = toScalarType(v->type.dtype);
    requireTensorBytes(tensorBytes(shape, static_cast<int64_t>(c10::elementSize(type))),
                       "a sample for input '" + v->name() + "'");
    if (at::isFloatingType(type)) {
      feeds[v->name()] = at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)).to(type);
    } else {
      feeds[v->name()] = at::zeros(shape, at::TensorOptions().dtype(type));
    }
  }
  return feeds;
}

}  // namespace qforge
