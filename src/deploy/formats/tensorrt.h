// TensorRT's files beside the Q/DQ model: MQBench's clip ranges JSON
// ({"tensorrt": {"blob_range": {tensor: amax}}}, activations only, amax = 127 * scale) and a
// calibration cache for implicit quantization of the float model (first line
// "TRT-<version>-EntropyCalibration2", then "tensor: <hex>" with the big-endian bits of the
// float32 scale amax / 127). Both describe symmetric int8 activations only.
#pragma once

#include <string>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

// TensorRT 8.6.1 (NV_TENSORRT_VERSION = major * 1000 + minor * 100 + patch).
constexpr int kDefaultTensorrtVersion = 8601;

// Throws naming the first activation that is not symmetric int8 with zero point 0 on a grid
// reaching 127, and saying what to change.
void checkTensorrtActivations(const QuantTable& table);

std::string tensorrtClipRanges(const QuantTable& table);
// Activations as symmetric int8 on [-127, 127] with scale amax / 127.
QuantTable parseTensorrtClipRanges(const std::string& text, const std::string& where);

std::string tensorrtCalibrationCache(const QuantTable& table,
                                     int version = kDefaultTensorrtVersion);
QuantTable parseTensorrtCalibrationCache(const std::string& text, const std::string& where);

// The float32 scale a cache line holds, as 8 lowercase hex digits of its big-endian bits.
std::string float32Hex(double scale);

}  // namespace qforge::deploy::formats
