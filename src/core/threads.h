// Debian's libtorch starts with one intra-op thread; qforge uses every core unless told otherwise.
#pragma once

namespace qforge {

// Sets ATen's intra-op thread count from QFORGE_NUM_THREADS, or to the number of cores when unset.
// Returns the count in effect. Throws qforge::Error when the variable is not a positive integer.
int configureThreads();

}  // namespace qforge
