// Running another program without a shell: argv[0] a path, stdin from /dev/null, its stdout and
// stderr captured, killed once a timeout passes. For ONNX Runtime's Node.js runner and users'
// metric scripts.
#pragma once

#include <string>
#include <vector>

namespace qforge {

struct ProcessResult {
  int status = 0;  // as waitpid reports it
  bool timed_out = false;
  std::string out;  // everything the child wrote to stdout
  std::string err;  // and to stderr
};

// Spawns argv and waits for it; kills it with SIGKILL once `timeout_seconds` (> 0) have passed.
// Throws qforge::Error when it cannot be started.
ProcessResult runProcess(const std::vector<std::string>& argv, double timeout_seconds = 0);

// `name` itself when it holds a '/' and is an executable file, else the first executable of that
// name on PATH; empty when there is none.
std::string findExecutable(const std::string& name);

// The last non-empty line of `text`, trimmed.
std::string lastLine(const std::string& text);

// "exited with code 3", "was killed by signal 9 (Killed)", "did not finish within 30 s".
std::string exitDescription(const ProcessResult& result, double timeout_seconds);

}  // namespace qforge
