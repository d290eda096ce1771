// The pass registry, text pipelines and their runner, and prepare() as the default pipeline.
#include "passes/pass_pipeline.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "passes/prepare.h"
#include "passes/zero_bias_under_batchnorm.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge {
namespace {

using passes::Pass;
using passes::PassContext;
using passes::PassKind;
using passes::PassPipeline;
using passes::PassRegistry;
using passes::PassResult;
using testing::errorOf;

// x[2,2,5,5] -> Conv(w[3,2,3,3], no bias) -> BatchNormalization -> Relu -> y
Graph convBnRelu() {
  at::manual_seed(3);
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{
      DType::Float, std::vector<Dim>{Dim::known(2), Dim::known(2), Dim::known(5), Dim::known(5)}};
  g.addInput(x);
  Node* conv =
      g.addNode("Conv", {x, g.addInitializer("w", at::randn({3, 2, 3, 3}))}, {"c"}, "conv");
  std::vector<Value*> bn_inputs{conv->output(0)};
  for (const char* p : {"scale", "bias", "mean", "var"}) {
    at::Tensor t = std::string(p) == "var" ? at::rand({3}) + 0.5 : at::randn({3});
    bn_inputs.push_back(g.addInitializer(std::string("bn_") + p, t));
  }
  Node* bn = g.addNode("BatchNormalization", bn_inputs, {"b"}, "bn");
  Node* relu = g.addNode("Relu", {bn->output(0)}, {"y"}, "relu");
  relu->output(0)->type =
      TensorType{DType::Float,
                 std::vector<Dim>{Dim::symbolic("N"), Dim::known(3), Dim::known(5), Dim::known(5)}};
  g.addOutput(relu->output(0));
  return g;
}

// Fuses Conv+BN+Relu and quantizes biases (derived from the input and weight scales).
backends::BackendConfig convBnBackend() {
  return testing::tinyBackend({{"fusions", {{"Conv", "BatchNormalization?", "Relu?"}}},
                               {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}});
}

TEST(PassPipeline, ParsesNamesInOrderAndWritesThemBack) {
  PassPipeline p = PassPipeline::parse(" constants-to-initializers, fold-bn ,find-units");
  ASSERT_EQ(p.passes().size(), 3u);
  EXPECT_EQ(p.passes()[1]->name(), "fold-bn");
  EXPECT_EQ(p.text(), "constants-to-initializers,fold-bn,find-units");
  EXPECT_TRUE(p.hasPlacement());
  EXPECT_FALSE(PassPipeline::parse("fold-bn").hasPlacement());
}

TEST(PassPipeline, RefusesBadListsNamingTheProblem) {
  EXPECT_EQ(
      errorOf([] { PassPipeline::parse("fold-bn,frobnicate"); }),
      "unknown pass 'frobnicate'; known: constants-to-initializers, float16-to-float32, "
      "fold-constants, upgrade-opset, fold-bn, find-units, zero-bias-under-bn, resolve-settings, "
      "list-float-ops, insert-fake-quant");
  EXPECT_NE(errorOf([] { PassPipeline::parse("fold-bn,,find-units"); }).find("empty name"),
            std::string::npos);
  EXPECT_NE(errorOf([] { PassPipeline::parse(""); }).find("empty name"), std::string::npos);
  EXPECT_EQ(errorOf([] { PassPipeline::parse("fold-bn,fold-bn"); }),
            "pass 'fold-bn' is listed twice");
  EXPECT_EQ(errorOf([] { PassPipeline::parse("find-units,fold-bn"); }),
            "pass 'fold-bn' edits the float graph and must come before the placement passes "
            "(find-units)");
}

TEST(PassRegistry, RefusesBadAndRepeatedNames) {
  PassRegistry r;
  auto nothing = [](Graph&, PassContext&) { return PassResult{}; };
  r.add(Pass("mine", PassKind::Graph, "does nothing", nothing));
  EXPECT_EQ(errorOf([&] { r.add(Pass("mine", PassKind::Graph, "", nothing)); }),
            "pass 'mine' is registered twice");
  EXPECT_NE(errorOf([&] {
              r.add(Pass("My Pass", PassKind::Graph, "", nothing));
            }).find("lowercase letters"),
            std::string::npos);
  EXPECT_EQ(r.names(), std::vector<std::string>{"mine"});
  EXPECT_EQ(r.find("other"), nullptr);
}

// A pass that leaves a broken graph is caught right after it, by name; so is one that throws.
TEST(PassPipeline, VerifiesAfterEachPassAndNamesThePassInErrors) {
  PassRegistry r;
  r.add(Pass("dangle", PassKind::Graph, "adds a node reading a value nothing produces",
             [](Graph& g, PassContext&) {
               Value* ghost = g.addValue("ghost");
               g.addNode("Relu", {ghost}, {"ghost_out"}, "reads_ghost");
               return PassResult{1, {}};
             }));
  r.add(Pass("fail", PassKind::Graph, "throws",
             [](Graph&, PassContext&) -> PassResult { throw Error("something is wrong"); }));
  Graph g = testing::convReluConv();
  PassContext context;
  const std::string dangling = errorOf([&] { PassPipeline::parse("dangle", r).run(g, context); });
  EXPECT_EQ(dangling.rfind("prepare, pass 'dangle': ", 0), 0u) << dangling;
  EXPECT_NE(dangling.find("ghost"), std::string::npos) << dangling;

  Graph h = testing::convReluConv();
  EXPECT_EQ(errorOf([&] { PassPipeline::parse("fail", r).run(h, context, "mine"); }),
            "mine, pass 'fail': something is wrong");
}

TEST(PassPipeline, PlacementPassesSayWhatTheyNeedBeforeThem) {
  Graph g = testing::convReluConv();
  const backends::BackendConfig backend = testing::tinyBackend();
  PassContext context;
  context.backend = &backend;
  EXPECT_EQ(errorOf([&] { PassPipeline::parse("insert-fake-quant").run(g, context); }),
            "prepare, pass 'insert-fake-quant': pass 'insert-fake-quant' needs the units of "
            "'find-units': list it earlier in the pipeline");
  PassContext no_backend;
  EXPECT_EQ(errorOf([&] { PassPipeline::parse("find-units").run(g, no_backend); }),
            "prepare, pass 'find-units': pass 'find-units' places quantizers and needs a backend");
}

TEST(Prepare, RunsTheDefaultPipelineAndRecordsWhatEachPassDid) {
  auto m = passes::prepare(convBnRelu(), convBnBackend());
  std::vector<std::string> names;
  for (const passes::PassRecord& r : m->passRecords())
    names.push_back(r.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"constants-to-initializers", "float16-to-float32",
                                      "fold-constants", "upgrade-opset", "fold-bn", "find-units",
                                      "resolve-settings", "list-float-ops", "insert-fake-quant"}));
  EXPECT_EQ(m->passRecords()[1].result.changes, 0);  // no float16 in the model
  EXPECT_EQ(m->passRecords()[4].result.changes, 1);  // the one BN folded
  EXPECT_EQ(m->passRecords()[5].result.changes, 1);  // Conv+Relu: one unit
  // Input, weight, bias (folding created it), output: four quantizers.
  EXPECT_EQ(m->passRecords()[8].result.changes, static_cast<int64_t>(m->points().size()));
  EXPECT_EQ(testing::opCounts(m->graph())["BatchNormalization"], 0);
}

