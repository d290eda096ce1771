#include "core/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace qforge {
namespace {

// Restores QFORGE_NUM_THREADS (ctest sets it) when a test changes it.
class ThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = std::getenv("QFORGE_NUM_THREADS");
    saved_ = v ? std::optional<std::string>(v) : std::nullopt;
  }
  void TearDown() override {
    if (saved_) {
      setenv("QFORGE_NUM_THREADS", saved_->c_str(), 1);
    } else {
      unsetenv("QFORGE_NUM_THREADS");
    }
    at::set_num_threads(1);
  }
  std::optional<std::string> saved_;
};

TEST_F(ThreadsTest, DefaultsToAllCores) {
  unsetenv("QFORGE_NUM_THREADS");
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(configureThreads(), cores);
  EXPECT_EQ(at::get_num_threads(), cores);
}

// libtorch's MatMul runs on the BLAS behind libblas.so.3, which scripts/install-deps.sh makes
// OpenBLAS; its own thread pool follows QFORGE_NUM_THREADS too.
TEST_F(ThreadsTest, OpenBlasIsLoadedAndUsesTheSameThreadCount) {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  ASSERT_NE(get, nullptr) << "libblas.so.3 is not OpenBLAS: run scripts/install-deps.sh";
  setenv("QFORGE_NUM_THREADS", "1", 1);
  configureThreads();
  EXPECT_EQ(get(), 1);
  setenv("QFORGE_NUM_THREADS", "2", 1);
  configureThreads();
  EXPECT_EQ(get(), 2);
}

TEST_F(ThreadsTest, EnvironmentOverrides) {
  setenv("QFORGE_NUM_THREADS", "3", 1);
  EXPECT_EQ(configureThreads(), 3);
  EXPECT_EQ(at::get_num_threads(), 3);
}

TEST_F(ThreadsTest, RejectsNonsense) {
  for (const char* bad : {"zero", "0", "-2", "4x"}) {
    setenv("QFORGE_NUM_THREADS", bad, 1);
    EXPECT_THROW(configureThreads(), Error) << bad;
  }
}

}  // namespace
}  // namespace qforge
