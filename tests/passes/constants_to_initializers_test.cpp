#include "passes/constants_to_initializers.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "ir/parse.h"
#include "ir/verifier.h"
#include "support/checks.h"
#include "support/pass_harness.h"

namespace qforge::passes {
namespace {

using testing::countOps;

Node* addConstant(Graph& g, const std::string& out, Attribute value) {
  Node* node = g.addNode("Constant", {}, {out}, out + "_node");
  node->attributes.set(std::move(value));
  return node;
}

// Every value attribute kind, each feeding the op that typically reads it:
//   y = Reshape(Clip(x, lo, hi) * scales + offset, shape)[index]  (Gather on axis 0)
struct AllKinds {
  Graph g;
  AllKinds() {
    Value* x = g.addValue("x");
    g.addInput(x);
    addConstant(g, "lo", Attribute::makeTensor("value", at::scalar_tensor(-0.5, at::kFloat)));
    addConstant(g, "hi", Attribute::makeFloat("value_float", 0.75));
    addConstant(g, "scales", Attribute::makeFloats("value_floats", {1.5, -2.0, 0.25}));
    addConstant(g, "offset", Attribute::makeTensor("value", at::tensor({0.1f, 0.2f, 0.3f})));
    addConstant(g, "shape", Attribute::makeInts("value_ints", {3, -1}));
    addConstant(g, "index", Attribute::makeInt("value_int", 1));
    Node* clip = g.addNode("Clip", {x, g.value("lo"), g.value("hi")}, {"clipped"}, "clip");
    Node* mul = g.addNode("Mul", {clip->output(0), g.value("scales")}, {"scaled"}, "mul");
    Node* add = g.addNode("Add", {mul->output(0), g.value("offset")}, {"shifted"}, "add");
    Node* reshape = g.addNode("Reshape", {add->output(0), g.value("shape")}, {"r"}, "reshape");
    Node* gather = g.addNode("Gather", {reshape->output(0), g.value("index")}, {"y"}, "gather");
    g.addOutput(gather->output(0));
  }
};

TEST(ConstantsToInitializersTest, EveryNumericKindBecomesAnInitializerOfTheSameName) {
  AllKinds m;
  const at::Tensor input = at::randn({2, 3});
  Executor before_run(m.g);
  // What the Constant nodes produce at run time is what the initializers must hold.
  const TensorMap constants =
      before_run.run({{"x", input}}, {"lo", "hi", "scales", "offset", "shape", "index", "y"});

  testing::expectPassRewrites([](Graph& g) { EXPECT_EQ(constantsToInitializers(g), 6u); }, m.g,
                              R"(
    graph qforge
      input %x
      init %lo: float32[] = {-0.5}
      init %hi: float32[] = {0.75}
      init %scales: float32[3] = {1.5,-2,0.25}
      init %offset: float32[3] = {0.1,0.2,0.3}
      init %shape: int64[2] = {3,-1}
      init %index: int64[] = {1}
      %clipped = Clip(%x, %lo, %hi)  # clip
      %scaled = Mul(%clipped, %scales)  # mul
      %shifted = Add(%scaled, %offset)  # add
      %r = Reshape(%shifted, %shape)  # reshape
      %y = Gather(%r, %index)  # gather
      output %y
  )");
  for (const std::string name : {"lo", "hi", "scales", "offset", "shape", "index"}) {
    SCOPED_TRACE(name);
    const Value* v = m.g.findValue(name);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->initializer().scalar_type(), constants.at(name).scalar_type());
    EXPECT_EQ(v->initializer().sizes(), constants.at(name).sizes());
    EXPECT_TRUE(at::equal(v->initializer(), constants.at(name)));
  }

