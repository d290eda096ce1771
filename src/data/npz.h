// NumPy .npz archives: a zip file of .npy members, one per array name. numpy.savez stores them
// (no compression); numpy.savez_compressed deflates them. Stored members are read in place, a
// deflated member is inflated once into an anonymous temporary file, so either streams records.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/npy.h"

namespace qforge::data {

class NpzFile {
 public:
  // Reads the zip central directory; throws qforge::Error naming `path` when the file is not a
  // zip archive, is truncated, or holds a member that is neither stored nor deflated.
  explicit NpzFile(const std::string& path);

  const std::string& path() const { return path_; }
  // Array names in archive order: member names without their ".npy" suffix.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const;

  // The array `name`; throws naming the archive and the arrays it has when there is none.
  std::unique_ptr<NpyFile> open(const std::string& name) const;

 private:
  struct Member {
    std::string name;
    uint16_t method = 0;  // 0 stored, 8 deflated
    uint32_t crc = 0;
    int64_t compressed_size = 0;
    int64_t size = 0;
    int64_t local_header = 0;
  };

  std::string path_;
  std::vector<Member> members_;
  std::vector<std::string> names_;
};

}  // namespace qforge::data
