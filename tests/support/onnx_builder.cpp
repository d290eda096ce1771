#include "support/onnx_builder.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "ir/onnx_tensor.h"

namespace qforge::testing {

namespace {
void setType(onnx::ValueInfoProto* info, int32_t elem_type, const std::vector<int64_t>& shape) {
  auto* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  t->mutable_shape();  // present even for a scalar: rank 0, not an unknown rank
  for (int64_t d : shape) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d >= 0) {
      dim->set_dim_value(d);
    } else {
      dim->set_dim_param("N");
    }
  }
}
}  // namespace

OnnxBuilder::OnnxBuilder(int64_t opset) {
  model_.set_ir_version(8);
  model_.set_producer_name("qforge-tests");
  auto* op = model_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model_.mutable_graph()->set_name("test");
}

OnnxBuilder& OnnxBuilder::input(const std::string& name, int32_t elem_type,
                                const std::vector<int64_t>& shape) {
  auto* in = model_.mutable_graph()->add_input();
  in->set_name(name);
  setType(in, elem_type, shape);
  return *this;
}

OnnxBuilder& OnnxBuilder::output(const std::string& name, int32_t elem_type,
                                 const std::vector<int64_t>& shape) {
  auto* out = model_.mutable_graph()->add_output();
  out->set_name(name);
  setType(out, elem_type, shape);
  return *this;
}

OnnxBuilder& OnnxBuilder::initializer(const std::string& name, const at::Tensor& value) {
  auto* t = model_.mutable_graph()->add_initializer();
  tensorToProto(value, t);
  t->set_name(name);
  return *this;
}

onnx::NodeProto& OnnxBuilder::node(const std::string& op_type,
                                   const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs,
                                   const std::string& name) {
  auto* n = model_.mutable_graph()->add_node();
  n->set_op_type(op_type);
  if (!name.empty()) n->set_name(name);
  for (const auto& i : inputs)
    n->add_input(i);
  for (const auto& o : outputs)
    n->add_output(o);
  return *n;
}

void OnnxBuilder::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary);
  const std::string b = bytes();
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

void addGraphAttribute(onnx::NodeProto& node, const std::string& name,
                       const onnx::GraphProto& body) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
}

void addIntAttribute(onnx::NodeProto& node, const std::string& name, int64_t value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void addFloatAttribute(onnx::NodeProto& node, const std::string& name, float value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void addStringAttribute(onnx::NodeProto& node, const std::string& name, const std::string& value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

void addIntsAttribute(onnx::NodeProto& node, const std::string& name,
                      const std::vector<int64_t>& values) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values)
    a->add_ints(v);
}

namespace {

// The directories this test process made, removed when it exits so that a ctest run does not leave
// thousands of them behind. QFORGE_KEEP_TEST_DIRS=1 keeps them for looking into a failure. Only the
// process that made them removes them: a forked child that exits must not.
class TempDirs {
 public:
  void add(const std::filesystem::path& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    const char* keep = std::getenv("QFORGE_KEEP_TEST_DIRS");
    if (::getpid() != owner_ || (keep && *keep && std::string(keep) != "0")) return;
    std::error_code ignored;
    for (const auto& dir : dirs_)
      std::filesystem::remove_all(dir, ignored);
  }

 private:
  const pid_t owner_ = ::getpid();
  std::mutex mutex_;
  std::vector<std::filesystem::path> dirs_;
};

TempDirs& tempDirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string makeTempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  namespace fs = std::filesystem;
  TempDirs& registry = tempDirs();  // constructed first, so destroyed after anything using a dir
  fs::path dir =
      fs::temp_directory_path() /
      ("qforge-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  registry.add(dir);
  return dir.string();
}

}  // namespace qforge::testing
