// Helpers shared by the ONNX Runtime integer kernels (exec/ops/ort_integer.cpp and
// exec/ops/ort_integer_contrib.cpp); internal to those two files. The facts they model are listed
// at the top of ort_integer.cpp.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "exec/op_info.h"

namespace qforge::ort_integer {

inline const char* const kMicrosoft = "com.microsoft";

std::string typeName(at::ScalarType type);
std::string typeName(const at::Tensor& t);
bool isQuant8(at::ScalarType type);

struct Range {
  int64_t lowest, highest;
};
Range rangeOf(at::ScalarType type);

bool isPerTensor(const at::Tensor& t);
const at::Tensor& requiredInput(const OpContext& ctx, size_t i, const std::string& name);
const at::Tensor& quant8Input(const OpContext& ctx, size_t i, const std::string& name);
void requireType(const OpContext& ctx, const at::Tensor& t, const std::string& name,
                 at::ScalarType type, const std::string& owner);

// A per-tensor float32 scale.
float scaleValue(const OpContext& ctx, size_t i, const std::string& name);

// A per-tensor zero point of type `type` (that of `owner`); 0 when the optional input is omitted.
int64_t zeroPointValue(const OpContext& ctx, size_t i, const std::string& name, at::ScalarType type,
                       const std::string& owner);

// MlasRequantizeOutput: float32(acc) * multiplier, clamped to [lowest - zp, highest - zp],
// rounded half to even, plus zp. `acc` is int32, or float32 already holding float32(acc) (then
// it is overwritten); `multiplier` is float32, broadcastable against `acc`.
at::Tensor requantize(const at::Tensor& acc, const at::Tensor& multiplier, int64_t zero_point,
                      at::ScalarType type);

at::Tensor wrapToInt32(const at::Tensor& exact);

// `info` moved into the com.microsoft domain.
OpInfo microsoft(OpInfo info);

// Registers QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
// QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax and MatMulIntegerToFloat
// (exec/ops/ort_integer_contrib.cpp).
void registerContribOps(OpRegistry& registry);

}  // namespace qforge::ort_integer
