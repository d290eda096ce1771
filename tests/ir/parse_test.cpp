#include "ir/parse.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "ir/dump.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "support/checks.h"

namespace qforge {
namespace {

using testing::errorOf;

// Every attribute kind the text carries, small initializers of several types, an omitted
// optional input, a custom domain, names that need quoting and an initializer that is also an
// input. Values are float32-exact, as ONNX stores attribute floats.
Graph richGraph() {
  Graph g;
  g.model.graph_name = "rich graph";
  g.model.opset_imports = {{"", 11}, {"com.microsoft", 1}};
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3),
                                                      Dim::symbolic(""), Dim::symbolic("h w")}};
  g.addInput(x);
  Value* bias = g.addInitializer("bias", at::tensor({0.5f, -1.25f, 3.0f}));
  g.addInput(bias);
  Value* w = g.addInitializer("w", at::arange(8, at::kFloat).reshape({2, 2, 2}) / 8);
  Value* shape = g.addInitializer("onnx::Shape_7", at::tensor({2, -1}, at::kLong));
  Value* zp = g.addInitializer("zp", at::tensor({-128, 0, 127}, at::kChar));
  Value* mask = g.addInitializer("mask", at::tensor({1, 0}).to(at::kBool));
  Value* wide = g.addInitializer("wide", at::tensor({0.1, 1e-300}, at::kDouble));
  Value* half = g.addInitializer("half", at::tensor({0.5f, 65504.0f}).to(at::kHalf));
  Value* scalar = g.addInitializer("scalar", at::scalar_tensor(2.5));

  Node* conv = g.addNode("Conv", {x, w, nullptr}, {"conv out"}, "conv/1");
  conv->attributes.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  conv->attributes.set(Attribute::makeInt("group", -3));
  conv->attributes.set(Attribute::makeFloat("alpha", 1.0));
  conv->attributes.set(Attribute::makeFloat("eps", static_cast<double>(1e-5f)));
  conv->attributes.set(Attribute::makeFloats("scales", {0.5, -2.0, static_cast<double>(1e-7f)}));
  conv->attributes.set(Attribute::makeString("mode", "say \"hi\"\n\\ \x01"));
  conv->attributes.set(Attribute::makeStrings("names", {"a", "b,c", ""}));
  conv->attributes.set(Attribute::makeInts("empty_ints", {}));
  conv->attributes.set(Attribute::makeFloats("empty_floats", {}));
  conv->attributes.set(Attribute::makeStrings("empty_strings", {}));
  conv->attributes.set(Attribute::makeTensor("value", at::tensor({1, 2, 3}, at::kInt)));
  conv->attributes.set(Attribute::makeFloat("inf", std::numeric_limits<double>::infinity()));
  Attribute tensors;
  tensors.name = "pair";
  tensors.kind = AttributeKind::Tensors;
  tensors.tensors = {at::tensor({1.5f}), at::scalar_tensor(7, at::kLong)};
  conv->attributes.set(tensors);
  conv->output(0)->type = TensorType{DType::Float, std::nullopt};
  Node* add = g.addNode("Add", {conv->output(0), bias}, {"sum"}, "");
  Node* reshape = g.addNode("Reshape", {add->output(0), shape}, {"r:"}, " padded ");
  Node* custom = g.addNode("Fused", {reshape->output(0), zp, mask, wide, half, scalar},
                           {"y", "aux"}, "custom", "com.microsoft");
  custom->output(0)->type = TensorType{DType::Float16, std::vector<Dim>{}};
  g.addOutput(custom->output(0));
  g.addOutput(custom->output(1));
  return g;
}

