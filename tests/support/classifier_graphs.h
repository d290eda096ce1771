// Tiny classifiers with BatchNormalization for the QAT tests.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace qforge::testing {

// Gives `v` the float type [N, dims...] with a symbolic batch.
inline void setBatchedShape(Value* v, const std::vector<int64_t>& dims) {
  std::vector<Dim> shape{Dim::symbolic("N")};
  for (int64_t d : dims)
    shape.push_back(Dim::known(d));
  v->type = TensorType{DType::Float, shape};
}

// x[N,1,6,6] -> Conv(cw[4,1,3,3]) -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten
// -> Gemm(fw[3,4], fb, transB) -> y[N,3], with weights drawn after at::manual_seed(seed).
inline Graph convBnClassifier(uint64_t seed) {
  at::manual_seed(seed);
  Graph g;
  Value* x = g.addValue("x");
  setBatchedShape(x, {1, 6, 6});
  g.addInput(x);
  Node* conv =
      g.addNode("Conv", {x, g.addInitializer("cw", at::randn({4, 1, 3, 3}) * 0.5)}, {"c"}, "conv");
  Node* bn = g.addNode("BatchNormalization",
                       {conv->output(0), g.addInitializer("gamma", at::rand({4}) + 0.5),
                        g.addInitializer("beta", at::randn({4}) * 0.1),
                        g.addInitializer("mean", at::randn({4}) * 0.1),
                        g.addInitializer("var", at::rand({4}) + 0.5)},
                       {"bn"}, "bn");
  Node* relu = g.addNode("Relu", {bn->output(0)}, {"r"}, "relu");
  Node* pool = g.addNode("GlobalAveragePool", {relu->output(0)}, {"p"}, "pool");
  Node* flat = g.addNode("Flatten", {pool->output(0)}, {"f"}, "flatten");
  Node* fc = g.addNode("Gemm",
                       {flat->output(0), g.addInitializer("fw", at::randn({3, 4})),
                        g.addInitializer("fb", at::zeros({3}))},
                       {"y"}, "fc");
  fc->attributes.set(Attribute::makeInt("transB", 1));
  setBatchedShape(fc->output(0), {3});
  g.addOutput(fc->output(0));
  return g;
}

}  // namespace qforge::testing
