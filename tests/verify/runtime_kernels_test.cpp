// A quantized Softmax (input and output quantizers, a calibrated output range below 1) written
// as QDQ and QOperator ONNX and run in ONNX Runtime: ORT computes QLinearSoftmax for both, the
// emulation equals it bit for bit, and so does the simulation once verify's RuntimeKernels run
// that group as ORT's kernel; without them the simulation differs (ORT multiplies by
// floor(1 / y_scale), not 1 / y_scale).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "deploy/qdq_onnx.h"
#include "deploy/qoperator_onnx.h"
#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/node_attributes.h"
#include "ir/onnx_export.h"
#include "ir/parse.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"
#include "support/quant_graphs.h"
#include "verify/runtime_kernels.h"

namespace qforge::testing {
namespace {

// x [N, classes] -> Softmax over the last axis -> y.
Graph softmaxGraph(int64_t classes = 10) {
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(classes)}};
  g.addInput(x);
  Node* s = g.addNode("Softmax", {x}, {"y"}, "softmax");
  s->attributes.set(Attribute::makeInt("axis", -1));
  s->output(0)->type = x->type;
  g.addOutput(s->output(0));
  g.model.opset_imports[""] = 13;
  return g;
}

const Node* findOp(const Graph& g, const std::string& op_type) {
  for (const Node* n : g.topologicalOrder()) {
    if (n->opType() == op_type) return n;
  }
  return nullptr;
}

TEST(RuntimeKernels, ASoftmaxBetweenQuantizersIsSimulatedAsOnnxRuntimesQLinearSoftmax) {
  if (!ortAvailable("the QLinearSoftmax test")) GTEST_SKIP();
  at::manual_seed(7);
  // Logits spread enough that no probability reaches 1: the output range is calibrated below it.
  const at::Tensor calibration = at::randn({64, 10}) * 2;
  auto model =
      passes::prepare(softmaxGraph(), outputQuantizingBackend({{"Softmax", "quantizable"}}));
  calibrateOn(*model, calibration);
  const Graph qdq = deploy::toQdqGraph(*model);
  const Graph qop = deploy::toQOperatorGraph(qdq);

  // The QOperator model names the kernel, with the Softmax's opset and axis.
  const Node* kernel = findOp(qop, "QLinearSoftmax");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->domain(), "com.microsoft");
  EXPECT_EQ(intAttr(*kernel, "opset", 0), 13);
  EXPECT_EQ(intAttr(*kernel, "axis", 0), -1);
  EXPECT_EQ(findOp(qop, "Softmax"), nullptr);

  const std::string dir = makeTempDir("runtime_kernels");
  exportOnnxFile(qdq, dir + "/qdq.onnx");
  exportOnnxFile(qop, dir + "/qop.onnx");
  EXPECT_EQ(onnxCheckerError(dir + "/qop.onnx"), "");
  const at::Tensor x = at::randn({256, 10}) * 2;
  const at::Tensor ort_qdq =
      runInOrt(dir + "/qdq.onnx", {{"x", x}}, verify::OrtOptimization::All).at("y");
  const at::Tensor ort_qop =
      runInOrt(dir + "/qop.onnx", {{"x", x}}, verify::OrtOptimization::All).at("y");
  // ORT fuses the QDQ model's DequantizeLinear -> Softmax -> QuantizeLinear into the same kernel.
  EXPECT_TRUE(at::equal(ort_qdq, ort_qop));
  Executor emulation(qop, {}, ortEmulationRegistry());
  EXPECT_TRUE(at::equal(emulation.run({{"x", x}}).at("y"), ort_qop));

  const at::Tensor simulated = model->executor().run({{"x", x}}).at("y");
  EXPECT_FALSE(at::equal(simulated, ort_qdq))
      << "the float simulation already equals ORT here; the output scale hides the difference";
  verify::RuntimeKernels kernels(model->graph(), qdq);
  ASSERT_EQ(kernels.names(), std::vector<std::string>{"Softmax 'softmax'"});
  HookScope hooks(model->executor());
  kernels.install(hooks);
  EXPECT_TRUE(at::equal(model->executor().run({{"x", x}}).at("y"), ort_qdq));
}

