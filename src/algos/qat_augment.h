// Training-time augmentation of image batches for QAT: random shifts (zero padded) and horizontal
// flips, drawn from a generator seeded per global step so every rank and a resumed run draw the
// same.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace qforge::algos {

// `images` [N, C, H, W] shifted by up to `shift` pixels (zero padded) and flipped horizontally
// with probability 1/2 when `flip`, each sample drawn from a generator seeded with `seed`.
at::Tensor augmentImages(const at::Tensor& images, int64_t shift, bool flip, uint64_t seed);

// The seed of the batch trained at `global_step` (0-based) of a run seeded with `run_seed`.
uint64_t augmentationSeed(uint64_t run_seed, int64_t global_step);

}  // namespace qforge::algos
