#include "ir/onnx_tensor.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "core/resource_limits.h"
#include "ir/dtype.h"

namespace qforge {

namespace fs = std::filesystem;

namespace {

std::vector<int64_t> dimsOf(const onnx::TensorProto& proto, const std::string& what) {
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims)
    require(d >= 0, what + ": negative dimension in tensor shape");
  return dims;
}

// Refuses a shape whose size overflows (a fuzzed initializer's dims overflowed int64_t, issue
// #22): no tensor holds 2^60 elements. Zero-sized dimensions count as 1 here, as in ATen's strides:
// [0, 2^40, 2^40] holds nothing, but its strides overflow and ATen's reshape aborted on them.
int64_t elementCount(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t strides_span = 1;
  bool empty = false;
  for (int64_t d : dims) {
    empty = empty || d == 0;
    require(!__builtin_mul_overflow(strides_span, std::max<int64_t>(d, 1), &strides_span) &&
                strides_span <= (int64_t{1} << 60),
            what + ": tensor shape has more elements than any tensor can hold");
  }
  return empty ? 0 : strides_span;
}

// An external-data offset or length: a decimal integer (std::stoll threw std::invalid_argument at
// anything else, an internal error).
int64_t externalDataNumber(const std::string& text, const std::string& what,
                           const std::string& key) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(error == std::errc() && end == text.data() + text.size() && !text.empty(),
          what + ": external data '" + key + "' is not an integer");
  return value;
}

// Reads the bytes an external-data tensor points at, refusing paths outside `base_dir`.
std::string readExternalData(const onnx::TensorProto& proto, const std::string& base_dir,
                             const std::string& what) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() == "offset") offset = externalDataNumber(entry.value(), what, "offset");
    if (entry.key() == "length") length = externalDataNumber(entry.value(), what, "length");
  }
  require(!location.empty(), what + ": external data has no 'location'");
  fs::path rel(location);
  const fs::path base = fs::weakly_canonical(fs::absolute(base_dir.empty() ? "." : base_dir));
  const fs::path target = fs::weakly_canonical(base / rel);
  auto mismatch = std::mismatch(base.begin(), base.end(), target.begin(), target.end());
  require(!rel.is_absolute() && mismatch.first == base.end(),
          what + ": external data location '" + location +
              "' points outside the model's directory; refusing to read it (move the data file "
              "next to the model and use a relative name)");
  std::ifstream in(target, std::ios::binary);
  require(static_cast<bool>(in), what + ": cannot open external data file '" + target.string() +
                                     "'; keep it next to the model");
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (length < 0 && offset >= 0 && offset <= size) length = size - offset;
  int64_t end = 0;  // offset + length, without overflowing on a crafted offset
  const bool overflow = __builtin_add_overflow(offset, length, &end);
  require(offset >= 0 && length >= 0 && !overflow && end <= size,
          what + ": external data range [" + std::to_string(offset) + ", " +
              (overflow ? std::string("overflow") : std::to_string(end)) +
              ") is past the end of '" + location + "' (" + std::to_string(size) +
              " bytes); the data file is truncated or does not match");
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  return bytes;
}

template <typename Repeated>
at::Tensor fromRepeated(const Repeated& field, const std::vector<int64_t>& dims,
                        c10::ScalarType field_type, c10::ScalarType target) {
  using T = typename Repeated::value_type;
  std::vector<T> copy(field.begin(), field.end());
  at::Tensor t = at::from_blob(copy.data(), {static_cast<int64_t>(copy.size())},
                               at::TensorOptions().dtype(field_type))
                     .clone();
  return t.to(target).reshape(dims);
}

}  // namespace

at::Tensor tensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir,
                           const std::string& what) {
  const DType dtype = static_cast<DType>(proto.data_type());
  require(hasScalarType(dtype),
          what + ": element type " + dtypeName(dtype) + " is not supported by qforge's runtime");
  const c10::ScalarType type = toScalarType(dtype);
  const std::vector<int64_t> dims = dimsOf(proto, what);
  requireTensorBytes(tensorBytes(dims, static_cast<int64_t>(c10::elementSize(type))), what);
  const int64_t count = elementCount(dims, what);
  const auto options = at::TensorOptions().dtype(type);

  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  if (external || proto.has_raw_data()) {
    const std::string bytes = external ? readExternalData(proto, base_dir, what) : proto.raw_data();
    const int64_t expected = count * static_cast<int64_t>(c10::elementSize(type));
    require(static_cast<int64_t>(bytes.size()) == expected,
            what + ": holds " + std::to_string(bytes.size()) +
                " bytes of data but its shape needs " + std::to_string(expected) +
                "; the tensor is corrupt");
    at::Tensor t = at::empty(dims, options);
    if (expected > 0) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    return t;
  }

  at::Tensor t;
  switch (dtype) {
    case DType::Float:
      t = fromRepeated(proto.float_data(), {-1}, c10::kFloat, type);
      break;
    case DType::Complex64:
      t = fromRepeated(proto.float_data(), {-1, 2}, c10::kFloat, c10::kFloat);
      t = at::view_as_complex(t.contiguous());
      break;
    case DType::Double:
      t = fromRepeated(proto.double_data(), {-1}, c10::kDouble, type);
      break;
    case DType::Complex128:
      t = at::view_as_complex(
          fromRepeated(proto.double_data(), {-1, 2}, c10::kDouble, c10::kDouble).contiguous());
      break;
    case DType::Int64:
      t = fromRepeated(proto.int64_data(), {-1}, c10::kLong, type);
      break;
    case DType::Float16:
    case DType::BFloat16: {
      // int32_data holds the 16-bit patterns.
      at::Tensor bits = fromRepeated(proto.int32_data(), {-1}, c10::kInt, c10::kShort);
      t = bits.view(type);
      break;
    }
    case DType::Int32:
    case DType::Int16:
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
      t = fromRepeated(proto.int32_data(), {-1}, c10::kInt, type);
      break;
    default:
      throw Error(what + ": element type " + dtypeName(dtype) + " is not supported");
  }
  require(t.numel() == count, what + ": holds " + std::to_string(t.numel()) +
                                  " elements but its shape needs " + std::to_string(count));
  return t.reshape(dims).contiguous();
}

void tensorToProto(const at::Tensor& tensor, onnx::TensorProto* proto) {
  at::Tensor t = tensor.detach().contiguous();
  proto->clear_dims();
  for (int64_t d : t.sizes())
    proto->add_dims(d);
  proto->set_data_type(static_cast<int32_t>(fromScalarType(t.scalar_type())));
  proto->set_raw_data(
      std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.nbytes())));
}

at::Tensor readTensorProtoFile(const std::string& path) {
  const std::string bytes = readFile(path);
  onnx::TensorProto proto;
  require(proto.ParseFromString(bytes), "'" + path + "' is not a serialized ONNX TensorProto");
  return tensorFromProto(proto, fs::path(path).parent_path().string(),
                         "tensor file '" + path + "'");
}

}  // namespace qforge
