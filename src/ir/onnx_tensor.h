// Conversion between onnx::TensorProto and ATen tensors, including external data.
#pragma once

#include <ATen/core/Tensor.h>
#include <onnx/onnx_pb.h>

#include <string>

namespace qforge {

// Loads `proto` into a new contiguous tensor. External data is read relative to `base_dir`; a
// location that is absolute or escapes `base_dir` is refused. `what` names the tensor in errors.
at::Tensor tensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir,
                           const std::string& what);

// Fills `proto` (dims, data_type, raw_data) from `tensor`; `name` is left to the caller.
void tensorToProto(const at::Tensor& tensor, onnx::TensorProto* proto);

// Reads a serialized TensorProto file (.pb), as ONNX's test data stores inputs and outputs.
at::Tensor readTensorProtoFile(const std::string& path);

}  // namespace qforge
