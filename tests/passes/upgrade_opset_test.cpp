// The opset upgrade, one rewrite per test on a tiny graph: the structure as text, and the
// numerics of the old graph (at its opset) against the new one, through the executor where it
// has the op and through ONNX Runtime; every upgraded file passes ONNX's checker.
#include "passes/upgrade_opset.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/executor.h"
#include "ir/captured_values.h"
#include "ir/dump.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "ir/parse.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"
#include "support/pass_harness.h"

namespace qforge::passes {
namespace {

using testing::errorOf;

// Upgrades `before_text` to `target` and checks: the file passes ONNX's checker; the executor
// (unless `executor_has_ops` is false) and ONNX Runtime give the old graph's outputs for `feeds`.
Graph expectSameOutputs(const std::string& before_text, int64_t target, const TensorMap& feeds,
                        bool executor_has_ops = true) {
  Graph before = parseGraph(before_text);
  Graph after = parseGraph(before_text);
  upgradeOpset(after, target);
  EXPECT_EQ(after.model.opsetFor(""), target);
  const std::string dir = testing::makeTempDir("upgrade-opset");
  exportOnnxFile(before, dir + "/before.onnx");
  exportOnnxFile(after, dir + "/after.onnx");
  EXPECT_EQ(testing::onnxCheckerError(dir + "/after.onnx"), "");

  std::vector<std::string> outputs;
  for (const Value* v : before.outputs())
    outputs.push_back(v->name());
  if (executor_has_ops) {
    const TensorMap old_out = Executor(before).run(feeds);
    const TensorMap new_out = Executor(after).run(feeds);
    for (const std::string& name : outputs) {
      EXPECT_TRUE(at::equal(new_out.at(name), old_out.at(name))) << name;
    }
  }
  if (testing::ortAvailable("the opset upgrade tests")) {
    const TensorMap old_ort = testing::runInOrt(dir + "/before.onnx", feeds);
    const TensorMap new_ort = testing::runInOrt(dir + "/after.onnx", feeds);
    for (const std::string& name : outputs) {
      EXPECT_TRUE(at::equal(new_ort.at(name), old_ort.at(name))) << name << "\n"
                                                                 << new_ort.at(name) << "\n"
                                                                 << old_ort.at(name);
      if (executor_has_ops) {
        const at::Tensor ours = Executor(after).run(feeds).at(name);
        EXPECT_TRUE(
            at::allclose(ours.to(at::kDouble), new_ort.at(name).to(at::kDouble), 1e-5, 1e-6))
            << name;
      }
    }
  }
  return after;
}

TensorMap oneInput(const at::Tensor& x) {
  return {{"x", x}};
}

TEST(UpgradeOpset, ClipBoundsBecomeInputsAt11) {
  const char* before = R"(
    graph g
    opset "" 9
    input %x: float32[2,3]
    %y: float32[2,3] = Clip[max=0.75, min=-0.5](%x)  # clip
    output %y: float32[2,3]
  )";
  testing::expectPassRewrites([](Graph& g) { upgradeOpset(g, 11); }, before, R"(
    graph g
    opset "" 11
    input %x: float32[2,3]
    init %clip_min: float32[] = {-0.5}
    init %clip_max: float32[] = {0.75}
    %y: float32[2,3] = Clip(%x, %clip_min, %clip_max)  # clip
    output %y: float32[2,3]
  )");
  expectSameOutputs(before, 11, oneInput(at::randn({2, 3})));
}

TEST(UpgradeOpset, PadAttributesBecomeInputsAt11) {
  const char* before = R"(
    graph g
    opset "" 10
    input %x: float32[1,2,3]
    %y = Pad[pads=[0,1,0,0,0,2], value=2.5](%x)  # pad
    output %y: float32[1,3,5]
  )";
  testing::expectPassRewrites([](Graph& g) { upgradeOpset(g, 11); }, before, R"(
    graph g
    opset "" 11
    input %x: float32[1,2,3]
    init %pad_pads: int64[6] = {0, 1, 0, 0, 0, 2}
    init %pad_value: float32[] = {2.5}
    %y = Pad(%x, %pad_pads, %pad_value)  # pad
    output %y: float32[1,3,5]
  )");
  expectSameOutputs(before, 13, oneInput(at::randn({1, 2, 3})));
}

