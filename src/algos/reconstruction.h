// Post-training reconstruction (MQBench's advanced PTQ, in C++): AdaRound (Nagel et al. 2020)
// per layer, BRECQ (Li et al. 2021) per block, QDrop (Wei et al. 2022) per block with float
// values randomly kept. Unit by unit in graph order, on a calibrated prepared model:
//   1. cache the unit's quantized input and float input/output over the calibration samples
//      (recon_data.h; a byte budget, recomputing beyond it);
//   2. give each weight of the unit AdaRound rounding variables V, and each activation quantizer
//      of the unit a learnable LSQ scale (when scale_lr > 0 and the quantizer is a fixed affine
//      one not learned in an earlier unit);
//   3. for max_count iterations on random batches: loss = output MSE (sum over channels, mean
//      over the rest, as MQBench's lp_loss) + weight * sum(1 - |2h(V) - 1|^beta) once past the
//      warm-up, beta annealed linearly from b_range[0] to b_range[1]; Adam on V (lr 1e-3) and on
//      the scales (scale_lr, cosine to 0). With prob < 1 (QDrop) the unit's input and every
//      activation quantizer in it keep the quantized value with probability prob and the float
//      one otherwise;
//   4. round V hard, keep the rounded weights for the next units' quantized inputs, and set the
//      learned scales into the model's quantizers.
// At the end the rounded weights replace the graph's initializers (on their quantization grid,
// so deploy writes exactly them). Deterministic for a seed on a given thread count.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algos/recon_units.h"
#include "passes/prepare.h"

namespace qforge::algos {

struct ReconstructionConfig {
  std::string algorithm = "qdrop";
  ReconGranularity pattern = ReconGranularity::Block;
  int64_t max_count = 20000;  // iterations per unit
  int64_t batch = 32;
  double weight = 0.01;  // rounding regulariser's lambda
  double warm_up = 0.2;  // share of iterations before the regulariser starts
  double b_start = 20, b_end = 2;
  double prob = 0.5;       // chance of keeping a quantized value (1: always, BRECQ and AdaRound)
  double scale_lr = 4e-5;  // 0: activation scales stay as calibrated
  double lr = 1e-3;        // Adam on the rounding variables
  int max_block_layers = 3;
  int64_t cache_limit = int64_t{4} << 30;  // bytes
  uint64_t seed = 0;
};

// The defaults of "adaround" (layer, prob 1), "brecq" (block, prob 1) and "qdrop" (block,
// prob 0.5); throws naming the known ones for anything else.
ReconstructionConfig reconstructionPreset(const std::string& algorithm);

// Applies MQBench's reconstruction keys (pattern, scale_lr, warm_up, weight, max_count, b_range,
// prob; keep_gpu and round_mode accepted) and qforge's (batch, lr, max_block_layers,
// cache_limit, seed) from `j`, which may also nest them as quantize.reconstruction. Unknown keys
// and bad values throw, naming `where` and the key.
void applyReconstructionKeys(ReconstructionConfig& config, const nlohmann::json& j,
                             const std::string& where);

struct ReconProgress {
  size_t unit = 0, units = 0;
  std::string name;
  int64_t iteration = 0, iterations = 0;
  double rec_loss = 0, round_loss = 0;
};
using ReconProgressFn = std::function<void(const ReconProgress&)>;

struct UnitReport {
  std::string name, entry, exit;
  size_t layers = 0;
  double first_rec_loss = 0, last_rec_loss = 0, last_round_loss = 0;
  double flipped = 0;  // share of weights rounded otherwise than to nearest
  int64_t cached_samples = 0, cached_bytes = 0, recomputed_samples = 0;
  double seconds = 0;
  double cache_seconds = 0;  // of `seconds`: computing the cached inputs and outputs
};

struct ReconstructionReport {
  std::vector<UnitReport> units;
  int64_t iterations = 0;
  double seconds = 0;
  double iterations_per_second = 0;
  int64_t peak_cache_bytes = 0;
};

class ProcessGroup;

// Reconstructs `model` (calibrated: every quantizer has parameters) on `images`, the calibration
// inputs [N, ...] of its data input. Throws qforge::Error for fewer samples than one batch, a
// unit whose weight quantizer has no affine grid, and bad settings.
//
// Data parallel over a group of N ranks (each calibrated identically, algos/calibrate.h):
// `images` is this rank's share of the calibration data, each iteration's batch of config.batch
// is split in N equal parts drawn from the ranks' own shares (so config.batch must divide by N),
// and the gradients of the rounding variables and scales are averaged before every step, so all
// ranks keep the same variables and end with the same rounded model. The random draws differ
// from one process's (each rank seeds its own), so the result is another sample of the same
// algorithm rather than one process's bit for bit. The reported losses are the ranks' means.
ReconstructionReport reconstruct(passes::PreparedModel& model, const at::Tensor& images,
                                 const ReconstructionConfig& config,
                                 const ReconProgressFn& progress = {},
                                 ProcessGroup* group = nullptr);

}  // namespace qforge::algos
