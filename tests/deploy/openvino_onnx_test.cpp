// The OpenVINO writer: org.openvinotoolkit FakeQuantize nodes with the grid's range where the
// prepared model quantizes; run by the executor's FakeQuantize (OpenVINO's spec formula), the
// file computes what the prepared model simulates.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "deploy/openvino_onnx.h"
#include "exec/executor.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

TEST(OpenVinoFakeQuantizeOp, FollowsTheSpecFormulaIncludingItsClampsAndTies) {
  // levels 5 over [0, 4] -> output [10, 18]: steps of 1 in, 2 out; ties go to even.
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* n = g.addNode("FakeQuantize",
                      {x, g.addInitializer("il", at::scalar_tensor(0.0f)),
                       g.addInitializer("ih", at::scalar_tensor(4.0f)),
                       g.addInitializer("ol", at::scalar_tensor(10.0f)),
                       g.addInitializer("oh", at::scalar_tensor(18.0f))},
                      {"y"}, "fq", deploy::kOpenVinoDomain);
  n->attributes.set(Attribute::makeInt("levels", 5));
  g.addOutput(g.value("y"));
  g.model.opset_imports[""] = 13;
  g.model.opset_imports[deploy::kOpenVinoDomain] = 1;
  const at::Tensor in = at::tensor({-1.0f, 0.0f, 0.5f, 1.5f, 2.4f, 3.9f, 4.0f, 7.0f});
  const at::Tensor want = at::tensor({10.0f, 10.0f, 10.0f, 14.0f, 14.0f, 18.0f, 18.0f, 18.0f});
  const at::Tensor got = Executor(g).run({{"x", in}}).at("y");
  EXPECT_TRUE(at::equal(got, want)) << got;
}

TEST(OpenVinoOnnx, EveryWeightAndActivationPointGetsAFakeQuantizeWithItsGridRange) {
  auto m = passes::prepare(convReluConv(), tinyBackend());
  const at::Tensor x = at::randn({2, 2, 5, 5});
  calibrateOn(*m, x);
  const deploy::DeployModel d = deploy::buildDeployModel(*m);
  const Graph g = deploy::toOpenVinoGraph(d);
  int count = 0;
  for (const Node* n : g.nodes()) {
    if (n->opType() != "FakeQuantize") continue;
    ++count;
    EXPECT_EQ(n->domain(), deploy::kOpenVinoDomain);
    EXPECT_EQ(n->attributes.find("levels")->i, 256);
    EXPECT_EQ(n->inputs().size(), 5u);
    if (n->input(0)->name() == "w1") {
      const deploy::TensorEncoding* e = d.table.find("w1");
      const at::Tensor lo = n->input(1)->initializer();
      ASSERT_EQ(lo.sizes().vec(), (std::vector<int64_t>{3, 1, 1, 1}));
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_FLOAT_EQ(lo[c].item<float>(), static_cast<float>(-128 * e->scale[c]));
        EXPECT_FLOAT_EQ(n->input(2)->initializer()[c].item<float>(),
                        static_cast<float>(127 * e->scale[c]));
      }
      EXPECT_TRUE(at::equal(n->input(1)->initializer(), n->input(3)->initializer()));
    }
  }
  EXPECT_EQ(count, static_cast<int>(d.table.tensors.size()));
  EXPECT_EQ(g.outputs().front()->name(), "y");

  const at::Tensor probe = at::randn({4, 2, 5, 5});
  const at::Tensor want = m->executor().run({{"x", probe}}).at("y");
  const at::Tensor got = Executor(g).run({{"x", probe}}).at("y");
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-5)) << (got - want).abs().max();
}

TEST(OpenVinoOnnx, RefusesAGridWithoutScaleAndZeroPoint) {
  auto m =
      passes::prepare(convReluConv(), tinyBackend({{"activation", {{"fake_quantizer", "NNIE"}}}}));
  calibrateOn(*m, at::randn({2, 2, 5, 5}));
  const deploy::DeployModel d = deploy::buildDeployModel(*m);
  try {
    deploy::toOpenVinoGraph(d);
    FAIL() << "a log grid was written as FakeQuantize";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no scale and zero point"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge::testing
