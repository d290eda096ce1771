#include "algos/qat_data_parallel.h"

#include <cmath>

#include "algos/distributed.h"

namespace qforge::algos {

namespace {

bool alone(const ProcessGroup* group) {
  return !group || group->worldSize() == 1;
}

}  // namespace

data::Batch rankShard(const data::Batch& global, int rank, int64_t batch_size) {
  data::Batch batch;
  batch.inputs = global.inputs.narrow(0, rank * batch_size, batch_size);
  if (global.labels.defined())
    batch.labels = global.labels.narrow(0, rank * batch_size, batch_size);
  if (global.targets.defined())
    batch.targets = global.targets.narrow(0, rank * batch_size, batch_size);
  batch.indices.assign(global.indices.begin() + rank * batch_size,
                       global.indices.begin() + (rank + 1) * batch_size);
  return batch;
}

void broadcastFromRankZero(ProcessGroup* group, const std::vector<at::Tensor>& tensors) {
  if (alone(group)) return;
  at::NoGradGuard no_grad;
  group->broadcast(tensors, 0);
}

void averageGradients(ProcessGroup* group, QatParameters& params) {
  if (alone(group)) return;
  std::vector<at::Tensor> grads;
  for (at::Tensor& p : params.tensors) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  group->allReduceMean(grads);
  const double correction = 1.0 / std::sqrt(static_cast<double>(group->worldSize()));
  for (size_t i = 0; i < params.size(); ++i) {
    if (params.batch_scaled_grad[i]) params.tensors[i].mutable_grad().mul_(correction);
  }
}

void averageBatchNormStatistics(ProcessGroup* group, const std::vector<at::Tensor>& statistics) {
  if (alone(group) || statistics.empty()) return;
  at::NoGradGuard no_grad;
  group->allReduceMean(statistics);
}

at::Tensor sumOverRanks(ProcessGroup* group, at::Tensor sums) {
  if (alone(group)) return sums;
  group->allReduceSum({sums});
  return sums;
}

bool anyRankStops(ProcessGroup* group, bool stop) {
  if (alone(group)) return stop;
  return group->allReduceMax(stop ? 1.0 : 0.0) > 0;
}

}  // namespace qforge::algos
