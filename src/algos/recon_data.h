// The tensors one reconstruction unit trains on, for every calibration sample: its input in the
// quantized model (everything before it quantized, earlier units already rounded), its input and
// output in the float model. Kept in memory up to a byte budget; samples past it are recomputed
// from the calibration images whenever a batch draws them, so a small budget costs time, never
// memory or failure.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "algos/recon_units.h"
#include "exec/executor.h"
#include "passes/prepare.h"

namespace qforge::algos {

struct UnitBatch {
  at::Tensor quant_input;  // [B, ...] entry value of the quantized model
  at::Tensor float_input;  // undefined unless asked for (QDrop mixes it in)
  at::Tensor float_output;
};

class UnitData {
 public:
  // `executor` runs the prepared graph without hooks; `rounded` maps weight initializers to the
  // values earlier units rounded them to (fed to the quantized model only: the float model keeps
  // the original weights).
  UnitData(passes::PreparedModel& model, Executor& executor, const at::Tensor& images,
           const ReconUnit& unit, const std::map<std::string, at::Tensor>& rounded,
           bool keep_float_input, int64_t byte_budget, int64_t chunk = 64);

  // Rows `indices` (int64 [B]) of every tensor.
  UnitBatch gather(const at::Tensor& indices);

  int64_t samples() const { return images_.size(0); }
  int64_t cachedSamples() const { return cached_; }
  int64_t cachedBytes() const { return cached_bytes_; }
  int64_t recomputedSamples() const { return recomputed_; }

 private:
  UnitBatch compute(const at::Tensor& images);

  passes::PreparedModel& model_;
  Executor& executor_;
  at::Tensor images_;
  const ReconUnit& unit_;
  const std::map<std::string, at::Tensor>& rounded_;
  std::string input_name_;
  bool keep_float_input_;
  int64_t cached_ = 0;
  int64_t cached_bytes_ = 0;
  int64_t recomputed_ = 0;
  UnitBatch cache_;  // the first cached_ samples
};

}  // namespace qforge::algos
