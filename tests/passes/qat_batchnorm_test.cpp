// Simulated BN folding for QAT on tiny graphs and the zoo ResNet: structure (what is rewritten
// and what is left alone), numerics against closed-form references (conv + fake quantization
// written with ATen ops here, PyTorch's own at::batch_norm for training statistics), the running
// statistics' updates, gradients, and the merge back to the graph prepare() gives with BN folded.
#include "passes/qat_batchnorm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "algos/calibrate.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "passes/fake_quantize_node.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

constexpr double kEpsilon = 1e-3;
constexpr double kMomentum = 0.9;  // ONNX's: running = running * 0.9 + batch * 0.1

struct ConvBn {
  at::Tensor w, b, gamma, beta, mean, var;
};

// x[4,2,5,5] -> Conv(w[3,2,3,3], b, pad 1) -> BatchNormalization -> Relu -> y, plus the
// parameters it was built with. `conv_bias`: whether the Conv has a bias.
Graph convBnRelu(ConvBn& p, bool conv_bias = true, bool second_reader = false) {
  at::manual_seed(3);
  p.w = at::randn({3, 2, 3, 3});
  p.b = conv_bias ? at::randn({3}) * 0.2 : at::zeros({3});
  p.gamma = at::rand({3}) + 0.5;
  p.beta = at::randn({3});
  p.mean = at::randn({3});
  p.var = at::rand({3}) + 0.5;
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  std::vector<Value*> conv_inputs = {x, g.addInitializer("w", p.w.clone())};
  if (conv_bias) conv_inputs.push_back(g.addInitializer("b", p.b.clone()));
  Node* conv = g.addNode("Conv", conv_inputs, {"c"}, "conv");
  conv->attributes.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  Node* bn =
      g.addNode("BatchNormalization",
                {conv->output(0), g.addInitializer("gamma", p.gamma.clone()),
                 g.addInitializer("beta", p.beta.clone()), g.addInitializer("mean", p.mean.clone()),
                 g.addInitializer("var", p.var.clone())},
                {"bn_out"}, "bn");
  bn->attributes.set(Attribute::makeFloat("epsilon", kEpsilon));
  bn->attributes.set(Attribute::makeFloat("momentum", kMomentum));
  g.addOutput(g.addNode("Relu", {bn->output(0)}, {"y"}, "relu")->output(0));
  if (second_reader) g.addOutput(g.addNode("Sigmoid", {conv->output(0)}, {"s"}, "sig")->output(0));
  return g;
}

backends::BackendConfig convBnBackend(const nlohmann::json& patch = nlohmann::json::object()) {
  nlohmann::json doc = {{"fusions", {{"Conv", "BatchNormalization?", "Relu?"}}}};
  doc.merge_patch(patch);
  return tinyBackend(doc);
}

std::unique_ptr<passes::PreparedModel> prepareKeepingBn(Graph g,
                                                        const backends::BackendConfig& backend) {
  passes::PrepareOptions options;
  options.fold_batchnorm = false;
  return passes::prepare(std::move(g), backend, options);
}

at::Tensor input(int64_t seed = 5) {
  at::manual_seed(seed);
  return at::randn({4, 2, 5, 5});
}

void calibrateOn(passes::PreparedModel& m, const at::Tensor& x) {
  m.setMode(quant::FakeQuantMode::Calibration);
  m.executor().run({{"x", x}});
  m.setMode(quant::FakeQuantMode::Quantization);
}

quant::FakeQuantizer* quantizerReadBy(passes::PreparedModel& m, const std::string& node,
                                      size_t slot) {
  const Value* v = m.graph().findNode(node)->input(slot);
  if (v == nullptr || !passes::isFakeQuantize(v->producer())) return nullptr;
  return m.quantizer(passes::quantizerOf(*v->producer()));
}

// Fake quantization written out: clamp(round(w / s) + zp, qmin, qmax) - zp, times s, per
// output channel (axis 0).
at::Tensor fakeQuantizePerChannel(const at::Tensor& w, quant::FakeQuantizer& q) {
  const quant::QParams p = q.qparams();
  std::vector<int64_t> shape(w.dim(), 1);
  shape[0] = w.size(0);
  const at::Tensor s = p.scale.reshape(shape);
  const at::Tensor zp = p.zero_point.to(at::kFloat).reshape(shape);
  return (at::clamp(at::round(w / s) + zp, q.scheme().qmin(), q.scheme().qmax()) - zp) * s;
}

