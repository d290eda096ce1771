#include "support/chromium.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/files.h"

extern char** environ;

namespace qforge::testing {

namespace {

// The executable `name` runs as: itself when it has a slash, else the first match on PATH.
std::string findExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) {
      return candidate;
    }
  }
  return "";
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

::testing::AssertionResult renderDom(const std::string& html_path, std::string* dom,
                                     const std::string& chromium, int timeout_seconds) {
  const std::string exe = findExecutable(chromium);
  if (exe.empty()) {
    return ::testing::AssertionFailure()
           << "chromium is not installed: run scripts/install-deps.sh (looked for '" << chromium
           << "')";
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(html_path, ec)) {
    return ::testing::AssertionFailure() << "no HTML file to render at " << html_path;
  }
  // A fresh profile per run: no state shared between tests or with a user's browser.
  TempDir profile("chromium");
  const std::string out_path = profile.file("dom.html");
  const std::string url = "file://" + std::filesystem::absolute(html_path).string();
  std::vector<std::string> args = {exe,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--no-first-run",
                                   "--disable-extensions",
                                   "--disable-background-networking",
                                   "--user-data-dir=" + profile.file("profile"),
                                   "--dump-dom",
                                   url};
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
  // Its own process group, so a timeout ends the renderer and GPU processes too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, exe.c_str(), &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (spawn_error != 0) {
    return ::testing::AssertionFailure()
           << "cannot start " << exe << ": " << std::strerror(spawn_error);
  }

  // Wait without reaping (WNOWAIT): while the leader is a zombie its group id cannot be reused,
  // so killing the group below only reaches processes this call started.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  bool timed_out = false;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 &&
        errno != EINTR) {
      break;
    }
    if (info.si_pid == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // stragglers of a finished run; everything on a timeout
  int status = 0;
  pid_t reaped;
  while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (reaped != pid) {
    return ::testing::AssertionFailure() << "cannot wait for chromium: " << std::strerror(errno);
  }

  if (timed_out) {
    return ::testing::AssertionFailure()
           << "chromium did not render " << html_path << " within " << timeout_seconds << " s";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return ::testing::AssertionFailure()
           << "chromium failed on " << html_path << " ("
           << (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                 : "signal " + std::to_string(WTERMSIG(status)))
           << ")";
  }
  *dom = readAll(out_path);
  if (dom->find("<html") == std::string::npos) {
    return ::testing::AssertionFailure()
           << "chromium printed no DOM for " << html_path << " (" << dom->size() << " bytes)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace qforge::testing
