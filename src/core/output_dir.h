// An output directory written as one unit: a run killed at any moment leaves the old directory
// whole or the new one whole, never a mix, and two runs cannot write the same directory at once.
//
// A run writes into a staging directory beside the final one (".NAME.qforge-staging-PID"); commit()
// carries over what it should keep of the old directory (as hard links), then swaps the two with
// one atomic rename (renameat2 RENAME_EXCHANGE) and removes the old one. A lock file beside the
// directory (".NAME.qforge-lock", flock) is held from construction to destruction and removed
// after; the kernel releases it when the process dies, so a killed run never blocks the next.
//
// What is carried over: every entry of the old directory the run did not write itself, except the
// files an earlier qforge run wrote in a role this run replaces. Roles are recorded in
// ".qforge-output.json" in the directory: re-running `quantize` drops the old run's deploy files
// instead of leaving a model.qoperator.onnx from another backend beside the new model, while a
// user's own files (and a prepared model that `deploy` writes beside) stay.
#pragma once

#include <map>
#include <set>
#include <string>

namespace qforge {

class OutputDirectory {
 public:
  // Roles of the files qforge writes: a prepared model with its tables and report, deploy files.
  static constexpr const char* kModelRole = "model";
  static constexpr const char* kDeployRole = "deploy";

  // Takes the lock on `dir` (throws Error naming the other run when it is held), checks that `dir`
  // can be an output directory, and removes what killed runs left beside it. Files the run writes
  // get `role`; the old directory's files of any role in `replaced_roles` are not carried over.
  OutputDirectory(const std::string& dir, std::string role, std::set<std::string> replaced_roles);
  // Without commit(): the staging directory is removed and `dir` is as it was.
  ~OutputDirectory();
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  // The final directory, as the user named it.
  const std::string& path() const { return dir_; }
  // Where this run writes (created on construction).
  const std::string& staging() const { return staging_; }
  // A staged file's path once committed (paths outside the staging directory are returned as is).
  std::string finalPath(const std::string& staged_path) const;

  // The file `name` in the staging directory has `role` instead of the run's.
  void setRole(const std::string& name, const std::string& role);
  // `name` was written in place in the final directory while the run went on (QAT's checkpoint,
  // kept whole there for --resume): it is carried over whatever its old role, with `role`.
  void keepWrittenInPlace(const std::string& name, const std::string& role);

  // Swaps the staging directory into place. After it, the object only holds the lock.
  void commit();

 private:
  void lockOrThrow();
  void carryOverOldEntries(std::map<std::string, std::string>& roles) const;
  void writeRoles(const std::map<std::string, std::string>& roles) const;

  std::string dir_;       // as given
  std::string resolved_;  // absolute, symlinks resolved: what is renamed
  std::string staging_;
  std::string lock_path_;
  std::string role_;
  std::set<std::string> replaced_roles_;
  std::map<std::string, std::string> role_overrides_;
  std::map<std::string, std::string> written_in_place_;
  int lock_fd_ = -1;
  bool committed_ = false;
};

}  // namespace qforge