at::Tensor factorOf(const ConvBn& p) {
  return p.gamma / at::sqrt(p.var + kEpsilon);
}

at::Tensor perChannel(const at::Tensor& t) {
  return t.reshape({1, -1, 1, 1});
}

// ---------------------------------------------------------------------------------------------
// Structure

TEST(SimulatedBatchNormFolding, RewritesConvBnIntoTheScaledWeightForm) {
  ConvBn p;
  auto m = prepareKeepingBn(convBnRelu(p), convBnBackend());
  ASSERT_EQ(passes::simulateBatchNormFolding(*m), 1);
  const Graph& g = m->graph();
  verifyGraph(g);
  const Node* conv = g.findNode("conv");
  const Node* wq = conv->input(1)->producer();
  ASSERT_TRUE(passes::isFakeQuantize(wq));
  EXPECT_EQ(wq->input(0)->producer()->opType(), "Mul");
  EXPECT_EQ(wq->input(0)->producer()->input(0)->name(), "w");
  EXPECT_EQ(conv->input(2), nullptr);  // the bias moves after the division
  const Node* bn = g.findNode("bn");
  ASSERT_NE(bn, nullptr);
  const Node* add = bn->input(0)->producer();
  ASSERT_EQ(add->opType(), "Add");
  EXPECT_EQ(add->input(0)->producer()->opType(), "Div");
  EXPECT_EQ(add->input(0)->producer()->input(0), conv->output(0));
  const auto ops = opCounts(g);
  EXPECT_EQ(ops.at("Div"), 2);      // factor, output / factor
  EXPECT_EQ(ops.at("Reshape"), 3);  // factor for the weight and the output, the bias
  EXPECT_EQ(ops.at("Sqrt"), 1);
  // Nothing left to rewrite the second time.
  EXPECT_EQ(passes::simulateBatchNormFolding(*m), 0);
}

TEST(SimulatedBatchNormFolding, AcademicKeepsBnUnfusedAndIsLeftAlone) {
  ConvBn p;
  auto m = prepareKeepingBn(convBnRelu(p), backends::loadBackend("Academic"));
  ASSERT_NE(m->graph().findNode("bn"), nullptr);
  EXPECT_EQ(passes::simulateBatchNormFolding(*m), 0);
  EXPECT_EQ(m->graph().findNode("bn")->input(0)->producer()->opType(), "Conv");
}

TEST(SimulatedBatchNormFolding, ConvOutputReadTwiceIsNotRewritten) {
  ConvBn p;
  auto m = prepareKeepingBn(convBnRelu(p, true, /*second_reader=*/true), convBnBackend());
  EXPECT_EQ(passes::simulateBatchNormFolding(*m), 0);
  EXPECT_EQ(m->graph().findNode("bn")->input(0)->name(), "c");
}

// ---------------------------------------------------------------------------------------------
// Frozen BN (inference statistics): closed form and merge

TEST(SimulatedBatchNormFolding, FrozenOutputIsTheFoldedConvAndEqualsTheMergedGraph) {
  ConvBn p;
  auto m = prepareKeepingBn(convBnRelu(p), convBnBackend());
  ASSERT_EQ(passes::simulateBatchNormFolding(*m), 1);
  const at::Tensor x = input();
  calibrateOn(*m, x);
  quantizerReadBy(*m, "conv", 0)->setMode(quant::FakeQuantMode::Float);  // x stays float
  quant::FakeQuantizer* wq = quantizerReadBy(*m, "conv", 1);
  ASSERT_NE(wq, nullptr);

  const at::Tensor simulated = m->executor().run({{"x", x}}).at("y");
  const at::Tensor f = factorOf(p);
  const at::Tensor wq_folded = fakeQuantizePerChannel(p.w * f.reshape({-1, 1, 1, 1}), *wq);
  const at::Tensor folded_bias = p.beta + (p.b - p.mean) * f;
  const at::Tensor expected =
      at::relu(at::conv2d(x, wq_folded, {}, 1, 1) + perChannel(folded_bias));
  EXPECT_LE((simulated - expected).abs().max().item<double>(), 1e-5);

  ASSERT_EQ(passes::mergeSimulatedBatchNorm(*m), 1);
  const Graph& g = m->graph();
  verifyGraph(g);
  EXPECT_EQ(g.findNode("bn"), nullptr);
  EXPECT_EQ(opCounts(g).count("Div"), 0u);
  EXPECT_EQ(g.findNode("relu")->input(0)->name(), "bn_out");  // BN's output name is kept
  EXPECT_EQ(g.findNode("relu")->input(0)->producer()->opType(), "Conv");
  EXPECT_EQ(g.findValue("gamma"), nullptr);
  EXPECT_EQ(g.findValue("w"), nullptr);
  const Node* conv = g.findNode("conv");
  EXPECT_EQ(conv->input(1)->producer()->input(0)->name(), "w_bn_folded");
  EXPECT_EQ(conv->input(2)->name(), "b_bn_folded");
  const at::Tensor merged = m->executor().run({{"x", x}}).at("y");
  EXPECT_LE((merged - simulated).abs().max().item<double>(), 1e-5);
}

