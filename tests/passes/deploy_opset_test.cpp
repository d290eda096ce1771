// The opset a backend's deploy files need, from the rules in deploy_opset.h: 11 for any QDQ model
// (ONNX Runtime adds a Round on load), 13 with per-channel weights, 0 where no QDQ model exists.
#include "passes/deploy_opset.h"

#include <gtest/gtest.h>

#include "backends/backend_config.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

using passes::requiredDeployOpset;

TEST(DeployOpset, PerTensorEightBitNeedsElevenPerChannelThirteen) {
  const backends::BackendConfig per_tensor = tinyBackend({{"weight", {{"per_channel", false}}}});
  EXPECT_EQ(requiredDeployOpset(per_tensor, {}), 11);
  EXPECT_EQ(requiredDeployOpset(tinyBackend(), {}), 13);  // tinyBackend's weights are per-channel
}

TEST(DeployOpset, AConfigOverrideMakingWeightsPerChannelRaisesIt) {
  const backends::BackendConfig per_tensor = tinyBackend({{"weight", {{"per_channel", false}}}});
  passes::QuantConfig config;
  config.weight = {{"per_channel", true}};
  EXPECT_EQ(requiredDeployOpset(per_tensor, config), 13);
}

TEST(DeployOpset, BuiltinBackendsFollowTheirWeightGranularity) {
  EXPECT_EQ(requiredDeployOpset(backends::loadBackend("TensorRT"), {}), 13);    // per-channel
  EXPECT_EQ(requiredDeployOpset(backends::loadBackend("Tengine_u8"), {}), 11);  // per-tensor
  // NNIE's logarithmic grid is written as arithmetic with Round and Clip's input bounds.
  EXPECT_EQ(requiredDeployOpset(backends::loadBackend("NNIE"), {}), 11);
}

}  // namespace
}  // namespace qforge::testing