bool sameTensor(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

void expectSameAttributes(const Node& a, const Node& b) {
  ASSERT_EQ(a.attributes.all().size(), b.attributes.all().size()) << a.describe();
  for (size_t i = 0; i < a.attributes.all().size(); ++i) {
    const Attribute& x = a.attributes.all()[i];
    const Attribute& y = b.attributes.all()[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.i, y.i);
    EXPECT_EQ(x.f, y.f);
    EXPECT_EQ(x.s, y.s);
    EXPECT_EQ(x.ints, y.ints);
    EXPECT_EQ(x.floats, y.floats);
    EXPECT_EQ(x.strings, y.strings);
    EXPECT_EQ(x.t.defined(), y.t.defined());
    if (x.t.defined()) {
      EXPECT_TRUE(sameTensor(x.t, y.t));
    }
    ASSERT_EQ(x.tensors.size(), y.tensors.size());
    for (size_t k = 0; k < x.tensors.size(); ++k)
      EXPECT_TRUE(sameTensor(x.tensors[k], y.tensors[k]));
  }
}

// Compares the graphs object by object, not through the text, so that a lossy dump cannot hide
// behind an equally lossy parser.
void expectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.model.graph_name, b.model.graph_name);
  EXPECT_EQ(a.model.opset_imports, b.model.opset_imports);
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    EXPECT_EQ(a.inputs()[i]->name(), b.inputs()[i]->name());
    EXPECT_EQ(a.inputs()[i]->type, b.inputs()[i]->type) << a.inputs()[i]->name();
  }
  ASSERT_EQ(a.initializers().size(), b.initializers().size());
  for (size_t i = 0; i < a.initializers().size(); ++i) {
    const Value* x = a.initializers()[i];
    const Value* y = b.initializers()[i];
    EXPECT_EQ(x->name(), y->name());
    EXPECT_EQ(x->type, y->type);
    EXPECT_TRUE(sameTensor(x->initializer(), y->initializer())) << x->name();
  }
  ASSERT_EQ(a.nodeCount(), b.nodeCount());
  const std::vector<Node*> na = a.topologicalOrder();
  const std::vector<Node*> nb = b.topologicalOrder();
  for (size_t i = 0; i < na.size(); ++i) {
    SCOPED_TRACE(na[i]->describe());
    EXPECT_EQ(na[i]->name(), nb[i]->name());
    EXPECT_EQ(na[i]->opType(), nb[i]->opType());
    EXPECT_EQ(na[i]->domain(), nb[i]->domain());
    ASSERT_EQ(na[i]->inputs().size(), nb[i]->inputs().size());
    for (size_t k = 0; k < na[i]->inputs().size(); ++k) {
      const Value* x = na[i]->input(k);
      const Value* y = nb[i]->input(k);
      EXPECT_EQ(x == nullptr, y == nullptr);
      if (x && y) {
        EXPECT_EQ(x->name(), y->name());
      }
    }
    ASSERT_EQ(na[i]->outputs().size(), nb[i]->outputs().size());
    for (size_t k = 0; k < na[i]->outputs().size(); ++k) {
      EXPECT_EQ(na[i]->output(k)->name(), nb[i]->output(k)->name());
      EXPECT_EQ(na[i]->output(k)->type, nb[i]->output(k)->type);
    }
    expectSameAttributes(*na[i], *nb[i]);
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i)
    EXPECT_EQ(a.outputs()[i]->name(), b.outputs()[i]->name());
}

TEST(ParseTest, ParseOfDumpRebuildsTheGraph) {
  const Graph original = richGraph();
  const std::string text = dumpGraph(original);
  const Graph parsed = parseGraph(text);
  expectSameGraph(original, parsed);
  EXPECT_EQ(dumpGraph(parsed), text);
  EXPECT_NO_THROW(verifyGraph(parsed));
  // The initializer that is also an input stays one value.
  EXPECT_EQ(parsed.inputs()[1], parsed.findValue("bias"));
  EXPECT_TRUE(parsed.inputs()[1]->isInitializer());
  EXPECT_EQ(parsed.findNode("conv/1")->input(2), nullptr);
}

TEST(ParseTest, AttributeFloatsReadBackAsFloat32) {
  Graph g;
  g.addInput(g.addValue("x"));
  Node* n = g.addNode("LeakyRelu", {g.value("x")}, {"y"}, "act");
  n->attributes.set(Attribute::makeFloat("alpha", 0.1));  // not a float32: ONNX stores 0.1f
  g.addOutput(n->output(0));
  const Graph parsed = parseGraph(dumpGraph(g));
  EXPECT_EQ(parsed.findNode("act")->attributes.find("alpha")->f, static_cast<double>(0.1f));
}

