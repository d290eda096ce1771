// Image files (`--data dir/` of PNG, JPEG, BMP, GIF, TGA, PNM): decoded by stb_image, then turned
// into a model input as a classifier's options do (resize, center crop, mean/std), whatever its
// channel count.
#include <cstddef>
#include <cstdint>

#include "data/image.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string path = fuzz::writeScratch("image", fuzz::text(data, size));
  return fuzz::refusalsOnly([&] {
    const at::Tensor pixels = data::decodeImage(path);
    data::ImageOptions options;
    options.resize = 8;
    options.crop_height = 6;
    options.crop_width = 6;
    options.mean = {0.45};
    options.std = {0.225};
    options.validate();
    (void)data::transformImage(pixels, options, path);
  });
}
