// Runs the qforge binary (QFORGE_CLI) as a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

namespace qforge::testing {

struct CliResult {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// `env` is prepended to the command line ("QFORGE_NUM_THREADS=1").
inline CliResult runCli(const std::string& args, const std::string& env = "") {
  const std::string command = env + " " + QFORGE_CLI + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline size_t lineCount(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace qforge::testing
