#include "passes/fold_batchnorm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "support/checks.h"
#include "support/pass_harness.h"

namespace qforge::passes {
namespace {

using testing::countOps;
using testing::expectClose;

// Inference-mode BN parameters with variances and scales away from zero.
struct BnParams {
  at::Tensor scale, bias, mean, var;
  double epsilon = 1e-3;

  explicit BnParams(int64_t channels)
      : scale(at::rand({channels}) + 0.5),
        bias(at::randn({channels})),
        mean(at::randn({channels})),
        var(at::rand({channels}) + 0.5) {}

  // PyTorch's eval-mode BN (what torch.nn.BatchNorm*d.eval() runs), the independent reference.
  at::Tensor apply(const at::Tensor& x) const {
    return at::batch_norm(x, scale, bias, mean, var, /*training=*/false, /*momentum=*/0.1, epsilon,
                          /*cudnn_enabled=*/false);
  }
};

// Appends x -> BatchNormalization -> `out` with the parameters as initializers bn.scale, ...
Node* addBatchNorm(Graph& g, Value* x, const BnParams& p, const std::string& out) {
  Node* bn = g.addNode("BatchNormalization",
                       {x, g.addInitializer(g.uniqueName("bn.scale"), p.scale),
                        g.addInitializer(g.uniqueName("bn.bias"), p.bias),
                        g.addInitializer(g.uniqueName("bn.mean"), p.mean),
                        g.addInitializer(g.uniqueName("bn.var"), p.var)},
                       {out}, "bn");
  bn->attributes.set(Attribute::makeFloat("epsilon", p.epsilon));
  return bn;
}

Value* addGraphInput(Graph& g, const std::string& name) {
  Value* x = g.addValue(name);
  g.addInput(x);
  return x;
}

at::Tensor runGraph(const Graph& g, const at::Tensor& x) {
  Executor executor(g);
  return executor({x}).at(0);
}

std::set<std::string> initializerNames(const Graph& g) {
  std::set<std::string> names;
  for (const Value* v : g.initializers())
    names.insert(v->name());
  return names;
}

// After a fold of `producer_name`: one node left, producing graph output "y" directly.
void expectFoldedInto(const Graph& g, const std::string& producer_name) {
  EXPECT_EQ(g.nodeCount(), 1u);
  EXPECT_EQ(countOps(g, "BatchNormalization"), 0u);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0]->name(), "y");
  ASSERT_NE(g.outputs()[0]->producer(), nullptr);
  EXPECT_EQ(g.outputs()[0]->producer()->name(), producer_name);
  EXPECT_NO_THROW(verifyGraph(g));
}

// --- Conv -------------------------------------------------------------------------------------

struct ConvCase {
  std::string name;
  int64_t in_channels, out_channels, groups;
  bool has_bias;
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name;
}

class FoldBatchNormConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(FoldBatchNormConvTest, FoldsIntoWeightAndBias) {
  const ConvCase& c = GetParam();
  at::manual_seed(1);
  const at::Tensor w = at::randn({c.out_channels, c.in_channels / c.groups, 3, 3});
  const at::Tensor b = c.has_bias ? at::randn({c.out_channels}) : at::Tensor();
  const BnParams bn(c.out_channels);

  Graph g;
  Value* x = addGraphInput(g, "x");
  std::vector<Value*> conv_inputs = {x, g.addInitializer("conv.weight", w)};
  if (c.has_bias) conv_inputs.push_back(g.addInitializer("conv.bias", b));
  Node* conv = g.addNode("Conv", conv_inputs, {"conv_out"}, "conv");
  conv->attributes.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  conv->attributes.set(Attribute::makeInt("group", c.groups));
  g.addOutput(addBatchNorm(g, conv->output(0), bn, "y")->output(0));

  const at::Tensor input = at::randn({2, c.in_channels, 6, 5});
  const at::Tensor before = runGraph(g, input);
  EXPECT_EQ(foldBatchNorm(g), 1u);
  expectFoldedInto(g, "conv");
  ASSERT_NE(conv->input(2), nullptr);  // a bias is created when the Conv had none
  EXPECT_EQ(initializerNames(g), (std::set<std::string>{"conv.weight", conv->input(2)->name()}));
  EXPECT_EQ(conv->input(1)->name(), "conv.weight");  // not shared: rewritten in place