  // Independent reference: the same arithmetic written directly.
  const at::Tensor reference = ((at::clamp(input, -0.5, 0.75) * at::tensor({1.5f, -2.0f, 0.25f}) +
                                 at::tensor({0.1f, 0.2f, 0.3f}))
                                    .reshape({3, -1}))[1];
  Executor after_run(m.g);
  const at::Tensor after = after_run({input}).at(0);
  EXPECT_TRUE(at::equal(after, constants.at("y")));
  EXPECT_TRUE(at::allclose(after, reference));
}

TEST(ConstantsToInitializersTest, AConstantReadTwiceBecomesOneInitializer) {
  Graph g = parseGraph(R"(
    graph g
      input %x
      %two = Constant[value_float=2.0]()  # two_node
      %a = Mul(%x, %two)  # a
      %y = Add(%a, %two)  # b
      output %y
  )");
  g.value("two")->doc_string = "the number two";  // which the text form does not carry
  testing::expectPassRewrites([](Graph& g) { EXPECT_EQ(constantsToInitializers(g), 1u); }, g, R"(
    graph g
      input %x
      init %two: float32[] = {2}
      %a = Mul(%x, %two)  # a
      %y = Add(%a, %two)  # b
      output %y
  )");
  EXPECT_EQ(g.value("two")->uses().size(), 2u);
  EXPECT_EQ(g.value("two")->doc_string, "the number two");
  Executor run(g);
  EXPECT_TRUE(at::equal(run({at::tensor({1.f, -3.f})}).at(0), at::tensor({4.f, -4.f})));
}

TEST(ConstantsToInitializersTest, AnUnreadConstantStillBecomesAnInitializer) {
  testing::expectPassRewrites([](Graph& g) { EXPECT_EQ(constantsToInitializers(g), 1u); },
                              "graph g\n  %lonely = Constant[value_ints=[1,2]]()  # lonely_node\n",
                              "graph g\n  init %lonely: int64[2] = {1,2}\n");
}

TEST(ConstantsToInitializersTest, GraphOutputStringSparseAndMalformedConstantsStay) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  // A graph output stays produced by its node; it is also read by a Mul, which keeps reading it.
  addConstant(g, "out_const", Attribute::makeFloat("value_float", 3.0));
  g.addOutput(g.value("out_const"));
  g.addOutput(g.addNode("Mul", {x, g.value("out_const")}, {"y"}, "mul")->output(0));
  addConstant(g, "text", Attribute::makeString("value_string", "hello"));
  addConstant(g, "texts", Attribute::makeStrings("value_strings", {"a", "b"}));
  Attribute sparse;
  sparse.name = "sparse_value";
  sparse.kind = AttributeKind::Opaque;
  addConstant(g, "sparse", sparse);
  Node* both = addConstant(g, "both", Attribute::makeFloat("value_float", 1.0));
  both->attributes.set(Attribute::makeInt("value_int", 1));
  Node* custom = g.addNode("Constant", {}, {"custom"}, "custom", "com.example");
  custom->attributes.set(Attribute::makeFloat("value_float", 1.0));

  const size_t nodes = g.nodeCount();
  EXPECT_EQ(constantsToInitializers(g), 0u);
  EXPECT_EQ(g.nodeCount(), nodes);
  EXPECT_TRUE(g.initializers().empty());
  EXPECT_EQ(g.value("out_const")->producer()->opType(), "Constant");
  EXPECT_EQ(g.outputs()[0], g.value("out_const"));
}

// The zoo's MobileNet reads Clip's bounds from Constant nodes (ReLU6).
TEST(ConstantsToInitializersTest, ZooMobileNetKeepsItsOutputs) {
  Graph g = importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/mobilenet.onnx");
  const size_t constants = countOps(g, "Constant");
  ASSERT_GT(constants, 0u);
  at::manual_seed(9);
  const at::Tensor images = at::rand({4, 1, 28, 28});
  Executor before_run(g);
  const at::Tensor before = before_run({images}).at(0);

  EXPECT_EQ(constantsToInitializers(g), constants);
  EXPECT_EQ(countOps(g, "Constant"), 0u);
  EXPECT_NO_THROW(verifyGraph(g));
  for (const Node* n : g.nodes()) {
    if (n->opType() != "Clip") continue;
    for (size_t slot = 1; slot < n->inputs().size(); ++slot) {
      if (n->input(slot) != nullptr) {
        EXPECT_TRUE(n->input(slot)->isInitializer()) << n->name();
      }
    }
  }
  Executor after_run(g);
  EXPECT_TRUE(at::equal(after_run({images}).at(0), before));
}

}  // namespace
}  // namespace qforge::passes
