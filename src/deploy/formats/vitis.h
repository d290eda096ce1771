// Xilinx Vitis AI (DPU) scales as MQBench writes them: {"vitis": {tensor: {"scale": s}}} for
// every quantized tensor (activations, weights, biases), one power-of-two scale each on a signed
// symmetric 8-bit grid. The DPU has no per-channel quantization: such tables are refused.
#pragma once

#include <string>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

std::string vitisScales(const QuantTable& table);
// Every entry as a symmetric signed 8-bit tensor [-128, 127] with its power-of-two scale; the
// file does not say which are weights, so all come back as activations.
QuantTable parseVitisScales(const std::string& text, const std::string& where);

}  // namespace qforge::deploy::formats
