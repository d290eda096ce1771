// Cross-layer equalization: which pairs are found and why others are skipped, the paper's
// closed form (equal per-channel ranges), outputs unchanged, high-bias absorption, ReLU6, bad
// options, and the zoo MobileNetV2's weight range spread.
#include "algos/equalization.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "passes/fold_batchnorm.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::algos {
namespace {

using testing::expectClose;

using testing::errorOf;
using testing::opCounts;

Value* addGraphInput(Graph& g, const std::string& name) {
  Value* x = g.addValue(name);
  g.addInput(x);
  return x;
}

Node* addConv(Graph& g, Value* x, const std::string& name, const at::Tensor& w,
              const at::Tensor& b = {}, int64_t pad = 0, int64_t group = 1) {
  std::vector<Value*> inputs = {x, g.addInitializer(name + ".w", w)};
  if (b.defined()) inputs.push_back(g.addInitializer(name + ".b", b));
  Node* conv = g.addNode("Conv", inputs, {name + "_out"}, name);
  conv->attributes.set(Attribute::makeInts("pads", {pad, pad, pad, pad}));
  conv->attributes.set(Attribute::makeInt("group", group));
  return conv;
}

Node* addBatchNorm(Graph& g, Value* x, const std::string& name, const at::Tensor& gamma,
                   const at::Tensor& beta, const at::Tensor& mean, const at::Tensor& var) {
  return g.addNode(
      "BatchNormalization",
      {x, g.addInitializer(name + ".gamma", gamma), g.addInitializer(name + ".beta", beta),
       g.addInitializer(name + ".mean", mean), g.addInitializer(name + ".var", var)},
      {name + "_out"}, name);
}

Node* addRelu(Graph& g, Value* x, const std::string& name) {
  return g.addNode("Relu", {x}, {name + "_out"}, name);
}

Node* addClip(Graph& g, Value* x, const std::string& name, float lo, float hi) {
  return g.addNode("Clip",
                   {x, g.addInitializer(name + ".min", at::scalar_tensor(lo)),
                    g.addInitializer(name + ".max", at::scalar_tensor(hi))},
                   {name + "_out"}, name);
}

// Conv weight [out, in, k, k] whose output channels span a wide range of magnitudes: the case
// equalization exists for.
at::Tensor unevenWeight(int64_t out, int64_t in, int64_t k) {
  const at::Tensor factors = at::pow(10.0, at::linspace(-1.5, 1.5, out)).reshape({out, 1, 1, 1});
  return at::randn({out, in, k, k}) * factors;
}

at::Tensor run(const Graph& g, const at::Tensor& x) {
  Executor executor(g);
  return executor({x}).at(0);
}

// Per-output-channel ranges of a weight, and per-input-channel ranges of a Conv weight.
at::Tensor outputRanges(const at::Tensor& w) {
  return w.abs().reshape({w.size(0), -1}).amax(1).to(at::kDouble);
}
at::Tensor inputRanges(const at::Tensor& w) {
  return outputRanges(w.transpose(0, 1));
}

const at::Tensor& weightOf(const Graph& g, const std::string& node) {
  return g.findNode(node)->input(1)->initializer();
}

// The paper's optimum: r1_i / R1 == r2_i / R2 for every channel (and here r1_i == r2_i).
void expectEqualized(const at::Tensor& r1, const at::Tensor& r2, double tol) {
  const at::Tensor p1 = r1 / r1.max();
  const at::Tensor p2 = r2 / r2.max();
  EXPECT_LE((p1 - p2).abs().max().item<double>(), tol) << "p1 " << p1 << "\np2 " << p2;
  EXPECT_LE(((r1 - r2) / r2).abs().max().item<double>(), tol);
}

// x -> conv1 (4 uneven channels) -> Relu -> conv2 -> y
Graph convReluConv() {
  at::manual_seed(3);
  Graph g;
  Value* x = addGraphInput(g, "x");
  Node* c1 = addConv(g, x, "conv1", unevenWeight(4, 2, 3), at::randn({4}), /*pad=*/1);
  Node* r = addRelu(g, c1->output(0), "relu");
  Node* c2 = addConv(g, r->output(0), "conv2", at::randn({3, 4, 3, 3}), at::randn({3}));
  g.addOutput(c2->output(0));
  return g;
}

TEST(EqualizationTest, OnePairReachesTheClosedForm) {
  Graph g = convReluConv();
  const Graph original = g.clone();
  const at::Tensor w1 = weightOf(g, "conv1").clone(), w2 = weightOf(g, "conv2").clone();
  const at::Tensor b1 = g.findNode("conv1")->input(2)->initializer().clone();

  const EqualizationReport report = equalizeCrossLayer(g);
  ASSERT_EQ(report.pairs.size(), 1u);
  const EqualizedPair& p = report.pairs[0];
  EXPECT_EQ(p.conv1, "conv1");
  EXPECT_EQ(p.conv2, "conv2");
  EXPECT_EQ(p.path, "Relu");
  EXPECT_EQ(p.channels, 4);
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0].conv, "conv2");
  EXPECT_NE(report.skipped[0].reason.find("graph output"), std::string::npos);
  EXPECT_TRUE(report.converged);
  EXPECT_EQ(report.iterations, 2);  // the second only confirms s == 1
  EXPECT_EQ(report.batchnorms_folded, 0u);
  EXPECT_NO_THROW(verifyGraph(g));

  // s_i = sqrt(r1_i / r2_i): W1 rows and b1 divided, W2 input channels multiplied.
  const at::Tensor s = at::sqrt(outputRanges(w1) / inputRanges(w2));
  expectClose(weightOf(g, "conv1").to(at::kDouble), w1.to(at::kDouble) / s.reshape({-1, 1, 1, 1}),
              1e-6);
  expectClose(g.findNode("conv1")->input(2)->initializer().to(at::kDouble), b1.to(at::kDouble) / s,
              1e-6);
  expectClose(weightOf(g, "conv2").to(at::kDouble), w2.to(at::kDouble) * s.reshape({1, -1, 1, 1}),
              1e-6);
  expectEqualized(outputRanges(weightOf(g, "conv1")), inputRanges(weightOf(g, "conv2")), 1e-6);
  EXPECT_GT(p.conv1_spread_before, 100);  // 10^3 by construction, times randn's spread
  EXPECT_LT(p.conv1_spread_after, p.conv1_spread_before / 10);

  at::manual_seed(4);
  for (int trial = 0; trial < 3; ++trial) {
    const at::Tensor x = at::randn({2, 2, 6, 5});
    expectClose(run(g, x), run(original, x), 1e-5);
  }
}

