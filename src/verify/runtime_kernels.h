// The quantized ops ONNX Runtime runs as integer kernels of its own arithmetic, which the float
// simulation does not share: DequantizeLinear -> Softmax -> QuantizeLinear becomes QLinearSoftmax
// (exp from a table, a whole-number output multiplier; exec/ops/ort_qlinear_softmax.h). Verify
// compares ONNX Runtime with the simulation running those groups as ORT does, as it rounds the
// float biases ORT fuses to int32: the user's figures stay the backend's own simulation.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ir/graph.h"

namespace qforge::verify {

class RuntimeKernels {
 public:
  // The groups of the exported QDQ model `qdq` that ORT fuses and whose op sits between two fake
  // quantizers in the prepared graph `prepared` (matched by node name).
  RuntimeKernels(const Graph& prepared, const Graph& qdq);

  bool empty() const { return groups_.empty(); }
  // The fused ops by name, for notes: "Softmax '/blocks/attn/Softmax', ...".
  std::vector<std::string> names() const;
  // Makes the simulation executor compute each group's output quantizer as ORT's kernel does,
  // from the levels its input quantizer leaves (read after every other hook on it).
  void install(HookScope& hooks) const;

 private:
  struct Group {
    std::string node;          // the op's name
    std::string input_value;   // its input quantizer's output in the prepared graph
    std::string output_value;  // its output quantizer's output
    float x_scale = 1;
    int64_t x_zero_point = 0;
    float y_scale = 1;
    int64_t y_zero_point = 0;
    at::ScalarType type = at::kByte;  // both quantizers' 8-bit container
    int64_t axis = -1;
    bool flatten_from_axis = false;  // Softmax below opset 13
  };

  std::vector<Group> groups_;
  // Each group's input as its input quantizer left it in the current run.
  std::shared_ptr<std::map<std::string, at::Tensor>> inputs_ =
      std::make_shared<std::map<std::string, at::Tensor>>();
};

}  // namespace qforge::verify
