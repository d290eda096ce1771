// Issue #18's per-op proof: for each op the corpus models use between quantizers, a tiny graph
// (Conv -> op -> Conv, or two Convs into a binary op) quantized for TensorRT (quantizers on unit
// inputs) and ONNXRuntime (on op outputs), written as QDQ ONNX and run by ONNX Runtime on
// synthetic data. ORT's outputs must equal qforge's emulation of the graph ORT optimized the file
// into, bit for bit, and the simulation (the prepared model) within one step on every element.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "support/cli_json.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int64_t kChannels = 8;

struct OpCase {
  std::string name;
  int64_t opset = 13;
  bool two_inputs = false;  // the op reads two Conv outputs, "a" and "b"
  int64_t out_channels = kChannels;
  // Adds the op (and its constants) reading "a" (and "b") and writing "m".
  std::function<void(OnnxBuilder&)> add;
};

void addConv(OnnxBuilder& b, const std::string& name, const std::string& x, const std::string& y,
             int64_t in_channels, int64_t kernel) {
  b.initializer(name + "_w", at::randn({kChannels, in_channels, kernel, kernel}) * 0.3);
  b.initializer(name + "_b", at::randn({kChannels}) * 0.1);
  addIntsAttribute(b.node("Conv", {x, name + "_w", name + "_b"}, {y}), "pads",
                   std::vector<int64_t>(4, kernel / 2));
}

std::string buildModel(const OpCase& c) {
  at::manual_seed(0);
  OnnxBuilder b(c.opset);
  b.input("x", kFloat, {-1, kChannels, 12, 12}).output("y", kFloat, {});
  addConv(b, "c1", "x", "a", kChannels, 3);
  if (c.two_inputs) addConv(b, "c2", "x", "b", kChannels, 3);
  c.add(b);
  addConv(b, "c3", "m", "y", c.out_channels, 3);
  const std::string path = makeTempDir("qdq-op-" + c.name) + "/model.onnx";
  b.save(path);
  return path;
}

std::vector<OpCase> opCases() {
  auto unary = [](const std::string& op) {
    return [op](OnnxBuilder& b) { b.node(op, {"a"}, {"m"}); };
  };
  auto binary = [](const std::string& op) {
    return [op](OnnxBuilder& b) { b.node(op, {"a", "b"}, {"m"}); };
  };
  auto resize = [](const std::string& mode) {
    return [mode](OnnxBuilder& b) {
      b.initializer("scales", at::tensor({1.0f, 1.0f, 2.0f, 2.0f}));
      addStringAttribute(b.node("Resize", {"a", "", "scales"}, {"m"}), "mode", mode);
    };
  };
  return {
      {"Relu", 13, false, kChannels, unary("Relu")},
      {"Sigmoid", 13, false, kChannels, unary("Sigmoid")},
      {"HardSwish", 14, false, kChannels, unary("HardSwish")},
      {"Clip", 13, false, kChannels,
       [](OnnxBuilder& b) {
         b.initializer("low", at::scalar_tensor(0.0f)).initializer("high", at::scalar_tensor(6.0f));
         b.node("Clip", {"a", "low", "high"}, {"m"});
       }},
      {"HardSigmoid", 13, false, kChannels,
       [](OnnxBuilder& b) {
         onnx::NodeProto& n = b.node("HardSigmoid", {"a"}, {"m"});
         addFloatAttribute(n, "alpha", 1.0f / 6);
         addFloatAttribute(n, "beta", 0.5f);
       }},
      {"LeakyRelu", 13, false, kChannels,
       [](OnnxBuilder& b) { addFloatAttribute(b.node("LeakyRelu", {"a"}, {"m"}), "alpha", 0.1f); }},
      {"Softmax", 13, false, kChannels,
       [](OnnxBuilder& b) { addIntAttribute(b.node("Softmax", {"a"}, {"m"}), "axis", 1); }},
      {"Add", 13, true, kChannels, binary("Add")},
      {"Mul", 13, true, kChannels, binary("Mul")},
      {"Max", 13, true, kChannels, binary("Max")},
      {"Concat", 13, true, 2 * kChannels,
       [](OnnxBuilder& b) {
         addIntAttribute(b.node("Concat", {"a", "b"}, {"m"}), "axis", 1);
       }},
      {"MaxPool", 13, false, kChannels,
       [](OnnxBuilder& b) {
         onnx::NodeProto& n = b.node("MaxPool", {"a"}, {"m"});
         addIntsAttribute(n, "kernel_shape", {2, 2});
         addIntsAttribute(n, "strides", {2, 2});
       }},
      {"AveragePool", 13, false, kChannels,
       [](OnnxBuilder& b) {
         onnx::NodeProto& n = b.node("AveragePool", {"a"}, {"m"});
         addIntsAttribute(n, "kernel_shape", {3, 3});
         addIntsAttribute(n, "strides", {2, 2});
         addIntsAttribute(n, "pads", {1, 1, 1, 1});
       }},
      {"GlobalAveragePool", 13, false, kChannels, unary("GlobalAveragePool")},
      {"ResizeLinear", 13, false, kChannels, resize("linear")},
      {"ResizeNearest", 13, false, kChannels, resize("nearest")},
      {"ConvTranspose", 13, false, kChannels,
       [](OnnxBuilder& b) {
         b.initializer("up_w", at::randn({kChannels, kChannels, 2, 2}) * 0.3);
         addIntsAttribute(b.node("ConvTranspose", {"a", "up_w"}, {"m"}), "strides", {2, 2});
       }},
      {"TransposeReshape", 13, false, kChannels,
       [](OnnxBuilder& b) {
         b.initializer("shape", at::tensor({int64_t{0}, kChannels, int64_t{12}, int64_t{12}}));
         addIntsAttribute(b.node("Transpose", {"a"}, {"t"}), "perm", {0, 1, 3, 2});
         b.node("Reshape", {"t", "shape"}, {"m"});
       }},
  };
}

