// An op table that predicts, bit for bit, what ONNX Runtime's CPU execution provider (MLAS
// kernels, x86-64) outputs for a QOperator model: the built-in table with QuantizeLinear,
// QLinearConv and QLinearMatMul replaced by ORT's arithmetic and the com.microsoft quantized ops
// added (QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
// QGemm, QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax, MatMulIntegerToFloat) with
// the normalizations ORT's fusions make (LayerNormalization, SkipLayerNormalization and
// SimplifiedLayerNormalization; verify/ort_fused_groups), and the float
// kernels ORT runs between a QDQ model's quantizers where it fused no integer kernel: Conv,
// FusedConv, ConvTranspose, Gemm and GlobalAveragePool as MLAS computes them, BiasGelu, QuickGelu,
// and the pooling ORT moves into channel-blocked (NCHWc) tensors. The built-in
// table keeps ONNX's reference semantics. Use it as `Executor(graph, options,
// ortEmulationRegistry())`.
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
// ReduceMean (exec/ops/ort_float.cpp), and adds com.microsoft BiasGelu and QuickGelu. Softmax
// and Erf already compute as ORT does in the built-in table (exec/ops/mlas_ops.h). The ops keep
// their facts; `registry` must hold them.
void registerOrtFloatOps(OpRegistry& registry);

// Replaces LayerNormalization with ORT's kernel (MLAS's AVX2 one, or a Welford loop for rows
// under 8) at every opset, and adds com.microsoft SkipLayerNormalization and
// SimplifiedLayerNormalization in both domains ORT's graphs use (exec/ops/ort_layer_norm.cpp).
void registerOrtLayerNormOps(OpRegistry& registry);

// Replaces Conv, Gemm and GlobalAveragePool with MLAS's float arithmetic and adds com.microsoft
// FusedConv (exec/ops/ort_float_mlas.cpp): what ORT runs between the DequantizeLinear and
// QuantizeLinear of a QDQ model it did not fuse into integer kernels.
void registerOrtMlasFloatOps(OpRegistry& registry);

// Adds com.microsoft.nchwc's ReorderInput, ReorderOutput and pools, as values on NCHW tensors
// (exec/ops/ort_nchwc.cpp): what ORT's NCHWc layout transformer makes of pooling.
void registerOrtNchwcOps(OpRegistry& registry);

// ORT's intra-op thread count, which decides how MLAS splits a batch of one (and a few GEMMs)
// over threads and so where it cuts K. Verify sets it to the count it runs ORT with; unset (0),
// qforge's own thread count.
void setOrtIntraOpThreads(int threads);
int ortIntraOpThreads();

}  // namespace qforge
