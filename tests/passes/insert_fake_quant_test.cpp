// Placement of fake quantizers on tiny graphs: structure (where the FakeQuantize nodes are, which
// quantizer each runs) and numerics (outputs against PyTorch's own fake_quantize ops with
// closed-form MinMax parameters).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "ir/onnx_import.h"
#include "ir/parse.h"
#include "passes/fake_quantize_node.h"
#include "passes/prepare.h"
#include "support/onnx_builder.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

using passes::PointKind;

std::vector<const Node*> fakeQuantizeNodes(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes()) {
    if (passes::isFakeQuantize(n)) out.push_back(n);
  }
  return out;
}

// The quantizer between `v`'s producer side and `consumer`'s input `slot`, or "".
std::string quantizerBefore(const Graph& g, const std::string& consumer, size_t slot) {
  const Node* n = g.findNode(consumer);
  const Value* in = n ? n->input(slot) : nullptr;
  if (in == nullptr || !passes::isFakeQuantize(in->producer())) return "";
  return passes::quantizerOf(*in->producer());
}

float toFloat(double v) {
  return static_cast<float>(v);
}

TEST(InsertFakeQuant, InputsPlacementQuantizesWeightsAndWhatEachUnitReads) {
  auto m = passes::prepare(convReluConv(), tinyBackend());
  const Graph& g = m->graph();
  EXPECT_EQ(fakeQuantizeNodes(g).size(), 4u);
  ASSERT_EQ(m->points().size(), 4u);
  EXPECT_EQ(quantizerBefore(g, "conv1", 0), "x");
  EXPECT_EQ(quantizerBefore(g, "conv1", 1), "w1");
  EXPECT_EQ(quantizerBefore(g, "conv2", 0), "r");  // after the fused ReLU, not between
  EXPECT_EQ(quantizerBefore(g, "conv2", 1), "w2");
  EXPECT_EQ(quantizerBefore(g, "relu", 0), "");  // nothing inside the Conv+Relu unit
  EXPECT_EQ(m->units().size(), 2u);
  EXPECT_EQ(m->units()[0].ops, "Conv+Relu");
  EXPECT_EQ(m->quantizer("w1")->scheme().axis, 0);
  EXPECT_EQ(m->quantizer("x")->scheme().axis, -1);
  EXPECT_EQ(g.outputs().front()->name(), "y");  // graph output untouched
}

TEST(InsertFakeQuant, QuantizedOutputMatchesPyTorchFakeQuantizeReference) {
  Graph reference_graph = convReluConv();
  const at::Tensor w1 = reference_graph.value("w1")->initializer();
  const at::Tensor b1 = reference_graph.value("b1")->initializer();
  const at::Tensor w2 = reference_graph.value("w2")->initializer();
  auto m = passes::prepare(convReluConv(), tinyBackend());
  const at::Tensor x = at::randn({2, 2, 5, 5});
  calibrateOn(*m, x);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");

  // Independent reference: ATen's conv2d/relu and PyTorch's fake_quantize kernels, with MinMax
  // parameters computed here from the data.
  // Calibration runs the float model (every quantizer off), so each activation's range is the
  // float network's.
  auto fq_act = [](const at::Tensor& t, const at::Tensor& calibrated_on) {
    const float s = toFloat(asymmetricScale(calibrated_on));
    return at::fake_quantize_per_tensor_affine(t, s, asymmetricZeroPoint(calibrated_on, s), 0, 255);
  };
  auto fq_weight = [](const at::Tensor& w) {
    const at::Tensor s = symmetricScalesPerChannel(w).to(at::kFloat);
    return at::fake_quantize_per_channel_affine(w, s, at::zeros({w.size(0)}, at::kInt), 0, -128,
                                                127);
  };
  const at::Tensor float_h = at::relu(at::conv2d(x, w1, b1, 1, 1));
  const at::Tensor h = at::relu(at::conv2d(fq_act(x, x), fq_weight(w1), b1, 1, 1));
  const at::Tensor expected = at::conv2d(fq_act(h, float_h), fq_weight(w2));
  EXPECT_TRUE(at::allclose(y, expected, 1e-5, 1e-5)) << (y - expected).abs().max();
  // And quantization changed something: the test would notice a no-op quantizer.
  const at::Tensor float_y = at::conv2d(float_h, w2);
  EXPECT_GT((y - float_y).abs().max().item<double>(), 1e-4);
}

