// A tiny attention-style head split, for the reconstruction tests: a linear layer whose output is
// reshaped into two heads and transposed so that the heads, not the samples, lead (as a ViT's qkv
// projection before q, k and v are gathered):
//   x[N,3,16] -> MatMul(w[16,6]) -> mm_out[N,3,6] -> Reshape(shape) -> heads[N,3,2,3]
//   -> Transpose(perm 2,0,1,3) -> split[2,N,3,3] -> Gather(0), Gather(1) on axis 0 -> Mul ->
//   y[N,3,3]
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "ir/graph.h"

namespace qforge::testing {

// `first_dim` is the reshape target's leading entry: -1 (inferred, as exported models write it)
// or 0 (copied from the input, so the samples provably stay on axis 0).
inline Graph headSplitGraph(int64_t first_dim = -1, uint64_t seed = 4) {
  at::manual_seed(static_cast<int64_t>(seed));
  Graph g;
  Value* x = g.addValue("x");
  x->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3), Dim::known(16)}};
  g.addInput(x);
  Node* mm =
      g.addNode("MatMul", {x, g.addInitializer("w", at::randn({16, 6}) / 4)}, {"mm_out"}, "matmul");
  Node* reshape =
      g.addNode("Reshape",
                {mm->output(0),
                 g.addInitializer("shape", at::tensor(std::vector<int64_t>{first_dim, 3, 2, 3}))},
                {"heads"}, "reshape");
  Node* transpose = g.addNode("Transpose", {reshape->output(0)}, {"split"}, "transpose");
  transpose->attributes.set(Attribute::makeInts("perm", {2, 0, 1, 3}));
  Value* first = g.addInitializer("first", at::tensor(int64_t{0}));
  Value* second = g.addInitializer("second", at::tensor(int64_t{1}));
  Node* q = g.addNode("Gather", {transpose->output(0), first}, {"q"}, "gather_q");
  Node* k = g.addNode("Gather", {transpose->output(0), second}, {"k"}, "gather_k");
  Node* mul = g.addNode("Mul", {q->output(0), k->output(0)}, {"y"}, "mul");
  mul->output(0)->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3), Dim::known(3)}};
  g.addOutput(mul->output(0));
  g.model.opset_imports[""] = 13;
  return g;
}

// The same computation in ATen ops, the float reference: y = q * k of x @ w's two heads.
inline at::Tensor headSplitReference(const at::Tensor& x, const at::Tensor& w) {
  const at::Tensor heads = at::matmul(x, w).reshape({x.size(0), 3, 2, 3}).permute({2, 0, 1, 3});
  return heads[0] * heads[1];
}

}  // namespace qforge::testing
