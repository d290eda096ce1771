#include "core/threads.h"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"

namespace qforge {

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
  return threads;
}

}  // namespace qforge
