#include "core/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace qforge {

std::string readFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error("'" + path + "' is a directory; give the path of a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  return buffer.str();
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error("cannot write '" + path + "': " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error("cannot move the new file into place at '" + path + "': " + std::strerror(err));
  }
}

void requireWritableFile(const std::string& path, const std::string& flag) {
  const std::filesystem::path p(path);
  require(!std::filesystem::is_directory(p), flag + ": '" + path + "' is a directory; name a file");
  const std::filesystem::path parent = p.has_parent_path() ? p.parent_path() : ".";
  require(std::filesystem::is_directory(parent),
          flag + ": the directory '" + parent.string() + "' does not exist; create it first");
}

TempDir::TempDir(const std::string& tag) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("qforge-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error("cannot create a temporary directory under " +
                std::filesystem::temp_directory_path().string() + ": " + std::strerror(errno));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::file(const std::string& name) const {
  return (std::filesystem::path(path_) / name).string();
}

}  // namespace qforge
