// Loading backends: every built-in parses and is found by name in any case; a user's file is
// checked key by key, and its errors name the file and the key path; "extends" merges a user's
// file over a built-in or another file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "core/error.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

using backends::BackendConfig;
using backends::loadBackend;
using backends::OpRole;
using nlohmann::json;

std::string writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// The message loadBackend throws for `path`, or "" when it loads.
std::string loadError(const std::string& path) {
  try {
    loadBackend(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The smallest valid user backend: quantize Conv with the default schemes.
json minimalBackend() {
  return {{"name", "Mine"},
          {"weight", json::object()},
          {"activation", json::object()},
          {"ops", {{"Conv", "quantizable"}}}};
}

std::string transformed(std::string s, int (*f)(int)) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [f](unsigned char c) { return static_cast<char>(f(c)); });
  return s;
}

TEST(BackendConfig, EveryBuiltinParsesAndIsFoundByNameInAnyCase) {
  const std::vector<std::string> names = backends::builtinBackendNames();
  EXPECT_EQ(names.size(), 16u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    BackendConfig config;
    ASSERT_NO_THROW(config = loadBackend(name));
    EXPECT_EQ(config.name, name);
    EXPECT_FALSE(config.ops.empty());
    EXPECT_EQ(loadBackend(transformed(name, ::tolower)).name, name);
    EXPECT_EQ(loadBackend(transformed(name, ::toupper)).name, name);
  }
}

TEST(BackendConfig, BuiltinFilesAreTheOnesInTheSourceTree) {
  for (const std::string& name : backends::builtinBackendNames()) {
    const std::string path =
        std::string(QFORGE_SOURCE_DIR) + "/backends/" + transformed(name, ::tolower) + ".json";
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path;
    EXPECT_EQ(json::parse(in), json::parse(backends::builtinBackendJson(name))) << path;
  }
}

TEST(BackendConfig, UnknownNameListsTheKnownBackends) {
  std::string message;
  try {
    loadBackend("TensorRTX");
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("unknown backend 'TensorRTX'"), std::string::npos) << message;
  for (const std::string& name : backends::builtinBackendNames()) {
    EXPECT_NE(message.find(name), std::string::npos) << name << " missing from: " << message;
  }
}

TEST(BackendConfig, MinimalUserFileLoadsWithDefaults) {
  const std::string path =
      writeFile(makeTempDir("backend_minimal") + "/mine.json", minimalBackend().dump());
  const BackendConfig config = loadBackend(path);
  EXPECT_EQ(config.name, "Mine");
  ASSERT_NE(config.trait("Conv"), nullptr);
  EXPECT_EQ(config.trait("Conv")->role, OpRole::Quantizable);
  EXPECT_EQ(config.trait("Gemm"), nullptr);
  EXPECT_TRUE(config.placement.unit_inputs);
  EXPECT_FALSE(config.placement.unit_outputs);
  EXPECT_EQ(config.constraints.bias.mode, backends::BiasRule::Mode::Float);
}

struct Malformed {
  const char* label;
  json patch;                 // merged over minimalBackend()
  const char* key_path;       // must appear in the message, quoted
  const char* also_expected;  // and this
};

class MalformedBackend : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedBackend, MessageNamesTheFileAndTheKeyPath) {
  const Malformed& c = GetParam();
  json doc = minimalBackend();
  doc.merge_patch(c.patch);
  const std::string path = writeFile(makeTempDir("backend_bad") + "/bad.json", doc.dump(2));
  const std::string message = loadError(path);
  ASSERT_FALSE(message.empty()) << "loaded: " << doc.dump();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("'") + c.key_path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(c.also_expected), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    BackendConfigKeys, MalformedBackend,
    ::testing::Values(
        Malformed{"UnknownKey", {{"weight", {{"bitz", 4}}}}, "weight.bitz", "unknown key"},
        Malformed{"WrongType",
                  {{"activation", {{"bits", "eight"}}}},
                  "activation.bits",
                  "must be an integer"},
        Malformed{"BadRoleString", {{"ops", {{"Relu", "quantisable"}}}}, "ops.Relu", "quantisable"},
        Malformed{"BadRoleObject",
                  {{"ops", {{"Relu", {{"role", "sometimes"}}}}}},
                  "ops.Relu.role",
                  "sometimes"},
        Malformed{"FixedRoleAsString", {{"ops", {{"Sigmoid", "fixed"}}}}, "ops.Sigmoid", "scale"},
        Malformed{"FixedRoleWithoutScale",
                  {{"ops", {{"Sigmoid", {{"role", "fixed"}}}}}},
                  "ops.Sigmoid.scale",
                  "positive scale"},
        Malformed{"EmptyFusionStep",
                  {{"fusions", json::array({json::array({"Conv", "|Relu"})})}},
                  "fusions[0]",
                  "empty op type"},
        Malformed{"FirstFusionStepOptional",
                  {{"fusions",
                    json::array({json::array({"Conv", "Relu"}), json::array({"Conv?", "Relu"})})}},
                  "fusions[1]",
                  "cannot be optional"},
        Malformed{"NoPlacement",
                  {{"placement", {{"unit_inputs", false}, {"unit_outputs", false}}}},
                  "placement.unit_inputs",
                  "inputs, outputs, or both"},
        Malformed{
            "ZeroPointZeroWithAsymmetricActivations",
            {{"activation", {{"symmetric", false}}}, {"constraints", {{"zero_point_zero", true}}}},
            "activation.symmetric",
            "zero_point_zero"},
        Malformed{"BadBiasMode",
                  {{"constraints", {{"bias", {{"mode", "int32"}}}}}},
                  "constraints.bias.mode",
                  "int32"},
        Malformed{"UnknownTopLevelKey", {{"placment", json::object()}}, "placment", "unknown key"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.label; });

TEST(BackendConfig, SyntaxErrorNamesTheByteOffset) {
  const std::string text = "{\"name\": \"Mine\",\n \"weight\": {\"bits\": 8,}\n}";
  const std::string path = writeFile(makeTempDir("backend_syntax") + "/broken.json", text);
  // nlohmann counts bytes from 1: the '}' after the trailing comma is the first bad byte.
  const size_t bad = text.find(",}") + 1;
  const std::string message = loadError(path);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("at byte " + std::to_string(bad + 1)), std::string::npos) << message;
}