TEST(InsertFakeQuant, OutputsPlacementQuantizesUnitOutputsAndKeepsGraphOutputNames) {
  auto m = passes::prepare(
      convReluConv(),
      tinyBackend({{"placement",
                    {{"unit_inputs", false}, {"unit_outputs", true}, {"graph_inputs", true}}}}));
  const Graph& g = m->graph();
  // x (graph input), w1, r (unit 1 output), w2, y (unit 2 output, a graph output).
  EXPECT_EQ(fakeQuantizeNodes(g).size(), 5u);
  EXPECT_EQ(quantizerBefore(g, "conv1", 0), "x");
  EXPECT_EQ(quantizerBefore(g, "conv2", 0), "r");
  ASSERT_EQ(g.outputs().size(), 1u);
  const Value* out = g.outputs().front();
  EXPECT_EQ(out->name(), "y");
  ASSERT_TRUE(passes::isFakeQuantize(out->producer()));
  EXPECT_EQ(passes::quantizerOf(*out->producer()), "y");
}

TEST(InsertFakeQuant, AValueReadByTwoUnitsGetsOneQuantizer) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* a = g.addNode("Conv", {x, g.addInitializer("wa", at::randn({2, 2, 1, 1}))}, {"a"}, "ca");
  Node* b = g.addNode("Conv", {x, g.addInitializer("wb", at::randn({2, 2, 1, 1}))}, {"b"}, "cb");
  Node* add = g.addNode("Add", {a->output(0), b->output(0)}, {"y"}, "add");
  g.addOutput(add->output(0));
  auto m = passes::prepare(std::move(g), tinyBackend());
  const Graph& p = m->graph();
  EXPECT_EQ(quantizerBefore(p, "ca", 0), "x");
  EXPECT_EQ(quantizerBefore(p, "cb", 0), "x");
  EXPECT_EQ(p.findNode("ca")->input(0), p.findNode("cb")->input(0));  // one node, not two
  EXPECT_EQ(quantizerBefore(p, "add", 0), "a");
  EXPECT_EQ(quantizerBefore(p, "add", 1), "b");
  EXPECT_EQ(fakeQuantizeNodes(p).size(), 5u);
}

TEST(InsertFakeQuant, SharesInputOpsCarryTheirInputsQuantizer) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* c1 =
      g.addNode("Conv", {x, g.addInitializer("w1", at::randn({2, 2, 1, 1}))}, {"c1"}, "conv1");
  Node* pool = g.addNode("MaxPool", {c1->output(0)}, {"p"}, "pool");
  pool->attributes.set(Attribute::makeInts("kernel_shape", {2, 2}));
  Node* c2 = g.addNode("Conv", {pool->output(0), g.addInitializer("w2", at::randn({2, 2, 1, 1}))},
                       {"y"}, "conv2");
  g.addOutput(c2->output(0));
  auto m = passes::prepare(
      std::move(g), tinyBackend({{"placement", {{"unit_inputs", true}, {"unit_outputs", true}}}}));
  const Graph& p = m->graph();
  EXPECT_EQ(quantizerBefore(p, "pool", 0), "c1");
  EXPECT_EQ(quantizerBefore(p, "conv2", 0), "");  // MaxPool output counts as quantized
  // x, w1, c1, w2, y
  EXPECT_EQ(fakeQuantizeNodes(p).size(), 5u);
}

TEST(InsertFakeQuant, ConcatInputsShareOneQuantizerWhoseRangeCoversBoth) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* a = g.addNode("Relu", {x}, {"a"}, "ra");
  Node* neg = g.addNode("Neg", {x}, {"n"}, "neg");
  Node* cat = g.addNode("Concat", {a->output(0), neg->output(0)}, {"y"}, "cat");
  cat->attributes.set(Attribute::makeInt("axis", 1));
  g.addOutput(cat->output(0));
  auto m = passes::prepare(std::move(g),
                           tinyBackend({{"constraints", {{"concat_shared_scale", true}}}}));
  const Graph& p = m->graph();
  const std::string q0 = quantizerBefore(p, "cat", 0);
  EXPECT_FALSE(q0.empty());
  EXPECT_EQ(q0, quantizerBefore(p, "cat", 1));
  EXPECT_EQ(m->points().size(), 1u);
  const at::Tensor xin = at::tensor({-3.0f, 0.5f, 1.0f, 2.0f}).reshape({1, 4});
  m->setMode(quant::FakeQuantMode::Calibration);
  m->executor().run({{"x", xin}});
  m->setMode(quant::FakeQuantMode::Quantization);
  // relu(x) spans [0, 2], -x spans [-2, 3]: the shared range is [-2, 3].
  EXPECT_NEAR(m->quantizer(q0)->qparams().scaleValue(), 5.0 / 255, 1e-7);
}

