#include "ir/dump.h"

#include <gtest/gtest.h>

namespace qforge {
namespace {

TEST(DumpTest, PrintsInputsInitializersNodesAndOutputs) {
  Graph g;
  g.model.graph_name = "tiny";
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3)}};
  g.addInput(x);
  Value* w = g.addInitializer("w", at::ones({3}));
  Node* n = g.addNode("Mul", {x, w}, {"y"}, "scale");
  n->attributes.set(Attribute::makeInts("axes", {0, -1}));
  n->attributes.set(Attribute::makeString("mode", "fast"));
  g.addOutput(n->output(0));
  EXPECT_EQ(dumpGraph(g),
            "graph tiny\n"
            "  input %x: float32[N,3]\n"
            "  init %w: float32[3] = {1,1,1}\n"
            "  %y = Mul[axes=[0,-1], mode=\"fast\"](%x, %w)  # scale\n"
            "  output %y\n");
}

// Each attribute kind as the grammar in ir/dump.h spells it.
TEST(DumpTest, SpellsEveryAttributeKind) {
  Graph g;
  g.model.graph_name = "kinds";
  g.model.opset_imports["com.microsoft"] = 1;
  Node* n = g.addNode("Op", {nullptr}, {"y"}, "", "com.microsoft");
  n->attributes.set(Attribute::makeFloat("f", 2.0));
  n->attributes.set(Attribute::makeFloat("g", 0.1));
  n->attributes.set(Attribute::makeFloats("fs", {1.0, -0.5}));
  n->attributes.set(Attribute::makeFloats("no_fs", {}));
  n->attributes.set(Attribute::makeStrings("ss", {"a\"b", "c"}));
  n->attributes.set(Attribute::makeStrings("no_ss", {}));
  n->attributes.set(Attribute::makeInts("no_is", {}));
  n->attributes.set(Attribute::makeTensor("t", at::tensor({3, 4}, at::kLong)));
  n->attributes.set(Attribute::makeTensor("big", at::zeros({17})));
  Attribute ts;
  ts.name = "ts";
  ts.kind = AttributeKind::Tensors;
  ts.tensors = {at::ones({1}, at::kBool)};
  n->attributes.set(ts);
  Attribute opaque;
  opaque.name = "body";
  opaque.kind = AttributeKind::Opaque;
  n->attributes.set(opaque);
  Value* y = n->output(0);
  y->type = TensorType{DType::Int8, std::nullopt};
  g.addOutput(y);
  EXPECT_EQ(dumpGraph(g),
            "graph kinds\n"
            "  opset \"\" 13\n"
            "  opset \"com.microsoft\" 1\n"
            "  %y: int8 = com.microsoft::Op[f=2.0, g=0.1, fs=[1.0,-0.5], no_fs=floats[], "
            "ss=[\"a\\\"b\",\"c\"], no_ss=strings[], no_is=[], t=tensor<int64[2]>{3,4}, "
            "big=tensor<float32[17]>, ts=tensors[tensor<bool[1]>{1}], body=<opaque>](<none>)\n"
            "  output %y: int8\n");
}

}  // namespace
}  // namespace qforge