TEST(UpgradeOpset, SliceAttributesBecomeInputsAt10) {
  const char* before = R"(
    graph g
    opset "" 9
    input %x: float32[3,5]
    %y = Slice[axes=[1], ends=[4], starts=[1]](%x)  # slice
    output %y: float32[3,3]
  )";
  testing::expectPassRewrites([](Graph& g) { upgradeOpset(g, 10); }, before, R"(
    graph g
    opset "" 10
    input %x: float32[3,5]
    init %slice_starts: int64[1] = {1}
    init %slice_ends: int64[1] = {4}
    init %slice_axes: int64[1] = {1}
    %y = Slice(%x, %slice_starts, %slice_ends, %slice_axes)  # slice
    output %y: float32[3,3]
  )");
  expectSameOutputs(before, 13, oneInput(at::randn({3, 5})));
}

TEST(UpgradeOpset, TopKsKBecomesAnInputAt10) {
  const char* before = R"(
    graph g
    opset "" 9
    input %x: float32[2,6]
    %v, %i = TopK[k=3](%x)  # topk
    output %v: float32[2,3]
    output %i: int64[2,3]
  )";
  const Graph after = expectSameOutputs(before, 10, oneInput(at::randn({2, 6})),
                                        /*executor_has_ops=*/false);
  const Node* topk = after.findNode("topk");
  ASSERT_EQ(topk->inputs().size(), 2u);
  EXPECT_TRUE(at::equal(topk->input(1)->initializer(), at::tensor({3}, at::kLong)));
  EXPECT_FALSE(topk->attributes.has("k"));
}

TEST(UpgradeOpset, UpsampleBecomesResizeWithOpset10Coordinates) {
  for (const char* mode : {"nearest", "linear"}) {
    SCOPED_TRACE(mode);
    const std::string before = std::string(R"(
      graph g
      opset "" 8
      input %x: float32[1,1,3,4]
      %y = Upsample[mode=")") + mode +
                               R"(", scales=[1.0,1.0,2.0,3.0]](%x)  # up
      output %y: float32[1,1,6,12]
    )";
    for (int64_t target : {9, 10, 11, 13}) {
      SCOPED_TRACE(target);
      const Graph after = expectSameOutputs(before, target, oneInput(at::randn({1, 1, 3, 4})));
      const Node* n = after.findNode("up");
      EXPECT_EQ(n->opType(), target >= 10 ? "Resize" : "Upsample");
      EXPECT_EQ(n->inputs().size(), target >= 11 ? 3u : 2u);
    }
  }
}

std::string resize10Model(const std::string& mode, const std::string& scales,
                          const std::string& out_shape) {
  return R"(
      graph g
      opset "" 10
      input %x: float32[1,1,5,5]
      init %scales: float32[4] = {)" +
         scales + R"(}
      %y = Resize[mode=")" +
         mode + R"("](%x, %scales)  # resize
      output %y: float32)" +
         out_shape + "\n";
}

TEST(UpgradeOpset, Resize10KeepsItsAsymmetricSamplingAt11) {
  // Non-integer scales, where half_pixel or round_prefer_floor would pick other pixels.
  for (const char* mode : {"nearest", "linear"}) {
    SCOPED_TRACE(mode);
    const std::string before = resize10Model(mode, "1.0, 1.0, 1.5, 0.6", "[1,1,7,3]");
    const Graph after = expectSameOutputs(before, 11, oneInput(at::randn({1, 1, 5, 5})));
    const Node* n = after.findNode("resize");
    ASSERT_EQ(n->inputs().size(), 3u);
    EXPECT_EQ(n->input(1)->initializer().numel(), 0);  // empty roi
    EXPECT_EQ(n->attributes.find("coordinate_transformation_mode")->s, "asymmetric");
  }
}

