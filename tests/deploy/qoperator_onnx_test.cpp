// The QOperator rewrite: QDQ groups become ONNX Runtime's integer kernels, data movement runs on
// the integers, and the result computes what the QDQ graph computes up to the requantization of
// each kernel (at most one output step), run here by the executor's ONNX-reference kernels.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include "deploy/qdq_onnx.h"
#include "deploy/qoperator_onnx.h"
#include "deploy/qoperator_rules.h"
#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

// uint8 asymmetric activations at unit inputs and outputs, int32 derived bias: ONNX_QNN's rules.
const nlohmann::json kIntegerPlacement = {
    {"placement", {{"unit_inputs", true}, {"unit_outputs", true}, {"graph_outputs", true}}},
    {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}};

struct Converted {
  std::unique_ptr<passes::PreparedModel> model;
  Graph qdq;
  Graph qop;
  deploy::QOperatorSummary summary;
  at::Tensor x;
};

Converted convert(Graph g, const nlohmann::json& patch, at::Tensor x) {
  Converted c;
  c.model = passes::prepare(std::move(g), tinyBackend(patch));
  c.x = x;
  calibrateOn(*c.model, x);
  c.qdq = deploy::toQdqGraph(*c.model);
  c.qop = deploy::toQOperatorGraph(c.qdq, &c.summary);
  return c;
}

// The scale of the activation quantizer in front of the unit anchored at an `op_type` node.
double stepOf(const Converted& c, const std::string& op_type) {
  for (const passes::QuantPoint& p : c.model->points()) {
    if (p.kind != passes::PointKind::Activation) continue;
    for (const passes::UnitSummary& u : c.model->units()) {
      if (u.name == p.unit && u.ops.rfind(op_type, 0) == 0)
        return c.model->quantizer(p.quantizer)->qparams().scale.max().item<double>();
    }
  }
  return 0;
}

// x[2,3,6,6] -> Conv -> Relu -> MaxPool(2) -> Conv -> y, every conv with a bias.
Graph convPoolConv() {
  at::manual_seed(3);
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{
      DType::Float, std::vector<Dim>{Dim::known(2), Dim::known(3), Dim::known(6), Dim::known(6)}};
  g.addInput(x);
  Node* c1 = g.addNode("Conv",
                       {x, g.addInitializer("w1", at::randn({4, 3, 3, 3})),
                        g.addInitializer("b1", at::randn({4}) * 0.1)},
                       {"c1"}, "conv1");
  c1->attributes.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  Node* r = g.addNode("Relu", {c1->output(0)}, {"r"}, "relu");
  Node* p = g.addNode("MaxPool", {r->output(0)}, {"p"}, "pool");
  p->attributes.set(Attribute::makeInts("kernel_shape", {2, 2}));
  p->attributes.set(Attribute::makeInts("strides", {2, 2}));
  Node* c2 = g.addNode("Conv",
                       {p->output(0), g.addInitializer("w2", at::randn({2, 4, 1, 1})),
                        g.addInitializer("b2", at::randn({2}) * 0.1)},
                       {"y"}, "conv2");
  (void)c2;
  g.addOutput(g.value("y"));
  g.model.opset_imports[""] = 13;
  return g;
}

TEST(QOperatorOnnx, ConvGroupsBecomeQLinearConvAndReluOnAZeroPointGridIsDropped) {
  Converted c = convert(convReluConv(), kIntegerPlacement, at::randn({2, 2, 5, 5}));
  const auto counts = opCounts(c.qop);
  EXPECT_EQ(counts.count("Conv"), 0u);
  EXPECT_EQ(counts.at("QLinearConv"), 2);
  // uint8 with zero point 0 after ReLU: the kernel's saturation is the ReLU.
  EXPECT_EQ(counts.count("Relu"), 0u);
  EXPECT_EQ(c.summary.integer_ops.at("QLinearConv"), 2);
  int biases = 0;
  for (const Node* n : c.qop.nodes()) {
    if (n->opType() != "QLinearConv") continue;
    EXPECT_EQ(n->input(3)->initializer().scalar_type(), at::kChar);  // weights stored as int8
    if (n->input(8) == nullptr) continue;                            // conv2 has no bias
    EXPECT_EQ(n->input(8)->initializer().scalar_type(), at::kInt);   // bias as int32
    ++biases;
  }
  EXPECT_EQ(biases, 1);
  EXPECT_EQ(c.qop.outputs().front()->name(), "y");
}

