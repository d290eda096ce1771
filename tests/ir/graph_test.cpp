#include "ir/graph.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "ir/dump.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"

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

// --- name index -------------------------------------------------------------------------------

// The reference findNode() must agree with: a linear scan in insertion order.
Node* firstNamed(const Graph& g, const std::string& name) {
  for (Node* n : g.nodes()) {
    if (n->name() == name) return n;
  }
  return nullptr;
}

TEST(GraphNameIndexTest, FindNodeFollowsRenamesRemovalsAndInsertions) {
  Chain c;
  EXPECT_EQ(c.g.findNode("b"), c.b);
  c.b->setName("negate");
  EXPECT_EQ(c.g.findNode("b"), nullptr);
  EXPECT_EQ(c.g.findNode("negate"), c.b);
  c.g.setOutputs({c.b->output(0)});
  c.g.removeNode(c.c);
  EXPECT_EQ(c.g.findNode("c"), nullptr);
  Node* q = c.g.insertOnValue(c.a->output(0), "Identity", {}, "q");
  EXPECT_EQ(c.g.findNode("q"), q);
  EXPECT_EQ(c.g.findNode("a"), c.a);
}

TEST(GraphNameIndexTest, SharedNamesResolveToTheFirstInsertedNode) {
  Chain c;
  c.c->setName("a");  // two nodes named "a" while a pass runs
  EXPECT_EQ(c.g.findNode("a"), c.a);
  c.a->setName("x");
  EXPECT_EQ(c.g.findNode("a"), c.c);
  c.a->setName("a");  // back: insertion order decides, not the order of renames
  EXPECT_EQ(c.g.findNode("a"), c.a);
  Node* unnamed = c.g.addNode("Relu", {c.x}, {"u1"});
  c.g.addNode("Relu", {c.x}, {"u2"});
  EXPECT_EQ(c.g.findNode(""), unnamed);
}

TEST(GraphNameIndexTest, MovedGraphKeepsItsIndex) {
  Chain c;
  Graph moved = std::move(c.g);
  c.b->setName("renamed_after_move");  // the node now belongs to `moved`
  EXPECT_EQ(moved.findNode("renamed_after_move"), c.b);
  EXPECT_EQ(moved.findNode("b"), nullptr);
  // The moved-from graph is empty and usable again.
  EXPECT_EQ(c.g.findNode("a"), nullptr);
  Node* fresh = c.g.addNode("Relu", {}, {"fresh_out"}, "fresh");
  EXPECT_EQ(c.g.findNode("fresh"), fresh);
}

TEST(GraphNameIndexTest, RandomEditsAgreeWithALinearScan) {
  std::mt19937 rng(7);
  const std::vector<std::string> pool = {"", "a", "b", "c", "d"};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  size_t outputs = 0;
  for (int step = 0; step < 400; ++step) {
    const std::vector<Node*> nodes = g.nodes();
    const size_t action = nodes.empty() ? 0 : pick(4);
    if (action == 0) {
      g.addNode("Relu", {x}, {"v" + std::to_string(outputs++)}, pool[pick(pool.size())]);
    } else if (action == 1) {
      nodes[pick(nodes.size())]->setName(pool[pick(pool.size())]);
    } else if (action == 2) {
      g.removeNode(nodes[pick(nodes.size())]);  // every output is unused
    } else {
      Node* n = g.insertOnValue(x, "Identity", {}, pool[pick(pool.size())]);
      g.replaceAllUsesWith(n->output(0), x);
    }
    for (const std::string& name : pool)
      ASSERT_EQ(g.findNode(name), firstNamed(g, name)) << "step " << step << ", '" << name << "'";
  }
}

TEST(GraphNameIndexTest, ValueLookupsFollowRenamesAndRemovals) {
  Chain c;
  Value* z = c.c->output(0);
  c.g.renameValue(z, "zed");
  EXPECT_EQ(c.g.findValue("zed"), z);
  EXPECT_EQ(c.g.findValue("z"), nullptr);
  c.g.setOutputs({c.b->output(0)});
  c.g.removeNode(c.c);
  EXPECT_EQ(c.g.findValue("zed"), nullptr);
  Value* w = c.g.addInitializer("zed", at::ones({1}));  // the name is free again
  EXPECT_EQ(c.g.findValue("zed"), w);
}

// --- clone ------------------------------------------------------------------------------------

std::string exportedBytes(const Graph& g) {
  return exportOnnxModel(g).SerializeAsString();
}

class GraphCloneZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphCloneZooTest, CloneExportsAsTheOriginalAndAsExportReimport) {
  const Graph g =
      importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + GetParam() + ".onnx");
  const Graph copy = g.clone();
  EXPECT_TRUE(exportedBytes(copy) == exportedBytes(g));
  onnx::ModelProto proto = exportOnnxModel(g);
  const Graph reimported = importOnnxModel(proto, "");
  EXPECT_TRUE(exportedBytes(copy) == exportedBytes(reimported));
  EXPECT_EQ(dumpGraph(copy), dumpGraph(g));
  EXPECT_EQ(names(copy.nodes()), names(g.nodes()));
  // Every initializer has its own storage.
  for (const Value* v : g.initializers()) {
    const at::Tensor& copied = copy.value(v->name())->initializer();
    EXPECT_NE(copied.data_ptr(), v->initializer().data_ptr()) << v->name();
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, GraphCloneZooTest,
                         ::testing::Values("resnet", "mobilenet", "unet", "vit"));

