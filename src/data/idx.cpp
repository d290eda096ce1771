#include "data/idx.h"

#include <fcntl.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/resource_limits.h"
#include "data/model_sources.h"

namespace qforge::data {

// zlib ships inside libprotobuf (which qforge links anyway): its gzip stream saves a dependency.
struct ByteSource::Gzip {
  explicit Gzip(int fd) : file(fd), stream(&file, google::protobuf::io::GzipInputStream::GZIP) {}
  ~Gzip() {
    if (spill) std::fclose(spill);
  }
  google::protobuf::io::FileInputStream file;
  google::protobuf::io::GzipInputStream stream;
  std::FILE* spill = nullptr;  // anonymous temporary file with the inflated prefix
  int64_t inflated = 0;
  bool finished = false;
};

ByteSource::ByteSource(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error("'" + path + "' is a directory; give the path of a file");
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  if (::pread(fd_, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    gzip_ = std::make_unique<Gzip>(fd_);
    gzip_->spill = std::tmpfile();
    if (!gzip_->spill) {
      throw Error("cannot create a temporary file to inflate '" + path +
                  "': " + std::strerror(errno));
    }
  }
}

ByteSource::~ByteSource() {
  gzip_.reset();
  if (fd_ >= 0) ::close(fd_);
}

void ByteSource::inflateUpTo(int64_t end) {
  Gzip& g = *gzip_;
  while (g.inflated < end && !g.finished) {
    const void* data = nullptr;
    int size = 0;
    if (!g.stream.Next(&data, &size)) {
      if (g.stream.ZlibErrorCode() < 0) {
        const char* msg = g.stream.ZlibErrorMessage();
        throw Error("cannot inflate '" + path_ + "': " + (msg ? msg : "corrupt gzip data"));
      }
      g.finished = true;
      break;
    }
    if (size <= 0) continue;
    if (::pwrite(fileno(g.spill), data, size, g.inflated) != size) {
      throw Error("cannot write the inflated copy of '" + path_ +
                  "' to a temporary file: " + std::strerror(errno));
    }
    g.inflated += size;
  }
}

void ByteSource::read(int64_t offset, int64_t n, void* out) {
  int fd = fd_;
  if (gzip_) {
    inflateUpTo(offset + n);
    fd = fileno(gzip_->spill);
  }
  auto* dst = static_cast<char*>(out);
  int64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, dst + done, n - done, offset + done);
    if (got < 0) throw Error("cannot read '" + path_ + "': " + std::strerror(errno));
    if (got == 0) {
      throw Error("'" + path_ + "' ends early: " + std::to_string(offset + done) +
                  " bytes of data, " + std::to_string(offset + n) + " needed (truncated file?)");
    }
    done += got;
  }
}

IdxFile::IdxFile(const std::string& path) : path_(path), source_(path) {
  unsigned char magic[4];
  try {
    source_.read(0, 4, magic);
  } catch (const Error&) {
    throw Error("'" + path + "' is not an IDX file (shorter than its 4-byte magic)");
  }
  require(magic[0] == 0 && magic[1] == 0 && magic[3] >= 1 && magic[3] <= 4,
          "'" + path + "' is not an IDX file (bad magic number)");
  require(magic[2] == 0x08, "'" + path + "': IDX element type code " + std::to_string(magic[2]) +
                                " is not supported (only unsigned bytes, code 8)");
  const int ndim = magic[3];
  std::vector<unsigned char> header(4 * ndim);
  source_.read(4, 4 * ndim, header.data());
  // Dims are up to 2^32 - 1 each: their product is checked before it can overflow (a fuzzed
  // header overflowed int64_t, issue #22). The data must fit a file offset.
  constexpr int64_t kMaxBytes = int64_t{1} << 48;
  int64_t total = 1;
  for (int i = 0; i < ndim; ++i) {
    const unsigned char* b = &header[4 * i];
    dims_.push_back((int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3]);
    const bool overflow =
        (i > 0 && (__builtin_mul_overflow(record_bytes_, dims_.back(), &record_bytes_) ||
                   record_bytes_ > kMaxBytes)) ||
        __builtin_mul_overflow(total, dims_.back(), &total) || total > kMaxBytes;
    require(!overflow, "'" + path + "': IDX dims " + shapeText(dims_) +
                           " hold more bytes than any file can (corrupt header)");
  }
  // A record is read whole into a float tensor: a header declaring a huge one is refused before
  // a gzipped file is inflated that far.
  requireTensorBytes(
      tensorBytes(std::vector<int64_t>(dims_.begin() + (dims_.empty() ? 0 : 1), dims_.end()),
                  sizeof(float)),
      "one record of '" + path + "' (IDX dims " + shapeText(dims_) + ")");
  data_offset_ = 4 + 4 * ndim;
  // An uncompressed file's size is known now; a gzipped one is checked as it is inflated.
  if (!source_.gzipped() && count() > 0) {
    uint8_t last_byte;
    source_.read(data_offset_ + count() * record_bytes_ - 1, 1, &last_byte);
  }
}

void IdxFile::read(int64_t index, uint8_t* out) {
  require(index >= 0 && index < count(), "'" + path_ + "': record " + std::to_string(index) +
                                             " is out of range (" + std::to_string(count()) +
                                             " records)");
  source_.read(data_offset_ + index * record_bytes_, record_bytes_, out);
}

}  // namespace qforge::data