TEST(QOperatorOnnx, ComputesTheQdqGraphWithinOneOutputStep) {
  Converted c = convert(convReluConv(), kIntegerPlacement, at::randn({2, 2, 5, 5}));
  const at::Tensor x = at::randn({8, 2, 5, 5});
  const at::Tensor want = Executor(c.qdq).run({{"x", x}}).at("y");
  const at::Tensor got = Executor(c.qop).run({{"x", x}}).at("y");
  // The graph output is quantized: its step is the output quantizer's scale.
  double step = 0;
  for (quant::FakeQuantizer* q : c.model->quantizers()) {
    for (const passes::QuantPoint& p : c.model->points()) {
      if (p.quantizer == q->name() && p.value == "y") step = q->qparams().scale.item<double>();
    }
  }
  ASSERT_GT(step, 0);
  const at::Tensor steps = ((got - want).abs() / step).round();
  EXPECT_LE(steps.max().item<double>(), 1.0);
  // Requantizing in one kernel differs from dequantize-compute-quantize only near ties.
  EXPECT_GE((steps == 0).to(at::kDouble).mean().item<double>(), 0.95);
}

TEST(QOperatorOnnx, MaxPoolRunsOnTheIntegers) {
  Converted c = convert(convPoolConv(),
                        {{"ops", {{"MaxPool", "shares_input"}}},
                         {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
                         {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}},
                        at::randn({2, 3, 6, 6}));
  const auto counts = opCounts(c.qop);
  EXPECT_EQ(counts.at("QLinearConv"), 2);
  ASSERT_EQ(counts.at("MaxPool"), 1);
  for (const Node* n : c.qop.nodes()) {
    if (n->opType() == "MaxPool") {
      ASSERT_NE(n->input(0)->producer(), nullptr);
      EXPECT_EQ(n->input(0)->producer()->opType(), "QLinearConv");
      EXPECT_EQ(n->output(0)->uses().front().node->opType(), "QLinearConv");
    }
  }
  const at::Tensor x = at::randn({4, 3, 6, 6});
  const at::Tensor want = Executor(c.qdq).run({{"x", x}}).at("y");
  const at::Tensor got = Executor(c.qop).run({{"x", x}}).at("y");
  EXPECT_LE((got - want).abs().max().item<double>(), 2.0 * want.abs().max().item<double>() / 127);
}

// ONNX gives MaxPool 8-bit data only from opset 12 (OpInfo::moves_int8): at opset 11 it stays
// float after the first kernel's DequantizeLinear. What it selects is on that grid, so it is
// quantized again on it, and the Conv reading it, which shares the quantizer in front of the
// MaxPool, gets a DequantizeLinear to fuse with (float, ORT's Conv rounds otherwise than the
// emulation's: U^2-NetP's QOperator model was 30 steps from it).
TEST(QOperatorOnnx, MaxPoolBeforeOpset12StaysFloatAndIsRequantizedOnItsInputsGrid) {
  Graph g = convPoolConv();
  g.model.opset_imports[""] = 11;
  Converted c = convert(std::move(g),
                        {{"ops", {{"MaxPool", "shares_input"}}},
                         {"weight", {{"per_channel", false}}},  // per-channel Q/DQ needs opset 13
                         {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
                         {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}},
                        at::randn({2, 3, 6, 6}));
  EXPECT_EQ(c.qop.model.opsetFor(""), 11);
  const auto counts = opCounts(c.qop);
  EXPECT_EQ(counts.at("QLinearConv"), 2);
  EXPECT_EQ(counts.count("Conv"), 0u);
  ASSERT_EQ(counts.at("MaxPool"), 1);
  const Node* pool = nullptr;
  for (const Node* n : c.qop.nodes())
    pool = n->opType() == "MaxPool" ? n : pool;
  const Node* dq = pool->input(0)->producer();
  ASSERT_NE(dq, nullptr);
  EXPECT_EQ(dq->opType(), "DequantizeLinear");
  ASSERT_EQ(pool->output(0)->uses().size(), 1u);
  const Node* q = pool->output(0)->uses().front().node;
  ASSERT_EQ(q->opType(), "QuantizeLinear");
  EXPECT_EQ(q->input(1), dq->input(1));
  EXPECT_EQ(q->input(2), dq->input(2));
  EXPECT_EQ(q->output(0)->uses().front().node->opType(), "QLinearConv");

  const at::Tensor x = at::randn({4, 3, 6, 6});
  // The requantization changes no value: the integers it writes, dequantized, are the MaxPool's.
  const TensorMap inside =
      Executor(c.qop).run({{"x", x}}, {pool->output(0)->name(), q->output(0)->name()});
  // DequantizeLinear's arithmetic, (q - z) * s in float32, gives the selected values exactly.
  const at::Tensor scale = q->input(1)->initializer().to(at::kFloat);
  const at::Tensor zero_point = q->input(2)->initializer().to(at::kFloat);
  const at::Tensor back = (inside.at(q->output(0)->name()).to(at::kFloat) - zero_point) * scale;
  EXPECT_TRUE(at::equal(back, inside.at(pool->output(0)->name())));
  const at::Tensor want = Executor(c.qdq).run({{"x", x}}).at("y");
  const at::Tensor got = Executor(c.qop).run({{"x", x}}).at("y");
  EXPECT_LE((got - want).abs().max().item<double>(), 2.0 * want.abs().max().item<double>() / 127);
}

// x[N,2,4,4] -> Conv(w[3,2,1,1]) -> Reshape([N,3,16]) -> Transpose -> MatMul(m[3,5]) -> y.
Graph convReshapeMatMul() {
  at::manual_seed(5);
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{
      DType::Float, std::vector<Dim>{Dim::known(2), Dim::known(2), Dim::known(4), Dim::known(4)}};
  g.addInput(x);
  Node* c = g.addNode("Conv", {x, g.addInitializer("w", at::randn({3, 2, 1, 1}))}, {"c"}, "conv");
  Node* r = g.addNode("Reshape",
                      {c->output(0), g.addInitializer("shape", at::tensor({-1, 3, 16}, at::kLong))},
                      {"r"}, "reshape");
  Node* t = g.addNode("Transpose", {r->output(0)}, {"t"}, "transpose");
  t->attributes.set(Attribute::makeInts("perm", {0, 2, 1}));
  g.addNode("MatMul", {t->output(0), g.addInitializer("m", at::randn({3, 5}))}, {"y"}, "matmul");
  g.addOutput(g.value("y"));
  g.model.opset_imports[""] = 13;
  return g;
}

TEST(QOperatorOnnx, QuantizeMovesUpThroughReshapesSoTheProducerBecomesAnIntegerKernel) {
  // The MatMul's input quantizer sits after Reshape -> Transpose; the Conv producing the data
  // meets it once it moves up, as ONNX Runtime's Q/DQ propagation does.
  Converted c = convert(
      convReshapeMatMul(),
      {{"ops",
        {{"MatMul", "quantizable"}, {"Reshape", "shares_input"}, {"Transpose", "shares_input"}}},
       {"fusions", nlohmann::json::array(
                       {nlohmann::json::array({"Conv"}), nlohmann::json::array({"MatMul"})})}},
      at::randn({2, 2, 4, 4}));
  const auto counts = opCounts(c.qop);
  EXPECT_EQ(counts.at("QLinearConv"), 1) << c.summary.float_ops.size();
  EXPECT_EQ(counts.count("Conv"), 0u);
  // Both now move the integers the QLinearConv wrote: the Reshape reads it, the Transpose the
  // Reshape.
  int movers = 0;
  for (const Node* n : c.qop.nodes()) {
    if (n->opType() != "Reshape" && n->opType() != "Transpose") continue;
    ++movers;
    const Node* p = n->input(0)->producer();
    ASSERT_NE(p, nullptr) << n->opType();
    EXPECT_EQ(p->opType(), n->opType() == "Reshape" ? "QLinearConv" : "Reshape");
  }
  EXPECT_EQ(movers, 2);
  const at::Tensor x = at::randn({6, 2, 4, 4});
  const at::Tensor want = Executor(c.qdq).run({{"x", x}}).at("y");
  const at::Tensor got = Executor(c.qop).run({{"x", x}}).at("y");
  ASSERT_GT(stepOf(c, "MatMul"), 0.0);  // the MatMul's unit has its input quantizer
  // One requantization apart at most: the MatMul stays float, reading one step of its input.
  EXPECT_LE((got - want).abs().max().item<double>(),
            1.01 *
                at::matmul(at::ones({1, 3}), c.model->graph().value("m")->initializer().abs())
                    .max()
                    .item<double>() *
                stepOf(c, "MatMul"));
}

TEST(QOperatorOnnx, ReluOnASignedGridStaysAndReadsTheKernelsDequantizedOutput) {
  // int8 symmetric activations: zero point 0 is mid-grid, so ReLU still removes values.
  const nlohmann::json sym = {{"activation", {{"symmetric", true}, {"unsigned", false}}},
                              {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
                              {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}};
  Converted c = convert(convReluConv(), sym, at::randn({2, 2, 5, 5}));
  const auto counts = opCounts(c.qop);
  EXPECT_EQ(counts.at("QLinearConv"), 2);
  ASSERT_EQ(counts.at("Relu"), 1);
  for (const Node* n : c.qop.nodes()) {
    if (n->opType() == "Relu") {
      EXPECT_EQ(n->input(0)->producer()->opType(), "DequantizeLinear");
    }
  }
  const at::Tensor x = at::randn({8, 2, 5, 5});
  const at::Tensor want = Executor(c.qdq).run({{"x", x}}).at("y");
  const at::Tensor got = Executor(c.qop).run({{"x", x}}).at("y");
  EXPECT_LE((got - want).abs().max().item<double>(), 1.01 * want.abs().max().item<double>() / 127);
}

TEST(QOperatorOnnx, GroupsWithoutAnIntegerKernelStayFloat) {
  // 4-bit activations are lowered to arithmetic, not QuantizeLinear: nothing to fuse.
  const nlohmann::json four_bit = {{"activation", {{"bits", 4}}},
                                   {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}}};
  Converted c = convert(convReluConv(), four_bit, at::randn({2, 2, 5, 5}));
  EXPECT_TRUE(c.summary.integer_ops.empty());
  EXPECT_EQ(opCounts(c.qop).at("Conv"), 2);
  // Inputs-only placement (TensorRT-like): conv1's output is quantized as conv2's input, but
  // conv2's output y is not, so conv2 stays a float Conv reading dequantized values.
  Converted d = convert(convReluConv(), nlohmann::json::object(), at::randn({2, 2, 5, 5}));
  EXPECT_EQ(opCounts(d.qop).at("QLinearConv"), 1);
  EXPECT_EQ(opCounts(d.qop).at("Conv"), 1);
  ASSERT_EQ(d.summary.float_ops.size(), 1u);
  EXPECT_NE(d.summary.float_ops.front().find("conv2"), std::string::npos)
      << d.summary.float_ops.front();
}

TEST(QOperatorOnnx, EachFloatNodeSaysWhyItHasNoIntegerKernel) {
  // conv2's output y is not quantized (inputs-only placement): the Conv rule refuses, and says so.
  Converted d = convert(convReluConv(), nlohmann::json::object(), at::randn({2, 2, 5, 5}));
  ASSERT_EQ(d.summary.not_fused.size(), 1u);
  const std::string why = d.summary.not_fused.at("conv2");
  EXPECT_EQ(why.rfind("no QLinearConv: ", 0), 0u) << why;
  EXPECT_NE(why.find("QuantizeLinear"), std::string::npos) << why;
  EXPECT_EQ(d.summary.kernel_of.at("conv1"), "QLinearConv");
  EXPECT_EQ(d.summary.kernel_of.count("conv2"), 0u);
}

// What ONNX Runtime's QLinearConv cannot take stays a float Conv between DequantizeLinear and
// QuantizeLinear, so the QOperator model still loads and runs; the summary says why.
TEST(QOperatorOnnx, ConvGroupsOnnxRuntimeCannotRunStayQdqWithTheReason) {
  // Asymmetric per-channel weights (Academic, PPLCUDA): one zero point per channel.
  nlohmann::json asymmetric = kIntegerPlacement;
  asymmetric["weight"] = {{"symmetric", false}};
  Converted a = convert(convReluConv(), asymmetric, at::randn({2, 2, 5, 5}));
  EXPECT_EQ(opCounts(a.qop).count("QLinearConv"), 0u);
  EXPECT_EQ(opCounts(a.qop).at("Conv"), 2);
  ASSERT_EQ(a.summary.not_fused.count("conv1"), 1u);
  EXPECT_NE(a.summary.not_fused.at("conv1").find("weight zero points differ between channels"),
            std::string::npos)
      << a.summary.not_fused.at("conv1");
  // Symmetric per-channel weights have one zero point (0) for all: they fuse.
  Converted s = convert(convReluConv(), kIntegerPlacement, at::randn({2, 2, 5, 5}));
  EXPECT_EQ(opCounts(s.qop).at("QLinearConv"), 2);

  // A signed graph input next to unsigned outputs after Relu (OpenVINO): conv1 reads int8 and
  // writes uint8.
  const nlohmann::json mixed = {{"activation", {{"symmetric", true}, {"unsigned", false}}},
                                {"constraints", {{"unsigned_after_relu", true}}}};
  Converted m = convert(convReluConv(), mixed, at::randn({2, 2, 5, 5}));
  for (const auto& [node, why] : m.summary.not_fused) {
    if (why.find("different 8-bit types") != std::string::npos) return;
  }
  // When every activation quantizer shares one type, this backend patch did not mix them, and
  // the test has not tested anything: fail loudly.
  ADD_FAILURE() << "no group was refused for mixing int8 and uint8";
}

TEST(QOperatorOnnx, OpsWithoutARuleAreNamedAsHavingNoKernel) {
  // A Tanh between two quantized points reads a dequantized value; ONNX Runtime has no integer
  // Tanh kernel, so it stays float and the summary names the reason.
  Graph g = convReluConv();
  Value* y = g.value("y");
  g.addNode("Tanh", {y}, {"s"}, "tanh");
  g.setOutputs({g.value("s")});
  Converted c = convert(std::move(g),
                        {{"ops", {{"Tanh", "quantizable"}}},
                         {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
                         {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}},
                        at::randn({2, 2, 5, 5}));
  ASSERT_EQ(c.summary.not_fused.count("tanh"), 1u);
  EXPECT_EQ(c.summary.not_fused.at("tanh"), "ONNX Runtime has no integer kernel for Tanh");
  EXPECT_EQ(opCounts(c.qop).at("QLinearConv"), 2);
}

// DequantizeLinear -> Sigmoid -> QuantizeLinear is what ONNX Runtime's QDQ transformer turns into
// com.microsoft QLinearSigmoid: the QOperator model says so itself, and computes within a step.
TEST(QOperatorOnnx, AQuantizedSigmoidBecomesQLinearSigmoid) {
  Graph g = convReluConv();
  g.addNode("Sigmoid", {g.value("y")}, {"s"}, "sigmoid");
  g.setOutputs({g.value("s")});
  Converted c = convert(std::move(g),
                        {{"ops", {{"Sigmoid", "quantizable"}}},
                         {"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
                         {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}},
                        at::randn({2, 2, 5, 5}));
  EXPECT_EQ(c.summary.kernel_of.at("sigmoid"), "QLinearSigmoid");
  EXPECT_EQ(opCounts(c.qop).count("Sigmoid"), 0u);
  const at::Tensor x = at::randn({4, 2, 5, 5});
  const at::Tensor want = Executor(c.qdq).run({{"x", x}}).at("s");
  const at::Tensor got = Executor(c.qop, {}, ortEmulationRegistry()).run({{"x", x}}).at("s");
  EXPECT_LE((got - want).abs().max().item<double>(), 2.01 / 256) << "more than a step or two";
}

TEST(QOperatorOnnx, RulesCoverTheKernelsOnnxRuntimeHas) {
  Graph g;
  Value* a = g.addValue("a");
  const std::map<std::string, std::string> want = {
      {"Conv", "QLinearConv"},
      {"MatMul", "QLinearMatMul"},
      {"Gemm", "QGemm"},
      {"Add", "QLinearAdd"},
      {"Mul", "QLinearMul"},
      {"AveragePool", "QLinearAveragePool"},
      {"GlobalAveragePool", "QLinearGlobalAveragePool"},
      {"Concat", "QLinearConcat"},
      {"LeakyRelu", "QLinearLeakyRelu"},
      {"Sigmoid", "QLinearSigmoid"},
      {"Softmax", "QLinearSoftmax"}};
  for (const auto& [op, kernel] : want) {
    const Node* n = g.addNode(op, {a}, {g.uniqueName("o")}, op);
    const deploy::QOperatorRule* rule = deploy::qoperatorRuleFor(*n);
    ASSERT_NE(rule, nullptr) << op;
    EXPECT_EQ(std::string(rule->kernel), kernel);
  }
  EXPECT_EQ(deploy::qoperatorRuleFor(*g.addNode("Relu", {a}, {"r"}, "relu")), nullptr);
  EXPECT_EQ(deploy::qoperatorRuleFor(*g.addNode("Conv", {a}, {"c"}, "c", "com.example")), nullptr);
}

}  // namespace
}  // namespace qforge::testing
