// User configs: JSON and YAML read the same, patches merge over backend specs with checked keys,
// overrides select nodes by name, regex and op type, and mistakes name their place.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "passes/quant_config.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

using passes::loadQuantConfig;

template <typename Fn>
void expectError(Fn&& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = makeTempDir("config") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(QuantConfig, YamlAndJsonReadTheSame) {
  const auto yaml = loadQuantConfig(write("c.yaml",
                                          "weight: {bits: 4, observer: Mse}\n"
                                          "extra_quantizable: [Mul]\n"
                                          "overrides:\n"
                                          "  - name: conv1\n"
                                          "    skip: true\n"
                                          "  - {op_type: Conv, activation: {bits: 6}}\n"));
  const auto json = loadQuantConfig(
      write("c.json", R"({"weight": {"bits": 4, "observer": "Mse"}, "extra_quantizable": ["Mul"],
                   "overrides": [{"name": "conv1", "skip": true},
                                 {"op_type": "Conv", "activation": {"bits": 6}}]})"));
  for (const auto* c : {&yaml, &json}) {
    EXPECT_EQ(c->weight, (nlohmann::json{{"bits", 4}, {"observer", "Mse"}}));
    EXPECT_EQ(c->extra_quantizable, std::vector<std::string>{"Mul"});
    ASSERT_EQ(c->overrides.size(), 2u);
    EXPECT_TRUE(c->overrides[0].skip);
    EXPECT_EQ(c->overrides[1].op_type, "Conv");
  }
}

TEST(QuantConfig, PatchesMergeOverTheBackendSpec) {
  backends::QuantSpec spec = tinyBackend().weight;
  spec.observer_options = {{"ratio", 0.9}};
  const auto patched = passes::applySpecPatch(spec, {{"bits", 4}, {"observer", "Mse"}}, "test");
  EXPECT_EQ(patched.scheme.bits, 4);
  EXPECT_EQ(patched.scheme.axis, 0);  // untouched keys stay
  EXPECT_EQ(patched.observer, "Mse");
  EXPECT_TRUE(patched.observer_options.empty());  // a new observer drops the old one's options
  // Leaving a narrow signed grid drops symmetric_range instead of failing validation.
  spec.scheme.symmetric_range = true;
  EXPECT_FALSE(passes::applySpecPatch(spec, {{"symmetric", false}}, "t").scheme.symmetric_range);
  // ...and its full-range clamp with it, from either direction; the clamp alone can be dropped.
  spec.scheme.full_range_clamp = true;
  for (const char* key : {"symmetric", "symmetric_range"}) {
    const auto left = passes::applySpecPatch(spec, {{key, false}}, "t").scheme;
    EXPECT_FALSE(left.symmetric_range) << key;
    EXPECT_FALSE(left.full_range_clamp) << key;
  }
  const auto narrow = passes::applySpecPatch(spec, {{"full_range_clamp", false}}, "t").scheme;
  EXPECT_TRUE(narrow.symmetric_range);
  EXPECT_EQ(narrow.qmin(), -127);
  EXPECT_EQ(passes::applySpecPatch(spec, {{"bits", 4}}, "t").scheme.qmin(), -8);
}

TEST(QuantConfig, MistakesNameTheirPlace) {
  expectError([] { loadQuantConfig(write("a.yaml", "weight: {bitz: 4}\n")); }, "'bitz'");
  expectError(
      [] { loadQuantConfig(write("b.yaml", "overrides:\n  - {name: a, op_type: Conv}\n")); },
      "exactly one of name, name_regex, op_type");
  expectError([] { loadQuantConfig(write("c.yaml", "overrides:\n  - {name_regex: \"(\"}\n")); },
              "not a valid regular expression");
  expectError([] { loadQuantConfig(write("d.yaml", "weight: [4]\n")); }, "'weight'");
  expectError([] { loadQuantConfig(write("e.json", "{\"weight\": {\"bits\": 40}}")); }, "bits=40");
  expectError([] { loadQuantConfig(write("f.yaml", "colour: blue\n")); }, "unknown key 'colour'");
}

// From fuzzing YAML configs (issue #22): integers past int64_t and numbers past double's range
// (std::stoll / std::stod threw), and bytes that are not UTF-8 (a later message's JSON dump threw).
TEST(QuantConfig, YamlNumbersOutOfRangeAndNonUtf8TextAreRefused) {
  EXPECT_EQ(passes::yamlToJson("weight: {bits: 99999999999999999999}", "c.yaml")["weight"]["bits"],
            1e20);
  EXPECT_EQ(errorOf([] { passes::yamlToJson("weight:\n  bits: 1e999\n", "c.yaml"); }),
            "c.yaml: line 2: the number 1e999 is out of range");
  EXPECT_EQ(errorOf([] { passes::yamlToJson("weight: {observer: \"M\xfc\"}", "c.yaml"); }),
            "c.yaml: not UTF-8 text (byte 22)");
}

TEST(QuantConfig, OverridesMustMatchSomething) {
  Graph g = convReluConv();
  auto config = [](const std::string& yaml) {
    return passes::parseQuantConfig(passes::yamlToJson(yaml, "cfg"), "cfg");
  };
  passes::checkOverridesMatch(config("overrides: [{name: conv2}, {name_regex: 'conv.*'}]"), g);
  expectError([&] { passes::checkOverridesMatch(config("overrides: [{name: conv3}]"), g); },
              "nearest names: conv");
  expectError([&] { passes::checkOverridesMatch(config("overrides: [{op_type: Gemm}]"), g); },
              "op_type 'Gemm' matches no node");
  const Node& conv1 = *g.findNode("conv1");
  EXPECT_TRUE(
      passes::selects(config("overrides: [{name_regex: 'conv[0-9]'}]").overrides[0], conv1));
  EXPECT_FALSE(passes::selects(config("overrides: [{name_regex: 'conv'}]").overrides[0], conv1));
}

}  // namespace
}  // namespace qforge::testing
