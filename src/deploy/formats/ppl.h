// OpenPPL's parameter files as MQBench writes them.
//
// PPL W8A16 ("ppl"): {"ppl": {tensor: {"step", "zero_point", "min", "max", "bit",
// "type": "biased"}}}, scalars per tensor and lists per channel; step is the scale,
// min/max = (qmin - zero_point) * step and (qmax - zero_point) * step.
//
// PPL-CUDA ("ppl_cuda"): text, one "tensor: amax" line per per-tensor quantized tensor,
// amax = max(|min|, |max|) (the file is named model_clip_ranges.json but is not JSON, as in
// MQBench). Per-channel weights are not listed (the toolchain computes their ranges).
#pragma once

#include <string>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

std::string pplParams(const QuantTable& table);
// Lists come back as per-channel weights on axis 0, scalars as activations.
QuantTable parsePplParams(const std::string& text, const std::string& where);

std::string pplCudaClipRanges(const QuantTable& table);
// Activations as symmetric int8 with scale amax / 127 (all the file says).
QuantTable parsePplCudaClipRanges(const std::string& text, const std::string& where);

}  // namespace qforge::deploy::formats
