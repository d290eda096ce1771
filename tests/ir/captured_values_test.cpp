// Values a control-flow body reads from outside: extra node inputs in the IR (so use lists,
// dead-code removal and rewiring see them), gone again in the exported ONNX node.
#include "ir/captured_values.h"

#include <gtest/gtest.h>
#include <onnx/checker.h>

#include "core/error.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "support/control_flow_models.h"

namespace qforge {
namespace {

using testing::addGraphAttribute;
using testing::ifModel;
using testing::OnnxBuilder;

std::vector<std::string> inputNames(const Node& node) {
  std::vector<std::string> names;
  for (const Value* v : node.inputs())
    names.push_back(v ? v->name() : "");
  return names;
}

const onnx::NodeProto& nodeNamed(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& n : g.node()) {
    if (n.name() == name) return n;
  }
  throw std::runtime_error("no node " + name);
}

const onnx::GraphProto& body(const onnx::NodeProto& node, const std::string& attribute) {
  for (const auto& a : node.attribute()) {
    if (a.name() == attribute) return a.g();
  }
  throw std::runtime_error("no attribute " + attribute);
}

TEST(CapturedValuesTest, BodyReadsBecomeInputsOfTheNode) {
  onnx::ModelProto proto = ifModel();
  Graph g = importOnnxModel(proto, "");
  const Node* node = g.findNode("if");
  ASSERT_NE(node, nullptr);
  // then_branch reads rx and two, else_branch rx (and its own initializer one).
  EXPECT_EQ(inputNames(*node), (std::vector<std::string>{"cond", "rx", "two"}));
  EXPECT_EQ(capturedNames(*node), (std::vector<std::string>{"rx", "two"}));
  EXPECT_EQ(onnxInputCount(*node), 1u);
  // Relu's output is read only inside the branches, and dead-code removal knows it.
  EXPECT_EQ(g.eliminateDeadCode(), 0u);
  EXPECT_NE(g.findNode("relu"), nullptr);
  ASSERT_EQ(g.topologicalOrder().back(), node);
}

std::string checkerError(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(CapturedValuesTest, ExportWritesTheOnnxNodeAsItWas) {
  onnx::ModelProto original = ifModel();
  onnx::ModelProto input = original;
  Graph g = importOnnxModel(input, "");
  onnx::ModelProto out = exportOnnxModel(g);
  const onnx::NodeProto& node = nodeNamed(out.graph(), "if");
  ASSERT_EQ(node.input_size(), 1);
  EXPECT_EQ(node.input(0), "cond");
  ASSERT_EQ(node.attribute_size(), 2);
  const onnx::NodeProto& before = nodeNamed(original.graph(), "if");
  EXPECT_EQ(body(node, "then_branch").SerializeAsString(),
            body(before, "then_branch").SerializeAsString());
  EXPECT_EQ(body(node, "else_branch").SerializeAsString(),
            body(before, "else_branch").SerializeAsString());
  EXPECT_EQ(checkerError(out), "");
}

TEST(CapturedValuesTest, RewiringAnOuterValueRenamesTheReadsInsideTheBodies) {
  onnx::ModelProto proto = ifModel();
  Graph g = importOnnxModel(proto, "");
  // A pass puts a node between Relu and every reader of rx, the If included.
  Node* neg = g.insertOnValue(g.value("rx"), "Neg", {}, "neg");
  const std::string negated = neg->output(0)->name();
  ASSERT_NE(negated, "rx");
  onnx::ModelProto out = exportOnnxModel(g);
  const onnx::NodeProto& node = nodeNamed(out.graph(), "if");
  EXPECT_EQ(nodeNamed(body(node, "then_branch"), "then_mul").input(0), negated);
  EXPECT_EQ(nodeNamed(body(node, "else_branch"), "else_sub").input(0), negated);
  // Names the pass did not touch stay as they were.
  EXPECT_EQ(nodeNamed(body(node, "then_branch"), "then_mul").input(1), "two");
  EXPECT_EQ(checkerError(out), "");
  // And the file reads back to the same wiring.
  Graph again = importOnnxModel(out, "");
  EXPECT_EQ(inputNames(*again.findNode("if")), (std::vector<std::string>{"cond", negated, "two"}));
}

TEST(CapturedValuesTest, NestedBodiesReadThroughTheirParents) {
  constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
  // Loop body: If(c) { w + v } else { v }; w comes from two graphs out, v from the Loop body.
  OnnxBuilder then_branch;
  then_branch.output("t", kFloat, {});
  then_branch.node("Add", {"w", "v"}, {"t"}, "inner_add");
  OnnxBuilder else_branch;
  else_branch.output("e", kFloat, {});
  else_branch.node("Identity", {"v"}, {"e"}, "inner_identity");
  OnnxBuilder loop_body;
  loop_body.input("i", onnx::TensorProto::INT64, {}).input("c", onnx::TensorProto::BOOL, {});
  loop_body.input("v", kFloat, {});
  loop_body.output("c_out", onnx::TensorProto::BOOL, {}).output("v_out", kFloat, {});
  loop_body.node("Identity", {"c"}, {"c_out"}, "keep_going");
  onnx::NodeProto& inner = loop_body.node("If", {"c"}, {"v_out"}, "inner_if");
  addGraphAttribute(inner, "then_branch", then_branch.model().graph());
  addGraphAttribute(inner, "else_branch", else_branch.model().graph());

  EXPECT_EQ(outerReads(loop_body.model().graph()), (std::vector<std::string>{"w"}));

  OnnxBuilder b;
  b.input("m", onnx::TensorProto::INT64, {}).input("w0", kFloat, {}).input("v0", kFloat, {});
  b.output("v_final", kFloat, {});
  b.node("Neg", {"w0"}, {"w"}, "neg");
  onnx::NodeProto& loop = b.node("Loop", {"m", "", "v0"}, {"v_final"}, "loop");
  addGraphAttribute(loop, "body", loop_body.model().graph());
  Graph g = importOnnxModel(b.model(), "");
  EXPECT_EQ(inputNames(*g.findNode("loop")), (std::vector<std::string>{"m", "", "v0", "w"}));
  EXPECT_EQ(checkerError(exportOnnxModel(g)), "");

  // The body as an Executor sees it: formal inputs, then the value it reads from outside.
  Subgraph sub = importSubgraph(loop_body.model().graph(), g.model);
  EXPECT_EQ(sub.formal_inputs, (std::vector<std::string>{"i", "c", "v"}));
  EXPECT_EQ(sub.captured, (std::vector<std::string>{"w"}));
  ASSERT_EQ(sub.graph.inputs().size(), 4u);
  EXPECT_EQ(sub.graph.inputs().back()->name(), "w");
  EXPECT_EQ(inputNames(*sub.graph.findNode("inner_if")), (std::vector<std::string>{"c", "w", "v"}));
}

TEST(CapturedValuesTest, ABodyReadingAValueNoGraphDefinesIsRefused) {
  onnx::ModelProto proto = ifModel();
  // The then branch now reads "ghost", which nothing defines.
  for (auto& n : *proto.mutable_graph()->mutable_node()) {
    if (n.op_type() != "If") continue;
    n.mutable_attribute(0)->mutable_g()->mutable_node(0)->set_input(0, "ghost");
  }
  try {
    importOnnxModel(proto, "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'ghost'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'if' (If)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge
