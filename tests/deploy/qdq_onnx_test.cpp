// The QDQ writer: FakeQuantize nodes become QuantizeLinear/DequantizeLinear (8-bit activations,
// weights up to 8 bits) or the same arithmetic in plain ops (other activations), and the written
// model computes what the prepared model computes, run by the executor's own ONNX
// QuantizeLinear/DequantizeLinear kernels.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "deploy/qdq_onnx.h"
#include "exec/executor.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

// Prepares and calibrates convReluConv for `backend`; returns the model and a test input.
std::unique_ptr<passes::PreparedModel> calibrated(const backends::BackendConfig& backend,
                                                  at::Tensor& x) {
  auto m = passes::prepare(convReluConv(), backend);
  x = at::randn({2, 2, 5, 5});
  calibrateOn(*m, x);
  return m;
}

void expectSameOutputs(passes::PreparedModel& m, const Graph& qdq, const at::Tensor& x) {
  const at::Tensor expected = m.executor().run({{"x", x}}).at("y");
  Executor plain(qdq);
  const at::Tensor got = plain.run({{"x", x}}).at("y");
  EXPECT_TRUE(at::allclose(got, expected, 1e-6, 1e-6)) << (got - expected).abs().max();
}

TEST(QdqOnnx, EightBitPointsBecomeQuantizeDequantizePairsThatComputeTheSame) {
  at::Tensor x;
  auto m = calibrated(tinyBackend(), x);
  Graph qdq = deploy::toQdqGraph(*m);
  auto counts = opCounts(qdq);
  EXPECT_EQ(counts["QuantizeLinear"], 4);
  EXPECT_EQ(counts["DequantizeLinear"], 4);
  EXPECT_EQ(counts["FakeQuantize"], 0);
  EXPECT_EQ(qdq.model.opset_imports.count(passes::kQforgeDomain), 0u);
  ASSERT_EQ(qdq.outputs().size(), 1u);
  EXPECT_EQ(qdq.outputs().front()->name(), "y");
  // Per-channel weights carry their axis and int8 zero points (symmetric signed); activations
  // are per-tensor with uint8 zero points (asymmetric unsigned).
  int per_channel = 0, per_tensor = 0;
  for (const Node* n : qdq.nodes()) {
    if (n->opType() != "QuantizeLinear") continue;
    const at::Tensor zp = n->input(2)->initializer();
    if (n->attributes.has("axis")) {
      ++per_channel;
      EXPECT_EQ(zp.scalar_type(), at::kChar) << n->output(0)->name();
      // One per output channel of the Conv weight it quantizes (w1 [3,2,3,3], w2 [2,3,1,1]).
      ASSERT_TRUE(n->input(0)->isInitializer()) << n->output(0)->name();
      EXPECT_EQ(zp.numel(), n->input(0)->initializer().size(0)) << n->output(0)->name();
    } else {
      ++per_tensor;
      EXPECT_EQ(zp.scalar_type(), at::kByte) << n->output(0)->name();
      EXPECT_EQ(zp.numel(), 1) << n->output(0)->name();
    }
  }
  EXPECT_EQ(per_channel, 2);
  EXPECT_EQ(per_tensor, 2);
  expectSameOutputs(*m, qdq, x);
}

TEST(QdqOnnx, WrittenFileReadsBackAndRuns) {
  at::Tensor x;
  auto m = calibrated(tinyBackend(), x);
  const std::string path = makeTempDir("qdq") + "/model.onnx";
  exportOnnxFile(deploy::toQdqGraph(*m), path);
  Graph back = importOnnxFile(path);
  expectSameOutputs(*m, back, x);
}

TEST(QdqOnnx, OutputQuantizerKeepsTheGraphOutputName) {
  at::Tensor x;
  auto m =
      calibrated(tinyBackend({{"placement", {{"unit_inputs", false}, {"unit_outputs", true}}}}), x);
  Graph qdq = deploy::toQdqGraph(*m);
  ASSERT_EQ(qdq.outputs().size(), 1u);
  EXPECT_EQ(qdq.outputs().front()->name(), "y");
  EXPECT_EQ(qdq.outputs().front()->producer()->opType(), "DequantizeLinear");
  expectSameOutputs(*m, qdq, x);
}