// x -> Mul(x, w) -> Constant-fed Add -> y, with a tensor attribute and out-of-order insertion.
Graph editableGraph() {
  Graph g;
  g.model.graph_name = "editable";
  g.model.opaque_model_fields = "opaque bytes";
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::known(3)}};
  x->doc_string = "the input";
  g.addInput(x);
  Value* w = g.addInitializer("w", at::tensor({1.f, 2.f, 3.f}));
  Node* add = g.addNode("Add", {}, {"y"}, "add");  // inserted before the nodes it reads
  Node* mul = g.addNode("Mul", {x, w}, {"m", "unused"}, "mul");
  mul->output(1)->anonymous = true;
  mul->doc_string = "scales";
  mul->metadata_props = {{"k", "v"}};
  Node* constant = g.addNode("Constant", {}, {"c"}, "const");
  constant->attributes.set(Attribute::makeTensor("value", at::tensor({0.5f, 0.5f, 0.5f})));
  Attribute opaque;
  opaque.name = "body";
  opaque.kind = AttributeKind::Opaque;
  opaque.opaque_proto = "serialized";
  constant->attributes.set(opaque);
  g.setInput(add, 0, mul->output(0));
  g.setInput(add, 1, constant->output(0));
  g.addNode("Neg", {mul->output(0)}, {"n"}, "neg");
  g.addOutput(add->output(0));
  g.addOutput(g.value("n"));
  return g;
}

TEST(GraphCloneTest, KeepsWhatTheTextFormDoesNotShow) {
  const Graph g = editableGraph();
  const Graph copy = g.clone();
  EXPECT_EQ(names(copy.nodes()), (std::vector<std::string>{"add", "mul", "const", "neg"}));
  EXPECT_EQ(copy.model.opaque_model_fields, "opaque bytes");
  EXPECT_EQ(copy.value("x")->doc_string, "the input");
  EXPECT_TRUE(copy.value("unused")->anonymous);
  const Node* mul = copy.findNode("mul");
  EXPECT_EQ(mul->doc_string, "scales");
  EXPECT_EQ(mul->metadata_props, g.findNode("mul")->metadata_props);
  EXPECT_EQ(copy.findNode("const")->attributes.find("body")->opaque_proto, "serialized");
  // Use lists in the same order, pointing at the copy's own nodes.
  const std::vector<Use>& uses = copy.value("m")->uses();
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0], (Use{copy.findNode("add"), 0}));
  EXPECT_EQ(uses[1], (Use{copy.findNode("neg"), 0}));
  EXPECT_EQ(copy.value("unused")->producer(), mul);
  EXPECT_EQ(copy.value("unused")->producerOutputIndex(), 1u);
  EXPECT_EQ(copy.inputs(), (std::vector<Value*>{copy.value("x")}));
  EXPECT_EQ(copy.outputs(), (std::vector<Value*>{copy.value("y"), copy.value("n")}));
  EXPECT_TRUE(exportedBytes(copy) == exportedBytes(g));
}

TEST(GraphCloneTest, EditingTheCloneLeavesTheOriginalAlone) {
  const Graph g = editableGraph();
  const std::string dump_before = dumpGraph(g);
  const std::string bytes_before = exportedBytes(g);
  Graph copy = g.clone();
  copy.value("w")->initializer().mul_(2);  // in place: storage must not be shared
  at::Tensor value = copy.findNode("const")->attributes.find("value")->t;
  value.add_(1);
  copy.findNode("mul")->setName("renamed");
  copy.renameValue(copy.value("n"), "negated");
  copy.setOutputs({copy.value("y")});
  copy.removeNode(copy.findNode("neg"));
  copy.addNode("Relu", {copy.value("y")}, {"extra"}, "extra");
  copy.model.graph_name = "changed";
  copy.value("x")->type.dtype = DType::Double;

  EXPECT_EQ(dumpGraph(g), dump_before);
  EXPECT_TRUE(exportedBytes(g) == bytes_before);
  EXPECT_TRUE(at::equal(g.value("w")->initializer(), at::tensor({1.f, 2.f, 3.f})));
  EXPECT_TRUE(
      at::equal(g.findNode("const")->attributes.find("value")->t, at::tensor({0.5f, 0.5f, 0.5f})));
  EXPECT_NE(g.findNode("mul"), nullptr);
  EXPECT_EQ(g.findNode("renamed"), nullptr);
  EXPECT_EQ(g.findNode("extra"), nullptr);
  EXPECT_EQ(copy.findNode("mul"), nullptr);
  EXPECT_NE(dumpGraph(copy), dump_before);  // the edits did land on the copy
}

TEST(GraphCloneTest, CopiesAGraphWithACycle) {
  Graph g;
  Node* p = g.addNode("Relu", {}, {"p_out"}, "p");
  Node* q = g.addNode("Relu", {p->output(0)}, {"q_out"}, "q");
  g.setInput(p, 0, q->output(0));
  const Graph copy = g.clone();
  EXPECT_EQ(copy.findNode("p")->input(0), copy.findNode("q")->output(0));
  EXPECT_THROW(copy.topologicalOrder(), Error);
}

TEST(GraphCloneTest, DetachesInitializersThatRequireGrad) {
  Graph g;
  Value* w = g.addInitializer("w", at::ones({2}).set_requires_grad(true));
  const Graph copy = g.clone();
  EXPECT_TRUE(w->initializer().requires_grad());
  EXPECT_FALSE(copy.value("w")->initializer().requires_grad());
  EXPECT_TRUE(at::equal(copy.value("w")->initializer(), at::ones({2})));
}

}  // namespace
}  // namespace qforge
