// Reconstruction presets and MQBench's config keys, read from the YAML layout MQBench ships.
#include <gtest/gtest.h>

#include "algos/reconstruction.h"
#include "core/error.h"
#include "passes/quant_config.h"

namespace qforge::testing {
namespace {

using algos::applyReconstructionKeys;
using algos::ReconGranularity;
using algos::reconstructionPreset;

TEST(ReconConfig, PresetsFollowMQBench) {
  EXPECT_EQ(reconstructionPreset("adaround").pattern, ReconGranularity::Layer);
  EXPECT_EQ(reconstructionPreset("adaround").prob, 1.0);
  EXPECT_EQ(reconstructionPreset("brecq").pattern, ReconGranularity::Block);
  EXPECT_EQ(reconstructionPreset("brecq").prob, 1.0);
  const auto q = reconstructionPreset("qdrop");
  EXPECT_EQ(q.pattern, ReconGranularity::Block);
  EXPECT_EQ(q.prob, 0.5);
  EXPECT_EQ(q.max_count, 20000);
  EXPECT_EQ(q.weight, 0.01);
  EXPECT_EQ(q.warm_up, 0.2);
  EXPECT_EQ(q.b_start, 20);
  EXPECT_EQ(q.b_end, 2);
  EXPECT_EQ(q.scale_lr, 4e-5);
}

TEST(ReconConfig, ReadsMQBenchYamlNestedUnderQuantizeReconstruction) {
  const std::string yaml = R"(quantize:
  reconstruction:
    pattern: layer
    scale_lr: 4.0e-5
    warm_up: 0.1
    weight: 0.02
    max_count: 5000
    b_range: [16, 4]
    keep_gpu: True
    round_mode: learned_hard_sigmoid
    prob: 0.7
)";
  auto c = reconstructionPreset("qdrop");
  applyReconstructionKeys(c, passes::yamlToJson(yaml, "r.yaml"), "r.yaml");
  EXPECT_EQ(c.pattern, ReconGranularity::Layer);
  EXPECT_EQ(c.warm_up, 0.1);
  EXPECT_EQ(c.weight, 0.02);
  EXPECT_EQ(c.max_count, 5000);
  EXPECT_EQ(c.b_start, 16);
  EXPECT_EQ(c.b_end, 4);
  EXPECT_EQ(c.prob, 0.7);
}

TEST(ReconConfig, UnknownKeysAndBadValuesNameTheKey) {
  auto c = reconstructionPreset("brecq");
  auto errorFor = [&](const nlohmann::json& j) {
    try {
      applyReconstructionKeys(c, j, "cfg.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(errorFor({{"iters", 5}}).find("cfg.json: iters is not a reconstruction key"),
            std::string::npos);
  EXPECT_NE(errorFor({{"pattern", "net"}}).find("\"layer\" or \"block\""), std::string::npos);
  EXPECT_NE(errorFor({{"max_count", 2.5}}).find("whole number"), std::string::npos);
  EXPECT_NE(errorFor({{"b_range", {20}}}).find("[start, end]"), std::string::npos);
  EXPECT_NE(errorFor({{"round_mode", "nearest"}}).find("learned_hard_sigmoid"), std::string::npos);
  EXPECT_NE(errorFor({{"quantize", {{"calibrate", 1}}}}).find("quantize.reconstruction"),
            std::string::npos);
}

}  // namespace
}  // namespace qforge::testing
