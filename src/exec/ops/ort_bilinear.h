// Bilinear Resize of (N, C, H, W) float32 images computed as ONNX Runtime's CPU kernel computes
// it, bit for bit: coordinates and the two distances per output row and column in float, the
// four weights as products of those distances, and the output as their weighted sum added in one
// fixed order. ATen's upsample_bilinear2d blends in another order, so where a quantized map has
// plateaus of equal levels its output differs from ORT's in the last bit, and an Equal of the map
// with its MaxPool (a heat map's local maxima) then keeps other elements.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace qforge::ops {

// Whether ORT computes `coordinate_mode` the way ortBilinear does (half_pixel,
// pytorch_half_pixel, asymmetric, align_corners, tf_half_pixel_for_nn; not tf_crop_and_resize).
bool ortBilinearCovers(const std::string& coordinate_mode);

// `input` [N, C, H, W] float32 resized to [N, C, out_h, out_w]; scale_h and scale_w are ORT's
// float scales (given, or out / in when sizes were given). Keeps autograd when the input needs
// gradients (the same arithmetic in ATen ops), else runs one pass, channels-last images in place.
at::Tensor ortBilinear(const at::Tensor& input, int64_t out_h, int64_t out_w, float scale_h,
                       float scale_w, const std::string& coordinate_mode);

}  // namespace qforge::ops
