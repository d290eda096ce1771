// Which of the nodes after a Conv (OpContext::tail) its oneDNN kernel computes, read with ONNX's
// semantics into a ConvEpilogue: an inference BatchNormalization first, then one activation (SiLU
// or HardSwish written out, a Sigmoid or HardSigmoid and the Mul of its input by it, counts as
// one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/dnnl_conv.h"

namespace qforge::ops {

// The op types a Conv offers to compute in its kernel (OpInfo::fusable_followers).
const std::vector<std::string>& convFusableFollowers();

// Reads the longest prefix of ctx.tail() that the kernel computes and records its length with
// ctx.absorb(). A follower outside what the kernel computes (a training-mode
// BatchNormalization, Clip bounds that are not float scalars, parameters of the wrong shape) ends
// the prefix: it then runs as its own node and reports its own errors.
ConvEpilogue absorbTail(const OpContext& ctx, int64_t out_channels);

}  // namespace qforge::ops