TEST(InsertFakeQuant, UnsignedGridAfterReluWhenTheBackendAsks) {
  auto m = passes::prepare(convReluConv(),
                           tinyBackend({{"activation", {{"symmetric", true}, {"unsigned", false}}},
                                        {"constraints", {{"unsigned_after_relu", true}}}}));
  EXPECT_FALSE(m->quantizer("x")->scheme().is_unsigned);  // graph input: could be negative
  EXPECT_TRUE(m->quantizer("r")->scheme().is_unsigned);   // after the fused ReLU
  EXPECT_EQ(m->quantizer("r")->scheme().qmax(), 255);
}

TEST(InsertFakeQuant, FirstAndLastUnitsKeepTheirWidth) {
  Graph g = convReluConv();
  // Insert a third conv between relu and conv2 so there is a middle unit.
  Node* conv2 = g.findNode("conv2");
  Node* mid = g.addNode("Conv", {g.value("r"), g.addInitializer("wm", at::randn({3, 3, 1, 1}))},
                        {"m"}, "mid");
  g.setInput(conv2, 0, mid->output(0));
  auto m = passes::prepare(std::move(g), tinyBackend({{"weight", {{"bits", 4}}},
                                                      {"activation", {{"bits", 4}}},
                                                      {"constraints", {{"first_last_bits", 8}}}}));
  EXPECT_EQ(m->quantizer("w1")->scheme().bits, 8);
  EXPECT_EQ(m->quantizer("x")->scheme().bits, 8);
  EXPECT_EQ(m->quantizer("wm")->scheme().bits, 4);
  EXPECT_EQ(m->quantizer("r")->scheme().bits, 4);
  EXPECT_EQ(m->quantizer("w2")->scheme().bits, 8);
  EXPECT_EQ(m->quantizer("m")->scheme().bits, 8);
}

TEST(InsertFakeQuant, DerivedBiasUsesInputTimesWeightScale) {
  Graph source = convReluConv();
  const at::Tensor b1 = source.value("b1")->initializer().clone();
  auto m = passes::prepare(
      std::move(source),
      tinyBackend({{"constraints", {{"bias", {{"mode", "derived"}, {"bits", 8}}}}}}));
  ASSERT_NE(m->quantizer("b1"), nullptr);
  const at::Tensor x = at::randn({2, 2, 5, 5});
  calibrateOn(*m, x);
  const at::Tensor s = (m->quantizer("x")->qparams().scale.to(at::kDouble) *
                        m->quantizer("w1")->qparams().scale.to(at::kDouble));
  const at::Tensor got = m->quantizer("b1")->forward(b1);
  const at::Tensor expected =
      (at::clamp(at::round(b1.to(at::kDouble) / s), -128, 127) * s).to(at::kFloat);
  EXPECT_TRUE(at::allclose(got, expected, 0, 1e-7));
  EXPECT_FALSE(at::equal(got, b1));
}

TEST(InsertFakeQuant, FixedRoleUsesTheFunctionsKnownRange) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* s = g.addNode("Sigmoid", {x}, {"y"}, "sig");
  g.addOutput(s->output(0));
  auto m = passes::prepare(std::move(g), tinyBackend());
  ASSERT_EQ(m->points().size(), 1u);
  EXPECT_EQ(m->points()[0].kind, PointKind::FixedOutput);
  m->setMode(quant::FakeQuantMode::Quantization);  // nothing to calibrate
  const at::Tensor xin = at::randn({64}) * 4;
  const at::Tensor y = m->executor().run({{"x", xin}}).at("y");
  const at::Tensor expected =
      at::fake_quantize_per_tensor_affine(at::sigmoid(xin), 1.0 / 256, 0, 0, 255);
  EXPECT_TRUE(at::equal(y, expected));
}

