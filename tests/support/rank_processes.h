// Tests that need several ranks of a ProcessGroup re-execute the test binary (/proc/self/exe)
// once per rank, filtered to the running test, with the rank and master in the environment. Not
// fork(): libtorch has started threads by then, and a forked child keeps only the forking one.
//
//   TEST(Suite, Name) {
//     const auto options = spawnedRankOptions();
//     if (!options) return runThisTestAsRanks(2);
//     algos::ProcessGroup group(*options);  // in each rank's process
//     ...
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algos/distributed.h"
#include "core/files.h"

extern char** environ;

namespace qforge::testing {

inline constexpr const char* kTestRankVariable = "QFORGE_TEST_RANK";
inline constexpr const char* kTestWorldVariable = "QFORGE_TEST_WORLD_SIZE";
inline constexpr const char* kTestMasterVariable = "QFORGE_TEST_MASTER";

// In a process runThisTestAsRanks started: this rank's options. In the test process: nullopt.
inline std::optional<algos::DistributedOptions> spawnedRankOptions() {
  const char* rank = std::getenv(kTestRankVariable);
  if (!rank) return std::nullopt;
  algos::DistributedOptions options;
  options.rank = std::atoi(rank);
  options.world_size = std::atoi(std::getenv(kTestWorldVariable));
  options.master = std::getenv(kTestMasterVariable);
  options.timeout_seconds = 10;
  return options;
}

// A loopback port nothing listens on now (the kernel's pick for port 0).
inline int unusedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Runs the current test in `world_size` processes and fails it, showing a rank's output, when
// that rank fails or still runs after `limit`.
inline void runThisTestAsRanks(int world_size,
                               std::chrono::seconds limit = std::chrono::seconds(30)) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter =
      std::string("--gtest_filter=") + test->test_suite_name() + "." + test->name();
  std::string program = "/proc/self/exe";
  const std::string master = "127.0.0.1:" + std::to_string(unusedLoopbackPort());
  // Our environment minus gtest's sharding (which could filter the test out), plus the rank's.
  std::vector<std::string> shared;
  for (char** variable = environ; *variable; ++variable) {
    const std::string entry = *variable;
    if (entry.rfind("GTEST_SHARD", 0) != 0 && entry.rfind("GTEST_TOTAL_SHARDS", 0) != 0)
      shared.push_back(entry);
  }
  shared.push_back(std::string(kTestWorldVariable) + "=" + std::to_string(world_size));
  shared.push_back(std::string(kTestMasterVariable) + "=" + master);
  TempDir logs("ranks");
  std::vector<pid_t> children;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> environment = shared;
    environment.push_back(std::string(kTestRankVariable) + "=" + std::to_string(rank));
    std::vector<char*> envp;
    for (std::string& entry : environment)
      envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<char*> argv{program.data(), filter.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO,
                                     logs.file(std::to_string(rank)).c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t child = -1;
    const int spawned =
        ::posix_spawn(&child, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(spawned, 0) << "could not start rank " << rank;
    children.push_back(child);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int rank = 0; rank < world_size; ++rank) {
    int status = 0;
    while (::waitpid(children[rank], &status, WNOHANG) != children[rank]) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(children[rank], SIGKILL);
        ::waitpid(children[rank], &status, 0);
        ADD_FAILURE() << "rank " << rank << " still ran after " << limit.count() << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const std::string output = readFile(logs.file(std::to_string(rank)));
    // A passing exit alone could be a filter that matched nothing.
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                output.find("[  PASSED  ] 1 test") != std::string::npos)
        << "rank " << rank << " failed; its output:\n"
        << output;
  }
}

}  // namespace qforge::testing