// A list of graph passes only is completed with the placement passes. Without fold-bn, BN stays
// inside the unit Conv+BN+Relu; where the caller keeps BN for training (fold_batchnorm false) the
// unit also gets a zero bias, so that folding BN later has a bias quantizer.
TEST(Prepare, GraphPassesOnlyGetThePlacementPassesAppended) {
  passes::PrepareOptions options;
  options.passes = "constants-to-initializers";
  for (bool keep_batchnorm : {false, true}) {
    options.fold_batchnorm = !keep_batchnorm;
    auto m = passes::prepare(convBnRelu(), convBnBackend(), options);
    std::vector<std::string> names;
    for (const passes::PassRecord& r : m->passRecords())
      names.push_back(r.name);
    std::vector<std::string> expected = {
        "constants-to-initializers", "upgrade-opset",  "find-units",
        "resolve-settings",          "list-float-ops", "insert-fake-quant"};
    if (keep_batchnorm) expected.insert(expected.begin() + 3, "zero-bias-under-bn");
    EXPECT_EQ(names, expected);
    EXPECT_EQ(testing::opCounts(m->graph())["BatchNormalization"], 1);
    ASSERT_EQ(m->units().size(), 1u);
    EXPECT_EQ(m->units()[0].ops, "Conv+BatchNormalization+Relu");
    EXPECT_EQ(m->graph().findNode("conv")->input(2) != nullptr, keep_batchnorm);
  }
}

