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
            "  init %w: float32[3]\n"
            "  %y: undefined[?] = Mul[axes=[0,-1], mode=\"fast\"](%x, %w)  # scale\n"
            "  output %y: undefined[?]\n");
}

}  // namespace
}  // namespace qforge
