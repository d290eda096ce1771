// Helpers for data tests: write tiny IDX, .npy, PNG files byte by byte, so the readers are
// checked against files whose content the test knows exactly.
#pragma once

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/onnx_builder.h"

namespace qforge::testing {

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string gzipped(const std::string& bytes) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream sink(&out);
    google::protobuf::io::GzipOutputStream::Options o;
    o.format = google::protobuf::io::GzipOutputStream::GZIP;
    google::protobuf::io::GzipOutputStream gz(&sink, o);
    void* data;
    int size;
    size_t done = 0;
    while (done < bytes.size() && gz.Next(&data, &size)) {
      const size_t n = std::min<size_t>(size, bytes.size() - done);
      std::memcpy(data, bytes.data() + done, n);
      done += n;
      if (static_cast<int>(n) < size) gz.BackUp(size - static_cast<int>(n));
    }
    gz.Close();
  }
  return out;
}

// An IDX file of unsigned bytes with the given dims, big-endian as the format says.
inline std::string idxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    s += static_cast<char>(d >> 24);
    s += static_cast<char>(d >> 16);
    s += static_cast<char>(d >> 8);
    s += static_cast<char>(d);
  }
  s.append(data.begin(), data.end());
  return s;
}

inline std::string littleEndian(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i)
    s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// Raw deflate (no zlib header), as zip members hold it.
inline std::string rawDeflate(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct ZipMember {
  std::string name;
  std::string bytes;
  uint16_t method = 0;  // 0 stored, 8 deflated; anything else is written stored but labelled so
};

// A zip archive laid out as Python's zipfile writes numpy's .npz: with `zip64`, every local
// header has 0xFFFFFFFF sizes and a zip64 extra field (numpy forces zip64), the central
// directory the real sizes.
inline std::string zipBytes(const std::vector<ZipMember>& members, bool zip64 = false) {
  std::string out, directory;
  for (const ZipMember& m : members) {
    const std::string data = m.method == 8 ? rawDeflate(m.bytes) : m.bytes;
    const uint32_t crc =
        crc32(0, reinterpret_cast<const Bytef*>(m.bytes.data()), static_cast<uInt>(m.bytes.size()));
    const uint64_t offset = out.size();
    const std::string extra = zip64 ? littleEndian(1, 2) + littleEndian(16, 2) +
                                          littleEndian(m.bytes.size(), 8) +
                                          littleEndian(data.size(), 8)
                                    : "";
    out += littleEndian(0x04034b50, 4) + littleEndian(zip64 ? 45 : 20, 2) + littleEndian(0, 2) +
           littleEndian(m.method, 2) + littleEndian(0, 4) + littleEndian(crc, 4) +
           littleEndian(zip64 ? 0xffffffff : data.size(), 4) +
           littleEndian(zip64 ? 0xffffffff : m.bytes.size(), 4) + littleEndian(m.name.size(), 2) +
           littleEndian(extra.size(), 2) + m.name + extra + data;
    directory += littleEndian(0x02014b50, 4) + littleEndian(20, 2) + littleEndian(20, 2) +
                 littleEndian(0, 2) + littleEndian(m.method, 2) + littleEndian(0, 4) +
                 littleEndian(crc, 4) + littleEndian(data.size(), 4) +
                 littleEndian(m.bytes.size(), 4) + littleEndian(m.name.size(), 2) +
                 littleEndian(0, 2) + littleEndian(0, 2) + littleEndian(0, 2) + littleEndian(0, 2) +
                 littleEndian(0, 4) + littleEndian(offset, 4) + m.name;
  }
  const uint64_t directory_offset = out.size();
  out += directory;
  out += littleEndian(0x06054b50, 4) + littleEndian(0, 2) + littleEndian(0, 2) +
         littleEndian(members.size(), 2) + littleEndian(members.size(), 2) +
         littleEndian(directory.size(), 4) + littleEndian(directory_offset, 4) + littleEndian(0, 2);
  return out;
}

// A version-1.0 .npy file with a hand-written header dict.
inline std::string npyBytes(const std::string& dict, const void* data, size_t bytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 16 != 0)
    header += ' ';
  header += '\n';
  std::string s("\x93NUMPY\x01\x00", 8);
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>(header.size() >> 8);
  s += header;
  s.append(static_cast<const char*>(data), bytes);
  return s;
}

// Runs `f`, expects a qforge::Error whose message contains every one of `parts`.
template <typename F>
void expectErrorWith(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a qforge::Error mentioning " << parts.front();
  } catch (const Error& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
    }
  }
}

}  // namespace qforge::testing
