// Helpers for data tests: write tiny IDX, .npy, PNG files byte by byte, so the readers are
// checked against files whose content the test knows exactly.
#pragma once

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

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