// x -> A (3->8) -> BN -> Relu -> B (depthwise 8) -> BN -> Clip(0, inf) -> C (8->4, 1x1) -> y
Graph depthwiseChain() {
  at::manual_seed(5);
  Graph g;
  Value* x = addGraphInput(g, "x");
  auto bn = [&](Value* v, const std::string& name) {
    return addBatchNorm(g, v, name, at::rand({8}) * 3 + 0.1, at::randn({8}) * 0.1,
                        at::randn({8}) * 0.1, at::rand({8}) + 0.5);
  };
  Node* a = addConv(g, x, "A", unevenWeight(8, 3, 3), {}, /*pad=*/1);
  Node* ra = addRelu(g, bn(a->output(0), "bnA")->output(0), "reluA");
  Node* b = addConv(g, ra->output(0), "B", unevenWeight(8, 1, 3), at::randn({8}), 1, /*group=*/8);
  Node* cb = g.addNode(
      "Clip",
      {bn(b->output(0), "bnB")->output(0), g.addInitializer("zero", at::scalar_tensor(0.0f))},
      {"clipB_out"}, "clipB");
  Node* c = addConv(g, cb->output(0), "C", at::randn({4, 8, 1, 1}));
  g.addOutput(c->output(0));
  return g;
}

TEST(EqualizationTest, ChainsConvergeJointlyThroughDepthwise) {
  Graph g = depthwiseChain();
  const Graph original = g.clone();
  EqualizationOptions options;
  options.high_bias_absorption = false;  // this test is about exact equivalence
  options.tolerance = 1e-9;
  const EqualizationReport report = equalizeCrossLayer(g, options);

  EXPECT_EQ(report.batchnorms_folded, 2u);
  EXPECT_EQ(opCounts(g)["BatchNormalization"], 0);
  ASSERT_EQ(report.pairs.size(), 2u);
  EXPECT_EQ(report.pairs[0].conv1, "A");
  EXPECT_EQ(report.pairs[0].conv2, "B");
  EXPECT_EQ(report.pairs[1].conv1, "B");
  EXPECT_EQ(report.pairs[1].conv2, "C");
  EXPECT_EQ(report.pairs[1].path, "Clip(0, inf)");
  EXPECT_TRUE(report.converged);
  EXPECT_GT(report.iterations, 2);
  EXPECT_LT(report.last_max_scale_change, 1e-9);

  // At the joint optimum every pair is balanced: A's rows, B's (depthwise) rows and C's input
  // channels have equal ranges per channel.
  const at::Tensor ra = outputRanges(weightOf(g, "A"));
  const at::Tensor rb = outputRanges(weightOf(g, "B"));
  const at::Tensor rc = inputRanges(weightOf(g, "C"));
  expectEqualized(ra, rb, 1e-6);
  expectEqualized(rb, rc, 1e-6);

  at::manual_seed(6);
  const at::Tensor x = at::randn({2, 3, 7, 7});
  expectClose(run(g, x), run(original, x), 1e-5);
}

