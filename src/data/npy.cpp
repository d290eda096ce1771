#include "data/npy.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <numeric>

#include "core/error.h"

namespace qforge::data {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct DtypeCode {
  const char* code;  // without the byte-order character
  at::ScalarType type;
};
constexpr DtypeCode kDtypes[] = {
    {"f4", at::kFloat}, {"f8", at::kDouble}, {"f2", at::kHalf},
    {"u1", at::kByte},  {"i1", at::kChar},   {"i2", at::kShort},
    {"i4", at::kInt},   {"i8", at::kLong},   {"b1", at::kBool},
};

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += std::to_string(shape[i]);
    if (i + 1 < shape.size() || shape.size() == 1) s += ",";
    if (i + 1 < shape.size()) s += " ";
  }
  return s + ")";
}

// The value text after `'key':` in the header dict, up to the next top-level comma.
std::string headerField(const std::string& header, const std::string& key,
                        const std::string& path) {
  const size_t k = header.find("'" + key + "'");
  require(k != std::string::npos, "'" + path + "': .npy header has no '" + key + "' field");
  size_t pos = header.find(':', k);
  require(pos != std::string::npos, "'" + path + "': malformed .npy header");
  ++pos;
  while (pos < header.size() && header[pos] == ' ')
    ++pos;
  if (header[pos] == '(') {
    const size_t end = header.find(')', pos);
    require(end != std::string::npos, "'" + path + "': malformed .npy shape");
    return header.substr(pos, end - pos + 1);
  }
  const size_t end = header.find_first_of(",}", pos);
  return header.substr(pos, end - pos);
}

}  // namespace

void writeNpy(const std::string& path, const at::Tensor& tensor) {
  const at::Tensor t = tensor.cpu().contiguous();
  const std::string header = npyHeader(t.scalar_type(), t.sizes().vec());
  std::ofstream out(path, std::ios::binary);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(t.data_ptr()),
            static_cast<std::streamsize>(t.numel() * t.element_size()));
  if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
}

std::string npyHeader(at::ScalarType dtype, const std::vector<int64_t>& shape) {
  std::string code;
  for (const auto& d : kDtypes) {
    if (d.type == dtype) code = d.code;
  }
  require(!code.empty(), std::string("cannot write dtype ") + c10::toString(dtype) + " to .npy");
  const char order = (code == "u1" || code == "i1" || code == "b1") ? '|' : '<';
  std::string dict = "{'descr': '" + std::string(1, order) + code +
                     "', 'fortran_order': False, 'shape': " + shapeString(shape) + ", }";
  // Magic (6) + version (2) + length (2) + dict + newline, padded to a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

NpyFile::NpyFile(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::fseek(file_, 0, SEEK_END);
  const int64_t size = std::ftell(file_);
  std::fseek(file_, 0, SEEK_SET);
  parseHeaderOrClose(size);
}

NpyFile::NpyFile(std::FILE* file, int64_t offset, int64_t length, std::string name)
    : path_(std::move(name)), file_(file) {
  data_offset_ = offset;
  std::fseek(file_, offset, SEEK_SET);
  parseHeaderOrClose(offset + length);
}

// A constructor that throws runs no destructor: the file is closed here (a refused file leaked
// its FILE and descriptor, found by fuzzing, issue #22).
void NpyFile::parseHeaderOrClose(int64_t end) {
  try {
    parseHeader(end);
  } catch (...) {
    std::fclose(file_);
    file_ = nullptr;
    throw;
  }
}

// Reads the header at the current position (data_offset_) of file_, whose array ends by `end`.
void NpyFile::parseHeader(int64_t end) {
  const std::string& path = path_;
  char pre[10];
  require(std::fread(pre, 1, 10, file_) == 10 && std::memcmp(pre, kMagic, 6) == 0,
          "'" + path + "' is not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(pre[6]);
  require(major >= 1 && major <= 3,
          "'" + path + "': .npy format version " + std::to_string(major) + " is not supported");
  uint32_t header_len = static_cast<unsigned char>(pre[8]) |
                        (static_cast<uint32_t>(static_cast<unsigned char>(pre[9])) << 8);
  data_offset_ += 10;
  if (major >= 2) {
    unsigned char more[2];
    require(std::fread(more, 1, 2, file_) == 2, "'" + path + "': truncated .npy header");
    header_len |= (static_cast<uint32_t>(more[0]) << 16) | (static_cast<uint32_t>(more[1]) << 24);
    data_offset_ += 2;
  }
  require(header_len < (1u << 24), "'" + path + "': implausible .npy header length");
  std::string header(header_len, '\0');
  require(std::fread(header.data(), 1, header_len, file_) == header_len,
          "'" + path + "': truncated .npy header");
  data_offset_ += header_len;

  std::string descr = headerField(header, "descr", path);
  require(descr.size() >= 4 && descr.front() == '\'' && descr.back() == '\'',
          "'" + path + "': malformed .npy dtype " + descr);
  descr = descr.substr(1, descr.size() - 2);
  const char order = descr[0];
  const std::string code = descr.substr(1);
  bool found = false;
  for (const auto& d : kDtypes) {
    if (code == d.code) {
      dtype_ = d.type;
      found = true;
    }
  }
  require(found, "'" + path + "': .npy dtype '" + descr +
                     "' is not supported (float16/32/64, int8/16/32/64, uint8, bool)");
  require(order != '>' || at::elementSize(dtype_) == 1,
          "'" + path + "': big-endian .npy data ('" + descr + "') is not supported");
  require(headerField(header, "fortran_order", path) == "False",
          "'" + path + "': Fortran-ordered .npy arrays are not supported; save with C order");
  const std::string shape = headerField(header, "shape", path);
  size_t pos = 1;
  while (pos < shape.size()) {
    while (pos < shape.size() && (shape[pos] == ' ' || shape[pos] == ','))
      ++pos;
    if (pos >= shape.size() || shape[pos] == ')') break;
    size_t used = 0;
    try {
      shape_.push_back(std::stoll(shape.substr(pos), &used));
    } catch (const std::exception&) {
      throw Error("'" + path + "': malformed .npy shape " + shape);
    }
    pos += used;
  }
  // The data must be all there: catches truncated files up front, not at the last record. Dims
  // are checked first: a negative one or a product past int64_t (signed overflow) came from
  // fuzzed headers (issue #22).
  // Zero-sized dims count as 1 in the product checked: an empty [0, 2^40, 2^40] still has strides
  // past int64_t.
  int64_t need = static_cast<int64_t>(at::elementSize(dtype_));
  int64_t strides_span = need;
  for (int64_t d : shape_) {
    require(d >= 0, "'" + path + "': negative dimension in .npy shape " + shape);
    require(!__builtin_mul_overflow(need, d, &need) &&
                !__builtin_mul_overflow(strides_span, std::max<int64_t>(d, 1), &strides_span) &&
                strides_span <= (int64_t{1} << 60),
            "'" + path + "': .npy shape " + shape + " holds more bytes than any file can");
  }
  need += data_offset_;
  require(end >= need, "'" + path + "': file has " + std::to_string(end) +
                           " bytes, its header (shape " + shape + ") needs " +
                           std::to_string(need));
}

NpyFile::~NpyFile() {
  if (file_) std::fclose(file_);
}

at::Tensor NpyFile::readBytes(int64_t offset, std::vector<int64_t> shape) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype_));
  const size_t bytes = t.numel() * at::elementSize(dtype_);
  if (bytes == 0) return t;
  const ssize_t got = ::pread(fileno(file_), t.data_ptr(), bytes, offset);
  require(got == static_cast<ssize_t>(bytes),
          "cannot read '" + path_ + "': " + (got < 0 ? std::strerror(errno) : "short read"));
  return t;
}

