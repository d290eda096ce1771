#include "algos/qat_augment.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include "core/error.h"

namespace qforge::algos {

at::Tensor augmentImages(const at::Tensor& images, int64_t shift, bool flip, uint64_t seed) {
  require(images.dim() == 4,
          "augmentation shifts and flips images [N, C, H, W]; the batch has "
          "shape " +
              c10::str(images.sizes()));
  require(shift >= 0, "the augmentation shift must not be negative");
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t n = images.size(0), h = images.size(2), w = images.size(3);
  const at::Tensor padded = at::constant_pad_nd(images, {shift, shift, shift, shift}, 0);
  const at::Tensor dx = at::randint(0, 2 * shift + 1, {n}, generator, at::kLong);
  const at::Tensor dy = at::randint(0, 2 * shift + 1, {n}, generator, at::kLong);
  const at::Tensor flips = at::rand({n}, generator, at::kFloat) < 0.5;
  const auto x_offset = dx.accessor<int64_t, 1>();
  const auto y_offset = dy.accessor<int64_t, 1>();
  const auto flipped = flips.accessor<bool, 1>();
  at::Tensor out = at::empty_like(images);
  for (int64_t i = 0; i < n; ++i) {
    at::Tensor crop = padded[i].narrow(1, y_offset[i], h).narrow(2, x_offset[i], w);
    if (flip && flipped[i]) crop = crop.flip({2});
    out[i].copy_(crop);
  }
  return out;
}

uint64_t augmentationSeed(uint64_t run_seed, int64_t global_step) {
  return run_seed * 1000003ULL + static_cast<uint64_t>(global_step) + 1;
}

}  // namespace qforge::algos