TEST(Prepare, RefusesAPassListThatPlacesNoQuantizersBeforeAnyWork) {
  passes::PrepareOptions options;
  options.passes = "fold-bn,find-units,resolve-settings";
  EXPECT_EQ(errorOf([&] { passes::prepare(convBnRelu(), convBnBackend(), options); }),
            "pass list 'fold-bn,find-units,resolve-settings' places no quantizers: end it with the "
            "placement passes (find-units,resolve-settings,list-float-ops,insert-fake-quant) or "
            "list graph passes only");
}

// The zero bias has one entry per output channel: ConvTranspose's weight is [C_in, C_out/group,
// kH, kW], so 2 groups of 3 give 6 channels; Gemm with transB=0 reads [K, N] and has N.
TEST(ZeroBiasUnderBatchNorm, BiasLengthIsTheOutputChannelCount) {
  struct Case {
    std::string op;
    std::vector<int64_t> weight_shape;
    Attribute attribute;
    int64_t channels;
  };
  const std::vector<Case> cases = {
      {"Conv", {4, 2, 3, 3}, Attribute::makeInt("group", 1), 4},
      {"ConvTranspose", {4, 3, 3, 3}, Attribute::makeInt("group", 2), 6},
      {"Gemm", {5, 7}, Attribute::makeInt("transB", 0), 7},
      {"Gemm", {7, 5}, Attribute::makeInt("transB", 1), 7}};
  for (const Case& c : cases) {
    Graph g;
    Value* x = g.addValue("x");
    g.addInput(x);
    Node* producer = g.addNode(c.op, {x, g.addInitializer("w", at::ones(c.weight_shape))}, {"p"});
    producer->attributes.set(c.attribute);
    Node* bn = g.addNode("BatchNormalization", {producer->output(0)}, {"y"});
    g.addOutput(bn->output(0));
    std::vector<passes::QuantUnit> units(1);
    units[0].name = "u";
    units[0].nodes = {producer, bn};
    ASSERT_EQ(passes::addZeroBiasesUnderBatchNorm(g, units), 1) << c.op;
    ASSERT_NE(producer->input(2), nullptr) << c.op;
    const at::Tensor& bias = producer->input(2)->initializer();
    EXPECT_EQ(bias.sizes(), at::IntArrayRef({c.channels})) << c.op;
    EXPECT_EQ(bias.abs().sum().item<float>(), 0.0f) << c.op;
    EXPECT_EQ(units[0].bias.node, producer) << c.op;
    // A second run finds the bias in place and adds nothing.
    EXPECT_EQ(passes::addZeroBiasesUnderBatchNorm(g, units), 0) << c.op;
  }
}

// An edit of the prepared graph is seen by the next executor() call without bookkeeping: here a
// Neg appended after the output (y' = -y); editing data alone keeps the executor.
TEST(PreparedModel, ExecutorFollowsEditsOfTheGraphStructure) {
  auto m = passes::prepare(testing::convReluConv(), testing::tinyBackend());
  const at::Tensor x = at::randn({2, 2, 5, 5});
  Executor* first = &m->executor();
  const at::Tensor y = first->run({{"x", x}}).at("y");
  EXPECT_EQ(&m->executor(), first);

  Graph& g = m->graph();
  const uint64_t version = g.structureVersion();
  g.value("w2")->setInitializer(g.value("w2")->initializer() * 1);
  EXPECT_EQ(g.structureVersion(), version);
  EXPECT_EQ(&m->executor(), first);

  Value* y_value = g.outputs().front();
  Node* neg = g.addNode("Neg", {y_value}, {"minus_y"}, "neg");
  g.setOutputs({neg->output(0)});
  EXPECT_NE(g.structureVersion(), version);
  const TensorMap out = m->executor().run({{"x", x}});
  ASSERT_EQ(out.count("minus_y"), 1u);
  EXPECT_TRUE(at::equal(out.at("minus_y"), -y));
}

}  // namespace
}  // namespace qforge
