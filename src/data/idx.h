// IDX files (the MNIST / Fashion-MNIST format), plain or gzipped, read one record at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace qforge::data {

// Byte-addressable read access to a file whose content may be gzipped. A gzipped file is
// inflated lazily into an anonymous temporary file, only as far as reads have reached, so
// memory stays constant and a `--limit`ed run inflates only the prefix it needs.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Reads exactly `n` bytes at `offset`; throws qforge::Error naming the file when it ends
  // early or cannot be read or inflated.
  void read(int64_t offset, int64_t n, void* out);
  bool gzipped() const { return gzip_ != nullptr; }

 private:
  struct Gzip;
  void inflateUpTo(int64_t end);

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<Gzip> gzip_;
};

// An IDX file of unsigned bytes: header (magic, dims) then records along the first dim.
class IdxFile {
 public:
  explicit IdxFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t count() const { return dims_.empty() ? 0 : dims_[0]; }
  int64_t recordBytes() const { return record_bytes_; }
  // Copies record `index` (recordBytes() bytes) to `out`.
  void read(int64_t index, uint8_t* out);

 private:
  std::string path_;
  ByteSource source_;
  std::vector<int64_t> dims_;
  int64_t record_bytes_ = 1;
  int64_t data_offset_ = 0;
};

}  // namespace qforge::data
