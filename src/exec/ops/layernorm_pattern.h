// LayerNorm as exporters before ONNX opset 17 write it out (torch.onnx, tf2onnx, Paddle2ONNX):
//
//   mean = ReduceMean(x) -> d = Sub(x, mean) -> Pow(d, 2) or Mul(d, d) -> ReduceMean -> Add eps
//        -> Sqrt -> Div(d, .) -> Mul gamma -> Add beta,   each ReduceMean over the last axis, kept.
//
// (passes/layer_norm_pattern.h recognises the same subgraph from the graph alone, for placement;
// this one reads the tensors a run gives.)
//
// The first ReduceMean's lowering computes the whole of it, offered as its OpContext::tail, in one
// pass over each row, as ONNX Runtime's LayerNormFusion does: nine nodes of a few microseconds
// each were most of the zoo ViT's time at batch 1. The arithmetic is the nodes' own: every
// elementwise step rounds to float32 where the node would, and the two means are the float32
// roundings of sums kept in double (ONNX leaves a reduction's order open; ATen's float sum is one
// order, this is the one nearest the exact mean).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"

namespace qforge::ops {

// The op types a ReduceMean offers to compute with it (OpInfo::fusable_followers).
const std::vector<std::string>& layerNormFollowers();

// The LayerNorm's output when `reduce_mean` (over x's last axis) and its tail are that pattern,
// x is float32 and no gradient is wanted, with the nodes computed recorded by absorb(): all eight
// followers, or the first seven or six when the Mul by gamma or the Add of beta is not there or
// not a per-feature constant. nullopt, absorbing nothing, for anything else.
std::optional<at::Tensor> layerNormOfTail(const OpContext& reduce_mean, const at::Tensor& x);

// The kernel: y = (x - mean) / sqrt(var + eps) * gamma + beta over each row of x's last axis, with
// the rounding described above. `gamma` and `beta` are float32 of x.size(-1) elements, or
// undefined for none.
at::Tensor layerNormRows(const at::Tensor& x, float epsilon, const at::Tensor& gamma,
                         const at::Tensor& beta);

}  // namespace qforge::ops
