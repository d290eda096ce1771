// NumPy .npy files: a reader that loads one record (a slice along the first axis) at a time, so
// a stacked array of any size is streamed, and a writer that appends rows as they are produced.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace qforge::data {

class NpyFile {
 public:
  // Parses the header; throws qforge::Error naming `path` when the file is unreadable, not a
  // .npy file, big-endian, Fortran-ordered, of an unsupported dtype, or shorter than its header
  // says.
  explicit NpyFile(const std::string& path);
  // The .npy array occupying `length` bytes from `offset` of `file` (a member of an .npz
  // archive), named `name` in errors ("'a.npz' member 'x'"). Takes ownership of `file`.
  NpyFile(std::FILE* file, int64_t offset, int64_t length, std::string name);
  ~NpyFile();
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  at::ScalarType dtype() const { return dtype_; }

  // The whole array, in its own dtype.
  at::Tensor readAll();
  // Slice `index` along the first axis (shape()[1:]); requires rank >= 1.
  at::Tensor readRecord(int64_t index);

 private:
  void parseHeader(int64_t end);
  void parseHeaderOrClose(int64_t end);
  at::Tensor readBytes(int64_t offset, std::vector<int64_t> shape);

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<int64_t> shape_;
  at::ScalarType dtype_;
  int64_t data_offset_ = 0;
};

// Writes a .npy file of a known final shape row by row (rows along the first axis), to a
// temporary name that becomes `path` only when close() finds every row written.
class NpyWriter {
 public:
  NpyWriter(const std::string& path, at::ScalarType dtype, std::vector<int64_t> shape);
  ~NpyWriter();  // an unclosed writer removes its temporary file
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  // Appends rows: `rows` has shape [k, shape[1:]...] and the writer's dtype.
  void append(const at::Tensor& rows);
  void close();

 private:
  std::string path_, tmp_path_;
  at::ScalarType dtype_;
  std::vector<int64_t> shape_;
  std::FILE* file_ = nullptr;
  int64_t rows_written_ = 0;
};

// Writes `tensor` (any shape, a dtype npyHeader knows) as one .npy file; throws qforge::Error
// naming `path` when it cannot be written.
void writeNpy(const std::string& path, const at::Tensor& tensor);

// The header a .npy file of this dtype and shape starts with (format version 1.0).
std::string npyHeader(at::ScalarType dtype, const std::vector<int64_t>& shape);

}  // namespace qforge::data