TEST(UpgradeOpset, Resize10NearestFloorsGrowingAxesAndCeilsShrinkingOnes) {
  // ONNX Runtime's Resize-10 (which ran these models): x_out / scale, floored where the axis
  // grows and rounded up where it shrinks. Closed form for the 5x5 input below.
  const at::Tensor x = at::arange(25, at::kFloat).reshape({1, 1, 5, 5});
  auto sample = [&](const std::vector<int64_t>& rows, const std::vector<int64_t>& cols) {
    return x.index_select(2, at::tensor(rows, at::kLong))
        .index_select(3, at::tensor(cols, at::kLong));
  };
  struct Case {
    const char* scales;
    const char* shape;
    at::Tensor want;
    size_t resizes;
  };
  const std::vector<Case> cases = {
      {"1.0, 1.0, 1.5, 1.5", "[1,1,7,7]", sample({0, 0, 1, 2, 2, 3, 4}, {0, 0, 1, 2, 2, 3, 4}), 1},
      {"1.0, 1.0, 0.6, 0.6", "[1,1,3,3]", sample({0, 2, 4}, {0, 2, 4}), 1},
      {"1.0, 1.0, 1.5, 0.6", "[1,1,7,3]", sample({0, 0, 1, 2, 2, 3, 4}, {0, 2, 4}), 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scales);
    const std::string before = resize10Model("nearest", c.scales, c.shape);
    EXPECT_TRUE(at::equal(Executor(parseGraph(before)).run(oneInput(x)).at("y"), c.want));
    const Graph after = expectSameOutputs(before, 11, oneInput(x));
    EXPECT_TRUE(at::equal(Executor(after).run(oneInput(x)).at("y"), c.want));
    EXPECT_EQ(testing::countOps(after, "Resize"), c.resizes);
  }
}

TEST(UpgradeOpset, Resize10NearestWithScalesComputedAtRunTimeIsRefused) {
  const std::string text = R"(
    graph g
    opset "" 10
    input %x: float32[1,1,4,4]
    input %s: float32[4]
    %y = Resize[mode="nearest"](%x, %s)  # resize
    output %y: float32[1,1,?,?]
  )";
  Graph g = parseGraph(text);
  EXPECT_EQ(errorOf([&] { upgradeOpset(g, 13); }),
            "node 'resize' (Resize): cannot carry Resize over to opset 11: its nearest rounding "
            "depends on whether each axis grows or shrinks, and its scales are computed at run "
            "time; give the model a fixed input size so they fold to constants");
}

TEST(UpgradeOpset, SoftmaxOverTrailingAxesBecomesFlattenSoftmaxReshapeAt13) {
  const char* before = R"(
    graph g
    opset "" 11
    input %x: float32[2,3,4]
    %y = Softmax[axis=1](%x)  # softmax
    output %y: float32[2,3,4]
  )";
  testing::expectPassRewrites([](Graph& g) { upgradeOpset(g, 13); }, before, R"(
    graph g
    opset "" 13
    input %x: float32[2,3,4]
    %x_2d = Flatten[axis=1](%x)  # softmax/flatten
    %y_2d: float32 = Softmax[axis=1](%x_2d)  # softmax
    %x_shape = Shape(%x)  # softmax/shape
    %y: float32[2,3,4] = Reshape(%y_2d, %x_shape)  # softmax/reshape
    output %y: float32[2,3,4]
  )");
  // A closed form besides: exp over each sample's 12 values.
  const at::Tensor x = at::randn({2, 3, 4});
  expectSameOutputs(before, 13, oneInput(x));
  Graph after = parseGraph(before);
  upgradeOpset(after, 13);
  const at::Tensor want = at::softmax(x.reshape({2, 12}), 1).reshape({2, 3, 4});
  EXPECT_TRUE(at::allclose(Executor(after).run(oneInput(x)).at("y"), want));
}

TEST(UpgradeOpset, SoftmaxOnTheLastAxisOnlyNamesItAt13) {
  const char* before = R"(
    graph g
    opset "" 9
    input %x: float32[2,5]
    %y = LogSoftmax(%x)  # logsoftmax
    output %y: float32[2,5]
  )";
  const Graph after = expectSameOutputs(before, 13, oneInput(at::randn({2, 5})));
  EXPECT_EQ(after.nodeCount(), 1u);
  EXPECT_EQ(after.findNode("logsoftmax")->attributes.find("axis")->i, 1);
}

