#include "data/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"

namespace qforge::data {

namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;

uint64_t little(const std::string& bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Opens `path` and reads `length` bytes at `offset`; throws naming the archive when short.
class ZipReader {
 public:
  explicit ZipReader(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) throw Error("cannot open '" + path + "': " + std::strerror(errno));
    std::fseek(file_, 0, SEEK_END);
    size_ = std::ftell(file_);
  }
  ~ZipReader() { std::fclose(file_); }
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  int64_t size() const { return size_; }
  std::string read(int64_t offset, int64_t length) const {
    require(offset >= 0 && length >= 0 && offset + length <= size_,
            "'" + path_ + "': truncated .npz (zip) archive");
    std::string out(static_cast<size_t>(length), '\0');
    std::fseek(file_, offset, SEEK_SET);
    require(std::fread(out.data(), 1, out.size(), file_) == out.size(),
            "cannot read '" + path_ + "': " + std::strerror(errno));
    return out;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t size_ = 0;
};

// Where the central directory starts and how many entries it has, from the end record (zip64
// when the 32-bit fields overflowed, as numpy's writer may force).
std::pair<int64_t, int64_t> centralDirectory(const ZipReader& zip, const std::string& path) {
  const int64_t tail = std::min<int64_t>(zip.size(), 22 + 65535);
  const std::string bytes = zip.read(zip.size() - tail, tail);
  for (int64_t at = tail - 22; at >= 0; --at) {
    if (little(bytes, at, 4) != kEndOfDirectory) continue;
    int64_t entries = static_cast<int64_t>(little(bytes, at + 10, 2));
    int64_t offset = static_cast<int64_t>(little(bytes, at + 16, 4));
    if ((entries == 0xffff || offset == 0xffffffff) && at >= 20 &&
        little(bytes, at - 20, 4) == kZip64EndLocator) {
      const int64_t end64 = static_cast<int64_t>(little(bytes, at - 12, 8));
      const std::string record = zip.read(end64, 56);
      require(little(record, 0, 4) == kZip64End, "'" + path + "': malformed zip64 end record");
      entries = static_cast<int64_t>(little(record, 32, 8));
      offset = static_cast<int64_t>(little(record, 48, 8));
    }
    return {offset, entries};
  }
  throw Error("'" + path + "' is not an .npz file (no zip end-of-directory record)");
}

// The 64-bit sizes and offset of a zip64 "extra" field, for the 32-bit fields that are full.
void readZip64Extra(const std::string& extra, uint64_t& size, uint64_t& compressed,
                    uint64_t& offset) {
  size_t at = 0;
  while (at + 4 <= extra.size()) {
    const uint64_t id = little(extra, at, 2);
    const size_t length = little(extra, at + 2, 2);
    size_t field = at + 4;
    if (id == 0x0001) {
      for (uint64_t* v : {&size, &compressed, &offset}) {
        if (*v == 0xffffffff && field + 8 <= at + 4 + length && field + 8 <= extra.size()) {
          *v = little(extra, field, 8);
          field += 8;
        }
      }
      return;
    }
    at += 4 + length;
  }
}

// Inflates a raw-deflate member into an anonymous temporary file, checking its size and CRC.
std::FILE* inflateMember(const ZipReader& zip, int64_t offset, int64_t compressed, int64_t size,
                         uint32_t crc, const std::string& name) {
  // Owned until returned, and the zlib stream ended, on every way out: a throwing read of a
  // truncated member leaked both (found by fuzzing, issue #22).
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::tmpfile(), &std::fclose);
  if (!out) throw Error("cannot create a temporary file for " + name + ": " + std::strerror(errno));
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
    throw Error("cannot inflate " + name + ": zlib refused to start");
  }
  struct EndInflate {
    z_stream& z;
    ~EndInflate() { inflateEnd(&z); }
  } end_inflate{z};
  uLong check = crc32(0, nullptr, 0);
  int64_t written = 0;
  int status = Z_OK;
  std::string chunk, buffer(1 << 16, '\0');
  for (int64_t done = 0; status != Z_STREAM_END;) {
    if (z.avail_in == 0 && done < compressed) {
      chunk = zip.read(offset + done, std::min<int64_t>(1 << 16, compressed - done));
      done += static_cast<int64_t>(chunk.size());
      z.next_in = reinterpret_cast<Bytef*>(chunk.data());
      z.avail_in = static_cast<uInt>(chunk.size());
    }
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    status = inflate(&z, Z_NO_FLUSH);
    const size_t got = buffer.size() - z.avail_out;
    if ((status != Z_OK && status != Z_STREAM_END) ||
        (got == 0 && status == Z_OK && z.avail_in == 0 && done >= compressed)) {
      throw Error(name + ": corrupt deflate data");
    }
    check = crc32(check, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(got));
    written += static_cast<int64_t>(got);
    if (std::fwrite(buffer.data(), 1, got, out.get()) != got) {
      throw Error("cannot write the inflated " + name + ": " + std::strerror(errno));
    }
  }
  if (written != size || check != crc || std::fflush(out.get()) != 0) {
    throw Error(name + ": inflated data does not match its size and CRC (corrupt archive)");
  }
  return out.release();
}

}  // namespace

