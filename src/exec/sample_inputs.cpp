#include "exec/sample_inputs.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "core/resource_limits.h"

namespace qforge {

namespace {

std::string declaredText(const Value& v) {
  std::string text = "[";
  for (size_t i = 0; i < v.type.shape->size(); ++i) {
    const Dim& d = (*v.type.shape)[i];
    text += (i ? "," : "") + (d.isKnown() ? std::to_string(d.value) : std::string("?"));
  }
  return text + "]";
}

// `batch` followed by the given sample dims, checked against what the model declares.
std::vector<int64_t> givenShape(const Value& v, int64_t batch, const std::vector<int64_t>& dims) {
  const std::string what = "--shape " + v.name();
  const size_t rank = v.type.shape->size();
  require(dims.size() + 1 == rank, what + ": the model declares the input as " + declaredText(v) +
                                       ", so give its " + std::to_string(rank - 1) +
                                       " dims after the batch, e.g. " + v.name() + "=3x224x224");
  std::vector<int64_t> shape = {batch};
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = (*v.type.shape)[i + 1];
    require(dims[i] > 0, what + ": dims must be positive");
    require(!d.isKnown() || d.value == dims[i], what + ": dim " + std::to_string(i + 1) + " is " +
                                                    std::to_string(dims[i]) +
                                                    " but the model declares " + declaredText(v));
    shape.push_back(dims[i]);
  }
  return shape;
}

}  // namespace

std::vector<OpenInput> inputsWithOpenDims(const Graph& graph) {
  std::vector<OpenInput> open;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || !v->type.shape.has_value()) continue;
    for (size_t i = 1; i < v->type.shape->size(); ++i) {
      if (!(*v->type.shape)[i].isKnown()) {
        open.push_back({v->name(), declaredText(*v)});
        break;
      }
    }
  }
  return open;
}

TensorMap sampleInputs(const Graph& graph, int64_t batch, bool override_batch, uint64_t seed,
                       int64_t open_dim, const SampleShapes& sample_shapes) {
  for (const auto& [name, dims] : sample_shapes) {
    const Value* v = graph.findValue(name);
    require(v != nullptr && graph.isGraphInput(v) && !v->isInitializer(),
            "--shape names '" + name + "', which is not an input of the model");
  }
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  TensorMap feeds;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer()) continue;
    require(v->type.shape.has_value(), "input '" + v->name() + "' has no declared shape; qforge " +
                                           "cannot make a sample for it");
    std::vector<int64_t> shape;
    const auto given = sample_shapes.find(v->name());
    if (given != sample_shapes.end()) {
      shape = givenShape(*v, batch, given->second);
    } else {
      for (size_t i = 0; i < v->type.shape->size(); ++i) {
        const Dim& d = (*v->type.shape)[i];
        if (i == 0 && (!d.isKnown() || override_batch)) {
          shape.push_back(batch);
        } else {
          shape.push_back(d.isKnown() ? d.value : open_dim);
        }
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