struct GemmCase {
  std::string name;
  bool pooled;  // GlobalAveragePool before Flatten (else Flatten of 2x2 maps)
  bool trans_b;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << c.name;
}

class EqualizationGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(EqualizationGemmTest, GemmAfterFlattenTakesTheScales) {
  const GemmCase& c = GetParam();
  at::manual_seed(7);
  Graph g;
  Value* x = addGraphInput(g, "x");
  Node* conv = addConv(g, x, "conv", unevenWeight(4, 3, 3), at::randn({4}), /*pad=*/1);
  Value* v = addRelu(g, conv->output(0), "relu")->output(0);
  if (c.pooled) v = g.addNode("GlobalAveragePool", {v}, {"gap_out"}, "gap")->output(0);
  v = g.addNode("Flatten", {v}, {"flat_out"}, "flatten")->output(0);
  const int64_t k = c.pooled ? 4 : 4 * 2 * 2;
  const at::Tensor w = c.trans_b ? at::randn({5, k}) : at::randn({k, 5});
  Node* gemm =
      g.addNode("Gemm", {v, g.addInitializer("fc.w", w), g.addInitializer("fc.b", at::randn({5}))},
                {"y"}, "fc");
  gemm->attributes.set(Attribute::makeInt("transB", c.trans_b ? 1 : 0));
  gemm->attributes.set(Attribute::makeFloat("alpha", 0.5));
  g.addOutput(gemm->output(0));
  const Graph original = g.clone();

  const EqualizationReport report = equalizeCrossLayer(g);
  ASSERT_EQ(report.pairs.size(), 1u);
  EXPECT_EQ(report.pairs[0].conv2, "fc");
  EXPECT_EQ(report.pairs[0].path,
            c.pooled ? "Relu -> GlobalAveragePool -> Flatten" : "Relu -> Flatten");
  EXPECT_LT(report.pairs[0].conv1_spread_after, report.pairs[0].conv1_spread_before / 10);

  // Input channel i of the Gemm: the block of features Flatten made from channel i.
  const at::Tensor fc = weightOf(g, "fc").to(at::kDouble);
  const at::Tensor per_channel =
      c.trans_b ? fc.reshape({5, 4, -1}).transpose(0, 1) : fc.reshape({4, -1});
  expectEqualized(outputRanges(weightOf(g, "conv")), outputRanges(per_channel), 1e-6);

