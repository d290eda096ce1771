// File helpers shared by every writer: nothing half-written ever appears under the final name.
#pragma once

#include <string>

namespace qforge {

// Reads a whole file; throws qforge::Error naming the path and the OS reason when it cannot.
std::string readFile(const std::string& path);

// Writes `content` to a temporary file beside `path`, then renames it over `path`.
void writeFileAtomically(const std::string& path, const std::string& content);

// Throws qforge::Error naming `flag` when `path` is a directory or its directory does not exist:
// checked before long work, so a typo in an output path costs seconds, not the run.
void requireWritableFile(const std::string& path, const std::string& flag);

// A fresh directory under the system temp dir ("qforge-<tag>-XXXXXX"), removed with everything
// in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace qforge