TEST(UpgradeOpset, SoftmaxRankComesFromASampleRunWhenNoShapeIsDeclared) {
  // The Relu output has no declared type: its rank (4) is found by running the graph once.
  const char* before = R"(
    graph g
    opset "" 11
    input %x: float32[N,2,3,2]
    %r = Relu(%x)
    %y = Softmax[axis=2](%r)  # softmax
    output %y: float32[N,2,3,2]
  )";
  const Graph after = expectSameOutputs(before, 13, oneInput(at::randn({3, 2, 3, 2})));
  EXPECT_EQ(testing::countOps(after, "Flatten"), 1u);
  EXPECT_EQ(after.findNode("softmax/flatten")->attributes.find("axis")->i, 2);
}

TEST(UpgradeOpset, AxesAndSplitsBecomeInputsAt13) {
  const char* before = R"(
    graph g
    opset "" 11
    input %x: float32[2,1,6]
    %s = Squeeze[axes=[1]](%x)  # squeeze
    %a, %b = Split[axis=1, split=[2,4]](%s)  # split
    %u = Unsqueeze[axes=[0]](%a)  # unsqueeze
    %r = ReduceSum[axes=[2], keepdims=0](%u)  # reducesum
    output %r: float32[1,2]
    output %b: float32[2,4]
  )";
  const Graph after = expectSameOutputs(before, 13, oneInput(at::randn({2, 1, 6})));
  for (const char* name : {"squeeze", "split", "unsqueeze", "reducesum"}) {
    const Node* n = after.findNode(name);
    EXPECT_EQ(n->inputs().size(), 2u) << name;
    EXPECT_FALSE(n->attributes.has("axes") || n->attributes.has("split")) << name;
  }
  EXPECT_TRUE(
      at::equal(after.findNode("split")->input(1)->initializer(), at::tensor({2, 4}, at::kLong)));
}

TEST(UpgradeOpset, DropoutLosesItsUnusedMaskAndTakesItsRatioAsAnInput) {
  const char* before = R"(
    graph g
    opset "" 7
    input %x: float32[2,3]
    %d, %mask = Dropout[ratio=0.25](%x)  # dropout
    %y = Relu(%d)
    output %y: float32[2,3]
  )";
  const Graph after = expectSameOutputs(before, 13, oneInput(at::randn({2, 3})));
  const Node* n = after.findNode("dropout");
  EXPECT_EQ(n->outputs().size(), 1u);
  ASSERT_EQ(n->inputs().size(), 2u);
  EXPECT_FLOAT_EQ(n->input(1)->initializer().item<float>(), 0.25f);
}

TEST(UpgradeOpset, BatchNormalizationDropsSpatial) {
  const char* before = R"(
    graph g
    opset "" 7
    input %x: float32[2,3,2,2]
    init %s: float32[3] = {1, 2, 3}
    init %b: float32[3] = {0.1, 0.2, 0.3}
    init %m: float32[3] = {0.5, -0.5, 0}
    init %v: float32[3] = {1, 4, 0.25}
    %y = BatchNormalization[epsilon=0.001, spatial=1](%x, %s, %b, %m, %v)  # bn
    output %y: float32[2,3,2,2]
  )";
  const Graph after = expectSameOutputs(before, 14, oneInput(at::randn({2, 3, 2, 2})));
  const Node* n = after.findNode("bn");
  EXPECT_EQ(n->outputs().size(), 1u);
  EXPECT_FALSE(n->attributes.has("spatial"));
}

TEST(UpgradeOpset, ScatterBecomesScatterElementsAt11) {
  const char* before = R"(
    graph g
    opset "" 9
    input %x: float32[2,3]
    init %i: int64[2,1] = {2, 0}
    init %u: float32[2,1] = {10, 20}
    %y = Scatter[axis=1](%x, %i, %u)  # scatter
    output %y: float32[2,3]
  )";
  const Graph after = expectSameOutputs(before, 11, oneInput(at::randn({2, 3})),
                                        /*executor_has_ops=*/false);
  EXPECT_EQ(after.findNode("scatter")->opType(), "ScatterElements");
}

TEST(UpgradeOpset, NothingChangesAtOrBelowTheModelsOpset) {
  Graph g = parseGraph(R"(
    graph g
    opset "" 11
    input %x: float32[2]
    %y = Clip[max=1.0](%x)
    output %y: float32[2]
  )");
  const OpsetUpgrade result = upgradeOpset(g, 10);
  EXPECT_EQ(result.to, 11);
  EXPECT_EQ(result.rewritten, 0u);
  EXPECT_EQ(g.model.opsetFor(""), 11);
}