TEST(BackendConfig, ExtendsABuiltinWithOverridesAndRemovals) {
  const json doc = {{"name", "MyTensorRT"},
                    {"extends", "tensorrt"},  // built-in names in any case here too
                    {"weight", {{"bits", 4}}},
                    {"ops", {{"MatMul", nullptr}, {"Softmax", "quantizable"}}}};
  const std::string path = writeFile(makeTempDir("backend_extends") + "/mine.json", doc.dump());
  const BackendConfig base = loadBackend("TensorRT");
  const BackendConfig mine = loadBackend(path);
  EXPECT_EQ(mine.name, "MyTensorRT");
  // The overridden key changes; its siblings in "weight" stay the base's.
  EXPECT_EQ(mine.weight.scheme.bits, 4);
  EXPECT_EQ(mine.weight.scheme.axis, base.weight.scheme.axis);
  EXPECT_EQ(mine.weight.scheme.symmetric_range, base.weight.scheme.symmetric_range);
  EXPECT_EQ(mine.weight.fake_quantizer, base.weight.fake_quantizer);
  EXPECT_EQ(mine.activation.scheme.bits, 8);
  // null removes an op; other ops and everything not mentioned are inherited.
  EXPECT_EQ(mine.trait("MatMul"), nullptr);
  ASSERT_NE(mine.trait("Softmax"), nullptr);
  ASSERT_NE(mine.trait("Conv"), nullptr);
  EXPECT_EQ(mine.ops.size(), base.ops.size());  // one removed, one added
  EXPECT_EQ(mine.fusions.size(), base.fusions.size());
  EXPECT_TRUE(mine.constraints.zero_point_zero);
  EXPECT_EQ(mine.deploy_format, base.deploy_format);
}

TEST(BackendConfig, ExtendsResolvesRelativePathsFromTheExtendingFile) {
  const std::string dir = makeTempDir("backend_relative");
  writeFile(dir + "/base.json",
            json({{"name", "Base"}, {"extends", "SNPE"}, {"activation", {{"bits", 6}}}}).dump());
  std::filesystem::create_directories(dir + "/sub");
  const std::string child = writeFile(
      dir + "/sub/child.json",
      json({{"name", "Child"}, {"extends", "../base.json"}, {"ops", {{"Add", nullptr}}}}).dump());
  const BackendConfig config = loadBackend(child);
  EXPECT_EQ(config.name, "Child");
  EXPECT_EQ(config.activation.scheme.bits, 6);  // from base.json
  EXPECT_TRUE(config.placement.unit_outputs);   // from SNPE
  EXPECT_EQ(config.trait("Add"), nullptr);
  EXPECT_NE(config.trait("Conv"), nullptr);
}

TEST(BackendConfig, ExtendsLoopIsReported) {
  const std::string dir = makeTempDir("backend_loop");
  const std::string a =
      writeFile(dir + "/a.json", json({{"name", "A"}, {"extends", "b.json"}}).dump());
  writeFile(dir + "/b.json", json({{"name", "B"}, {"extends", "a.json"}}).dump());
  const std::string message = loadError(a);
  EXPECT_NE(message.find("loops"), std::string::npos) << message;

  const std::string self =
      writeFile(dir + "/self.json", json({{"name", "Self"}, {"extends", "self.json"}}).dump());
  EXPECT_NE(loadError(self).find("loops"), std::string::npos) << loadError(self);
}

