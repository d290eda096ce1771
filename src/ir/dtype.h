// Element types, numbered as ONNX's TensorProto.DataType so import/export is a plain cast.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace qforge {

enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

std::string dtypeName(DType dtype);

// True when ATen has a tensor type for `dtype` (UInt16/32/64 and String have none in
// libtorch 1.13).
bool hasScalarType(DType dtype);

// Throws qforge::Error naming the dtype when ATen cannot hold it.
c10::ScalarType toScalarType(DType dtype);
DType fromScalarType(c10::ScalarType type);

}  // namespace qforge
