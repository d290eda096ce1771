#include "core/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"

namespace qforge {

namespace {

// Debian's libtorch calls whichever BLAS the libblas.so.3 alternative points to. OpenBLAS
// (libopenblas0-openmp, which scripts/install-deps.sh installs for MatMul and Gemm) sizes its
// threads from the machine unless told: give it the same count as ATen's.
void setBlasThreads(int threads) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

}  // namespace

int configureThreads() {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  if (const char* env = std::getenv("QFORGE_NUM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    long requested = std::strtol(env, &end, 10);
    require(*end == '\0' && requested > 0 && requested <= 4096,
            std::string("QFORGE_NUM_THREADS='") + env +
                "' is not a positive integer; unset it or "
                "set it to the number of threads to use");
    threads = static_cast<int>(requested);
  }
  at::set_num_threads(threads);
  setBlasThreads(threads);
  return threads;
}

}  // namespace qforge