// The merged model is the one prepare() gives with BN folded, calibrated the same way.
TEST(SimulatedBatchNormFolding, MergedModelMatchesPtqPrepareWithFoldedBn) {
  for (const bool conv_bias : {true, false}) {
    ConvBn p;
    auto simulated = prepareKeepingBn(convBnRelu(p, conv_bias), convBnBackend());
    ASSERT_EQ(passes::simulateBatchNormFolding(*simulated), 1);
    auto folded = passes::prepare(convBnRelu(p, conv_bias), convBnBackend());
    const at::Tensor x = input();
    calibrateOn(*simulated, x);
    calibrateOn(*folded, x);
    ASSERT_EQ(passes::mergeSimulatedBatchNorm(*simulated), 1);
    const at::Tensor a = simulated->executor().run({{"x", x}}).at("y");
    const at::Tensor b = folded->executor().run({{"x", x}}).at("y");
    EXPECT_LE((a - b).abs().max().item<double>(), 1e-5) << "conv bias " << conv_bias;
  }
}

// ---------------------------------------------------------------------------------------------
// Training BN (batch statistics)

struct TrainingSetup {
  ConvBn p;
  std::unique_ptr<passes::PreparedModel> model;
  std::shared_ptr<passes::BatchNormTraining> state = std::make_shared<passes::BatchNormTraining>();
  std::unique_ptr<OpRegistry> registry;
  std::unique_ptr<Executor> executor;

  explicit TrainingSetup(const at::Tensor& calibration) {
    model = prepareKeepingBn(convBnRelu(p), convBnBackend());
    EXPECT_EQ(passes::simulateBatchNormFolding(*model), 1);
    calibrateOn(*model, calibration);
    quantizerReadBy(*model, "conv", 0)->setMode(quant::FakeQuantMode::Float);
    registry = std::make_unique<OpRegistry>(passes::registryWithFakeQuantize(
        [this](const std::string& name) { return model->quantizer(name); }));
    passes::registerTrainingBatchNorm(*registry, state);
    for (const char* name : {"w", "b", "gamma", "beta"}) {
      Value* v = model->graph().value(name);
      v->setInitializer(v->initializer().detach().clone().requires_grad_(true));
    }
    executor = std::make_unique<Executor>(model->graph(), ExecutorOptions{true}, *registry);
  }
  const at::Tensor& param(const char* name) { return model->graph().value(name)->initializer(); }
};

