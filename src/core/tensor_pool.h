// A CPU allocator for ATen's tensors that keeps freed blocks for the next request of the same
// size. An executor run allocates the same activations in the same sizes every time; at batch 1
// each is a few KiB, and glibc's malloc/free of them (with the consolidation its free lists do
// between small and large requests) was a tenth of a small transformer's run. A block of up to
// kLargestPooledBlock bytes goes back to a free list of its size (rounded up to 64 bytes) and is
// handed out again; larger blocks, whose work dwarfs an allocation, go straight to glibc, and
// the free lists hold at most kMaxPooledBytes in all, beyond which freed blocks are released.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>

namespace qforge {

constexpr size_t kLargestPooledBlock = size_t{1} << 20;
constexpr size_t kMaxPooledBytes = size_t{64} << 20;

// The process's one pool (it lives as long as the process, as c10 expects of an allocator).
c10::Allocator* tensorPool();

// Makes the pool ATen's CPU allocator. Tensors allocated before keep their own deleter, so both
// kinds mix freely. Refused (false) once an executor has run: the size check of
// core/resource_limits.h then wraps the allocator it found, for good.
bool installTensorPool();

struct TensorPoolCounts {
  size_t reused = 0;        // requests served from a free list
  size_t allocated = 0;     // requests that went to glibc
  size_t pooled_bytes = 0;  // bytes now waiting in the free lists
};
TensorPoolCounts tensorPoolCounts();

// Gives every block waiting in the free lists back to the system (between phases of a long
// process, and so that tests start from an empty pool).
void releasePooledBlocks();

}  // namespace qforge