TEST(ParseTest, LargeInitializersReadBackAsZerosOfTheirShape) {
  Graph g;
  g.model.graph_name = "big";
  Value* w = g.addInitializer("w", at::randn({4, 5}));
  g.addOutput(w);
  const std::string text = dumpGraph(g);
  EXPECT_EQ(text, "graph big\n  init %w: float32[4,5]\n  output %w: float32[4,5]\n");
  const Graph parsed = parseGraph(text);
  EXPECT_TRUE(sameTensor(parsed.value("w")->initializer(), at::zeros({4, 5})));
  // With a larger limit the values are written and read back exactly.
  const Graph exact = parseGraph(dumpGraph(g, 20));
  EXPECT_TRUE(sameTensor(exact.value("w")->initializer(), w->initializer()));
}

TEST(ParseTest, HandWrittenTextWithNodesOutOfOrderAndSpacing) {
  const Graph g = parseGraph(R"(
    graph   hand

    input %x: float32[2]
    %y = Neg(%h)      # second
    %h: float32[2] = Relu(%x)   # first
    output %y: float32[2]
  )");
  EXPECT_EQ(g.model.graph_name, "hand");
  EXPECT_EQ(g.model.opset_imports, ModelInfo().opset_imports);
  ASSERT_EQ(g.nodeCount(), 2u);
  EXPECT_EQ(g.findNode("second")->input(0), g.findNode("first")->output(0));
  EXPECT_EQ(g.outputs()[0]->type.str(), "float32[2]");  // the output line types the value
  EXPECT_EQ(g.topologicalOrder()[0]->name(), "first");
}

TEST(ParseTest, GraphWithACycleParsesForTheVerifierToRefuse) {
  const Graph g = parseGraph(
      "graph loop\n"
      "  %a = Relu(%b)  # one\n"
      "  %b = Relu(%a)  # two\n"
      "  output %b\n");
  EXPECT_EQ(g.nodeCount(), 2u);
  EXPECT_NE(errorOf([&] { verifyGraph(g); }).find("cycle"), std::string::npos);
}

class ParseZooTest : public ::testing::TestWithParam<std::string> {};

// Real names ("/layer1/conv1/Conv_output_0", "onnx::Conv_193"), symbolic dims, every weight
// written out: the parsed graph exports exactly as the imported one.
TEST_P(ParseZooTest, FullDumpParsesBackToTheSameModel) {
  const Graph g =
      importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + GetParam() + ".onnx");
  const size_t all = std::numeric_limits<size_t>::max();
  const std::string text = dumpGraph(g, all);
  Graph parsed = parseGraph(text);
  EXPECT_EQ(dumpGraph(parsed, all), text);
  parsed.model = g.model;  // the text carries only the graph name and the opsets of ModelInfo
  EXPECT_TRUE(exportOnnxModel(parsed).SerializeAsString() ==
              exportOnnxModel(g).SerializeAsString());
  // With weights left out, the text is still a fixed point of parse and dump.
  EXPECT_EQ(dumpGraph(parseGraph(dumpGraph(g))), dumpGraph(g));
}

INSTANTIATE_TEST_SUITE_P(Zoo, ParseZooTest,
                         ::testing::Values("resnet", "mobilenet", "unet", "vit"));

struct BadText {
  std::string label;
  std::string text;
  std::string error;  // the whole message
};

void PrintTo(const BadText& b, std::ostream* os) {
  *os << b.label;
}

class ParseErrorTest : public ::testing::TestWithParam<BadText> {};

TEST_P(ParseErrorTest, NamesTheLineAndWhatIsWrong) {
  EXPECT_EQ(errorOf([&] { parseGraph(GetParam().text); }), GetParam().error);
}

const std::string kHead = "graph g\n  input %x: float32[2]\n";

