#include "core/output_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"

namespace qforge {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRolesFile = ".qforge-output.json";

std::string lockPathFor(const fs::path& dir) {
  return (dir.parent_path() / ("." + dir.filename().string() + ".qforge-lock")).string();
}

std::string stagingPrefixFor(const fs::path& dir) {
  return "." + dir.filename().string() + ".qforge-staging-";
}

// The directory absolute, without "." or ".." parts, symlinks resolved as far as it exists, and
// without a trailing separator (its filename names it).
fs::path resolveOutputDir(const std::string& dir) {
  fs::path p = fs::weakly_canonical(fs::absolute(dir)).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

bool isSameOrInside(const fs::path& inner, const fs::path& outer) {
  const fs::path rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != "..";
}

// Another qforge run holds the lock: its pid, as it wrote it into the lock file.
std::string lockHolder(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("unknown");
}

// `src` recreated at `dst` without copying file contents: regular files hard-linked (copied where
// the file system refuses links), directories recreated, symlinks copied as symlinks.
void linkTree(const fs::path& src, const fs::path& dst) {
  const fs::file_status st = fs::symlink_status(src);
  if (fs::is_symlink(st)) {
    fs::copy_symlink(src, dst);
  } else if (fs::is_directory(st)) {
    fs::create_directory(dst);
    fs::permissions(dst, st.permissions());
    for (const fs::directory_entry& e : fs::directory_iterator(src))
      linkTree(e.path(), dst / e.path().filename());
  } else if (fs::is_regular_file(st)) {
    std::error_code ec;
    fs::create_hard_link(src, dst, ec);
    if (ec) fs::copy_file(src, dst);
  } else {
    throw Error("cannot keep '" + src.string() +
                "' in the new output directory: it is not a file, directory or link; move it "
                "out of the output directory");
  }
}

// The roles recorded by an earlier run; empty when there is no record (a directory qforge did not
// write, or one from before roles were recorded) or it cannot be read: then nothing is dropped.
std::map<std::string, std::string> readRoles(const fs::path& dir) {
  std::map<std::string, std::string> roles;
  std::error_code ec;
  if (!fs::exists(dir / kRolesFile, ec)) return roles;
  try {
    const nlohmann::json j = nlohmann::json::parse(readFile((dir / kRolesFile).string()));
    for (const auto& [name, role] : j.at("files").items())
      roles[name] = role.get<std::string>();
  } catch (const std::exception&) {
    roles.clear();
  }
  return roles;
}

// Swaps `staging` and `target` (both directories), or moves `staging` to `target` when there is
// none yet. Where the file system cannot exchange atomically, two renames with a moment between.
void swapIntoPlace(const fs::path& staging, const fs::path& target, bool target_exists) {
  const unsigned flags = target_exists ? RENAME_EXCHANGE : RENAME_NOREPLACE;
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), flags) == 0) return;
  const int err = errno;
  if (target_exists && (err == EINVAL || err == ENOSYS)) {
    const fs::path aside = staging.string() + "-old";
    if (::rename(target.c_str(), aside.c_str()) == 0) {
      if (::rename(staging.c_str(), target.c_str()) == 0) {
        ::rename(aside.c_str(), staging.c_str());  // where the caller removes the old directory
        return;
      }
      ::rename(aside.c_str(), target.c_str());
    }
  }
  throw Error("cannot move the new output into place at '" + target.string() +
              "': " + std::strerror(err));
}

}  // namespace

