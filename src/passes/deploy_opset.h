// The default-domain opset a backend's deploy files need, known from the backend and the user's
// config alone, so that prepare() raises the model to it (passes/upgrade_opset.h) before any
// calibration: a model the upgrade cannot carry is refused in seconds, not after hours.
//
//   11  QuantizeLinear/DequantizeLinear (from 10): every backend whose grids are affine gets a
//       QDQ model, and ONNX Runtime's default optimizations add a Round (opset 11) to a QDQ
//       Conv/Gemm with a float bias when they load it; also a grid written as float arithmetic
//       (activations not 8-bit round-half-to-even, weights over 8 bits): Round and Clip with
//       input bounds
//   13  per-channel weights: QuantizeLinear's axis
// 16-bit grids are written as arithmetic, so opset 21's int16 QuantizeLinear is never needed.
// NNIE's logarithmic grid, which QuantizeLinear cannot express, is written as float arithmetic
// (Log, Round, Clip with input bounds, Pow, Where): the floor covers it too.
#pragma once

#include <cstdint>

#include "backends/backend_config.h"
#include "passes/quant_config.h"

namespace qforge::passes {

// The lowest opset of any QDQ model qforge writes. QuantizeLinear exists from 10 and the
// arithmetic form's Round from 11; ONNX Runtime's default optimizations also turn a float bias
// between a quantized input and weight into Div + Round + int32 when they load a model, so an
// opset-10 QDQ model fails to load there.
inline constexpr int64_t kQdqOpsetFloor = 11;

int64_t requiredDeployOpset(const backends::BackendConfig& backend, const QuantConfig& config);

}  // namespace qforge::passes
