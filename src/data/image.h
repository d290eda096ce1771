// Image decoding (PNG, JPEG, BMP, ... via stb_image) and the transforms that turn decoded pixels
// into a model input: resize, center crop, scaling to [0,1], mean/std, channel order, layout.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qforge::data {

// Decodes an image file to uint8 [H, W, C], C being the file's own channel count (1 gray,
// 2 gray+alpha, 3 RGB, 4 RGBA). Throws qforge::Error naming the file when it cannot.
at::Tensor decodeImage(const std::string& path);

struct ImageOptions {
  int64_t channels = 0;     // channels the model wants; 0: whatever the files have
  int64_t resize = 0;       // shorter side to this many pixels (bilinear); 0: keep
  int64_t crop_height = 0;  // center crop; 0: none
  int64_t crop_width = 0;
  std::vector<double> mean{0.0};  // on the [0,1] scale; one value, or one per channel
  std::vector<double> std{1.0};
  bool bgr = false;   // the model wants channels in BGR order (files are RGB)
  bool nhwc = false;  // the model wants one sample as [H, W, C] instead of [C, H, W]

  // Throws qforge::Error when the options contradict each other (std 0, negative sizes).
  void validate() const;
};

// uint8 [H, W, C] pixels -> float32 [C, H, W] (or [H, W, C]) model input. `origin` names the
// sample in errors (wrong channel count, crop larger than the image).
at::Tensor transformImage(const at::Tensor& pixels, const ImageOptions& options,
                          const std::string& origin);

}  // namespace qforge::data