  const at::Tensor after = runGraph(g, input);
  const at::Tensor reference =
      bn.apply(at::conv2d(input, w, b, /*stride=*/1, /*padding=*/1, /*dilation=*/1, c.groups));
  expectClose(after, before, 1e-5);
  expectClose(after, reference, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FoldBatchNormConvTest,
                         ::testing::Values(ConvCase{"plain_bias", 3, 4, 1, true},
                                           ConvCase{"plain_no_bias", 3, 4, 1, false},
                                           ConvCase{"grouped_bias", 4, 6, 2, true},
                                           ConvCase{"grouped_no_bias", 4, 6, 2, false},
                                           ConvCase{"depthwise_bias", 4, 4, 4, true},
                                           ConvCase{"depthwise_no_bias", 4, 4, 4, false}),
                         [](const auto& info) { return info.param.name; });

// --- ConvTranspose ----------------------------------------------------------------------------

struct ConvTransposeCase {
  std::string name;
  int64_t in_channels, out_channels, groups;
  bool has_bias;
};

void PrintTo(const ConvTransposeCase& c, std::ostream* os) {
  *os << c.name;
}

class FoldBatchNormConvTransposeTest : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(FoldBatchNormConvTransposeTest, FoldsPerOutputChannelOfEachGroup) {
  const ConvTransposeCase& c = GetParam();
  at::manual_seed(2);
  // ONNX and PyTorch agree: [C_in, C_out / groups, kH, kW].
  const at::Tensor w = at::randn({c.in_channels, c.out_channels / c.groups, 3, 2});
  const at::Tensor b = c.has_bias ? at::randn({c.out_channels}) : at::Tensor();
  const BnParams bn(c.out_channels);

  Graph g;
  Value* x = addGraphInput(g, "x");
  std::vector<Value*> inputs = {x, g.addInitializer("deconv.weight", w)};
  if (c.has_bias) inputs.push_back(g.addInitializer("deconv.bias", b));
  Node* deconv = g.addNode("ConvTranspose", inputs, {"deconv_out"}, "deconv");
  deconv->attributes.set(Attribute::makeInts("strides", {2, 2}));
  deconv->attributes.set(Attribute::makeInt("group", c.groups));
  g.addOutput(addBatchNorm(g, deconv->output(0), bn, "y")->output(0));

  const at::Tensor input = at::randn({2, c.in_channels, 4, 5});
  const at::Tensor before = runGraph(g, input);
  EXPECT_EQ(foldBatchNorm(g), 1u);
  expectFoldedInto(g, "deconv");
  EXPECT_EQ(g.initializers().size(), 2u);

