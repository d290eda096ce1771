#include "ir/dtype.h"

#include "core/error.h"

namespace qforge {

std::string dtypeName(DType dtype) {
  switch (dtype) {
    case DType::Undefined:
      return "undefined";
    case DType::Float:
      return "float32";
    case DType::UInt8:
      return "uint8";
    case DType::Int8:
      return "int8";
    case DType::UInt16:
      return "uint16";
    case DType::Int16:
      return "int16";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::String:
      return "string";
    case DType::Bool:
      return "bool";
    case DType::Float16:
      return "float16";
    case DType::Double:
      return "float64";
    case DType::UInt32:
      return "uint32";
    case DType::UInt64:
      return "uint64";
    case DType::Complex64:
      return "complex64";
    case DType::Complex128:
      return "complex128";
    case DType::BFloat16:
      return "bfloat16";
  }
  return "dtype(" + std::to_string(static_cast<int>(dtype)) + ")";
}

bool hasScalarType(DType dtype) {
  switch (dtype) {
    case DType::Float:
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::Bool:
    case DType::Float16:
    case DType::Double:
    case DType::Complex64:
    case DType::Complex128:
    case DType::BFloat16:
      return true;
    default:
      return false;
  }
}

c10::ScalarType toScalarType(DType dtype) {
  switch (dtype) {
    case DType::Float:
      return c10::kFloat;
    case DType::UInt8:
      return c10::kByte;
    case DType::Int8:
      return c10::kChar;
    case DType::Int16:
      return c10::kShort;
    case DType::Int32:
      return c10::kInt;
    case DType::Int64:
      return c10::kLong;
    case DType::Bool:
      return c10::kBool;
    case DType::Float16:
      return c10::kHalf;
    case DType::Double:
      return c10::kDouble;
    case DType::Complex64:
      return c10::kComplexFloat;
    case DType::Complex128:
      return c10::kComplexDouble;
    case DType::BFloat16:
      return c10::kBFloat16;
    default:
      throw Error("element type " + dtypeName(dtype) +
                  " has no tensor type in qforge's runtime; convert it to a supported type");
  }
}

DType fromScalarType(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return DType::Float;
    case c10::kByte:
      return DType::UInt8;
    case c10::kChar:
      return DType::Int8;
    case c10::kShort:
      return DType::Int16;
    case c10::kInt:
      return DType::Int32;
    case c10::kLong:
      return DType::Int64;
    case c10::kBool:
      return DType::Bool;
    case c10::kHalf:
      return DType::Float16;
    case c10::kDouble:
      return DType::Double;
    case c10::kComplexFloat:
      return DType::Complex64;
    case c10::kComplexDouble:
      return DType::Complex128;
    case c10::kBFloat16:
      return DType::BFloat16;
    default:
      throw Error(std::string("tensor type ") + c10::toString(type) + " has no ONNX equivalent");
  }
}

}  // namespace qforge