TEST(RuntimeKernels, ASoftmaxWithAFloatSideIsLeftToTheSimulation) {
  // Inputs-only placement: the Softmax's output is not quantized, so ORT has nothing to fuse.
  auto model = passes::prepare(
      softmaxGraph(),
      tinyBackend({{"ops", {{"Softmax", "quantizable"}}}, {"placement", {{"unit_inputs", true}}}}));
  calibrateOn(*model, at::randn({8, 10}));
  const Graph qdq = deploy::toQdqGraph(*model);
  EXPECT_TRUE(verify::RuntimeKernels(model->graph(), qdq).empty());
  EXPECT_EQ(findOp(deploy::toQOperatorGraph(qdq), "QLinearSoftmax"), nullptr);
}

// Two classes whose probabilities stay below 0.86: y_scale < 1/297, and floor(1 / y_scale) >=
// e^5 x 2, where ORT's QLinearSoftmax overflows. The QDQ writer then writes the output quantizer
// as arithmetic, leaving ORT nothing to fuse, and ORT computes what the simulation does. The same
// scales as a plain DequantizeLinear -> Softmax -> QuantizeLinear show what ORT would have done.
TEST(RuntimeKernels, ASoftmaxWhoseScaleOverflowsOrtsKernelIsWrittenSoOrtDoesNotFuseIt) {
  if (!ortAvailable("the QLinearSoftmax overflow test")) GTEST_SKIP();
  at::manual_seed(8);
  auto model =
      passes::prepare(softmaxGraph(2), outputQuantizingBackend({{"Softmax", "quantizable"}}));
  calibrateOn(*model, at::randn({64, 2}) * 0.3);
  const Graph qdq = deploy::toQdqGraph(*model);
  const Node* softmax = findOp(qdq, "Softmax");
  ASSERT_NE(softmax, nullptr);
  ASSERT_EQ(softmax->output(0)->uses().size(), 1u);
  const Node* reader = softmax->output(0)->uses().front().node;
  EXPECT_EQ(reader->opType(), "Div") << "the output quantizer is arithmetic";
  const float y_scale = reader->input(1)->initializer().item<float>();
  ASSERT_GE(std::floor(1.0f / y_scale), std::exp(5.0) * 2) << "calibrated past the bound";

  const std::string dir = makeTempDir("softmax_overflow");
  exportOnnxFile(qdq, dir + "/qdq.onnx");
  const at::Tensor x = at::randn({32, 2}) * 0.3;
  const at::Tensor ort =
      runInOrt(dir + "/qdq.onnx", {{"x", x}}, verify::OrtOptimization::All).at("y");
  const at::Tensor simulated = model->executor().run({{"x", x}}).at("y");
  EXPECT_LE((ort - simulated).abs().max().item<double>() / y_scale, 1.0 + 1e-3);

  // The fusible form with the same scales, as ORT would have fused it.
  const Value* x_scale = findOp(qdq, "QuantizeLinear")->input(1);
  const Value* x_zero_point = findOp(qdq, "QuantizeLinear")->input(2);
  Graph fusible = parseGraph(R"(
    graph fusible
    opset "" 13
    input %x: float32[N,2]
    init %xs: float32[] = {1}
    init %xz: uint8[] = {0}
    init %ys: float32[] = {1}
    init %yz: uint8[] = {0}
    %xq = QuantizeLinear(%x, %xs, %xz)  # xq
    %xd = DequantizeLinear(%xq, %xs, %xz)  # xd
    %p = Softmax[axis=-1](%xd)  # softmax
    %yq = QuantizeLinear(%p, %ys, %yz)  # yq
    %y = DequantizeLinear(%yq, %ys, %yz)  # yd
    output %y: float32[N,2]
  )");
  fusible.findValue("xs")->setInitializer(x_scale->initializer().clone());
  fusible.findValue("xz")->setInitializer(x_zero_point->initializer().clone());
  fusible.findValue("ys")->setInitializer(at::scalar_tensor(y_scale));
  exportOnnxFile(fusible, dir + "/fusible.onnx");
  const at::Tensor fused =
      runInOrt(dir + "/fusible.onnx", {{"x", x}}, verify::OrtOptimization::All).at("y");
  // Rows where the kernel overflows come out all zero, which no softmax gives (the simulation's
  // rows hold their probabilities).
  const int64_t empty_rows = (fused.sum(1) == 0).sum().item<int64_t>();
  EXPECT_GT(empty_rows, 0) << "ORT's QLinearSoftmax no longer overflows here";
  EXPECT_EQ((simulated.sum(1) == 0).sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace qforge::testing