TEST(InsertFakeQuant, SkippedUnitsAndUnknownOpsStayFloatAndAreReported) {
  Graph g = convReluConv();
  Node* conv2 = g.findNode("conv2");
  Node* sm = g.addNode("Softmax", {conv2->output(0)}, {"probs"}, "softmax");
  g.setOutputs({sm->output(0)});
  passes::PrepareOptions options;
  options.config = passes::parseQuantConfig(
      nlohmann::json{{"overrides", {{{"name", "conv2"}, {"skip", true}}}}}, "test config");
  auto m = passes::prepare(std::move(g), tinyBackend(), options);
  EXPECT_EQ(quantizerBefore(m->graph(), "conv2", 0), "");
  EXPECT_EQ(quantizerBefore(m->graph(), "conv2", 1), "");
  EXPECT_EQ(m->points().size(), 2u);  // x and w1
  ASSERT_EQ(m->units().size(), 2u);
  EXPECT_TRUE(m->units()[1].skipped);
  const auto& floats = m->floatOps();
  EXPECT_TRUE(std::any_of(floats.begin(), floats.end(),
                          [](const std::string& l) { return l.rfind("Softmax", 0) == 0; }));
}

// x -> Conv -> BatchNormalization -> Relu -> y, for the fold / keep-BN choice.
Graph convBnRelu() {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* c = g.addNode("Conv", {x, g.addInitializer("w", at::randn({3, 2, 1, 1}))}, {"c"}, "conv");
  Node* bn =
      g.addNode("BatchNormalization",
                {c->output(0), g.addInitializer("gamma", at::rand({3}) + 0.5),
                 g.addInitializer("beta", at::randn({3})), g.addInitializer("mean", at::randn({3})),
                 g.addInitializer("var", at::rand({3}) + 0.5)},
                {"b"}, "bn");
  Node* r = g.addNode("Relu", {bn->output(0)}, {"y"}, "relu");
  g.addOutput(r->output(0));
  return g;
}

TEST(InsertFakeQuant, BatchNormIsFoldedForPtqAndKeptInsideTheUnitForQat) {
  const auto backend = tinyBackend({{"fusions", {{"Conv", "BatchNormalization?", "Relu?"}}}});
  auto folded = passes::prepare(convBnRelu(), backend);
  EXPECT_EQ(folded->graph().findNode("bn"), nullptr);
  EXPECT_EQ(folded->units()[0].ops, "Conv+Relu");

  passes::PrepareOptions keep;
  keep.fold_batchnorm = false;
  auto kept = passes::prepare(convBnRelu(), backend, keep);
  ASSERT_NE(kept->graph().findNode("bn"), nullptr);
  EXPECT_EQ(kept->units()[0].ops, "Conv+BatchNormalization+Relu");
  EXPECT_EQ(quantizerBefore(kept->graph(), "bn", 0), "");  // nothing inside the unit
  EXPECT_EQ(quantizerBefore(kept->graph(), "relu", 0), "");
  EXPECT_EQ(quantizerBefore(kept->graph(), "conv", 1), "w");
  EXPECT_EQ(kept->points().size(), 2u);
}