  const at::Tensor after = runGraph(g, input);
  const at::Tensor reference = bn.apply(at::conv_transpose2d(
      input, w, b, /*stride=*/2, /*padding=*/0, /*output_padding=*/0, c.groups, /*dilation=*/1));
  expectClose(after, before, 1e-5);
  expectClose(after, reference, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FoldBatchNormConvTransposeTest,
                         ::testing::Values(ConvTransposeCase{"plain_bias", 3, 4, 1, true},
                                           ConvTransposeCase{"plain_no_bias", 3, 4, 1, false},
                                           ConvTransposeCase{"two_groups_bias", 4, 6, 2, true},
                                           ConvTransposeCase{"two_groups_no_bias", 6, 4, 2, false}),
                         [](const auto& info) { return info.param.name; });

// --- Gemm -------------------------------------------------------------------------------------

struct GemmCase {
  std::string name;
  bool trans_b;
  std::vector<int64_t> c_shape;  // empty: no C
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << c.name;
}

class FoldBatchNormGemmTest : public ::testing::TestWithParam<GemmCase> {};

constexpr int64_t kGemmK = 5;
constexpr int64_t kGemmN = 4;

TEST_P(FoldBatchNormGemmTest, FoldsIntoColumnsOfBAndIntoC) {
  const GemmCase& c = GetParam();
  at::manual_seed(3);
  const at::Tensor w = c.trans_b ? at::randn({kGemmN, kGemmK}) : at::randn({kGemmK, kGemmN});
  const at::Tensor bias = c.c_shape.empty() ? at::Tensor() : at::randn(c.c_shape);
  const double alpha = 0.75;
  const double beta = 0.5;
  const BnParams bn(kGemmN);

  Graph g;
  Value* a = addGraphInput(g, "a");
  std::vector<Value*> inputs = {a, g.addInitializer("fc.weight", w)};
  if (bias.defined()) inputs.push_back(g.addInitializer("fc.bias", bias));
  Node* gemm = g.addNode("Gemm", inputs, {"fc_out"}, "fc");
  gemm->attributes.set(Attribute::makeInt("transB", c.trans_b ? 1 : 0));
  gemm->attributes.set(Attribute::makeFloat("alpha", alpha));
  gemm->attributes.set(Attribute::makeFloat("beta", beta));
  g.addOutput(addBatchNorm(g, gemm->output(0), bn, "y")->output(0));

  const at::Tensor input = at::randn({3, kGemmK});
  const at::Tensor before = runGraph(g, input);
  EXPECT_EQ(foldBatchNorm(g), 1u);
  expectFoldedInto(g, "fc");
  ASSERT_NE(gemm->input(2), nullptr);
  EXPECT_EQ(g.initializers().size(), 2u);
  // C keeps its rank: a [1, N] C stays a row.
  EXPECT_EQ(gemm->input(2)->initializer().dim(), c.c_shape.size() == 2 ? 2 : 1);

  const at::Tensor after = runGraph(g, input);
  at::Tensor linear = alpha * at::matmul(input, c.trans_b ? w.t() : w);
  if (bias.defined()) linear = linear + beta * bias;
  expectClose(after, before, 1e-5);
  expectClose(after, bn.apply(linear), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FoldBatchNormGemmTest,
                         ::testing::Values(GemmCase{"transB0_no_C", false, {}},
                                           GemmCase{"transB1_no_C", true, {}},
                                           GemmCase{"transB0_C_N", false, {kGemmN}},
                                           GemmCase{"transB1_C_N", true, {kGemmN}},
                                           GemmCase{"transB1_C_1xN", true, {1, kGemmN}},
                                           GemmCase{"transB0_C_scalar", false, {1}}),
                         [](const auto& info) { return info.param.name; });

// --- sharing, rewiring, chains ----------------------------------------------------------------

// x -> Conv(w) -> BN -> Relu -> y, and x -> Conv(w) -> z reading the same weight.
struct SharedWeight {
  Graph g;
  at::Tensor w = at::randn({4, 3, 1, 1});
  at::Tensor b = at::randn({4});
  BnParams bn{4};
  Node* conv_a;
  Node* conv_b;
  Node* relu;
  SharedWeight() {
    Value* x = addGraphInput(g, "x");
    Value* weight = g.addInitializer("shared.weight", w);
    Value* bias = g.addInitializer("shared.bias", b);
    conv_a = g.addNode("Conv", {x, weight, bias}, {"a_out"}, "conv_a");
    Node* bn_node = addBatchNorm(g, conv_a->output(0), bn, "bn_out");
    relu = g.addNode("Relu", {bn_node->output(0)}, {"y"}, "relu");
    conv_b = g.addNode("Conv", {x, weight, bias}, {"z"}, "conv_b");
    g.addOutput(relu->output(0));
    g.addOutput(conv_b->output(0));
  }
};

TEST(FoldBatchNormTest, SharedWeightAndBiasAreCopiedNotChanged) {
  at::manual_seed(4);
  SharedWeight s;
  const at::Tensor input = at::randn({2, 3, 4, 4});
  Executor before_run(s.g);
  const std::vector<at::Tensor> before = before_run({input});

  // conv_a reads folded copies; conv_b still reads the untouched originals (values below).
  // Weights are compared by shape here and numerically against PyTorch after.
  testing::expectPassRewrites([](Graph& g) { EXPECT_EQ(foldBatchNorm(g), 1u); }, s.g, R"(
    graph qforge
      input %x
      init %shared.weight: float32[4,3,1,1]
      init %shared.bias: float32[4]
      init %shared.weight_bn_folded: float32[4,3,1,1]
      init %shared.bias_bn_folded: float32[4]
      %a_out = Conv(%x, %shared.weight_bn_folded, %shared.bias_bn_folded)  # conv_a
      %y = Relu(%a_out)  # relu
      %z = Conv(%x, %shared.weight, %shared.bias)  # conv_b
      output %y
      output %z
  )",
                              /*max_values=*/0);
  EXPECT_TRUE(at::equal(s.conv_b->input(1)->initializer(), s.w));
  EXPECT_TRUE(at::equal(s.conv_b->input(2)->initializer(), s.b));

  Executor after_run(s.g);
  const std::vector<at::Tensor> after = after_run({input});
  expectClose(after[0], before[0], 1e-5);
  expectClose(after[0], at::relu(s.bn.apply(at::conv2d(input, s.w, s.b))), 1e-5);
  EXPECT_TRUE(at::equal(after[1], before[1]));
}

TEST(FoldBatchNormTest, ChainedBatchNormsFoldOneAfterTheOther) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({3, 2, 3, 3});
  const BnParams first(3), second(3);
  Graph g;
  Node* conv = g.addNode("Conv", {addGraphInput(g, "x"), g.addInitializer("w", w)}, {"c"}, "conv");
  Node* bn1 = addBatchNorm(g, conv->output(0), first, "bn1_out");
  bn1->setName("bn1");  // node names are unique in a valid graph
  g.addOutput(addBatchNorm(g, bn1->output(0), second, "y")->output(0));

