// Qualcomm SNPE / QNN quantization overrides in AIMET's encoding layouts.
//
// Legacy (what MQBench writes for SNPE, AIMET up to 0.6):
//   {"activation_encodings": {tensor: [enc, ...]}, "param_encodings": {tensor: [enc, ...]}}
//   enc = {"bitwidth", "dtype": "int", "is_symmetric": "True"|"False", "max", "min", "offset",
//          "scale"}, one per channel.
// 1.0.0:
//   {"version": "1.0.0", "activation_encodings": [e, ...], "param_encodings": [e, ...]}
//   e = {"name", "dtype": "INT", "enc_type": "PER_TENSOR"|"PER_CHANNEL", "is_sym", "bw",
//        "scale": [...], "offset": [...]}
// AIMET's grid is [0, 2^bw - 1] with real = (q + offset) * scale, so offset = round(min / scale)
// = qmin - zero_point: -zero_point on an unsigned grid, -128 for signed symmetric 8-bit.
// Weights and biases go to param_encodings, everything else to activation_encodings.
#pragma once

#include <string>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

std::string aimetLegacyEncodings(const QuantTable& table);
std::string aimetV1Encodings(const QuantTable& table);

// Both read symmetric encodings back as signed grids [offset, round(max / scale)] with zero
// point 0 and asymmetric ones as unsigned [0, 2^bw - 1] with zero point -offset. Entries with
// only bitwidth/min/max (MQBench's SNPE file) get scale (max - min) / (2^bw - 1) and offset
// round(min / scale), as SNPE computes them. "float" entries (tensors left in float) are skipped.
QuantTable parseAimetLegacyEncodings(const std::string& text, const std::string& where);
QuantTable parseAimetV1Encodings(const std::string& text, const std::string& where);

}  // namespace qforge::deploy::formats
