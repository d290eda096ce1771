// An op table that predicts, bit for bit, what ONNX Runtime's CPU execution provider (MLAS
// kernels, x86-64) outputs for a QOperator model: the built-in table with QuantizeLinear,
// QLinearConv and QLinearMatMul replaced by ORT's arithmetic and the com.microsoft quantized ops
// added (QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
// QGemm, QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax, MatMulIntegerToFloat) with
// SimplifiedLayerNormalization, which ORT's fusions make (verify/ort_fused_groups). The built-in
// table keeps ONNX's reference semantics. Use it as
// `Executor(graph, options, ortEmulationRegistry())`.
#pragma once

#include "exec/op_info.h"

namespace qforge {

// Built on first use; the ORT kernels live in exec/ops/ort_integer.cpp (weighted ops) and
// exec/ops/ort_integer_contrib.cpp (the weightless com.microsoft ops).
const OpRegistry& ortEmulationRegistry();

// Adds the ORT kernels to `registry` (which must not hold QuantizeLinear, QLinearConv or
// QLinearMatMul yet).
void registerOrtIntegerOps(OpRegistry& registry);

// Replaces the float kernels whose rounding ORT fixes differently from ATen: MatMul and
// ReduceMean (exec/ops/ort_float.cpp), and adds com.microsoft SimplifiedLayerNormalization. Softmax
// and Erf already compute as ORT does in the built-in table (exec/ops/mlas_ops.h). The ops keep
// their facts; `registry` must hold them.
void registerOrtFloatOps(OpRegistry& registry);

}  // namespace qforge
