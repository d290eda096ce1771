// The whole state of a QAT run in one file, so that an interrupted run continues exactly where it
// stopped: weights and BN statistics, every quantizer's state, the optimizer's buffers, position
// (epoch, step), torch's RNG and the metrics so far. The file is a torch pickle
// (torch::pickle_save), so `torch.load` in Python can read it too; it is written to a temporary
// name and renamed, so a kill at any moment leaves the previous checkpoint or the new one, never a
// torn file.
//
// Besides the file format: what the trainer puts in and takes out (the settings a resumed run
// must share, the metric history, the model's tensors and quantizer states).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "algos/qat_config.h"
#include "algos/qat_parameters.h"
#include "algos/qat_results.h"
#include "passes/prepare.h"

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

// The settings a run is resumed with only if they are the same: the backend, every quantizer's
// kind, every trained tensor's name and shape, the config's training settings and the world size.
std::string qatSettingsJson(const passes::PreparedModel& model, const QatParameters& params,
                            const QatConfig& config, int world_size);
// Throws naming each setting that differs between a checkpoint's `saved` settings and `now`.
void requireSameQatSettings(const std::string& saved, const std::string& now,
                            const std::string& checkpoint_path);

std::string qatHistoryJson(const std::vector<QatEpochResult>& history);
std::vector<QatEpochResult> parseQatHistory(const std::string& json);

// Copies the checkpoint's initializers into the model's (in place, so trained tensors stay the
// same objects) and loads every quantizer's state. Throws naming the tensor or quantizer that
// does not match the model.
void restoreQatModelState(const QatCheckpoint& checkpoint, passes::PreparedModel& model,
                          const std::string& checkpoint_path);

}  // namespace qforge::algos
