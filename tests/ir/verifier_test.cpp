#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace qforge {
namespace {

std::string verifyMessage(const Graph& g) {
  try {
    verifyGraph(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VerifierTest, AcceptsAWellFormedGraph) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Value* w = g.addInitializer("w", at::ones({3}));
  Node* n = g.addNode("Mul", {x, w}, {"y"}, "mul");
  g.addOutput(n->output(0));
  EXPECT_EQ(verifyMessage(g), "");
}

TEST(VerifierTest, RejectsANodeWithoutOutputs) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  g.addNode("Relu", {x}, {}, "");  // unnamed too: nothing to name it by
  Node* n = g.addNode("Neg", {x}, {"y"}, "neg");
  g.addOutput(n->output(0));
  EXPECT_EQ(verifyMessage(g),
            "node '' (Relu) has no outputs; every node must produce at least one value");
}

TEST(VerifierTest, RejectsAnInputNobodyDefines) {
  Graph g;
  Value* x = g.addValue("x");  // neither graph input nor initializer
  Node* n = g.addNode("Relu", {x}, {"y"}, "relu");
  g.addOutput(n->output(0));
  const std::string m = verifyMessage(g);
  EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  EXPECT_NE(m.find("relu"), std::string::npos) << m;
}

TEST(VerifierTest, RejectsTwoNodesWithOneNameButAllowsUnnamedOnes) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* a = g.addNode("Relu", {x}, {"a"}, "act");
  Node* b = g.addNode("Relu", {a->output(0)}, {"b"}, "");
  Node* c = g.addNode("Relu", {b->output(0)}, {"c"}, "");
  g.addOutput(c->output(0));
  EXPECT_EQ(verifyMessage(g), "");
  c->setName("act");
  EXPECT_NE(verifyMessage(g).find("two nodes are named 'act'"), std::string::npos)
      << verifyMessage(g);
}

TEST(VerifierTest, RejectsAnUndefinedGraphOutput) {
  Graph g;
  g.addOutput(g.addValue("ghost"));
  EXPECT_NE(verifyMessage(g).find("ghost"), std::string::npos);
}

TEST(VerifierTest, RejectsInitializerTypeMismatch) {
  Graph g;
  Value* w = g.addInitializer("w", at::ones({3}));
  w->type.dtype = DType::Int64;
  g.addOutput(w);
  EXPECT_NE(verifyMessage(g).find("declared int64"), std::string::npos);
}

TEST(VerifierTest, RejectsACycle) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* p = g.addNode("Add", {x}, {"p_out"}, "p");
  Node* q = g.addNode("Neg", {p->output(0)}, {"q_out"}, "q");
  g.setInput(p, 1, q->output(0));
  g.addOutput(q->output(0));
  EXPECT_NE(verifyMessage(g).find("cycle"), std::string::npos);
}

TEST(VerifierTest, RejectsANodeOutputThatIsAlsoAGraphInput) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* n = g.addNode("Relu", {x}, {"y"}, "relu");
  g.addInput(n->output(0));
  g.addOutput(n->output(0));
  EXPECT_NE(verifyMessage(g).find("defined once"), std::string::npos);
}

}  // namespace
}  // namespace qforge
