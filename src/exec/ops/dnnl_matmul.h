// Float MatMul through oneDNN's own API (the library behind exec/ops/dnnl_conv.h). Through ATen,
// a batch of small products (attention's Q·Kᵀ and P·V: hundreds of 49x16 by 16x49) went to BLAS
// one matrix at a time, and a weight was re-read in its plain layout on every call; oneDNN's
// matmul runs the whole batch in one kernel and, for a weight seen again unchanged, keeps it
// reordered into the layout that kernel reads fastest.
#pragma once

#include <ATen/core/Tensor.h>

#include <any>

namespace qforge::ops {

// True when dnnlMatMul computes a @ b: float32, no gradient wanted through it, and either b is
// 2-D (a's leading dims are rows of one product) or both have the same rank and the same batch
// dims. Other shapes (1-D operands, broadcast batches) stay with ATen.
bool dnnlMatMulApplies(const at::Tensor& a, const at::Tensor& b);

// a @ b as ONNX's MatMul, the result contiguous. `state` is the node's slot kept between runs
// (OpContext::nodeState), or null to keep nothing. Throws dnnl::error when oneDNN has no kernel.
// With `bias` (b 2-D; N = b's columns float32 values, contiguous), oneDNN adds bias[j] to column
// j of each float32 product as it stores it: the same sum, rounded once, that an Add after the
// product computes, without a second pass over the result.
at::Tensor dnnlMatMul(std::any* state, const at::Tensor& a, const at::Tensor& b,
                      const at::Tensor& bias = at::Tensor());

// `c` as dnnlMatMul's bias for a product with `columns` columns and rank `rank`: a float32 tensor
// of `columns` values along its last axis whose other dims are 1, no more dims than the product
// (so adding it leaves the product's shape as it is). Undefined when it is not one.
at::Tensor asColumnBias(const at::Tensor& c, int64_t columns, int64_t rank);

}  // namespace qforge::ops
