// BatchNormalization for quantization-aware training: the training lowering of BN (batch
// statistics, running statistics updated in place) and "simulated BN folding", the form
// PyTorch's torch.ao.nn.intrinsic.qat.ConvBn2d trains in (its approximate forward):
//
//   factor = gamma / sqrt(running_var + eps)
//   y = Conv(x, FQ(W * factor)) / factor + b  ->  BatchNormalization
//
// The weight quantizer sees the weight BN folding will produce, while BN still normalises with
// the batch's statistics and learns gamma and beta. mergeSimulatedBatchNorm folds BN for real
// afterwards, giving the graph prepare() gives with BN folded.
#pragma once

#include <memory>
#include <vector>

#include "exec/op_info.h"
#include "passes/prepare.h"

namespace qforge::passes {

// Shared switch read by the training BatchNormalization lowering.
struct BatchNormTraining {
  bool use_batch_statistics = true;  // false: BN "frozen": running statistics, no updates
};

// Replaces `registry`'s BatchNormalization lowerings (all opsets) with one that, while
// state->use_batch_statistics, normalises with the batch's statistics (biased variance, autograd
// through them) and updates the running mean and variance IN PLACE with ONNX's momentum m
// (running = running * m + batch * (1 - m), PyTorch's momentum being 1 - m), the variance from
// the unbiased batch variance as PyTorch does; when frozen, the registry's own inference
// lowering runs. The running statistics must be initializers (directly or through Identity
// nodes) that the executor passes unchanged, and must not require grad: a fed or hooked
// replacement fails naming the node, since its update would be lost.
void registerTrainingBatchNorm(OpRegistry& registry,
                               std::shared_ptr<const BatchNormTraining> state);

// Rewrites, in a prepared model whose BN was kept (PrepareOptions::fold_batchnorm = false), each
// BatchNormalization that the backend fuses into the Conv, ConvTranspose (group 1) or Gemm before
// it (the unit's ops are "<producer>+BatchNormalization...") and whose weight is
// FakeQuantize(initializer), into the simulated-folding form above; the conv bias (float during
// training, its quantizer node removed until the merge) is added after the division. Units that
// do not fuse BN (Academic), a producer output read by more than the BN, or an unquantized
// weight are left alone. A fused BN that cannot be rewritten (statistics or parameters that are
// not [C] float initializers, training outputs in use, grouped ConvTranspose, Gemm with a bias
// other than [C] or beta != 1) throws qforge::Error naming the node. Returns the number of BNs
// rewritten. The model's executor is rebuilt on next use.
int simulateBatchNormFolding(PreparedModel& model);

// The BNs simulateBatchNormFolding would rewrite now (empty once it ran), with the same
// refusals.
std::vector<const Node*> batchNormsToSimulate(const PreparedModel& model);

// Undoes simulateBatchNormFolding with BN folded for real, from the current initializers:
// W' = W * s, b' = b * s + (beta - mean * s) with s = gamma / sqrt(var + eps) (W' with the very
// float operations the simulated graph scaled W with, so the weight quantizer's range fits it
// bit for bit; b' in double, as foldBatchNorm), written as new initializers; the weight's
// FakeQuantize node reads W', the conv reads b' (through its bias quantizer again, when the backend
// quantizes biases), the helper nodes, BN and unused parameters are removed, and the conv output
// takes BN's output name. Returns the number merged. The model's executor is rebuilt on next use.
int mergeSimulatedBatchNorm(PreparedModel& model);

// Whether `node` is one of the nodes simulated folding added (factor, W * factor, y / factor, + b).
bool isSimulatedBatchNormHelper(const Node& node);
// How many BNs of `graph` are in the simulated-folding form.
int countSimulatedBatchNorms(const Graph& graph);

}  // namespace qforge::passes