TEST(SimulatedBatchNormFolding, TrainingUsesBatchStatisticsAndUpdatesRunningOnesInPlace) {
  const at::Tensor x = input();
  TrainingSetup t(x);
  quant::FakeQuantizer* wq = quantizerReadBy(*t.model, "conv", 1);
  const ConvBn& p = t.p;

  const at::Tensor y = t.executor->run({{"x", x}}).at("y");

  // Closed form: z = conv(x, FQ(W * f)) / f + b, then PyTorch's training BN on z, whose running
  // statistics (momentum 1 - 0.9 in PyTorch's convention) are the reference for the update.
  at::Tensor expected, ref_mean = p.mean.clone(), ref_var = p.var.clone();
  {
    at::NoGradGuard no_grad;
    const at::Tensor f = factorOf(p);
    const at::Tensor wq_folded = fakeQuantizePerChannel(p.w * f.reshape({-1, 1, 1, 1}), *wq);
    const at::Tensor z = at::conv2d(x, wq_folded, {}, 1, 1) / perChannel(f) + perChannel(p.b);
    expected = at::relu(at::batch_norm(z, p.gamma, p.beta, ref_mean, ref_var, /*training=*/true,
                                       1 - kMomentum, kEpsilon, /*cudnn_enabled=*/false));
  }
  EXPECT_LE((y.detach() - expected).abs().max().item<double>(), 1e-5);
  EXPECT_LE((t.param("mean") - ref_mean).abs().max().item<double>(), 1e-6);
  EXPECT_LE((t.param("var") - ref_var).abs().max().item<double>(), 1e-6);
  EXPECT_GT((t.param("var") - p.var).abs().max().item<double>(), 1e-3);  // it did move

  y.sum().backward();
  for (const char* name : {"w", "gamma", "beta"}) {
    const at::Tensor grad = t.param(name).grad();
    ASSERT_TRUE(grad.defined()) << name;
    EXPECT_GT(grad.abs().sum().item<double>(), 0) << name;
  }
  // d sum(relu(bn)) / d beta: the number of positive outputs per channel.
  const at::Tensor positive = (y.detach() > 0).to(at::kFloat).sum({0, 2, 3});
  EXPECT_LE((t.param("beta").grad() - positive).abs().max().item<double>(), 1e-4);
  // A per-channel constant before training BN cancels with the batch mean: no gradient.
  ASSERT_TRUE(t.param("b").grad().defined());
  EXPECT_LE(t.param("b").grad().abs().max().item<double>(), 1e-4);
}

