#include "core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

extern char** environ;

namespace qforge {

namespace {

bool isExecutableFile(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string findExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return isExecutableFile(name) ? name : "";
  const char* env = std::getenv("PATH");
  const std::string path = env ? env : "";
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > begin ? path.substr(begin, end - begin) : ".";
    const std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (isExecutableFile(candidate)) return candidate.string();
    begin = end + 1;
  }
  return "";
}

ProcessResult runProcess(const std::vector<std::string>& argv, double timeout_seconds) {
  require(!argv.empty(), "runProcess: no program");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw Error("cannot create a pipe for " + argv[0] + ": " + std::strerror(errno));
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw Error("cannot create a pipe for " + argv[0] + ": " + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error =
      ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawn_error != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw Error("cannot start '" + argv[0] + "': " + std::strerror(spawn_error));
  }

  ProcessResult result;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  // Milliseconds left before the deadline (-1: no deadline); sets timed_out when none are.
  auto millisecondsLeft = [&]() -> int {
    if (timeout_seconds <= 0) return -1;
    const double left = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    result.timed_out = left <= 0;
    return result.timed_out ? 0 : static_cast<int>(std::ceil(left));
  };

  // Read both until the child closes them (it is exiting) or the deadline passes.
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    const int wait_ms = millisecondsLeft();
    if (result.timed_out) break;
    const int ready = ::poll(fds, 2, wait_ms);
    if (ready <= 0) continue;  // interrupted, or the deadline: checked at the top
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      sinks[i]->append(buffer, static_cast<size_t>(got));
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }

  // Reap it, still within the deadline (a child may close its pipes and linger).
  while (!result.timed_out) {
    const pid_t done = ::waitpid(pid, &result.status, timeout_seconds > 0 ? WNOHANG : 0);
    if (done == pid) return result;
    if (done < 0 && errno != EINTR) {
      throw Error("cannot wait for " + argv[0] + ": " + std::string(std::strerror(errno)));
    }
    if (done == 0 && millisecondsLeft() > 0) ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::string lastLine(const std::string& text) {
  const size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  const size_t begin = text.rfind('\n', end);
  const size_t first = begin == std::string::npos ? 0 : begin + 1;
  const size_t start = text.find_first_not_of(" \t\r", first);
  return text.substr(start, end + 1 - start);
}

std::string exitDescription(const ProcessResult& result, double timeout_seconds) {
  if (result.timed_out) {
    char text[64];
    std::snprintf(text, sizeof text, "did not finish within %g s", timeout_seconds);
    return text;
  }
  if (WIFSIGNALED(result.status)) {
    const int signal = WTERMSIG(result.status);
    return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(result.status));
}

}  // namespace qforge