  const at::Tensor input = at::randn({3, 3, 2, 2});
  expectClose(run(g, input), run(original, input), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EqualizationGemmTest,
                         ::testing::Values(GemmCase{"pooled_transB", true, true},
                                           GemmCase{"pooled", true, false},
                                           GemmCase{"flattened_maps_transB", false, true},
                                           GemmCase{"flattened_maps", false, false}),
                         [](const auto& info) { return info.param.name; });

// x -> A (1x1) -> BN(beta high, gamma low) -> Relu -> B (1x1) -> y, with inputs small enough
// that every pre-activation stays within beta +- 3 gamma: absorption is then exact.
Graph highBiasGraph(const at::Tensor& beta) {
  at::manual_seed(8);
  Graph g;
  Value* x = addGraphInput(g, "x");
  Node* a = addConv(g, x, "A", at::rand({3, 2, 1, 1}) * 0.5, at::zeros({3}));
  Node* bn =
      addBatchNorm(g, a->output(0), "bn", at::full({3}, 0.5f), beta, at::zeros({3}), at::ones({3}));
  Node* r = addRelu(g, bn->output(0), "relu");
  Node* b = addConv(g, r->output(0), "B", at::randn({2, 3, 1, 1}));
  g.addOutput(b->output(0));
  return g;
}

TEST(EqualizationTest, HighBiasAbsorptionMovesBiasThroughRelu) {
  const at::Tensor beta = at::tensor({4.0f, 2.5f, -1.0f});
  Graph absorbed = highBiasGraph(beta);
  Graph plain = highBiasGraph(beta);
  const Graph original = absorbed.clone();
  EqualizationOptions off;
  off.high_bias_absorption = false;
  equalizeCrossLayer(plain, off);
  const EqualizationReport report = equalizeCrossLayer(absorbed);

  // c_i = max(0, beta_i - 3 |gamma_i|) in the scaled domain: beta / s and gamma / s.
  ASSERT_EQ(report.pairs.size(), 1u);
  EXPECT_EQ(report.pairs[0].absorbed_channels, 2);
  // s from the weights: BN folding multiplied A by gamma / sqrt(var + eps), equalization
  // divided it by s.
  const double folded = 0.5 / std::sqrt(1 + 1e-5);
  const at::Tensor s =
      outputRanges(weightOf(original, "A")) * folded / outputRanges(weightOf(plain, "A"));
  const at::Tensor c = at::clamp_min((beta.to(at::kDouble) - 1.5) / s, 0);
  EXPECT_NEAR(report.pairs[0].max_absorbed, c.max().item<double>(), 1e-6);
  const at::Tensor b1_plain = plain.findNode("A")->input(2)->initializer().to(at::kDouble);
  const at::Tensor b1 = absorbed.findNode("A")->input(2)->initializer().to(at::kDouble);
  expectClose(b1, b1_plain - c, 1e-6);
  // B had no bias: it gets one holding W2 c.
  const Value* b2 = absorbed.findNode("B")->input(2);
  ASSERT_NE(b2, nullptr);
  const at::Tensor w2 = weightOf(absorbed, "B").to(at::kDouble).reshape({2, 3});
  expectClose(b2->initializer().to(at::kDouble), w2.mv(c), 1e-6);
  EXPECT_EQ(plain.findNode("B")->input(2), nullptr);

  at::manual_seed(9);
  const at::Tensor x = at::rand({4, 2, 3, 3}) * 2 - 1;  // |A(x)| <= 1 < 3 standard deviations
  expectClose(run(absorbed, x), run(original, x), 1e-5);
  expectClose(run(plain, x), run(original, x), 1e-5);
}

TEST(EqualizationTest, AbsorptionNeedsBatchNormStatistics) {
  Graph g = convReluConv();  // no BN: nothing says how high the bias is relative to the spread
  const EqualizationReport report = equalizeCrossLayer(g);
  ASSERT_EQ(report.pairs.size(), 1u);
  EXPECT_EQ(report.pairs[0].absorbed_channels, 0);
  EXPECT_EQ(g.findNode("conv2")->input(2)->name(), "conv2.b");
}

// x -> conv1 -> Clip(0, 6) -> conv2 -> y, as MobileNetV2 exports ReLU6 (bounds as Constants).
Graph relu6Graph() {
  at::manual_seed(10);
  Graph g;
  Value* x = addGraphInput(g, "x");
  Node* c1 = addConv(g, x, "conv1", unevenWeight(4, 2, 3) * 0.1, at::randn({4}) * 0.1, 1);
  Node* lo = g.addNode("Constant", {}, {"lo"}, "lo");
  lo->attributes.set(Attribute::makeTensor("value", at::scalar_tensor(0.0f)));
  Node* hi = g.addNode("Constant", {}, {"hi"}, "hi");
  hi->attributes.set(Attribute::makeTensor("value", at::scalar_tensor(6.0f)));
  Node* clip =
      g.addNode("Clip", {c1->output(0), lo->output(0), hi->output(0)}, {"clip_out"}, "relu6");
  Node* c2 = addConv(g, clip->output(0), "conv2", at::randn({3, 4, 3, 3}));
  g.addOutput(c2->output(0));
  return g;
}

TEST(EqualizationTest, Relu6IsLeftAloneWithoutTheOption) {
  Graph g = relu6Graph();
  const at::Tensor w1 = weightOf(g, "conv1").clone();
  const EqualizationReport report = equalizeCrossLayer(g);
  EXPECT_TRUE(report.pairs.empty());
  EXPECT_TRUE(report.relu6_replaced.empty());
  ASSERT_EQ(report.skipped.size(), 2u);
  EXPECT_EQ(report.skipped[0].conv, "conv1");
  EXPECT_NE(report.skipped[0].reason.find("Clip(0, 6)"), std::string::npos);
  EXPECT_NE(report.skipped[0].reason.find("relu6_to_relu"), std::string::npos);
  EXPECT_EQ(opCounts(g)["Clip"], 1);
  EXPECT_EQ(opCounts(g).count("Relu"), 0u);
  EXPECT_TRUE(weightOf(g, "conv1").equal(w1));
}

TEST(EqualizationTest, Relu6BecomesReluWithTheOption) {
  Graph g = relu6Graph();
  const Graph original = g.clone();
  EqualizationOptions options;
  options.relu6_to_relu = true;
  const EqualizationReport report = equalizeCrossLayer(g, options);
  ASSERT_EQ(report.pairs.size(), 1u);
  EXPECT_EQ(report.pairs[0].path, "Relu (was Clip(0, 6))");
  EXPECT_EQ(report.relu6_replaced, std::vector<std::string>{"relu6"});
  EXPECT_EQ(opCounts(g)["Clip"], 0);
  EXPECT_EQ(opCounts(g)["Relu"], 1);
  const Node* relu = g.findNode("relu6");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->opType(), "Relu");
  EXPECT_EQ(relu->output(0)->name(), "clip_out");
  EXPECT_EQ(g.findValue("hi"), nullptr);  // bounds no one reads are gone
  EXPECT_NO_THROW(verifyGraph(g));