TEST(QdqOnnx, OtherActivationWidthsAndRoundingBecomePlainArithmetic) {
  at::Tensor x;
  auto m = calibrated(tinyBackend({{"weight", {{"bits", 4}}},
                                   {"activation", {{"bits", 6}, {"rounding", "half_up"}}}}),
                      x);
  deploy::QdqDetails details;
  Graph qdq = deploy::toQdqGraph(*m, &details);
  std::map<std::string, std::string>& quantized_values = details.quantized_values;
  auto counts = opCounts(qdq);
  EXPECT_EQ(counts["QuantizeLinear"], 2);  // the two 4-bit weights
  EXPECT_EQ(counts["Round"], 2);           // off-tie half-up activations
  EXPECT_EQ(counts["Where"], 2);           // half-up activations: floor(v) + 1 on exact ties
  EXPECT_EQ(counts["Floor"], 2);
  EXPECT_EQ(counts["Clip"], 2);
  expectSameOutputs(*m, qdq, x);
  // An arithmetic activation's integers are its Clip's output, named for verify's trace.
  int arithmetic = 0;
  for (const auto& [quantizer, tensor] : quantized_values) {
    const Value* v = qdq.findValue(tensor);
    ASSERT_NE(v, nullptr) << quantizer;
    if (v->producer()->opType() == "QuantizeLinear") continue;  // a weight
    EXPECT_EQ(v->producer()->opType(), "Clip") << quantizer;
    ++arithmetic;
    const at::Tensor levels = Executor(qdq).run({{"x", x}}, {tensor}).at(tensor);
    EXPECT_TRUE(at::equal(levels, levels.round())) << quantizer;
    EXPECT_GE(levels.min().item<double>(), 0.0) << quantizer;
    EXPECT_LE(levels.max().item<double>(), 63.0) << quantizer;
  }
  EXPECT_EQ(arithmetic, 2);
}

// A weight written as float arithmetic is a constant expression: ONNX Runtime folds it and then
// folds a following BatchNormalization into it, which moves the Conv's outputs by an ulp and
// flips activations on rounding ties (a 4-bit LSQ MobileNetV2 lost 0.7% top-1 agreement so).
// Every weight of up to 8 bits, whatever its rounding rule, is stored as integers instead.
TEST(QdqOnnx, WeightsOfUpToEightBitsAreIntegersBehindDequantizeLinear) {
  at::Tensor x;
  auto m = calibrated(
      tinyBackend(
          {{"weight",
            {{"bits", 4}, {"symmetric", false}, {"unsigned", true}, {"rounding", "half_up"}}},
           {"activation", {{"bits", 4}}}}),
      x);
  deploy::QdqDetails details;
  Graph qdq = deploy::toQdqGraph(*m, &details);
  std::map<std::string, std::string>& quantized_values = details.quantized_values;
  for (const char* conv_name : {"conv1", "conv2"}) {
    const Node* conv = qdq.findNode(conv_name);
    ASSERT_NE(conv, nullptr) << conv_name;
    const Node* dq = conv->input(1)->producer();
    ASSERT_NE(dq, nullptr) << conv_name;
    ASSERT_EQ(dq->opType(), "DequantizeLinear") << conv_name;
    const Node* q = dq->input(0)->producer();
    ASSERT_NE(q, nullptr) << conv_name;
    EXPECT_EQ(q->opType(), "QuantizeLinear") << conv_name;
    EXPECT_TRUE(q->input(0)->isInitializer()) << conv_name;
    EXPECT_EQ(q->input(2)->initializer().scalar_type(), at::kByte) << conv_name;
  }
  // The integers are the 4-bit half-up levels of the float weight (closed form from the
  // quantizer's per-channel scale and zero point), and dequantized they are the prepared model's
  // weights.
  for (const char* weight : {"w1", "w2"}) {
    ASSERT_TRUE(quantized_values.count(weight)) << weight;
    Executor plain(qdq);
    const std::string levels_name = quantized_values[weight];
    const std::string dq_name = qdq.findValue(levels_name)->uses().front().node->output(0)->name();
    const TensorMap got = plain.run({{"x", x}}, {levels_name, dq_name});
    ASSERT_EQ(got.at(levels_name).scalar_type(), at::kByte) << weight;
    const at::Tensor levels = got.at(levels_name).to(at::kLong);
    const at::Tensor w = m->graph().findValue(weight)->initializer();
    const quant::QParams p = m->quantizer(weight)->qparams();
    const at::Tensor s = p.scale.to(at::kDouble).reshape({-1, 1, 1, 1});
    const at::Tensor zp = p.zero_point.to(at::kDouble).reshape({-1, 1, 1, 1});
    const at::Tensor want = at::clamp(at::floor(w.to(at::kDouble) / s + 0.5) + zp, 0, 15);
    EXPECT_TRUE(at::equal(levels, want.to(at::kLong))) << weight << ": " << levels << want;
    EXPECT_GT(levels.max().item<int64_t>(), levels.min().item<int64_t>()) << weight;
    const at::Tensor expected =
        m->quantizer(weight)->forward(m->graph().findValue(weight)->initializer());
    EXPECT_TRUE(at::equal(got.at(dq_name), expected)) << weight;
  }
  EXPECT_EQ(opCounts(qdq)["Round"], 2);  // the 4-bit activations only
  expectSameOutputs(*m, qdq, x);
}