// Refusals name the node, the op and the opsets, and leave the graph as it was.
TEST(UpgradeOpset, RefusesWhatItCannotCarryOverNamingTheNode) {
  const auto refusal = [](const std::string& text, int64_t target) {
    Graph g = parseGraph(text);
    const std::string before = dumpGraph(g);
    const std::string error = errorOf([&] { upgradeOpset(g, target); });
    EXPECT_EQ(dumpGraph(g), before) << "the graph changed before the refusal";
    return error;
  };
  EXPECT_EQ(refusal(R"(
    graph g
    opset "" 10
    input %x: float32[1,1,4,4]
    input %r: float32[1,5]
    input %i: int64[1]
    %y = RoiAlign(%x, %r, %i)  # roi
    output %y: float32
  )",
                    16),
            "node 'roi' (RoiAlign): qforge cannot move RoiAlign from opset 10 to 16: ONNX changed "
            "RoiAlign at opset 16 in a way qforge has no rewrite for; convert the model to opset "
            "16 first");
  EXPECT_EQ(refusal(R"(
    graph g
    opset "" 7
    input %x: float32[2,3,2,2]
    init %s: float32[3]
    %y = BatchNormalization[spatial=0](%x, %s, %s, %s, %s)  # bn
    output %y: float32
  )",
                    9),
            "node 'bn' (BatchNormalization): cannot carry BatchNormalization over to opset 9: "
            "spatial=0 (per-element statistics) has no form in opset 9");
  // Five outputs at opsets 7-13 mean training mode: ONNX Runtime normalizes with the batch's
  // statistics then, which no inference graph at opset 14 reproduces.
  EXPECT_EQ(refusal(R"(
    graph g
    opset "" 7
    input %x: float32[2,3,2,2]
    init %s: float32[3]
    %y, %m, %v, %sm, %sv = BatchNormalization(%x, %s, %s, %s, %s)  # bn
    output %y: float32[2,3,2,2]
  )",
                    14),
            "node 'bn' (BatchNormalization): cannot carry BatchNormalization over to opset 14: "
            "it has training-mode outputs (mean, var, saved_mean, saved_var), so it normalizes "
            "with each batch's statistics; export the model in inference (eval) mode");
  EXPECT_EQ(refusal(R"(
    graph g
    opset "" 9
    input %x: float32[2,3]
    %d, %mask = Dropout(%x)  # dropout
    output %d: float32
    output %mask: bool
  )",
                    10),
            "node 'dropout' (Dropout): cannot carry Dropout over to opset 10: its mask output, "
            "which is read, turns boolean at opset 10");
  // No declared shape and a graph the executor cannot run: the rank stays unknown.
  const std::string rank = refusal(R"(
    graph g
    opset "" 11
    opset "custom" 1
    input %x: float32[2,3]
    %c = custom::Op(%x)
    %y = Softmax(%c)  # softmax
    output %y: float32
  )",
                                   13);
  EXPECT_NE(rank.find("node 'softmax' (Softmax): cannot carry Softmax over to opset 13"),
            std::string::npos)
      << rank;
  EXPECT_NE(rank.find("rank"), std::string::npos) << rank;
  EXPECT_NE(refusal(R"(
    graph g
    opset "" 9
    input %x: float32[2]
    %y = Relu(%x)
    output %y: float32
  )",
                    21)
                .find("up to opset 17"),
            std::string::npos);
}

// If(cond) { Squeeze(x, axes 1) } else { Squeeze(-x, axes 1) } at opset 11: Squeeze's axes
// become an input at 13, inside the branches as outside.
onnx::ModelProto squeezeInBranches() {
  constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
  testing::OnnxBuilder then_branch(11);
  then_branch.output("t", kFloat, {2, 3});
  testing::addIntsAttribute(then_branch.node("Squeeze", {"x"}, {"t"}, "then_squeeze"), "axes", {1});
  testing::OnnxBuilder else_branch(11);
  else_branch.output("e", kFloat, {2, 3});
  else_branch.node("Neg", {"x"}, {"nx"}, "else_neg");
  testing::addIntsAttribute(else_branch.node("Squeeze", {"nx"}, {"e"}, "else_squeeze"), "axes",
                            {1});
  testing::OnnxBuilder b(11);
  b.input("cond", onnx::TensorProto::BOOL, {}).input("x", kFloat, {2, 1, 3});
  b.output("y", kFloat, {2, 3});
  onnx::NodeProto& node = b.node("If", {"cond"}, {"y"}, "branch");
  testing::addGraphAttribute(node, "then_branch", then_branch.model().graph());
  testing::addGraphAttribute(node, "else_branch", else_branch.model().graph());
  return b.model();
}