  // Inputs small enough that conv1 stays below 6, where ReLU6 and ReLU agree.
  at::manual_seed(11);
  const at::Tensor x = at::randn({2, 2, 5, 5}) * 0.1;
  Executor executor(original);
  ASSERT_LT(executor.run({{"x", x}}, {"conv1_out"}).at("conv1_out").max().item<double>(), 6);
  expectClose(run(g, x), run(original, x), 1e-5);
}

// What a conv -> Relu -> conv graph becomes in each negative case, and the reason expected.
struct SkipCase {
  std::string name;
  std::string reason;
};

void PrintTo(const SkipCase& c, std::ostream* os) {
  *os << c.name;
}

Graph skipGraph(const std::string& name) {
  at::manual_seed(12);
  Graph g;
  Value* x = addGraphInput(g, "x");
  Value* w1 = name == "weight_is_input" ? addGraphInput(g, "conv1.w")
                                        : g.addInitializer("conv1.w", at::randn({4, 2, 3, 3}));
  Node* c1 = g.addNode("Conv", {x, w1}, {"conv1_out"}, "conv1");
  Node* act = name == "clip_0_3" ? addClip(g, c1->output(0), "clip", 0, 3)
                                 : addRelu(g, c1->output(0), "relu");
  const int64_t group = name == "grouped" ? 2 : 1;
  Node* c2 = addConv(g, act->output(0), "conv2", at::randn({4, 4 / group, 3, 3}), {}, 0, group);
  g.addOutput(c2->output(0));
  if (name == "two_readers") {
    g.addOutput(g.addNode("Sigmoid", {c1->output(0)}, {"side"}, "side")->output(0));
  }
  if (name == "graph_output") g.addOutput(c1->output(0));
  return g;
}

class EqualizationSkipTest : public ::testing::TestWithParam<SkipCase> {};

TEST_P(EqualizationSkipTest, ReportsWhyAndLeavesWeightsAlone) {
  Graph g = skipGraph(GetParam().name);
  const at::Tensor w2 = weightOf(g, "conv2").clone();
  const EqualizationReport report = equalizeCrossLayer(g);
  EXPECT_TRUE(report.pairs.empty());
  ASSERT_FALSE(report.skipped.empty());
  EXPECT_EQ(report.skipped[0].conv, "conv1");
  EXPECT_NE(report.skipped[0].reason.find(GetParam().reason), std::string::npos)
      << report.skipped[0].reason;
  EXPECT_TRUE(weightOf(g, "conv2").equal(w2));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EqualizationSkipTest,
    ::testing::Values(SkipCase{"two_readers", "'conv1_out' has 2 readers"},
                      SkipCase{"graph_output", "'conv1_out' is a graph output"},
                      SkipCase{"grouped", "grouped convolution (group 2 over 4 channels)"},
                      SkipCase{"weight_is_input", "weight is not an initializer"},
                      SkipCase{"clip_0_3", "Clip other than"}),
    [](const auto& info) { return info.param.name; });