class QdqOpVerify : public ::testing::TestWithParam<std::tuple<size_t, std::string>> {};

TEST_P(QdqOpVerify, OrtEqualsTheEmulationAndTheSimulationWithinOneStep) {
  const OpCase c = opCases().at(std::get<0>(GetParam()));
  const std::string backend = std::get<1>(GetParam());
  const std::string model = buildModel(c);
  const std::string out = makeTempDir("qdq-op-out") + "/" + backend;
  const CliResult q =
      runCli("quantize " + model + " --backend " + backend +
             " --calib random:normal,count=16 --calib-batches 2 --calib-batch 8 --out " + out +
             " --quiet");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const CliResult v =
      runCli("verify " + out + " --data random:normal,count=16,seed=7 --limit 16 --quiet --json",
             ortEnv());
  ASSERT_EQ(v.exit_code, 0) << v.out;
  const nlohmann::json report = jsonOf(v);
  const nlohmann::json* simulation = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(simulation, nullptr) << report.dump(2);
  EXPECT_EQ((*simulation)["within_one_step_fraction"].get<double>(), 1.0) << simulation->dump(2);
  const nlohmann::json* emulation = verifyComparison(report, "qdq", "emulation");
  if (c.name == "MaxPool" && backend == "ONNXRuntime") {
    // ORT runs this MaxPool as com.microsoft NhwcMaxPool on uint8, which the emulation does not
    // restate, and the backend writes no QOperator model to stand in: verify says so, and the
    // simulation above is the reference.
    EXPECT_EQ(emulation, nullptr);
    EXPECT_NE(report["notes"].dump().find("NhwcMaxPool"), std::string::npos) << report["notes"];
    return;
  }
  ASSERT_NE(emulation, nullptr) << report["notes"].dump(2);
  EXPECT_EQ((*emulation)["exact_fraction"].get<double>(), 1.0) << emulation->dump(2);
}

INSTANTIATE_TEST_SUITE_P(CorpusOps, QdqOpVerify,
                         ::testing::Combine(::testing::Range(size_t{0}, opCases().size()),
                                            ::testing::Values(std::string("TensorRT"),
                                                              std::string("ONNXRuntime"))),
                         [](const ::testing::TestParamInfo<QdqOpVerify::ParamType>& info) {
                           return opCases().at(std::get<0>(info.param)).name + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace qforge::testing