TEST(UpgradeOpset, ControlFlowBodiesAreUpgradedWithTheGraph) {
  onnx::ModelProto proto = squeezeInBranches();
  Graph before = importOnnxModel(proto, "");
  Graph after = before.clone();
  const OpsetUpgrade done = upgradeOpset(after, 13);
  EXPECT_EQ(done.rewritten, 2u);
  const std::string dir = testing::makeTempDir("upgrade-bodies");
  exportOnnxFile(after, dir + "/after.onnx");
  EXPECT_EQ(testing::onnxCheckerError(dir + "/after.onnx"), "");
  // Both Squeezes now read their axes as an input.
  Graph reread = importOnnxFile(dir + "/after.onnx");
  for (const Attribute& a : reread.findNode("branch")->attributes.all()) {
    for (const onnx::GraphProto& body : subgraphsOf(a)) {
      for (const auto& n : body.node()) {
        if (n.op_type() != "Squeeze") continue;
        EXPECT_EQ(n.input_size(), 2) << a.name;
        EXPECT_EQ(n.attribute_size(), 0) << a.name;
      }
    }
  }
  const at::Tensor x = at::arange(6, at::kFloat).reshape({2, 1, 3});
  for (bool cond : {true, false}) {
    const TensorMap feeds = {{"cond", at::scalar_tensor(cond, at::kBool)}, {"x", x}};
    const at::Tensor expected = cond ? x.squeeze(1) : -x.squeeze(1);
    EXPECT_TRUE(at::equal(Executor(after).run(feeds).at("y"), expected));
    if (testing::ortAvailable("the opset upgrade tests")) {
      EXPECT_TRUE(at::equal(testing::runInOrt(dir + "/after.onnx", feeds).at("y"), expected));
    }
  }
}

TEST(UpgradeOpset, ABodyItCannotCarryOverIsNamedWithItsNode) {
  onnx::ModelProto proto = squeezeInBranches();
  // The else branch's Squeeze becomes a Softmax over axis 1 of a value whose rank nothing
  // declares (the branch reads it from outside): opset 13 changed what that axis means.
  for (auto& n : *proto.mutable_graph()->mutable_node()) {
    if (n.op_type() != "If") continue;
    auto* squeeze = n.mutable_attribute(1)->mutable_g()->mutable_node(1);
    squeeze->set_op_type("Softmax");
    squeeze->clear_attribute();
    squeeze->set_input(0, "x");
  }
  Graph g = importOnnxModel(proto, "");
  g.value("x")->type.shape.reset();
  const std::string before = exportOnnxModel(g).SerializeAsString();
  const std::string error = errorOf([&] { upgradeOpset(g, 13); });
  EXPECT_NE(error.find("node 'branch' (If), body 'else_branch'"), std::string::npos) << error;
  EXPECT_NE(error.find("Softmax"), std::string::npos) << error;
  // Nothing was edited, not even the then branch, which alone would have upgraded.
  EXPECT_EQ(exportOnnxModel(g).SerializeAsString(), before);
  EXPECT_EQ(g.model.opsetFor(""), 11);
}

TEST(UpgradeOpset, Scan8IsRefusedForItsBatchAxis) {
  Graph g = parseGraph(R"(
    graph g
    opset "" 8
    input %s: float32[1,2]
    input %x: float32[1,4,2]
    %y, %z = Scan(%s, %x)  # scan
    output %y: float32
  )");
  EXPECT_NE(errorOf([&] {
              upgradeOpset(g, 13);
            }).find("node 'scan' (Scan): qforge cannot move Scan from opset 8 to 13"),
            std::string::npos);
}

}  // namespace
}  // namespace qforge::passes