TEST(SimulatedBatchNormFolding, FrozenTrainingLoweringRunsInferenceWithoutUpdates) {
  const at::Tensor x = input();
  TrainingSetup t(x);
  t.state->use_batch_statistics = false;
  const at::Tensor before = t.param("var").clone();
  const at::Tensor frozen = t.executor->run({{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(t.param("var"), before));
  const at::Tensor plain = t.model->executor().run({{"x", x}}).at("y");
  EXPECT_LE((frozen.detach() - plain).abs().max().item<double>(), 1e-6);
}

// After training steps changed the running statistics (and the weights), the merge folds the
// current ones: the merged model computes what the frozen simulated model computes.
TEST(SimulatedBatchNormFolding, MergeAfterStatisticsChangedEqualsFrozenSimulation) {
  const at::Tensor x = input();
  TrainingSetup t(x);
  for (int step = 0; step < 3; ++step) {
    t.executor->run({{"x", input(10 + step) * 2 + 0.5}}).at("y").sum().backward();
    at::NoGradGuard no_grad;
    for (const char* name : {"w", "b", "gamma", "beta"}) {
      at::Tensor param = t.param(name);
      param.sub_(param.grad() * 1e-3);
      param.grad().zero_();
    }
  }
  EXPECT_GT((t.param("mean") - t.p.mean).abs().max().item<double>(), 0.05);
  t.state->use_batch_statistics = false;
  const at::Tensor frozen = t.executor->run({{"x", x}}).at("y").detach();
  ASSERT_EQ(passes::mergeSimulatedBatchNorm(*t.model), 1);
  const at::Tensor merged = t.model->executor().run({{"x", x}}).at("y");
  EXPECT_LE((merged - frozen).abs().max().item<double>(), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// A derived int32 bias quantizer (ONNX_QNN-style): created for a Conv+BN without bias, left out
// while simulating, and quantizing the folded bias after the merge.

TEST(SimulatedBatchNormFolding, DerivedBiasQuantizerQuantizesTheFoldedBias) {
  const nlohmann::json derived = {{"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}};
  ConvBn p;
  auto m = prepareKeepingBn(convBnRelu(p, /*conv_bias=*/false), convBnBackend(derived));
  const passes::QuantPoint* bias_point = nullptr;
  for (const passes::QuantPoint& point : m->points()) {
    if (point.kind == passes::PointKind::Bias) bias_point = &point;
  }
  ASSERT_NE(bias_point, nullptr);
  ASSERT_EQ(passes::simulateBatchNormFolding(*m), 1);
  EXPECT_EQ(m->graph().findNode("conv")->input(2), nullptr);
  EXPECT_EQ(m->graph().findNode(bias_point->nodes.front()), nullptr);

  auto folded = passes::prepare(convBnRelu(p, false), convBnBackend(derived));
  const at::Tensor x = input();
  calibrateOn(*m, x);
  calibrateOn(*folded, x);
  ASSERT_EQ(passes::mergeSimulatedBatchNorm(*m), 1);
  const Node* bq = m->graph().findNode("conv")->input(2)->producer();
  ASSERT_TRUE(passes::isFakeQuantize(bq));
  EXPECT_EQ(bq->name(), bias_point->nodes.front());
  EXPECT_EQ(passes::quantizerOf(*bq), bias_point->quantizer);
  EXPECT_EQ(bq->input(0)->name(), "conv_bias_bn_folded");
  const at::Tensor a = m->executor().run({{"x", x}}).at("y");
  const at::Tensor b = folded->executor().run({{"x", x}}).at("y");
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// Bad input

TEST(SimulatedBatchNormFolding, FusedBnWithComputedStatisticsIsRefusedNamingIt) {
  ConvBn p;
  Graph g = convBnRelu(p);
  Value* mean_in = g.addValue("mean_in");
  g.addInput(mean_in);
  g.setInput(g.findNode("bn"), 3, mean_in);
  auto m = prepareKeepingBn(std::move(g), convBnBackend());
  const std::string error = errorOf([&] { passes::simulateBatchNormFolding(*m); });
  EXPECT_NE(error.find("node 'bn'"), std::string::npos) << error;
  EXPECT_NE(error.find("mean is not an initializer"), std::string::npos) << error;
}

TEST(SimulatedBatchNormFolding, TrainingLoweringRefusesReplacedRunningStatistics) {
  const at::Tensor x = input();
  TrainingSetup t(x);
  const std::string error = errorOf([&] { t.executor->run({{"x", x}, {"var", at::ones({3})}}); });
  EXPECT_NE(error.find("'bn'"), std::string::npos) << error;
  EXPECT_NE(error.find("replaced at run time"), std::string::npos) << error;
}

TEST(SimulatedBatchNormFolding, TrainingLoweringNeedsMoreThanOneValuePerChannel) {
  TrainingSetup t(input());
  const std::string error = errorOf([&] { t.executor->run({{"x", at::randn({1, 2, 1, 1})}}); });
  EXPECT_NE(error.find("more than one value per channel"), std::string::npos) << error;
}

TEST(SimulatedBatchNormFolding, MergeWithoutSimulationChangesNothing) {
  ConvBn p;
  auto m = prepareKeepingBn(convBnRelu(p), convBnBackend());
  EXPECT_EQ(passes::mergeSimulatedBatchNorm(*m), 0);
  EXPECT_NE(m->graph().findNode("bn"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// The zoo ResNet on TensorRT: every Conv+BN simulated, and after the merge the calibrated model
// is the PTQ one.

TEST(SimulatedBatchNormFolding, ZooResnetMergesBackToThePtqModel) {
  const std::string path = std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx";
  const backends::BackendConfig trt = backends::loadBackend("TensorRT");
  auto simulated = prepareKeepingBn(importOnnxFile(path), trt);
  const auto convs = opCounts(simulated->graph()).at("Conv");
  EXPECT_EQ(convs, 9);
  EXPECT_EQ(passes::simulateBatchNormFolding(*simulated), convs);
  EXPECT_EQ(opCounts(simulated->graph()).at("BatchNormalization"), convs);
  auto folded = passes::prepare(importOnnxFile(path), trt);

  auto calibrate = [](passes::PreparedModel& m) {
    data::LoaderOptions o;
    o.batch_size = 64;
    o.limit = 128;
    data::BatchLoader loader(data::openDataset("fashion-mnist:test"), o);
    algos::calibrate(m, loader, 2);
  };
  calibrate(*simulated);
  calibrate(*folded);
  EXPECT_EQ(passes::mergeSimulatedBatchNorm(*simulated), convs);
  EXPECT_EQ(opCounts(simulated->graph()).count("BatchNormalization"), 0u);
  EXPECT_EQ(opCounts(simulated->graph()), opCounts(folded->graph()));

  data::LoaderOptions o;
  o.batch_size = 16;
  o.limit = 16;
  o.shuffle_seed = 3;
  data::BatchLoader loader(data::openDataset("fashion-mnist:test"), o);
  const at::Tensor images = loader.next()->inputs;
  const at::Tensor a = simulated->executor().run({{"image", images}}).at("logits");
  const at::Tensor b = folded->executor().run({{"image", images}}).at("logits");
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace qforge::testing
