// A tiny CNN with one residual block, for the reconstruction tests:
//   x[N,2,6,6] -> conv_a(2->4, 3x3) -> relu_a -> conv_b(4->4, 3x3) -> relu_b -> conv_c(4->4, 3x3)
//   -> add(conv_c, relu_a) -> relu_add -> conv_d(4->3, 1x1) -> relu_d -> conv_e(3->3, 1x1)
//   -> GlobalAveragePool -> Flatten -> fc(Gemm 3->5) -> y
#pragma once

#include <ATen/ATen.h>

#include "ir/graph.h"

namespace qforge::testing {

inline Graph residualCnn(uint64_t seed = 3) {
  at::manual_seed(static_cast<int64_t>(seed));
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(2),
                                                      Dim::known(6), Dim::known(6)}};
  g.addInput(x);
  auto conv = [&](const std::string& name, Value* in, int64_t cin, int64_t cout, int64_t k) {
    Value* w = g.addInitializer(name + ".w", at::randn({cout, cin, k, k}) / std::sqrt(cin * k * k));
    Value* b = g.addInitializer(name + ".b", at::randn({cout}) * 0.1);
    Node* n = g.addNode("Conv", {in, w, b}, {name + "_out"}, name);
    const int64_t p = k / 2;
    n->attributes.set(Attribute::makeInts("pads", {p, p, p, p}));
    return n->output(0);
  };
  auto relu = [&](const std::string& name, Value* in) {
    return g.addNode("Relu", {in}, {name + "_out"}, name)->output(0);
  };
  Value* a = relu("relu_a", conv("conv_a", x, 2, 4, 3));
  Value* b = relu("relu_b", conv("conv_b", a, 4, 4, 3));
  Value* c = conv("conv_c", b, 4, 4, 3);
  Value* sum = g.addNode("Add", {c, a}, {"add_out"}, "add")->output(0);
  Value* r = relu("relu_add", sum);
  Value* d = relu("relu_d", conv("conv_d", r, 4, 3, 1));
  Value* e = conv("conv_e", d, 3, 3, 1);
  Value* pool = g.addNode("GlobalAveragePool", {e}, {"pool_out"}, "pool")->output(0);
  Node* flat = g.addNode("Flatten", {pool}, {"flat_out"}, "flatten");
  flat->attributes.set(Attribute::makeInt("axis", 1));
  Value* fw = g.addInitializer("fc.w", at::randn({5, 3}));
  Value* fb = g.addInitializer("fc.b", at::randn({5}) * 0.1);
  Node* fc = g.addNode("Gemm", {flat->output(0), fw, fb}, {"y"}, "fc");
  fc->attributes.set(Attribute::makeInt("transB", 1));
  fc->output(0)->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(5)}};
  g.addOutput(fc->output(0));
  return g;
}

}  // namespace qforge::testing
