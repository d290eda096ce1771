// The data-parallel parts of QAT over a ProcessGroup (algos/distributed.h): each rank's share of a
// global batch, rank 0's starting point, averaged gradients and BN statistics, epoch sums and the
// agreement to stop. Every function takes the group as a pointer: null (or a world of one) means
// training alone, where each is the identity or a no-op.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "algos/qat_parameters.h"
#include "data/loader.h"

namespace qforge::algos {

class ProcessGroup;

// Rows [rank * batch_size, (rank + 1) * batch_size) of a global batch (inputs, labels, targets
// and indices).
data::Batch rankShard(const data::Batch& global, int rank, int64_t batch_size);

// Every rank takes rank 0's values of `tensors`, in place (a user's program may not have
// calibrated every rank on the same data).
void broadcastFromRankZero(ProcessGroup* group, const std::vector<at::Tensor>& tensors);

// Every rank's gradients averaged: the gradient of the loss averaged over the global batch.
// Parameters without a gradient contribute zeros. LSQ's activation gradient scale
// 1/sqrt(numel * qmax) is the exception: numel counts the rank's batch, not the global one, so
// those gradients come out sqrt(world) times larger than a single process with the whole batch
// would compute; they are scaled back, so that N ranks x batch B train exactly as 1 rank x batch
// N*B.
void averageGradients(ProcessGroup* group, QatParameters& params);

// Ranks normalise with their own batches' statistics; averaging the running ones (after every
// epoch) makes all ranks evaluate and save the same model.
void averageBatchNormStatistics(ProcessGroup* group, const std::vector<at::Tensor>& statistics);

// `sums` (any shape, double) summed over ranks; returned as is when alone.
at::Tensor sumOverRanks(ProcessGroup* group, at::Tensor sums);

// True when any rank asked to stop, so that all stop after the same step.
bool anyRankStops(ProcessGroup* group, bool stop);

}  // namespace qforge::algos
