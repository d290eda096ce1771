// buildDeployModel: FakeQuantize nodes stripped, weights replaced by their grid values, and one
// encoding per quantized tensor whose parameters match the closed-form MinMax results.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "deploy/deploy_model.h"
#include "passes/fake_quantize_node.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

using deploy::TensorRole;

struct Calibrated {
  std::unique_ptr<passes::PreparedModel> model;
  at::Tensor x;
};

Calibrated calibratedTiny(const nlohmann::json& patch = nlohmann::json::object()) {
  Calibrated c{passes::prepare(convReluConv(), tinyBackend(patch)), at::randn({2, 2, 5, 5})};
  calibrateOn(*c.model, c.x);
  return c;
}

TEST(DeployModel, StripsEveryFakeQuantizeAndKeepsValueNames) {
  Calibrated c = calibratedTiny();
  const deploy::DeployModel d = deploy::buildDeployModel(*c.model);
  for (const Node* n : d.graph.nodes())
    EXPECT_FALSE(passes::isFakeQuantize(n)) << n->describe();
  EXPECT_EQ(d.graph.model.opset_imports.count(passes::kQforgeDomain), 0u);
  ASSERT_EQ(d.graph.outputs().size(), 1u);
  EXPECT_EQ(d.graph.outputs().front()->name(), "y");
  // Every quantization point appears under the name of the value it quantizes.
  ASSERT_EQ(d.table.tensors.size(), c.model->points().size());
  for (const passes::QuantPoint& p : c.model->points()) {
    const deploy::TensorEncoding* e = d.table.find(p.value);
    ASSERT_NE(e, nullptr) << p.value;
    EXPECT_NE(d.graph.findValue(p.value), nullptr) << p.value;
    EXPECT_EQ(e->quantizer, p.quantizer);
    EXPECT_EQ(e->role,
              p.kind == passes::PointKind::Weight ? TensorRole::Weight : TensorRole::Activation);
  }
}

TEST(DeployModel, WeightEncodingsAreTheClosedFormPerChannelScalesAndWeightsSitOnTheirGrid) {
  Calibrated c = calibratedTiny();
  const at::Tensor w1 = c.model->graph().value("w1")->initializer().clone();
  const deploy::DeployModel d = deploy::buildDeployModel(*c.model);
  const deploy::TensorEncoding* e = d.table.find("w1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->role, TensorRole::Weight);
  EXPECT_EQ(e->axis, 0);
  EXPECT_EQ(e->qmin, -128);
  EXPECT_EQ(e->qmax, 127);
  const at::Tensor expected = symmetricScalesPerChannel(w1);
  ASSERT_EQ(e->scale.size(), 3u);
  for (size_t ch = 0; ch < 3; ++ch) {
    EXPECT_NEAR(e->scale[ch], expected[ch].item<double>(), 1e-6 * expected[ch].item<double>());
    EXPECT_EQ(e->zero_point[ch], 0);
    EXPECT_NEAR(e->min(ch), -128 * e->scale[ch], 1e-12);
    EXPECT_NEAR(e->max(ch), 127 * e->scale[ch], 1e-12);
    EXPECT_NEAR(e->absMax(ch), 128 * e->scale[ch], 1e-12);
  }
  // The stored weight is round(w / s) * s, clamped: the integers any toolchain recovers.
  // Scales are float32 and so is the division, as in ONNX's QuantizeLinear.
  const at::Tensor s = at::tensor(e->scale, at::kDouble).to(at::kFloat).reshape({3, 1, 1, 1});
  const at::Tensor stored = d.graph.value("w1")->initializer();
  const at::Tensor levels = stored / s;
  EXPECT_TRUE(at::allclose(levels, levels.round(), 0, 1e-3));
  EXPECT_TRUE(at::equal(levels.round(), (w1 / s).round().clamp(-128, 127)));
}

TEST(DeployModel, ActivationEncodingIsTheObservedRange) {
  Calibrated c = calibratedTiny();
  const deploy::DeployModel d = deploy::buildDeployModel(*c.model);
  // The second conv reads relu(conv1(x)): uint8, MinMax over that tensor.
  const Graph& g = c.model->graph();
  const at::Tensor r =
      at::relu(at::conv2d(c.x, g.value("w1")->initializer(), g.value("b1")->initializer(), 1, 1));
  const deploy::TensorEncoding* e = d.table.find("r");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->role, TensorRole::Activation);
  EXPECT_EQ(e->axis, -1);
  EXPECT_TRUE(e->is_unsigned);
  const double scale = asymmetricScale(r);
  EXPECT_NEAR(e->scale.at(0), scale, 1e-6 * scale);
  EXPECT_EQ(e->zero_point.at(0), asymmetricZeroPoint(r, scale));
  EXPECT_DOUBLE_EQ(e->max(), (255 - e->zero_point[0]) * e->scale[0]);
  EXPECT_DOUBLE_EQ(e->min(), -e->zero_point[0] * e->scale[0]);
}

TEST(DeployModel, RefusesAnUncalibratedModelNamingTheQuantizer) {
  auto m = passes::prepare(convReluConv(), tinyBackend());
  try {
    deploy::buildDeployModel(*m);
    FAIL() << "an uncalibrated model was deployed";
  } catch (const Error& e) {
    bool names_one = false;
    for (const passes::QuantPoint& p : m->points())
      names_one = names_one || std::string(e.what()).find(p.quantizer) != std::string::npos;
    EXPECT_TRUE(names_one) << e.what();
  }
}

}  // namespace
}  // namespace qforge::testing