TEST(InsertFakeQuant, CalibrationIsRequiredBeforeQuantizing) {
  auto m = passes::prepare(convReluConv(), tinyBackend());
  m->setMode(quant::FakeQuantMode::Quantization);
  try {
    m->executor().run({{"x", at::randn({1, 2, 5, 5})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run calibration first"), std::string::npos) << e.what();
  }
}

// x[1,2,5,5] -> Conv(w[3,2,3,3], b, pad 1) -> Relu -> y as an ONNX file whose nodes and opset
// import spell the default domain `domain`.
Graph convReluInDomain(const std::string& domain) {
  at::manual_seed(3);
  OnnxBuilder b;
  b.model().mutable_opset_import(0)->set_domain(domain);
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 5, 5})
      .output("y", onnx::TensorProto::FLOAT, {1, 3, 5, 5});
  b.initializer("w", at::randn({3, 2, 3, 3})).initializer("b", at::randn({3}));
  onnx::NodeProto& conv = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  addIntsAttribute(conv, "pads", {1, 1, 1, 1});
  conv.set_domain(domain);
  b.node("Relu", {"c"}, {"y"}, "relu").set_domain(domain);
  return importOnnxModel(b.model(), "");
}

TEST(InsertFakeQuant, ConvInTheAiOnnxDomainIsQuantizedLikeOneInTheDefaultDomain) {
  auto plain = passes::prepare(convReluInDomain(""), tinyBackend());
  auto spelled = passes::prepare(convReluInDomain("ai.onnx"), tinyBackend());
  ASSERT_EQ(spelled->units().size(), 1u);
  EXPECT_EQ(spelled->units()[0].ops, "Conv+Relu");
  // Weight w, input x: the same points, on the same values, as the "" spelling.
  ASSERT_EQ(spelled->points().size(), 2u);
  ASSERT_EQ(plain->points().size(), spelled->points().size());
  for (size_t i = 0; i < plain->points().size(); ++i) {
    EXPECT_EQ(spelled->points()[i].kind, plain->points()[i].kind);
    EXPECT_EQ(spelled->points()[i].value, plain->points()[i].value);
  }
  EXPECT_EQ(quantizerBefore(spelled->graph(), "conv", 1), "w");
  EXPECT_EQ(fakeQuantizeNodes(spelled->graph()).size(), 2u);
  const at::Tensor x = at::randn({1, 2, 5, 5});
  for (auto* m : {plain.get(), spelled.get()})
    m->setMode(quant::FakeQuantMode::CalibrateAndQuantize);
  EXPECT_TRUE(at::equal(spelled->executor().run({{"x", x}}).at("y"),
                        plain->executor().run({{"x", x}}).at("y")));
}

backends::BackendConfig outputsBackend() {
  return tinyBackend(
      {{"ops", {{"Mul", "quantizable"}, {"Cast", "quantizable"}}},
       {"placement", {{"unit_inputs", true}, {"unit_outputs", true}, {"graph_inputs", true}}}});
}

TEST(InsertFakeQuant, NoQuantizerOnIntegersOrShapeComputations) {
  auto m = passes::prepare(parseGraph(kShapeArithmeticGraph), outputsBackend());
  std::vector<std::string> quantized;
  for (const passes::QuantPoint& p : m->points())
    quantized.push_back(p.value);
  EXPECT_EQ(quantized, (std::vector<std::string>{"x", "y"}));
  // The Mul of two sizes is no unit; the Cast of an activation is, with its input quantized only.
  std::vector<std::string> units;
  for (const passes::UnitSummary& u : m->units())
    units.push_back(u.name);
  EXPECT_EQ(units, (std::vector<std::string>{"data_mul", "to_int"}));
  EXPECT_EQ(quantizerBefore(m->graph(), "to_int", 0), "y");
  EXPECT_EQ(quantizerBefore(m->graph(), "shape_mul", 0), "");
  EXPECT_EQ(fakeQuantizeNodes(m->graph()).size(), 2u);
  // Nor is the shape arithmetic reported as an op the backend leaves in float.
  EXPECT_TRUE(m->floatOps().empty()) << m->floatOps().front();
}

TEST(InsertFakeQuant, ShapeArithmeticRunsInFloatAndTheDataPathMatchesPyTorch) {
  auto m = passes::prepare(parseGraph(kShapeArithmeticGraph), outputsBackend());
  const at::Tensor x = at::randn({3, 2});
  const at::Tensor ids = at::tensor({0, 3, 1}, at::kLong);
  m->setMode(quant::FakeQuantMode::Calibration);
  m->executor().run({{"x", x}, {"ids", ids}});
  m->setMode(quant::FakeQuantMode::Quantization);
  const TensorMap out = m->executor().run({{"x", x}, {"ids", ids}});

  // Reference: the batch of 3 makes k = 1.5; MinMax ranges of the float run, PyTorch's kernel.
  const auto fq = [](const at::Tensor& t, const at::Tensor& range) {
    const double s = asymmetricScale(range);
    return at::fake_quantize_per_tensor_affine(t, static_cast<float>(s),
                                               asymmetricZeroPoint(range, s), 0, 255);
  };
  const at::Tensor y = fq(fq(x, x) * 1.5, x * 1.5);
  EXPECT_TRUE(at::allclose(out.at("y"), y, 0, 1e-6)) << out.at("y") << y;
  EXPECT_TRUE(at::equal(out.at("yi"), y.to(at::kLong)));
  EXPECT_EQ(out.at("yi").scalar_type(), at::kLong);
  const at::Tensor table = m->graph().value("table")->initializer();
  EXPECT_TRUE(at::equal(out.at("e"), table.index_select(0, ids)));  // float: Gather is no unit
}

// A heat map's local maxima as detectors keep them: Equal(MaxPool(s), s). The backend quantizes
// MaxPool's input; the other side of the Equal must read the same quantized s, or no element is
// ever equal once quantized.
const char* const kLocalMaxima = R"(
  graph g
  input %x: float32[N,1,1,6]
  %s = Sigmoid(%x)  # sigmoid
  %m = MaxPool[kernel_shape=[1,3], pads=[0,1,0,1], strides=[1,1]](%s)  # maxpool
  %flat = Reshape(%s, %shape)  # flatten
  %mflat = Reshape(%m, %shape)  # flatten_max
  %eq = Equal(%mflat, %flat)  # equal
  %keep = Cast[to=1](%eq)  # keep
  %y = Mul(%flat, %keep)  # peaks
  output %y
  init %shape: int64[2] = {-1, 6}
)";

