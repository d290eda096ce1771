// The whole state of a QAT run in one file, so that an interrupted run continues exactly where it
// stopped: weights and BN statistics, every quantizer's state, the optimizer's buffers, position
// (epoch, step), torch's RNG and the metrics so far. The file is a torch pickle
// (torch::pickle_save), so `torch.load` in Python can read it too; it is written to a temporary
// name and renamed, so a kill at any moment leaves the previous checkpoint or the new one, never a
// torn file.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

namespace qforge::algos {

struct QatCheckpoint {
  // The run's settings as JSON text; a resumed run must have the same ones.
  std::string settings;
  int64_t epoch = 0;          // the epoch to continue in
  int64_t step_in_epoch = 0;  // batches of that epoch already done
  int64_t global_step = 0;
  // Sums over the steps of the unfinished epoch (loss, correct, labelled, steps, seconds), so its
  // metrics come out as an uninterrupted epoch's.
  at::Tensor epoch_sums;
  std::map<std::string, at::Tensor> initializers;
  std::map<std::string, std::map<std::string, at::Tensor>> quantizers;
  std::map<std::string, at::Tensor> optimizer;
  at::Tensor rng_state;  // torch's default CPU generator
  std::string history;   // per-epoch metrics, JSON text
};

void saveQatCheckpoint(const QatCheckpoint& checkpoint, const std::string& path);
// Throws qforge::Error naming the file when it is missing, unreadable or not a qforge checkpoint.
QatCheckpoint loadQatCheckpoint(const std::string& path);

}  // namespace qforge::algos
