#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"

namespace qforge {
namespace {

// x -> Relu(a) -> Neg(b) -> y, with a second consumer Abs(c) of a's output.
struct Chain {
  Graph g;
  Value* x;
  Node* a;
  Node* b;
  Node* c;
  Chain() {
    x = g.addValue("x");
    g.addInput(x);
    a = g.addNode("Relu", {x}, {"a_out"}, "a");
    b = g.addNode("Neg", {a->output(0)}, {"y"}, "b");
    c = g.addNode("Abs", {a->output(0)}, {"z"}, "c");
    g.addOutput(b->output(0));
    g.addOutput(c->output(0));
  }
};

std::vector<std::string> names(const std::vector<Node*>& nodes) {
  std::vector<std::string> result;
  for (const Node* n : nodes)
    result.push_back(n->name());
  return result;
}

TEST(GraphTest, AddNodeRecordsProducerAndUses) {
  Chain c;
  EXPECT_EQ(c.a->output(0)->producer(), c.a);
  ASSERT_EQ(c.a->output(0)->uses().size(), 2u);
  EXPECT_EQ(c.a->output(0)->uses()[0], (Use{c.b, 0}));
  EXPECT_EQ(c.a->output(0)->uses()[1], (Use{c.c, 0}));
}

TEST(GraphTest, DuplicateValueNameIsRefused) {
  Chain c;
  EXPECT_THROW(c.g.addValue("y"), Error);
  EXPECT_THROW(c.g.addNode("Relu", {c.x}, {"a_out"}), Error);
  EXPECT_EQ(c.g.nodeCount(), 3u);  // the failed addNode left nothing behind
}

TEST(GraphTest, UniqueNameAvoidsExistingNames) {
  Chain c;
  EXPECT_EQ(c.g.uniqueName("fresh"), "fresh");
  EXPECT_EQ(c.g.uniqueName("y"), "y_1");
}

TEST(GraphTest, InsertOnValueMovesAllConsumers) {
  Chain c;
  Value* a_out = c.a->output(0);
  Node* q = c.g.insertOnValue(a_out, "Identity");
  Value* q_out = q->output(0);
  EXPECT_EQ(c.b->input(0), q_out);
  EXPECT_EQ(c.c->input(0), q_out);
  ASSERT_EQ(a_out->uses().size(), 1u);
  EXPECT_EQ(a_out->uses()[0].node, q);
  EXPECT_EQ(q_out->uses().size(), 2u);
}

TEST(GraphTest, InsertOnValueMovesOnlyChosenConsumers) {
  Chain c;
  Value* a_out = c.a->output(0);
  Node* q = c.g.insertOnValue(a_out, "Identity", {Use{c.c, 0}});
  EXPECT_EQ(c.b->input(0), a_out);
  EXPECT_EQ(c.c->input(0), q->output(0));
}

TEST(GraphTest, InsertOnGraphOutputKeepsOrMovesTheOutput) {
  Chain c;
  Value* y = c.b->output(0);
  Node* kept = c.g.insertOnValue(y, "Identity");
  EXPECT_EQ(c.g.outputs()[0], y);
  Node* moved = c.g.insertOnValue(y, "Identity", {}, "", /*move_graph_output=*/true);
  EXPECT_EQ(c.g.outputs()[0], moved->output(0));
  EXPECT_NE(kept->output(0)->name(), moved->output(0)->name());
}

TEST(GraphTest, InsertOnValueRejectsANonConsumer) {
  Chain c;
  EXPECT_THROW(c.g.insertOnValue(c.x, "Identity", {Use{c.b, 0}}), Error);
}

TEST(GraphTest, ReplaceAllUsesWithRewiresUsesAndOutputs) {
  Chain c;
  Value* y = c.b->output(0);
  c.g.replaceAllUsesWith(c.a->output(0), c.x);
  EXPECT_EQ(c.b->input(0), c.x);
  EXPECT_EQ(c.c->input(0), c.x);
  EXPECT_TRUE(c.a->output(0)->uses().empty());
  c.g.replaceAllUsesWith(y, c.x);
  EXPECT_EQ(c.g.outputs()[0], c.x);
}

TEST(GraphTest, RemoveNodeRefusesWhileOutputIsUsed) {
  Chain c;
  EXPECT_THROW(c.g.removeNode(c.a), Error);
  EXPECT_THROW(c.g.removeNode(c.b), Error);  // its output is a graph output
}

TEST(GraphTest, RemoveNodeDropsItsOutputsAndUses) {
  Chain c;
  c.g.setOutputs({c.b->output(0)});
  c.g.removeNode(c.c);
  EXPECT_EQ(c.g.findValue("z"), nullptr);
  EXPECT_EQ(c.a->output(0)->uses().size(), 1u);
  EXPECT_EQ(c.g.nodeCount(), 2u);
}

TEST(GraphTest, EliminateDeadCodeRemovesUnreachableNodesAndInitializers) {
  Chain c;
  Value* w = c.g.addInitializer("w", at::ones({2}));
  c.g.addNode("Mul", {c.b->output(0), w}, {"dead1"}, "d1");
  c.g.addNode("Neg", {c.g.value("dead1")}, {"dead2"}, "d2");
  c.g.addInitializer("unused", at::zeros({1}));
  c.g.setOutputs({c.b->output(0)});
  EXPECT_EQ(c.g.eliminateDeadCode(), 3u);  // c, d1, d2
  EXPECT_EQ(names(c.g.nodes()), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.g.findValue("w"), nullptr);
  EXPECT_EQ(c.g.findValue("unused"), nullptr);
}

TEST(GraphTest, TopologicalOrderSortsNodesAddedOutOfOrder) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  // "second" is added first but reads the output of "first".
  Node* second = g.addNode("Neg", {}, {"y"}, "second");
  Node* first = g.addNode("Relu", {x}, {"t"}, "first");
  g.setInput(second, 0, first->output(0));
  g.addOutput(second->output(0));
  EXPECT_EQ(names(g.topologicalOrder()), (std::vector<std::string>{"first", "second"}));
}

TEST(GraphTest, TopologicalOrderIsStableForSortedGraphs) {
  Chain c;
  EXPECT_EQ(names(c.g.topologicalOrder()), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(GraphTest, CycleIsReportedWithANodeOnIt) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* p = g.addNode("Add", {x}, {"p_out"}, "p");
  Node* q = g.addNode("Neg", {p->output(0)}, {"q_out"}, "q");
  g.setInput(p, 1, q->output(0));
  g.addOutput(q->output(0));
  try {
    g.topologicalOrder();
    FAIL() << "expected a cycle error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(GraphTest, SetInitializerUpdatesTheType) {
  Graph g;
  Value* w = g.addInitializer("w", at::zeros({2, 3}, at::kLong));
  EXPECT_EQ(w->type.dtype, DType::Int64);
  EXPECT_EQ(w->type.str(), "int64[2,3]");
}

TEST(GraphTest, RenameValueKeepsUsesAndFreesTheOldName) {
  Chain c;
  Value* a_out = c.a->output(0);
  a_out->anonymous = true;
  c.g.renameValue(a_out, "renamed");
  EXPECT_EQ(a_out->name(), "renamed");
  EXPECT_FALSE(a_out->anonymous);
  EXPECT_EQ(c.g.findValue("renamed"), a_out);
  EXPECT_EQ(c.g.findValue("a_out"), nullptr);
  EXPECT_EQ(c.b->input(0), a_out);
  EXPECT_EQ(c.g.uniqueName("a_out"), "a_out");
}

TEST(GraphTest, RenameValueRefusesATakenOrEmptyName) {
  Chain c;
  EXPECT_THROW(c.g.renameValue(c.a->output(0), "y"), Error);
  EXPECT_THROW(c.g.renameValue(c.a->output(0), ""), Error);
  EXPECT_EQ(c.a->output(0)->name(), "a_out");
  c.g.renameValue(c.a->output(0), "a_out");  // its own name: nothing to do
  EXPECT_EQ(c.g.findValue("a_out"), c.a->output(0));
}

}  // namespace
}  // namespace qforge
