// Folds inference-mode BatchNormalization into the Conv, ConvTranspose or Gemm before it, the
// way deployment runtimes execute it: y = (x - mean) / sqrt(var + eps) * scale + B is an affine
// map per output channel, s * x + t, which the producer's weight and bias absorb.
//
// Quantization-aware training keeps BN as its own node (it must see the un-folded statistics);
// that path does not run this pass.
#pragma once

#include <cstddef>
#include <functional>

#include "ir/graph.h"

namespace qforge::passes {

// Folds every BatchNormalization (training_mode absent or 0, outputs other than Y unused) whose
// input X is the only output of an op the op table says absorbs BN (Conv, ConvTranspose, Gemm:
// OpInfo::absorbs_batchnorm, along its weight_layout), is read by the BN alone and is not
// a graph output, when the producer's weight and bias and the BN's scale, B, mean and var are all
// initializers (directly or through Identity nodes, as PyTorch exports shared tensors). Gemm folds
// only when C is absent or a row ([N], [1,N] or a broadcast scalar). Returns how many BNs were
// folded; BNs that do not match are left as they are.
//
// The producer's weight and bias are rewritten in place, or copied to new initializers when
// another node also reads them; a bias (Gemm: C, with beta set to 1) is created when missing.
// The BN's readers then read the producer's output; a BN output that was a graph output keeps its
// name (the producer's output is renamed), so the model's interface does not change. BN
// parameters and replaced weights no longer read by anything are removed, with their Identity
// nodes.
//
// `may_fold`, when given, is asked about each producer first: a BN whose producer it refuses
// stays (a backend that quantizes the producer's weights before BN).
size_t foldBatchNorm(Graph& graph, const std::function<bool(const Node& producer)>& may_fold = {});

// Removes `v` once nothing reads it, with the Identity chain and the initializer it came from
// (a folded BN's parameters, say).
void removeIfUnused(Graph& graph, Value* v);

}  // namespace qforge::passes
