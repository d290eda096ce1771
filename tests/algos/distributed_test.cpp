// ProcessGroup over real processes on loopback: each rank fills known values and checks the
// collectives' results against their closed forms; plus option checks, the world_size 1 no-op and
// the timeouts when a rank never gets a peer.
//
// Multi-rank tests re-execute this test binary (/proc/self/exe) once per rank, filtered to the
// running test, with the rank and master in the environment. Not fork(): by the time a test runs,
// libtorch has started threads (its intra-op pool, OpenMP's) and a forked child keeps only the
// forking thread, with any lock another thread held still held. A fresh exec starts clean, and
// posix_spawn is safe to call from a threaded process.
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
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "algos/distributed.h"
#include "core/error.h"
#include "support/checks.h"

extern char** environ;

namespace qforge::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kRankVariable = "QFORGE_TEST_DIST_RANK";
constexpr const char* kWorldSizeVariable = "QFORGE_TEST_DIST_WORLD_SIZE";
constexpr const char* kMasterVariable = "QFORGE_TEST_DIST_MASTER";

// A port nothing listens on right now: the kernel picks one for a socket bound to port 0.
int freeLoopbackPort() {
  const int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(socket_fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  EXPECT_EQ(::bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ::close(socket_fd);
  return ntohs(address.sin_port);
}

std::string loopbackMaster(int port) {
  return "127.0.0.1:" + std::to_string(port);
}

// In a process spawned by runAsRanks: this rank's options. In the test process itself: nullopt.
std::optional<algos::DistributedOptions> spawnedRank() {
  const char* rank = std::getenv(kRankVariable);
  if (!rank) return std::nullopt;
  algos::DistributedOptions options;
  options.rank = std::atoi(rank);
  options.world_size = std::atoi(std::getenv(kWorldSizeVariable));
  options.master = std::getenv(kMasterVariable);
  options.timeout_seconds = 10;
  return options;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the current test once per rank, each in its own process, and fails it (showing the rank's
// output) when a rank fails or is still running after `limit`.
void runAsRanks(int world_size, std::chrono::seconds limit = std::chrono::seconds(15)) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + test->test_suite_name() + "." + test->name();
  const std::string master = loopbackMaster(freeLoopbackPort());

  // The child's environment: ours, minus gtest's sharding (which could filter the test out), plus
  // the rank variables.
  std::vector<std::string> shared_environment;
  for (char** variable = environ; *variable; ++variable) {
    const std::string entry = *variable;
    if (entry.rfind("GTEST_SHARD", 0) == 0 || entry.rfind("GTEST_TOTAL_SHARDS", 0) == 0) continue;
    shared_environment.push_back(entry);
  }
  shared_environment.push_back(std::string(kWorldSizeVariable) + "=" + std::to_string(world_size));
  shared_environment.push_back(std::string(kMasterVariable) + "=" + master);

  std::vector<pid_t> children;
  std::vector<std::filesystem::path> logs;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> environment = shared_environment;
    environment.push_back(std::string(kRankVariable) + "=" + std::to_string(rank));
    std::vector<char*> envp;
    for (std::string& entry : environment)
      envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::string program = "/proc/self/exe";
    std::string filter_argument = filter;
    std::vector<char*> argv{program.data(), filter_argument.data(), nullptr};

    logs.push_back(std::filesystem::temp_directory_path() /
                   ("qforge_distributed_test_" + std::to_string(::getpid()) + "_rank" +
                    std::to_string(rank) + ".log"));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logs.back().c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t child = -1;
    const int spawned =
        ::posix_spawn(&child, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(spawned, 0) << "could not start rank " << rank;
    children.push_back(child);
  }

  const Clock::time_point deadline = Clock::now() + limit;
  std::vector<std::optional<int>> statuses(world_size);
  for (bool running = true; running;) {
    running = false;
    for (int rank = 0; rank < world_size; ++rank) {
      if (statuses[rank]) continue;
      int status = 0;
      if (::waitpid(children[rank], &status, WNOHANG) == children[rank])
        statuses[rank] = status;
      else
        running = true;
    }
    if (running && Clock::now() > deadline) {
      for (int rank = 0; rank < world_size; ++rank) {
        if (statuses[rank]) continue;
        ::kill(children[rank], SIGKILL);
        int status = 0;
        ::waitpid(children[rank], &status, 0);
        ADD_FAILURE() << "rank " << rank << " still ran after " << limit.count() << " s";
        statuses[rank] = status;
      }
      running = false;
    }
    if (running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int rank = 0; rank < world_size; ++rank) {
    const int status = *statuses[rank];
    const std::string output = readFile(logs[rank]);
    // A passing exit alone could be a filter that matched nothing.
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                output.find("[  PASSED  ] 1 test") != std::string::npos)
        << "rank " << rank << " failed; its output:\n"
        << output;
    std::filesystem::remove(logs[rank]);
  }
}

TEST(Distributed, TwoRanksSumMeanBroadcastBarrierMax) {
  const std::optional<algos::DistributedOptions> options = spawnedRank();
  if (!options) return runAsRanks(2);
  algos::ProcessGroup group(*options);
  ASSERT_EQ(group.worldSize(), 2);
  const int r = group.rank();
  const at::Tensor index = at::arange(6, at::kFloat);

  // Sum: float32 of two shapes, a non-contiguous view, int64 and a 0-dim tensor in one call.
  at::Tensor matrix = (index + 10 * r).view({2, 3});
  at::Tensor base = ((index + 1) * (r + 1)).view({2, 3});
  at::Tensor transposed = base.t();
  ASSERT_FALSE(transposed.is_contiguous());
  at::Tensor counts = at::full({4}, r + 1, at::kLong);
  at::Tensor scalar = at::scalar_tensor(r + 0.5, at::kFloat);
  group.allReduceSum({matrix, transposed, counts, scalar});
  EXPECT_TRUE(at::equal(matrix, (2 * index + 10).view({2, 3})));  // i + (i + 10)
  EXPECT_TRUE(at::equal(base, ((index + 1) * 3).view({2, 3})));   // the view wrote through
  EXPECT_TRUE(at::equal(counts, at::full({4}, 3, at::kLong)));
  EXPECT_EQ(scalar.item<float>(), 2.0f);  // 0.5 + 1.5

  // Mean: gradients of parameters (p.grad() = r + 1 and 2r), float32 and float64 together.
  at::Tensor p = at::zeros({3}, at::kFloat).set_requires_grad(true);
  at::Tensor q = at::zeros({2, 2}, at::kDouble).set_requires_grad(true);
  ((p * (r + 1)).sum() + (q * (2.0 * r)).sum()).backward();
  at::Tensor transposed_mean = (index * (r + 1)).view({2, 3}).t();
  group.allReduceMean({p.grad(), q.grad(), transposed_mean});
  EXPECT_TRUE(at::equal(p.grad(), at::full({3}, 1.5, at::kFloat)));
  EXPECT_TRUE(at::equal(q.grad(), at::full({2, 2}, 1.0, at::kDouble)));
  EXPECT_TRUE(at::equal(transposed_mean, (index * 1.5).view({2, 3}).t()));

  // Broadcast into parameters that require grad, from rank 1 and from the default root 0.
  at::Tensor weight = at::full({2, 2}, r + 1.0, at::kFloat).set_requires_grad(true);
  at::Tensor steps = at::full({2}, 100 + r, at::kLong);
  group.broadcast({weight, steps}, 1);
  EXPECT_TRUE(at::equal(weight, at::full({2, 2}, 2.0, at::kFloat)));
  EXPECT_TRUE(weight.requires_grad());
  EXPECT_TRUE(at::equal(steps, at::full({2}, 101, at::kLong)));
  at::Tensor bias = (index + r).view({3, 2}).t();
  group.broadcast({bias});
  EXPECT_TRUE(at::equal(bias, index.view({3, 2}).t()));

  // Barrier: rank 0 cannot pass before rank 1 arrives 300 ms late.
  const Clock::time_point before = Clock::now();
  if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  group.barrier();
  if (r == 0) {
    EXPECT_GE(Clock::now() - before, std::chrono::milliseconds(250));
  }

  EXPECT_EQ(group.allReduceMax(r == 0 ? 7.25 : -3.0), 7.25);
  EXPECT_EQ(group.allReduceMax(2.5 * r), 2.5);
}

TEST(Distributed, PeerThatLeftFailsTheCollectiveInsteadOfHanging) {
  const std::optional<algos::DistributedOptions> options = spawnedRank();
  if (!options) return runAsRanks(2);
  algos::ProcessGroup group(*options);
  if (group.rank() == 1) return;  // leaves: its sockets close with the process
  const std::string message = errorOf([&] { group.allReduceSum({at::ones({8})}); });
  EXPECT_EQ(message.rfind("rank 0 of 2: all-reduce (sum) failed: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Distributed, WorldSizeOneIsANoOpWithoutNetworking) {
  // The master port is one this process holds: a world of one that tried to host it would fail.
  const int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(socket_fd, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length), 0);

  algos::DistributedOptions options;
  options.master = loopbackMaster(ntohs(address.sin_port));
  algos::ProcessGroup group(options);
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.worldSize(), 1);
  at::Tensor values = at::arange(6, at::kFloat).view({2, 3});
  at::Tensor transposed = values.t();
  group.allReduceMean({values, transposed});
  group.allReduceSum({values});
  group.broadcast({values});
  group.barrier();
  EXPECT_TRUE(at::equal(values, at::arange(6, at::kFloat).view({2, 3})));
  EXPECT_EQ(group.allReduceMax(-4.5), -4.5);
  ::close(socket_fd);
}

algos::DistributedOptions optionsWith(int world_size, int rank, const std::string& master) {
  algos::DistributedOptions options;
  options.world_size = world_size;
  options.rank = rank;
  options.master = master;
  return options;
}

TEST(Distributed, BadOptionsNameTheFlag) {
  auto construct = [](const algos::DistributedOptions& options) {
    return [options] { algos::ProcessGroup group(options); };
  };
  EXPECT_NE(errorOf(construct(optionsWith(0, 0, "127.0.0.1:29500"))).find("--world-size"),
            std::string::npos);
  EXPECT_NE(errorOf(construct(optionsWith(2, 2, "127.0.0.1:29500"))).find("--rank"),
            std::string::npos);
  EXPECT_NE(errorOf(construct(optionsWith(2, -1, "127.0.0.1:29500"))).find("--rank"),
            std::string::npos);
  for (const char* master : {"127.0.0.1", "127.0.0.1:", ":29500", "127.0.0.1:0", "127.0.0.1:65536",
                             "127.0.0.1:29x00", "[::1]"}) {
    const std::string message = errorOf(construct(optionsWith(2, 0, master)));
    EXPECT_NE(message.find("--master"), std::string::npos) << master << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  algos::DistributedOptions no_time = optionsWith(2, 0, "127.0.0.1:29500");
  no_time.timeout_seconds = 0;
  EXPECT_NE(errorOf(construct(no_time)).find("timeout"), std::string::npos);

  const algos::MasterAddress ipv6 = algos::parseMasterAddress("[::1]:1234");
  EXPECT_EQ(ipv6.host, "::1");
  EXPECT_EQ(ipv6.port, 1234);

  algos::ProcessGroup alone(algos::DistributedOptions{});
  EXPECT_NE(errorOf([&] { alone.broadcast({at::ones({2})}, 1); }).find("root rank 1"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { alone.allReduceSum({at::Tensor()}); }).find("undefined"),
            std::string::npos);
  EXPECT_NE(
      errorOf([&] { alone.allReduceMean({at::ones({2}, at::kLong)}); }).find("floating point"),
      std::string::npos);
}

TEST(Distributed, RankWithoutMasterTimesOutWithAClearError) {
  algos::DistributedOptions options = optionsWith(2, 1, loopbackMaster(freeLoopbackPort()));
  options.timeout_seconds = 2;
  const Clock::time_point start = Clock::now();
  const std::string message = errorOf([&] { algos::ProcessGroup group(options); });
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(message.rfind("rank 1 of 2 could not reach the master " + options.master +
                              " within 2 s; start every rank with the same --master and "
                              "--world-size",
                          0),
            0u)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_LT(elapsed, std::chrono::seconds(6));
}

TEST(Distributed, MasterWithoutPeersTimesOutWithAClearError) {
  algos::DistributedOptions options = optionsWith(2, 0, loopbackMaster(freeLoopbackPort()));
  options.timeout_seconds = 2;
  const Clock::time_point start = Clock::now();
  const std::string message = errorOf([&] { algos::ProcessGroup group(options); });
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(message, "rank 0 of 2: only 1 of 2 ranks reached the master " + options.master +
                         " within 2 s; start every rank with the same --master and --world-size");
  EXPECT_GE(elapsed, std::chrono::milliseconds(1500));
  EXPECT_LT(elapsed, std::chrono::seconds(6));
}

}  // namespace
}  // namespace qforge::testing
