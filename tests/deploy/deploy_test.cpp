// deployPreparedModel: constraint checks before any file is written, the standard ONNX forms,
// the backend's format, and a manifest that names each quantizer's integer tensor.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "deploy/deploy.h"
#include "deploy/openvino_onnx.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/quant_config.h"
#include "support/onnx_builder.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

std::unique_ptr<passes::PreparedModel> calibrated(const nlohmann::json& patch) {
  auto m = passes::prepare(convReluConv(), tinyBackend(patch));
  calibrateOn(*m, at::randn({2, 2, 5, 5}));
  return m;
}

deploy::WriterRegistry builtinWriters() {
  deploy::WriterRegistry w;
  deploy::registerBuiltinWriters(w);
  return w;
}

const nlohmann::json kIntegerPlacement = {
    {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
    {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}};

TEST(Deploy, WritesBothOnnxFormsAndAManifestOfTensorsAndIntegerValues) {
  auto m = calibrated(kIntegerPlacement);
  const std::string dir = makeTempDir("deploy");
  const deploy::DeployResult r = deploy::deployPreparedModel(*m, dir, builtinWriters());
  for (const char* f : {"model.qdq.onnx", "model.qoperator.onnx", "deploy.json"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  EXPECT_EQ(r.files.back(), dir + "/deploy.json");
  const nlohmann::json manifest = deploy::readDeployManifest(dir);
  EXPECT_EQ(manifest["backend"], "Tiny");
  EXPECT_EQ(manifest["tensors"].size(), m->points().size());
  EXPECT_EQ(manifest["qoperator"]["integer_ops"]["QLinearConv"], 2);
  // Every quantizer's integer tensor exists in the QDQ model, as a QuantizeLinear output.
  const Graph qdq = importOnnxFile(dir + "/model.qdq.onnx");
  ASSERT_FALSE(manifest["quantized_values"].empty());
  for (const auto& [quantizer, value] : manifest["quantized_values"].items()) {
    const Value* v = qdq.findValue(value.get<std::string>());
    ASSERT_NE(v, nullptr) << quantizer;
    EXPECT_EQ(v->producer()->opType(), "QuantizeLinear") << quantizer;
    EXPECT_NE(m->quantizer(quantizer), nullptr) << quantizer;
  }
}

TEST(Deploy, ManifestSaysHowEachUnitRunsInTheQOperatorModel) {
  // Inputs-only placement: conv1 feeds a quantized input, conv2 writes the float output.
  auto m = calibrated(nlohmann::json::object());
  const std::string dir = makeTempDir("deploy_units");
  deploy::deployPreparedModel(*m, dir, builtinWriters());
  const nlohmann::json units = deploy::readDeployManifest(dir)["qoperator"]["units"];
  ASSERT_EQ(units.size(), m->units().size());
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0]["unit"], "conv1");
  EXPECT_EQ(units[0]["kernel"], "QLinearConv");
  EXPECT_FALSE(units[0].contains("why"));
  EXPECT_EQ(units[1]["unit"], "conv2");
  EXPECT_TRUE(units[1]["kernel"].is_null());
  const std::string why = units[1]["why"].get<std::string>();
  EXPECT_NE(why.find("no QLinearConv"), std::string::npos) << why;
  EXPECT_NE(why.find("QuantizeLinear"), std::string::npos) << why;
}

TEST(Deploy, EveryOnnxFileItWritesPassesOnnxsChecker) {
  auto m = calibrated(kIntegerPlacement);
  const std::string dir = makeTempDir("deploy_checker");
  deploy::deployPreparedModel(*m, dir, builtinWriters());
  exportOnnxFile(deploy::toOpenVinoGraph(deploy::buildDeployModel(*m)),
                 dir + "/model.openvino.onnx");
  for (const char* f : {"model.qdq.onnx", "model.qoperator.onnx", "model.openvino.onnx"}) {
    onnx::ModelProto proto;
    std::ifstream in(dir + "/" + f, std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&in)) << f;
    EXPECT_NO_THROW(onnx::checker::check_model(proto)) << f;
    EXPECT_GE(proto.opset_import_size(), 1) << f;
  }
}

TEST(Deploy, AConstraintViolationNamesTheTensorAndWritesNothing) {
  // A zero-point-0 backend (TensorRT-like) whose user config made activations asymmetric.
  const backends::BackendConfig strict =
      tinyBackend({{"name", "Strict"},
                   {"activation", {{"symmetric", true}, {"unsigned", false}}},
                   {"constraints", {{"zero_point_zero", true}}}});
  passes::PrepareOptions options;
  options.config = passes::parseQuantConfig(
      {{"activation", {{"symmetric", false}, {"unsigned", true}}}}, "config");
  auto m = passes::prepare(convReluConv(), strict, options);
  calibrateOn(*m, at::randn({2, 2, 5, 5}));
  const deploy::QuantTable table = deploy::buildDeployModel(*m).table;
  const deploy::TensorEncoding* asym = nullptr;
  for (const auto& e : table.tensors) {
    if (e.zero_point.front() != 0 && asym == nullptr) asym = &e;
  }
  ASSERT_NE(asym, nullptr) << "the test needs an asymmetric tensor";

  const std::string dir = makeTempDir("deploy_strict");
  std::string message;
  try {
    deploy::deployPreparedModel(*m, dir, builtinWriters());
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("tensor '" + asym->tensor + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("Strict needs zero point 0"), std::string::npos) << message;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "files were written before the check";
}

TEST(Deploy, TheLogGridGetsAQdqModelButNoQOperatorOne) {
  auto m = calibrated({{"activation", {{"fake_quantizer", "NNIE"}, {"observer", "MinMax"}}}});
  const std::string dir = makeTempDir("deploy_nnie");
  const deploy::DeployResult r = deploy::deployPreparedModel(*m, dir, builtinWriters());
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.qdq.onnx"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.qoperator.onnx"));
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.front().find("no model.qoperator.onnx"), std::string::npos) << r.notes.front();
}

}  // namespace
}  // namespace qforge::testing
