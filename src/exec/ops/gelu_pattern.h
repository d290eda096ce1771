// GELU as torch.onnx (before opset 20) writes it out: Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x ->
// Mul 0.5. The Div's lowering computes the whole chain, offered as its OpContext::tail, with
// ATen's gelu in one vectorized pass, as ONNX Runtime's Gelu fusion does: Debian's ATen runs Erf
// alone one element at a time (3 of them were 5 of the zoo ViT's 27 ms at batch 100, one thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"

namespace qforge::ops {

// The op types a Div offers to compute with it (OpInfo::fusable_followers).
const std::vector<std::string>& geluFollowers();

// gelu(x) when `div` (computing x / divisor) and its tail are that chain, with absorb(4)
// recorded; nullopt, absorbing nothing, for anything else.
std::optional<at::Tensor> geluOfTail(const OpContext& div, const at::Tensor& x,
                                     const at::Tensor& divisor);

}  // namespace qforge::ops
