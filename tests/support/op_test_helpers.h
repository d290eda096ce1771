// Helpers shared by the op unit tests (tests/exec/ops): tensor makers, running a single op, and
// the tensor and error expectations.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "support/single_op.h"

namespace qforge::testing {

// 1-D tensors of the given values, or reshaped to `shape`.
at::Tensor f32(std::vector<float> values);
at::Tensor f32(std::vector<float> values, at::IntArrayRef shape);
at::Tensor i64(std::vector<int64_t> values);
// Integer tensors of the quantized types, shaped, and 0-d scales / zero points.
at::Tensor u8(const std::vector<int64_t>& values, at::IntArrayRef shape);
at::Tensor i8(const std::vector<int64_t>& values, at::IntArrayRef shape);
at::Tensor i32(const std::vector<int64_t>& values, at::IntArrayRef shape);
at::Tensor scalarF32(float v);
at::Tensor scalarU8(int64_t v);
at::Tensor scalarI8(int64_t v);

// An INTS attribute.
Attribute ints(const std::string& name, std::vector<int64_t> values);

// Runs `op` and returns its first output.
at::Tensor run1(const SingleOp& op);

// Same dtype, same shape and identical elements.
void expectTensorEqual(const at::Tensor& actual, const at::Tensor& expected);

// Same dtype and shape; floating-point elements within at::allclose(rtol, atol), any other
// dtype identical.
void expectTensorNear(const at::Tensor& actual, const at::Tensor& expected, double rtol = 1e-5,
                      double atol = 1e-6);

// `actual` has `shape` and each element (read as double, whatever the dtype) is within `tol` of
// the listed value.
void expectValuesNear(const at::Tensor& actual, std::vector<int64_t> shape,
                      std::vector<double> values, double tol = 1e-5);

// Runs `op` expecting a qforge::Error whose message contains every one of `parts`.
void expectError(const SingleOp& op, const std::vector<std::string>& parts);

// Runs `op` expecting a qforge::Error that names the node as "node 'op' (<op_type>)" (see
// single_op.h) and contains `what`.
void expectNodeError(const SingleOp& op, const std::string& what);

}  // namespace qforge::testing