TEST(EqualizationTest, BadInputIsAnError) {
  Graph g = convReluConv();
  EqualizationOptions no_iterations;
  no_iterations.max_iterations = 0;
  EXPECT_NE(errorOf([&] { equalizeCrossLayer(g, no_iterations); }).find("max_iterations"),
            std::string::npos);
  EqualizationOptions no_tolerance;
  no_tolerance.tolerance = 0;
  EXPECT_NE(errorOf([&] { equalizeCrossLayer(g, no_tolerance); }).find("tolerance"),
            std::string::npos);

  at::Tensor w = weightOf(g, "conv2").clone();
  w[0][1][0][0] = std::nanf("");
  g.findNode("conv2")->input(1)->setInitializer(w);
  EXPECT_EQ(errorOf([&] { equalizeCrossLayer(g); }),
            "cross-layer equalization: node 'conv2' (Conv): tensor 'conv2.w' holds NaN or Inf");
}

// --- the zoo MobileNetV2 ------------------------------------------------------------------

// Per-output-channel range spread (max r / min r) of every Conv and Gemm weight, by node.
std::map<std::string, double> weightSpreads(const Graph& g) {
  std::map<std::string, double> spreads;
  for (const Node* n : g.nodes()) {
    if (n->opType() != "Conv" && n->opType() != "Gemm") continue;
    const at::Tensor r = outputRanges(n->input(1)->initializer());
    const at::Tensor live = r.masked_select(r > 0);
    spreads[n->name()] = (live.max() / live.min()).item<double>();
  }
  return spreads;
}

double geometricMean(const std::vector<double>& v) {
  double log_sum = 0;
  for (double x : v)
    log_sum += std::log(x);
  return std::exp(log_sum / static_cast<double>(v.size()));
}

TEST(EqualizationTest, MobileNetRangeSpreadDropsWithRelu6ToRelu) {
  const std::string path = std::string(QFORGE_SOURCE_DIR) + "/models/zoo/mobilenet.onnx";
  Graph folded = importOnnxFile(path);
  passes::foldBatchNorm(folded);
  Graph kept = importOnnxFile(path);
  Graph relu = importOnnxFile(path);
  const EqualizationReport without = equalizeCrossLayer(kept);
  EqualizationOptions options;
  options.relu6_to_relu = true;
  const EqualizationReport with = equalizeCrossLayer(relu, options);

  // Without the option, only the linear project -> expand pairs (no Clip between) qualify.
  for (const EqualizedPair& p : without.pairs)
    EXPECT_EQ(p.path, "none") << p.conv1;
  EXPECT_GT(with.pairs.size(), without.pairs.size());
  EXPECT_EQ(with.relu6_replaced.size(), static_cast<size_t>(16 - opCounts(relu)["Clip"]));
  EXPECT_TRUE(with.converged);

  // The layers equalization touched, before (BN folded only) and after.
  const std::map<std::string, double> before = weightSpreads(folded);
  const std::map<std::string, double> after = weightSpreads(relu);
  std::set<std::string> touched;
  for (const EqualizedPair& p : with.pairs) {
    touched.insert(p.conv1);
    touched.insert(p.conv2);
  }
  std::vector<double> spread_before, spread_after;
  for (const std::string& name : touched) {
    spread_before.push_back(before.at(name));
    spread_after.push_back(after.at(name));
  }
  const double gm_before = geometricMean(spread_before);
  const double gm_after = geometricMean(spread_after);
  const double max_before = *std::max_element(spread_before.begin(), spread_before.end());
  const double max_after = *std::max_element(spread_after.begin(), spread_after.end());
  std::cout << "MobileNetV2: " << with.pairs.size() << " pairs (" << without.pairs.size()
            << " without relu6_to_relu), " << with.relu6_replaced.size() << " ReLU6 replaced, "
            << with.iterations << " iterations; per-output-channel range spread over "
            << touched.size() << " layers: geometric mean " << gm_before << " -> " << gm_after
            << ", max " << max_before << " -> " << max_after << "\n";
  for (const EqualizedPair& p : with.pairs) {
    std::cout << "  " << p.conv1 << " -> " << p.conv2 << " [" << p.path << "] spread "
              << p.conv1_spread_before << " -> " << p.conv1_spread_after << " / "
              << p.conv2_spread_before << " -> " << p.conv2_spread_after << ", absorbed "
              << p.absorbed_channels << " (max " << p.max_absorbed << ")\n";
  }
  for (const SkippedConv& s : with.skipped)
    std::cout << "  skipped " << s.conv << ": " << s.reason << "\n";
  EXPECT_LT(gm_after, gm_before / 2);
  EXPECT_LT(max_after, max_before);
  EXPECT_NO_THROW(verifyGraph(relu));
}

}  // namespace
}  // namespace qforge::algos