  const at::Tensor input = at::randn({1, 2, 5, 5});
  testing::expectPassRewrites([](Graph& g) { EXPECT_EQ(foldBatchNorm(g), 2u); }, g, R"(
    graph qforge
      input %x
      init %w: float32[3,2,3,3]
      init %conv_bias: float32[3]
      %y = Conv(%x, %w, %conv_bias)  # conv
      output %y
  )",
                              /*max_values=*/0);
  expectClose(runGraph(g, input), second.apply(first.apply(at::conv2d(input, w))), 1e-5);
}

TEST(FoldBatchNormTest, TrainingOutputsThatNobodyReadsDoNotBlockTheFold) {
  at::manual_seed(6);
  Graph g;
  g.model.opset_imports = {{"", 12}};
  const BnParams bn(2);
  Node* conv =
      g.addNode("Conv", {addGraphInput(g, "x"), g.addInitializer("w", at::randn({2, 1, 1, 1}))},
                {"c"}, "conv");
  Node* bn_node =
      g.addNode("BatchNormalization",
                {conv->output(0), g.addInitializer("s", bn.scale), g.addInitializer("b", bn.bias),
                 g.addInitializer("m", bn.mean), g.addInitializer("v", bn.var)},
                {"y", "unused_mean", "unused_var"}, "bn");
  bn_node->output(1)->anonymous = true;
  bn_node->output(2)->anonymous = true;
  g.addOutput(bn_node->output(0));
  EXPECT_EQ(foldBatchNorm(g), 1u);
  EXPECT_EQ(g.findValue("unused_mean"), nullptr);
  expectFoldedInto(g, "conv");
}

