// Builds small onnx::ModelProto objects in code, so import tests can craft exactly the (good or
// broken) file they need.
#pragma once

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace qforge::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 13);

  OnnxBuilder& input(const std::string& name, int32_t elem_type, const std::vector<int64_t>& shape);
  OnnxBuilder& output(const std::string& name, int32_t elem_type,
                      const std::vector<int64_t>& shape);
  OnnxBuilder& initializer(const std::string& name, const at::Tensor& value);
  onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "");

  onnx::ModelProto& model() { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }
  // Writes the model to `path` (no atomic rename: tests want broken files too).
  void save(const std::string& path) const;

 private:
  onnx::ModelProto model_;
};

void addIntAttribute(onnx::NodeProto& node, const std::string& name, int64_t value);
void addFloatAttribute(onnx::NodeProto& node, const std::string& name, float value);
void addStringAttribute(onnx::NodeProto& node, const std::string& name, const std::string& value);
void addIntsAttribute(onnx::NodeProto& node, const std::string& name,
                      const std::vector<int64_t>& values);

// A control-flow body (If's branches, Loop's and Scan's body): `body` is usually another
// builder's graph, whose inputs and outputs are the body's.
void addGraphAttribute(onnx::NodeProto& node, const std::string& name,
                       const onnx::GraphProto& body);

// A fresh empty directory under the system temp dir, unique per test, removed when the test
// process exits (QFORGE_KEEP_TEST_DIRS=1 keeps it).
std::string makeTempDir(const std::string& tag);

}  // namespace qforge::testing