INSTANTIATE_TEST_SUITE_P(
    Malformed, ParseErrorTest,
    ::testing::Values(
        BadText{"empty", "\n  \n",
                "graph text line 3, column 1: the text is empty; it starts "
                "with 'graph <name>'"},
        BadText{"no_header", "input %x\n",
                "graph text line 1, column 1: the text must start with 'graph <name>', found "
                "'input'"},
        BadText{"unknown_keyword", kHead + "  inptu %z\n",
                "graph text line 3, column 3: expected 'input', 'init', 'output', 'opset' or a "
                "node ('%y = Relu(%x)'), found 'inptu'"},
        BadText{"unknown_dtype", kHead + "  %y: float99[2] = Relu(%x)\n",
                "graph text line 3, column 7: unknown element type 'float99' (float32, float16, "
                "int8, int64, bool, ...)"},
        BadText{"unclosed_inputs", kHead + "  %y = Relu(%x\n",
                "graph text line 3, column 15: expected ')' to close the node's inputs, found "
                "the end of the line"},
        BadText{"missing_equals", kHead + "  %y Relu(%x)\n",
                "graph text line 3, column 6: expected '=' between a node's outputs and its op, "
                "found 'Relu(%x)'"},
        BadText{"undefined_input", kHead + "  %y = Add(%x, %nope)\n  output %y\n",
                "graph text line 3, column 16: %nope is never defined: no input, init or node "
                "output has this name"},
        BadText{"duplicate_value", kHead + "  %x = Relu(%x)\n",
                "graph text line 3, column 3: %x is defined twice (first on line 2); value names "
                "must be unique"},
        BadText{"value_count", kHead + "  init %w: float32[2,2] = {1,2,3}\n",
                "graph text line 3, column 27: init %w: float32[2,2] holds 4 values, the text "
                "gives 3"},
        BadText{"value_range", kHead + "  init %q: int8[2] = {1,200}\n",
                "graph text line 3, column 25: 200 does not fit int8 (init %q)"},
        BadText{"not_a_number", kHead + "  init %w: float32[1] = {1.5x}\n",
                "graph text line 3, column 26: expected a number in the values of init %w, "
                "found '1.5x'"},
        BadText{"init_without_type", kHead + "  init %w = {1}\n",
                "graph text line 3, column 8: init %w needs a type with its shape, e.g. 'init "
                "%w: float32[2] = {1,2}'"},
        BadText{"unknown_dim_init", kHead + "  init %w: float32[N]\n",
                "graph text line 3, column 12: init %w needs a known shape; 'float32[N]' is "
                "not"},
        BadText{"opaque_attribute", kHead + "  %y = If[then_branch=<opaque>](%x)\n",
                "graph text line 3, column 11: attribute 'then_branch' is opaque (a subgraph or "
                "sparse tensor), which the text form cannot carry; add that node in code"},
        BadText{"mixed_list", kHead + "  %y = Op[a=[1,\"b\"]](%x)\n",
                "graph text line 3, column 13: a list mixes strings and numbers in the list of "
                "attribute 'a'"},
        BadText{"duplicate_attribute", kHead + "  %y = Op[a=1, a=2](%x)\n",
                "graph text line 3, column 16: attribute 'a' is given twice"},
        BadText{"bad_escape", kHead + "  %y = Op[s=\"a\\qb\"](%x)\n",
                "graph text line 3, column 15: unknown escape '\\q' in a string (use \\\" \\\\ "
                "\\n \\r \\t \\xHH)"},
        BadText{"unclosed_string", kHead + "  %y = Op[s=\"abc](%x)\n",
                "graph text line 3, column 22: a string is not closed: '\"' is missing"},
        BadText{"output_type_conflict",
                kHead + "  %y: float32[2] = Relu(%x)\n  output %y: int8[2]\n",
                "graph text line 4, column 10: output %y is declared int8[2] here but "
                "float32[2] where it is defined"},
        BadText{"trailing_text", kHead + "  output %x extra\n",
                "graph text line 3, column 13: unexpected 'extra' after the output"},
        BadText{"bad_op", kHead + "  %y = ::Relu(%x)\n",
                "graph text line 3, column 8: expected an op ('Relu' or 'domain::Op'), found "
                "'::Relu'"},
        BadText{"typed_input", kHead + "  %y = Relu(%x: float32)\n",
                "graph text line 3, column 13: a node input takes no type; types go where "
                "values are defined"}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace qforge