// PyTorch's exporter deduplicates equal initializers and reads the copies through Identity nodes
// (the zoo's ResNet: a zero BN bias). Those count as initializers, and go when no longer read.
TEST(FoldBatchNormTest, ParametersBehindIdentityNodesFoldAndAreCleanedUp) {
  at::manual_seed(10);
  const at::Tensor w = at::randn({3, 2, 1, 1});
  const BnParams bn(3);
  Graph g;
  Value* x = addGraphInput(g, "x");
  Node* weight_copy = g.addNode("Identity", {g.addInitializer("w", w)}, {"w_copy"}, "w_copy");
  Node* conv = g.addNode("Conv", {x, weight_copy->output(0)}, {"c"}, "conv");
  Node* bn_node = addBatchNorm(g, conv->output(0), bn, "y");
  Node* mean_copy = g.addNode("Identity", {bn_node->input(3)}, {"mean_copy"}, "mean_copy");
  g.setInput(bn_node, 3, mean_copy->output(0));
  g.addOutput(bn_node->output(0));

  const at::Tensor input = at::randn({2, 2, 3, 3});
  EXPECT_EQ(foldBatchNorm(g), 1u);
  expectFoldedInto(g, "conv");
  EXPECT_EQ(g.initializers().size(), 2u);
  EXPECT_EQ(g.findValue("w"), nullptr);
  EXPECT_TRUE(conv->input(1)->isInitializer());
  expectClose(runGraph(g, input), bn.apply(at::conv2d(input, w)), 1e-5);
}

// --- patterns that do not apply ---------------------------------------------------------------

// x -> Conv -> BN -> y, which each negative test breaks in one way.
struct ConvBn {
  Graph g;
  BnParams bn{3};
  Node* conv;
  Node* bn_node;
  explicit ConvBn(const std::string& conv_domain = "") {
    Value* x = addGraphInput(g, "x");
    conv = g.addNode(
        "Conv",
        {x, g.addInitializer("w", at::randn({3, 2, 3, 3})), g.addInitializer("b", at::randn({3}))},
        {"c"}, "conv", conv_domain);
    bn_node = addBatchNorm(g, conv->output(0), bn, "y");
    g.addOutput(bn_node->output(0));
  }

  // Nothing folded and nothing changed: same nodes, same initializer tensors.
  void expectUntouched() {
    const std::vector<at::Tensor> weights = {conv->input(1)->initializer().clone(),
                                             conv->input(2)->initializer().clone()};
    const size_t nodes = g.nodeCount();
    const std::set<std::string> initializers = initializerNames(g);
    const Value* bn_input = bn_node->input(0);
    ASSERT_EQ(foldBatchNorm(g), 0u);  // else bn_node is gone
    EXPECT_EQ(g.nodeCount(), nodes);
    EXPECT_EQ(countOps(g, "BatchNormalization"), 1u);
    EXPECT_EQ(bn_node->input(0), bn_input);
    EXPECT_EQ(initializerNames(g), initializers);
    EXPECT_TRUE(at::equal(conv->input(1)->initializer(), weights[0]));
    EXPECT_TRUE(at::equal(conv->input(2)->initializer(), weights[1]));
  }
};

TEST(FoldBatchNormTest, ConvOutputWithASecondConsumerIsLeftAlone) {
  ConvBn m;
  m.g.addOutput(m.g.addNode("Relu", {m.conv->output(0)}, {"r"}, "relu")->output(0));
  m.expectUntouched();
}

TEST(FoldBatchNormTest, ConvOutputThatIsAGraphOutputIsLeftAlone) {
  ConvBn m;
  m.g.addOutput(m.conv->output(0));
  m.expectUntouched();
}

TEST(FoldBatchNormTest, BatchNormParametersFedAsGraphInputsAreLeftAlone) {
  ConvBn m;
  Value* mean = m.g.addValue("fed_mean");
  m.g.addInput(mean);
  m.g.setInput(m.bn_node, 3, mean);
  m.expectUntouched();
}

// An initializer that is also a graph input is only a default: a run may feed another value.
TEST(FoldBatchNormTest, BatchNormParametersThatAreAlsoGraphInputsAreLeftAlone) {
  ConvBn m;
  m.g.addInput(m.bn_node->input(4));
  m.expectUntouched();
}

TEST(FoldBatchNormTest, TrainingModeIsLeftAlone) {
  ConvBn m;
  m.g.model.opset_imports = {{"", 15}};
  m.bn_node->attributes.set(Attribute::makeInt("training_mode", 1));
  m.expectUntouched();
}

TEST(FoldBatchNormTest, ConvWeightFedAsAGraphInputIsLeftAlone) {
  ConvBn m;
  Value* w = m.g.addValue("fed_w");
  m.g.addInput(w);
  Value* old = m.conv->input(1);
  m.g.setInput(m.conv, 1, w);
  EXPECT_EQ(foldBatchNorm(m.g), 0u);
  EXPECT_EQ(countOps(m.g, "BatchNormalization"), 1u);
  EXPECT_TRUE(old->uses().empty());
}

