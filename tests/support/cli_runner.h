// Runs the qforge binary (QFORGE_CLI) as a user would, for the CLI tests.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern char** environ;

namespace qforge::testing {

struct CliResult {
  int exit_code;
  std::string out;  // runCli: stdout and stderr together
};

// The exit code and stdout of a shell command line.
inline CliResult runShell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `env` is prepended to the command line ("QFORGE_NUM_THREADS=1").
inline CliResult runCli(const std::string& args, const std::string& env = "") {
  return runShell(env + " " + QFORGE_CLI + " " + args + " 2>&1");
}

// stdout and stderr apart, for checks of what goes where.
struct CliStreams {
  int exit_code;
  std::string out;
  std::string err;
};

inline CliStreams runCliStreams(const std::string& args, const std::string& env = "") {
  char err_path[] = "/tmp/qforge-cli-stderr-XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd >= 0) close(fd);
  const CliResult r = runShell(env + " " + QFORGE_CLI + " " + args + " 2>" + err_path);
  std::ifstream in(err_path);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(err_path);
  return {r.exit_code, r.out, err};
}

// Starts qforge in the background (one thread, output to `log`) and returns its pid; -1 when it
// cannot be started.
inline pid_t spawnCli(const std::string& args, const std::string& log) {
  const std::string command = "exec env QFORGE_NUM_THREADS=1 " + std::string(QFORGE_CLI) + " " +
                              args + " >" + log + " 2>&1";
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
    return -1;
  return pid;
}

// The exit code of a spawned run (128 + the signal when one ended it).
inline int waitExit(pid_t pid, bool* signalled = nullptr) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (signalled) *signalled = WIFSIGNALED(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Every qforge command, in the order `qforge help` lists them.
inline const std::vector<std::string> kCliCommands = {"inspect", "run",    "eval",      "quantize",
                                                      "qat",     "deploy", "verify",    "analyze",
                                                      "convert", "help",   "completion"};

inline size_t lineCount(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace qforge::testing