at::Tensor NpyFile::readAll() {
  return readBytes(data_offset_, shape_);
}

at::Tensor NpyFile::readRecord(int64_t index) {
  require(!shape_.empty(), "'" + path_ + "' holds a scalar, not an array of samples");
  require(index >= 0 && index < shape_[0], "'" + path_ + "': record " + std::to_string(index) +
                                               " is out of range (" + std::to_string(shape_[0]) +
                                               " records)");
  std::vector<int64_t> record(shape_.begin() + 1, shape_.end());
  const int64_t record_numel =
      std::accumulate(record.begin(), record.end(), int64_t{1}, std::multiplies<int64_t>());
  const int64_t record_bytes = record_numel * static_cast<int64_t>(at::elementSize(dtype_));
  return readBytes(data_offset_ + index * record_bytes, record);
}

NpyWriter::NpyWriter(const std::string& path, at::ScalarType dtype, std::vector<int64_t> shape)
    : path_(path),
      tmp_path_(path + ".tmp." + std::to_string(::getpid())),
      dtype_(dtype),
      shape_(std::move(shape)) {
  require(!shape_.empty(), "a .npy file of rows needs a shape of rank >= 1");
  const std::string header = npyHeader(dtype_, shape_);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  require(std::fwrite(header.data(), 1, header.size(), file_) == header.size(),
          "cannot write '" + path + "': " + std::strerror(errno));
}

NpyWriter::~NpyWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void NpyWriter::append(const at::Tensor& rows) {
  require(file_ != nullptr, "'" + path_ + "' is already closed");
  std::vector<int64_t> row_shape(shape_.begin() + 1, shape_.end());
  require(rows.dim() == static_cast<int64_t>(shape_.size()) &&
              rows.sizes().slice(1).vec() == row_shape && rows.scalar_type() == dtype_,
          "'" + path_ + "': rows of shape " + c10::str(rows.sizes()) + " do not fit " +
              shapeString(shape_));
  require(rows_written_ + rows.size(0) <= shape_[0],
          "'" + path_ + "': more than " + std::to_string(shape_[0]) + " rows");
  at::Tensor c = rows.contiguous();
  const size_t bytes = c.numel() * at::elementSize(dtype_);
  require(std::fwrite(c.data_ptr(), 1, bytes, file_) == bytes,
          "cannot write '" + path_ + "': " + std::strerror(errno));
  rows_written_ += rows.size(0);
}

void NpyWriter::close() {
  require(file_ != nullptr, "'" + path_ + "' is already closed");
  require(rows_written_ == shape_[0], "'" + path_ + "': " + std::to_string(rows_written_) + " of " +
                                          std::to_string(shape_[0]) + " rows written");
  const bool ok = std::fflush(file_) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok || std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_path_.c_str());
    throw Error("cannot write '" + path_ + "': " + std::strerror(err));
  }
}

}  // namespace qforge::data
