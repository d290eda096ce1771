// Every deploy writer, for every built-in backend, on a small model at opset 9 with a dynamic
// batch (a shape computation feeds its Reshape): the ONNX files written pass ONNX's checker at
// their opset and load and run in ONNX Runtime. Before the upgrade at prepare time, per-channel
// backends refused opset-9 models after calibrating, ONNX_QNN wrote a QuantizeLinear opset 9 does
// not have, and the backends quantizing op outputs stopped at the int64 shape values.
#include "deploy/writer_registry.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "deploy/deploy.h"
#include "ir/parse.h"
#include "passes/prepare.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"

namespace qforge::testing {
namespace {

const char* const kOpset9Model = R"(
  graph tiny
  opset "" 9
  input %x: float32[N,3,8,8]
  init %w1: float32[4,3,3,3]
  init %b1: float32[4]
  init %gamma: float32[4]
  init %beta: float32[4]
  init %mean: float32[4]
  init %var: float32[4]
  init %w2: float32[4,4,1,1]
  init %fc: float32[5,4]
  init %fcb: float32[5]
  init %zero: int64[] = {0}
  init %minus_one: int64[1] = {-1}
  %c1 = Conv[kernel_shape=[3,3], pads=[1,1,1,1]](%x, %w1, %b1)  # conv1
  %bn = BatchNormalization(%c1, %gamma, %beta, %mean, %var)  # bn1
  %r6 = Clip[max=6.0, min=0.0](%bn)  # relu6
  %p = MaxPool[kernel_shape=[2,2], strides=[2,2]](%r6)  # pool
  %c2 = Conv[kernel_shape=[1,1]](%p, %w2)  # conv2
  %r = Relu(%c2)  # relu
  %gap = GlobalAveragePool(%r)  # gap
  %s = Shape(%gap)  # shape
  %n = Gather[axis=0](%s, %zero)  # batch
  %nu = Unsqueeze[axes=[0]](%n)  # batch_1d
  %flat_shape = Concat[axis=0](%nu, %minus_one)  # flat_shape
  %f = Reshape(%gap, %flat_shape)  # flatten
  %logits = Gemm[transB=1](%f, %fc, %fcb)  # fc
  %y = Softmax(%logits)  # softmax
  output %y: float32[N,5]
)";

Graph opset9Model() {
  Graph g = parseGraph(kOpset9Model);
  at::manual_seed(3);
  for (Value* v : g.initializers()) {
    if (!at::isFloatingType(v->initializer().scalar_type())) continue;
    const auto sizes = v->initializer().sizes();
    v->setInitializer(v->name() == "var" ? at::rand(sizes) + 0.5 : at::randn(sizes) * 0.5);
  }
  return g;
}

std::vector<std::string> onnxFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".onnx") out.push_back(entry.path().string());
  }
  return out;
}

TEST(WriterRegistry, EveryBackendsOnnxFilesFromAnOpset9ModelPassTheCheckerAndLoadInOrt) {
  const bool ort = ortAvailable("the deploy writers' validity test");
  const at::Tensor x = at::randn({2, 3, 8, 8});
  for (const std::string& name : backends::builtinBackendNames()) {
    SCOPED_TRACE(name);
    const backends::BackendConfig backend = backends::loadBackend(name);
    auto m = passes::prepare(opset9Model(), backend);
    m->setMode(quant::FakeQuantMode::Calibration);
    m->executor().run({{"x", x}});
    m->setMode(quant::FakeQuantMode::Quantization);
    const at::Tensor simulated = m->executor().run({{"x", x}}).at("y");
    const std::string dir = makeTempDir("writers-" + name);
    deploy::deployPreparedModel(*m, dir);

    const std::vector<std::string> files = onnxFilesIn(dir);
    EXPECT_FALSE(files.empty());
    for (const std::string& file : files) {
      SCOPED_TRACE(file);
      EXPECT_EQ(onnxCheckerError(file), "");
      // OpenVINO's model holds org.openvinotoolkit FakeQuantize nodes, which only OpenVINO reads.
      if (!ort || file.find("openvino") != std::string::npos) continue;
      at::Tensor y;
      EXPECT_NO_THROW(y = runInOrt(file, {{"x", x}}).at("y"));
      ASSERT_TRUE(y.defined());
      EXPECT_EQ(y.sizes(), simulated.sizes());
      // A softmax over 5 classes: ORT's result is a distribution close to qforge's simulation
      // (the float deploy graphs lose the quantization, the QDQ ones match it up to rounding;
      // a quantized output is off by at most half a step of 1/255 per class).
      EXPECT_TRUE(at::allclose(y.sum(1), at::ones({2}), 0, 5 * 0.5 / 255 + 1e-4)) << y;
      EXPECT_LT((y - simulated).abs().max().item<double>(), 0.25) << y << simulated;
      // ORT's default level rewrites the graph on load (a float bias between quantized input and
      // weight becomes Div + Round + int32, which needs opset 11): the file must survive that.
      EXPECT_NO_THROW(runInOrt(file, {{"x", x}}, verify::OrtOptimization::All));
    }
  }
}

}  // namespace
}  // namespace qforge::testing