TEST(BackendConfig, ExtendsAMissingFileNamesIt) {
  const std::string path = writeFile(makeTempDir("backend_missing") + "/mine.json",
                                     json({{"name", "Mine"}, {"extends", "nowhere.json"}}).dump());
  EXPECT_NE(loadError(path).find("nowhere.json"), std::string::npos) << loadError(path);
}

// The op table's layout-only ops, listed here independently of it.
const std::vector<std::string> kLayoutOnly = {
    "Reshape",  "Flatten", "Transpose",    "Squeeze",      "Unsqueeze",
    "Identity", "Dropout", "DepthToSpace", "SpaceToDepth", "ReverseSequence"};

TEST(BackendConfig, LayoutOnlyOpsShareTheirInputByDefault) {
  const std::string path =
      writeFile(makeTempDir("backend_defaults") + "/mine.json", minimalBackend().dump());
  const BackendConfig config = loadBackend(path);
  for (const std::string& op : kLayoutOnly) {
    ASSERT_NE(config.trait(op), nullptr) << op;
    EXPECT_EQ(config.trait(op)->role, OpRole::SharesInput) << op;
  }
  // Data movement that is not layout-only, and computing ops, get no default role.
  for (const char* op : {"MaxPool", "Concat", "Gather", "Slice", "Relu", "Shape"})
    EXPECT_EQ(config.trait(op), nullptr) << op;
  EXPECT_EQ(config.ops.size(), 1 + kLayoutOnly.size());  // Conv and the defaults
  // The resolved document (what a saved prepared model keeps) spells them out.
  const json resolved = backends::resolveBackendDocument(path);
  for (const std::string& op : kLayoutOnly)
    EXPECT_EQ(resolved.at("ops").at(op), "shares_input") << op;
}

TEST(BackendConfig, FilesOverrideOrRemoveTheDefaults) {
  const std::string dir = makeTempDir("backend_exceptions");
  json doc = minimalBackend();
  doc["ops"]["Reshape"] = "never";
  doc["ops"]["Transpose"] = {{"role", "quantizable"}, {"inputs", json::array({0})}};
  doc["ops"]["Flatten"] = nullptr;
  const BackendConfig root = loadBackend(writeFile(dir + "/root.json", doc.dump()));
  ASSERT_NE(root.trait("Reshape"), nullptr);
  EXPECT_EQ(root.trait("Reshape")->role, OpRole::Never);
  ASSERT_NE(root.trait("Transpose"), nullptr);
  EXPECT_EQ(root.trait("Transpose")->role, OpRole::Quantizable);
  EXPECT_EQ(root.trait("Flatten"), nullptr);  // null: float, as an unlisted op
  EXPECT_EQ(root.trait("Squeeze")->role, OpRole::SharesInput);

  // Down an "extends" chain, null removes a default the base kept and a role restores it.
  const json child = {{"name", "Child"},
                      {"extends", "root.json"},
                      {"ops", {{"Dropout", nullptr}, {"Flatten", "shares_input"}}}};
  const BackendConfig config = loadBackend(writeFile(dir + "/child.json", child.dump()));
  EXPECT_EQ(config.trait("Dropout"), nullptr);
  ASSERT_NE(config.trait("Flatten"), nullptr);
  EXPECT_EQ(config.trait("Flatten")->role, OpRole::SharesInput);
  EXPECT_EQ(config.trait("Reshape")->role, OpRole::Never);
  // A file that still lists a default role says the same thing.
  const BackendConfig trt = loadBackend("TensorRT");
  json explicit_doc = backends::resolveBackendDocument("TensorRT");
  explicit_doc["name"] = "ExplicitTensorRT";
  const BackendConfig listed = loadBackend(writeFile(dir + "/listed.json", explicit_doc.dump()));
  ASSERT_EQ(listed.ops.size(), trt.ops.size());
  for (const auto& [op, trait] : trt.ops)
    EXPECT_EQ(listed.trait(op)->role, trait.role) << op;
}

TEST(BackendConfig, ParsingAResolvedDocumentAddsNoDefaults) {
  // parseBackendConfig reads a document as it is (a saved prepared model's, already resolved).
  json doc = minimalBackend();
  const BackendConfig config = backends::parseBackendConfig(doc, "test");
  EXPECT_EQ(config.trait("Reshape"), nullptr);
  EXPECT_EQ(config.ops.size(), 1u);
}

}  // namespace
}  // namespace qforge::testing