OutputDirectory::OutputDirectory(const std::string& dir, std::string role,
                                 std::set<std::string> replaced_roles)
    : dir_(dir), role_(std::move(role)), replaced_roles_(std::move(replaced_roles)) {
  require(!dir.empty(), "no output directory given");
  const fs::path resolved = resolveOutputDir(dir);
  resolved_ = resolved.string();
  std::error_code ec;
  require(!fs::exists(resolved, ec) || fs::is_directory(resolved, ec),
          dir + ": exists and is not a directory; give a directory for the output");
  // The directory is replaced as a whole when the run ends: a shell standing in it would be left
  // in a deleted directory.
  require(resolved.has_parent_path() && resolved != resolved.root_path() &&
              !isSameOrInside(fs::current_path(), resolved),
          dir + ": is the current directory or holds it; the output directory is replaced " +
              "as a whole when the run ends, so give one below it (--out out)");
  fs::create_directories(resolved.parent_path(), ec);
  require(!ec, dir + ": cannot create its parent directory: " + ec.message());

  lock_path_ = lockPathFor(resolved);
  lockOrThrow();
  const std::string pid = std::to_string(::getpid());

  // With the lock held, every staging directory beside this one is a killed run's.
  const std::string prefix = stagingPrefixFor(resolved);
  for (const fs::directory_entry& e : fs::directory_iterator(resolved.parent_path(), ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
  }
  staging_ = (resolved.parent_path() / (prefix + pid)).string();
  fs::create_directory(staging_, ec);
  require(!ec, dir + ": cannot create the staging directory '" + staging_ + "': " + ec.message());
}

OutputDirectory::~OutputDirectory() {
  std::error_code ignored;
  if (!staging_.empty()) fs::remove_all(staging_, ignored);
  if (lock_fd_ >= 0) {
    // Unlinked while still held: a run that opened it meanwhile finds, once it holds it, that the
    // path no longer names its file, and tries again (lockOrThrow).
    ::unlink(lock_path_.c_str());
    ::close(lock_fd_);
  }
}

void OutputDirectory::lockOrThrow() {
  for (;;) {
    lock_fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    require(lock_fd_ >= 0,
            dir_ + ": cannot create the lock file '" + lock_path_ + "': " + std::strerror(errno));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const std::string holder = lockHolder(lock_fd_);
      ::close(lock_fd_);
      lock_fd_ = -1;
      throw Error(dir_ + ": another qforge run (pid " + holder +
                  ") is writing this directory; wait for it to end or give another output "
                  "directory");
    }
    struct stat held {};
    struct stat named {};
    if (::fstat(lock_fd_, &held) == 0 && ::stat(lock_path_.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      break;
    }
    ::close(lock_fd_);  // the holder unlinked it as we opened it: take the new one
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(lock_fd_, pid.data(), pid.size(), 0);
  }
}

std::string OutputDirectory::finalPath(const std::string& staged_path) const {
  const fs::path rel = fs::path(staged_path).lexically_relative(staging_);
  if (rel.empty() || *rel.begin() == ".." || rel == ".") return staged_path;
  return (fs::path(dir_) / rel).string();
}

void OutputDirectory::setRole(const std::string& name, const std::string& role) {
  role_overrides_[name] = role;
}

void OutputDirectory::keepWrittenInPlace(const std::string& name, const std::string& role) {
  written_in_place_[name] = role;
}

void OutputDirectory::carryOverOldEntries(std::map<std::string, std::string>& roles) const {
  const fs::path old_dir = resolved_;
  std::error_code ec;
  if (!fs::is_directory(old_dir, ec)) return;
  const std::map<std::string, std::string> old_roles = readRoles(old_dir);
  for (const fs::directory_entry& e : fs::directory_iterator(old_dir)) {
    const std::string name = e.path().filename().string();
    if (name == kRolesFile || roles.count(name)) continue;  // this run wrote its own
    const auto in_place = written_in_place_.find(name);
    const auto old = old_roles.find(name);
    if (in_place != written_in_place_.end()) {
      roles[name] = in_place->second;
    } else if (old != old_roles.end()) {
      if (replaced_roles_.count(old->second)) continue;
      roles[name] = old->second;
    }
    linkTree(e.path(), fs::path(staging_) / name);
  }
}

void OutputDirectory::writeRoles(const std::map<std::string, std::string>& roles) const {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, role] : roles)
    files[name] = role;
  writeFileAtomically((fs::path(staging_) / kRolesFile).string(),
                      nlohmann::json{{"qforge_output", 1}, {"files", files}}.dump(1) + "\n");
}

void OutputDirectory::commit() {
  require(!committed_, "internal: output directory committed twice");
  // The role of every file this run wrote; carryOverOldEntries adds those of the kept old files
  // (files of unknown role, a user's own, are carried over but not recorded as qforge's).
  std::map<std::string, std::string> roles;
  for (const fs::directory_entry& e : fs::directory_iterator(staging_)) {
    const std::string name = e.path().filename().string();
    const auto override_role = role_overrides_.find(name);
    roles[name] = override_role != role_overrides_.end() ? override_role->second : role_;
  }
  carryOverOldEntries(roles);
  writeRoles(roles);

  std::error_code ec;
  const bool exists = fs::is_directory(resolved_, ec);
  if (exists) fs::permissions(staging_, fs::status(resolved_).permissions(), ec);
  swapIntoPlace(staging_, resolved_, exists);
  committed_ = true;
  fs::remove_all(staging_, ec);  // the old directory, now at the staging path
}

}  // namespace qforge