NpzFile::NpzFile(const std::string& path) : path_(path) {
  const ZipReader zip(path);
  const auto [directory, entries] = centralDirectory(zip, path);
  int64_t at = directory;
  for (int64_t i = 0; i < entries; ++i) {
    const std::string entry = zip.read(at, 46);
    require(little(entry, 0, 4) == kDirectoryEntry,
            "'" + path + "': malformed zip central directory");
    const size_t name_length = little(entry, 28, 2);
    const size_t extra_length = little(entry, 30, 2);
    const size_t comment_length = little(entry, 32, 2);
    Member m;
    m.method = static_cast<uint16_t>(little(entry, 10, 2));
    m.crc = static_cast<uint32_t>(little(entry, 16, 4));
    uint64_t compressed = little(entry, 20, 4), size = little(entry, 24, 4);
    uint64_t local = little(entry, 42, 4);
    m.name = zip.read(at + 46, static_cast<int64_t>(name_length));
    readZip64Extra(zip.read(at + 46 + name_length, static_cast<int64_t>(extra_length)), size,
                   compressed, local);
    m.compressed_size = static_cast<int64_t>(compressed);
    m.size = static_cast<int64_t>(size);
    m.local_header = static_cast<int64_t>(local);
    at += 46 + static_cast<int64_t>(name_length + extra_length + comment_length);
    if (!m.name.empty() && m.name.back() == '/') continue;  // a directory entry
    require(m.method == 0 || m.method == 8,
            "'" + path + "': member '" + m.name + "' uses zip compression method " +
                std::to_string(m.method) + "; only stored and deflated .npz members are read " +
                "(numpy.savez / numpy.savez_compressed)");
    const std::string name =
        endsWith(m.name, ".npy") ? m.name.substr(0, m.name.size() - 4) : m.name;
    names_.push_back(name);
    members_.push_back(m);
  }
  require(!members_.empty(), "'" + path + "' holds no arrays (empty .npz)");
}

bool NpzFile::contains(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

std::unique_ptr<NpyFile> NpzFile::open(const std::string& name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) {
    throw Error("'" + path_ + "' has no array '" + name + "' (it has: " + join(names_) + ")");
  }
  const Member& m = members_[static_cast<size_t>(it - names_.begin())];
  const std::string what = "'" + path_ + "' array '" + name + "'";
  const ZipReader zip(path_);
  const std::string local = zip.read(m.local_header, 30);
  require(little(local, 0, 4) == kLocalHeader, what + ": malformed zip local header");
  const int64_t data = m.local_header + 30 + static_cast<int64_t>(little(local, 26, 2)) +
                       static_cast<int64_t>(little(local, 28, 2));
  if (m.method == 0) {
    require(data + m.size <= zip.size(), what + ": truncated archive");
    std::FILE* file = std::fopen(path_.c_str(), "rb");
    if (!file) throw Error("cannot open '" + path_ + "': " + std::strerror(errno));
    return std::make_unique<NpyFile>(file, data, m.size, path_ + ":" + name);
  }
  std::FILE* inflated = inflateMember(zip, data, m.compressed_size, m.size, m.crc, what);
  return std::make_unique<NpyFile>(inflated, 0, m.size, path_ + ":" + name);
}

}  // namespace qforge::data
