// The emulation's com.microsoft.nchwc ops against ONNX Runtime itself: a float model of pools
// whose channels fill whole blocks, which ORT's layout transformer moves into NCHWc tensors; the
// graph ORT optimized it into, run on the emulation's kernels, equals ORT bit for bit, while the
// built-in pooling (ATen's) rounds the averages otherwise. And what a blocked op the emulation
// cannot take says.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/data_test_files.h"
#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

int64_t countDomain(const onnx::ModelProto& m, const std::string& domain) {
  int64_t n = 0;
  for (const onnx::NodeProto& node : m.graph().node())
    n += node.domain() == domain ? 1 : 0;
  return n;
}

TEST(OrtNchwc, PoolsOnBlockedTensorsMatchOnnxRuntimeBitForBit) {
  at::manual_seed(40);
  const at::Tensor x = at::randn({4, 32, 15, 15}) * at::exp(at::randn({4, 32, 15, 15}) * 2);
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 32, 15, 15})
      .output("avg", kFloat, {})
      .output("max", kFloat, {})
      .output("gap", kFloat, {});
  onnx::NodeProto& avg = b.node("AveragePool", {"x"}, {"avg"});
  addIntsAttribute(avg, "kernel_shape", {3, 3});
  addIntsAttribute(avg, "strides", {2, 2});
  addIntsAttribute(avg, "pads", {1, 1, 1, 1});  // windows at the edges hold 4 or 6 elements
  onnx::NodeProto& max = b.node("MaxPool", {"x"}, {"max"});
  addIntsAttribute(max, "kernel_shape", {2, 2});
  addIntsAttribute(max, "strides", {2, 2});
  b.node("GlobalAveragePool", {"x"}, {"gap"});
  const std::string model = makeTempDir("ort-nchwc") + "/model.onnx";
  b.save(model);

  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  const verify::OrtRunner ort(options);
  onnx::ModelProto optimized = ort.optimizedModel(model);
  ASSERT_GE(countDomain(optimized, "com.microsoft.nchwc"), 4)  // reorders and the pools
      << "ORT did not move the pools into NCHWc tensors; the test needs a machine where it does";
  const TensorMap expected = ort.run(model, {{"x", x}});
  Graph g = importOnnxModel(optimized, "");
  const TensorMap emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}});
  for (const char* name : {"avg", "max", "gap"}) {
    EXPECT_TRUE(at::equal(emulated.at(name), expected.at(name)))
        << name << ": " << (emulated.at(name) - expected.at(name)).abs().max();
  }
  // ATen's average pooling (the built-in kernels on the model itself) rounds otherwise.
  Graph plain = importOnnxFile(model);
  const TensorMap builtin = Executor(plain).run({{"x", x}});
  EXPECT_FALSE(at::equal(builtin.at("gap"), expected.at("gap")));
}

TEST(OrtNchwc, AReorderOutputAskingForMoreChannelsThanItHasFailsNamingThem) {
  OnnxBuilder b;
  b.model().add_opset_import()->set_domain("com.microsoft.nchwc");
  b.model().mutable_opset_import()->rbegin()->set_version(1);
  b.input("x", kFloat, {1, 8, 3, 3}).output("y", kFloat, {});
  onnx::NodeProto& reorder = b.node("ReorderOutput", {"x"}, {"y"});
  reorder.set_domain("com.microsoft.nchwc");
  addIntAttribute(reorder, "channels", 9);
  const std::string model = makeTempDir("ort-nchwc-bad") + "/model.onnx";
  b.save(model);
  Graph g = importOnnxFile(model);
  Executor e(g, {}, ortEmulationRegistry());
  expectErrorWith(
      [&] {
        e.run({{"x", at::zeros({1, 8, 3, 3})}});
      },
      {"ReorderOutput", "channels 9 is outside the input's 8"});
}

}  // namespace
}  // namespace qforge::testing