TEST(FoldBatchNormTest, BatchNormAfterAnUnrelatedOpIsLeftAlone) {
  ConvBn m;
  Node* relu = m.g.addNode("Relu", {m.conv->output(0)}, {"r"}, "relu");
  m.g.setInput(m.bn_node, 0, relu->output(0));
  m.expectUntouched();
}

// The op table decides which producers absorb BN: a Conv of another domain is not ONNX's.
TEST(FoldBatchNormTest, ConvOfACustomDomainIsLeftAlone) {
  ConvBn m("com.example");
  m.expectUntouched();
}

// MatMul has a weight but no bias slot to take BN's shift (OpInfo::absorbs_batchnorm is false).
TEST(FoldBatchNormTest, MatMulIsLeftAlone) {
  Graph g;
  const at::Tensor w = at::randn({4, 3});
  Node* mm = g.addNode("MatMul", {addGraphInput(g, "a"), g.addInitializer("w", w)}, {"m"}, "mm");
  g.addOutput(addBatchNorm(g, mm->output(0), BnParams(3), "y")->output(0));
  EXPECT_EQ(foldBatchNorm(g), 0u);
  EXPECT_EQ(countOps(g, "BatchNormalization"), 1u);
  EXPECT_TRUE(at::equal(mm->input(1)->initializer(), w));
}

TEST(FoldBatchNormTest, SpatialZeroBeforeOpset9IsLeftAlone) {
  ConvBn m;
  m.g.model.opset_imports = {{"", 7}};
  m.bn_node->attributes.set(Attribute::makeInt("spatial", 0));
  m.expectUntouched();
}

TEST(FoldBatchNormTest, GemmWithAPerRowCIsLeftAlone) {
  at::manual_seed(7);
  Graph g;
  Node* gemm = g.addNode("Gemm",
                         {addGraphInput(g, "a"), g.addInitializer("w", at::randn({5, 4})),
                          g.addInitializer("c", at::randn({3, 4}))},
                         {"fc_out"}, "fc");
  g.addOutput(addBatchNorm(g, gemm->output(0), BnParams(4), "y")->output(0));
  const at::Tensor c_before = gemm->input(2)->initializer().clone();
  EXPECT_EQ(foldBatchNorm(g), 0u);
  EXPECT_EQ(countOps(g, "BatchNormalization"), 1u);
  EXPECT_TRUE(at::equal(gemm->input(2)->initializer(), c_before));
  EXPECT_EQ(gemm->attributes.find("beta"), nullptr);
}

// --- the zoo ----------------------------------------------------------------------------------

class FoldBatchNormZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FoldBatchNormZooTest, FoldsEveryBatchNormWithoutChangingTheOutputs) {
  Graph g = importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + GetParam() + ".onnx");
  const size_t batch_norms = countOps(g, "BatchNormalization");
  ASSERT_GT(batch_norms, 0u);
  // Besides the BNs, only Identity copies of their parameters may go.
  const size_t other_nodes = g.nodeCount() - batch_norms - countOps(g, "Identity");
  const std::vector<std::string> outputs = {g.outputs()[0]->name()};

  at::manual_seed(8);
  const at::Tensor images = at::rand({8, 1, 28, 28});
  const at::Tensor before = runGraph(g, images);
  EXPECT_EQ(foldBatchNorm(g), batch_norms);
  EXPECT_EQ(countOps(g, "BatchNormalization"), 0u);
  EXPECT_EQ(g.nodeCount() - countOps(g, "Identity"), other_nodes);
  EXPECT_EQ(g.outputs()[0]->name(), outputs[0]);
  EXPECT_NO_THROW(verifyGraph(g));
  expectClose(runGraph(g, images), before, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Zoo, FoldBatchNormZooTest,
                         ::testing::Values("resnet", "mobilenet", "unet"));

}  // namespace
}  // namespace qforge::passes