TEST(QdqOnnx, DerivedBiasIsStoredAsInt32WithItsScale) {
  at::Tensor x;
  auto m = calibrated(tinyBackend({{"constraints", {{"bias", {{"mode", "derived"}}}}}}), x);
  Graph qdq = deploy::toQdqGraph(*m);
  const Node* conv = qdq.findNode("conv1");
  ASSERT_NE(conv, nullptr);
  const Node* dq = conv->input(2)->producer();
  ASSERT_NE(dq, nullptr);
  EXPECT_EQ(dq->opType(), "DequantizeLinear");
  EXPECT_EQ(dq->input(0)->initializer().scalar_type(), at::kInt);
  const at::Tensor scale = dq->input(1)->initializer();
  const at::Tensor expected =
      m->quantizer("x")->qparams().scale * m->quantizer("w1")->qparams().scale;
  EXPECT_TRUE(at::allclose(scale, expected));
  expectSameOutputs(*m, qdq, x);
}

// NNIE's log grid has no QuantizeLinear form: activations become float arithmetic, weights are
// stored on the grid, and ONNX Runtime running the file computes what the simulation does.
TEST(QdqOnnx, TheLogGridIsWrittenAsArithmeticThatComputesTheSame) {
  const nlohmann::json log_grid = {
      {"symmetric", true}, {"unsigned", false}, {"per_channel", false}, {"fake_quantizer", "NNIE"}};
  auto m = passes::prepare(convReluConv(),
                           tinyBackend({{"activation", log_grid}, {"weight", log_grid}}));
  // Values over several octaves and both signs, so codes on both sides of zero are used.
  const at::Tensor x = at::randn({2, 2, 5, 5}) * at::exp2(at::randint(-6, 3, {2, 2, 5, 5}));
  calibrateOn(*m, x);
  Graph qdq = deploy::toQdqGraph(*m);
  auto counts = opCounts(qdq);
  EXPECT_EQ(counts["QuantizeLinear"], 0);
  EXPECT_EQ(counts["FakeQuantize"], 0);
  EXPECT_GE(counts["Log"], 1);
  EXPECT_GE(counts["Pow"], 2);
  // The weights are stored as their grid values: each is +-2^(k/16) times a common factor.
  const at::Tensor w = qdq.findNode("conv1")->input(1)->initializer();
  const at::Tensor nonzero = w.masked_select(w != 0).abs().to(at::kDouble);
  const at::Tensor codes = nonzero.log2() * 16;
  EXPECT_TRUE(at::allclose(codes, codes.round(), 0, 1e-4)) << codes;

  const at::Tensor expected = m->executor().run({{"x", x}}).at("y");
  const at::Tensor ours = Executor(qdq).run({{"x", x}}).at("y");
  // float32 Log and Pow against the simulation's double: a value within an ulp of a code
  // boundary may take the neighbouring code; the outputs agree to float precision otherwise.
  EXPECT_LT(
      (ours - expected).abs().gt(1e-4 * expected.abs().max()).to(at::kFloat).mean().item<double>(),
      0.01);
  const std::string path = makeTempDir("qdq_log") + "/model.onnx";
  exportOnnxFile(qdq, path);
  EXPECT_EQ(onnxCheckerError(path), "");
  if (ortAvailable("the log-grid QDQ test")) {
    const at::Tensor ort = runInOrt(path, {{"x", x}}).at("y");
    const double noise = (ort - expected).pow(2).sum().item<double>();
    const double signal = expected.pow(2).sum().item<double>();
    EXPECT_GT(10 * std::log10(signal / std::max(noise, 1e-30)), 60.0);
  }
}

TEST(QdqOnnx, QuantizerTableHasEveryQuantizerWithItsParameters) {
  at::Tensor x;
  auto m = calibrated(tinyBackend(), x);
  const nlohmann::json table = deploy::quantizerTable(*m);
  ASSERT_EQ(table.size(), 4u);
  for (const auto& q : table) {
    const auto* fq = m->quantizer(q["name"].get<std::string>());
    ASSERT_NE(fq, nullptr);
    EXPECT_EQ(q["scale"].size(), q["zero_point"].size());
  }
  EXPECT_EQ(table[0]["name"], "w1");        // weights come before the input they meet
  EXPECT_EQ(table[0]["scale"].size(), 3u);  // per output channel
  EXPECT_EQ(table[0]["kind"], "weight");
}

// A prepared model saved at opset 10 (before prepare() raised models, or with a pass list that
// left the opset alone) is still written at the QDQ floor: ONNX Runtime adds a Round (opset 11)
// to a QDQ Conv with a float bias when it loads the model. Per-channel weights need 13.
TEST(QdqOnnx, AGraphBelowTheQdqFloorIsRaisedToItAndPerChannelTo13) {
  at::Tensor x;
  auto per_tensor = calibrated(tinyBackend({{"weight", {{"per_channel", false}}}}), x);
  per_tensor->graph().model.opset_imports[""] = 10;
  EXPECT_EQ(deploy::toQdqGraph(*per_tensor).model.opsetFor(""), 11);
  auto per_channel = calibrated(tinyBackend(), x);
  per_channel->graph().model.opset_imports[""] = 10;
  EXPECT_EQ(deploy::toQdqGraph(*per_channel).model.opsetFor(""), 13);
}

}  // namespace
}  // namespace qforge::testing
