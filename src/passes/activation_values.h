// Which values of a graph carry activations, the only values a fake quantizer may see: a float
// element type, and computed from a runtime graph input through more than a shape query. Integer
// and boolean tensors (token ids, masks, indices) and the values of shape subgraphs (Shape ->
// Gather -> Unsqueeze -> Concat -> Reshape's shape, Cast of a size to float, ConstantOfShape,
// Range) are never quantized, whatever the backend's op roles say.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/graph.h"

namespace qforge::passes {

// True for the floating-point element types (float32/16/64, bfloat16).
bool isFloatType(DType dtype);

class ActivationValues {
 public:
  // Element types come from the values' declared types (ONNX shape inference, value_info,
  // initializers); where some are missing, from one run on sample inputs (passes/sample_run.h).
  // A type neither gives counts as float: the value is then judged by where it comes from alone.
  explicit ActivationValues(const Graph& graph);

  // Float, and derived from a runtime graph input other than through Shape/Size only.
  bool carriesActivations(const Value* v) const;
  // The element type as far as it is known (Undefined when neither source gave it).
  DType dtypeOf(const Value* v) const;
  // Why some types are unknown: the sample run's failure, "" when it ran or was not needed.
  const std::string& sampleRunFailure() const { return sample_failure_; }

 private:
  void findDataValues(const Graph& graph);
  void findTypes(const Graph& graph);

  std::unordered_set<const Value*> data_;  // derived from a runtime input's values
  std::unordered_map<const Value*, DType> sampled_;
  std::string sample_failure_;
};

}  // namespace qforge::passes