// MaxPool quantizes its input; Sigmoid (fixed in tinyBackend, which would quantize s for every
// reader) stays float here, so s has a quantized use and float ones.
backends::BackendConfig maxPoolBackend() {
  return tinyBackend({{"ops", {{"MaxPool", "quantizable"}, {"Sigmoid", nullptr}}},
                      {"placement", {{"unit_inputs", true}, {"graph_inputs", false}}}});
}

TEST(InsertFakeQuant, BothSidesOfAnEqualReadTheSameQuantizedValue) {
  auto m = passes::prepare(parseGraph(kLocalMaxima), maxPoolBackend());
  ASSERT_EQ(m->points().size(), 1u);
  EXPECT_EQ(m->points()[0].value, "s");
  EXPECT_EQ(quantizerBefore(m->graph(), "maxpool", 0), m->points()[0].quantizer);
  // The float side (Reshape of s) now reads the quantizer too, and so does nothing else.
  EXPECT_EQ(quantizerBefore(m->graph(), "flatten", 0), m->points()[0].quantizer);
  EXPECT_EQ(fakeQuantizeNodes(m->graph()).size(), 1u);

  // Numerics against a closed form: peaks keep q(s) where q(s) is the max of its window of 3.
  const at::Tensor x = at::tensor({-2.0f, 1.0f, 0.5f, 0.7f, 3.0f, -1.0f}).reshape({1, 1, 1, 6});
  m->setMode(quant::FakeQuantMode::Calibration);
  m->executor().run({{"x", x}});
  m->setMode(quant::FakeQuantMode::Quantization);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");
  const at::Tensor s = at::sigmoid(x).reshape({6});
  const double scale = asymmetricScale(s);
  const at::Tensor qs = at::fake_quantize_per_tensor_affine(s, static_cast<float>(scale),
                                                            asymmetricZeroPoint(s, scale), 0, 255);
  const at::Tensor window_max = at::max_pool1d(qs.view({1, 1, 6}), 3, 1, 1).view({6});
  const at::Tensor want = (qs * (window_max == qs).to(at::kFloat)).view({1, 6});
  EXPECT_TRUE(at::allclose(y, want, 0, 1e-6)) << y << want;
  EXPECT_EQ(at::count_nonzero(y).item<int64_t>(), 2);  // the peaks at 1.0 and 3.0
}

// An Equal of two different values is left alone: each side keeps what it read.
TEST(InsertFakeQuant, AnEqualOfUnrelatedValuesIsLeftAlone) {
  const char* const unrelated = R"(
    graph g
    input %x: float32[N,1,1,6]
    input %z: float32[N,1,1,6]
    %m = MaxPool[kernel_shape=[1,3], pads=[0,1,0,1], strides=[1,1]](%x)  # maxpool
    %eq = Equal(%m, %z)  # equal
    output %eq
  )";
  auto m = passes::prepare(parseGraph(unrelated), maxPoolBackend());
  EXPECT_NE(quantizerBefore(m->graph(), "maxpool", 0), "");
  EXPECT_EQ(m->graph().findNode("equal")->input(1)->name(), "z");
}

}  // namespace
}  // namespace qforge::testing
