// The tensor pool: aligned, writable blocks; a freed block comes back for the next request of
// its size and only of its size; large blocks and blocks beyond the pool's bound go back to the
// system; empty requests have no data; frees from other threads land in the same lists; and,
// installed, ATen's tensors come from it and compute as before.
#include "core/tensor_pool.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/resource_limits.h"

namespace qforge {
namespace {

bool aligned64(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 64 == 0;
}

TEST(TensorPoolTest, AFreedBlockServesTheNextRequestOfItsSizeOnly) {
  releasePooledBlocks();
  c10::Allocator* pool = tensorPool();
  void* first_data = nullptr;
  {
    c10::DataPtr first = pool->allocate(1000);
    ASSERT_NE(first.get(), nullptr);
    EXPECT_TRUE(aligned64(first.get()));
    std::memset(first.get(), 0xab, 1000);  // writable over its whole length
    first_data = first.get();
  }
  const TensorPoolCounts before = tensorPoolCounts();
  EXPECT_GE(before.pooled_bytes, 1024u);  // 1000 rounded up to 64 bytes
  // Another size does not take it...
  c10::DataPtr other = pool->allocate(5000);
  EXPECT_NE(other.get(), first_data);
  // ...a request rounding to the same size does, without going to the system.
  c10::DataPtr again = pool->allocate(1020);
  EXPECT_EQ(again.get(), first_data);
  const TensorPoolCounts after = tensorPoolCounts();
  EXPECT_EQ(after.reused, before.reused + 1);
  EXPECT_EQ(after.allocated, before.allocated + 1);  // the 5000-byte block
  EXPECT_EQ(after.pooled_bytes, before.pooled_bytes - 1024);
}

TEST(TensorPoolTest, LargeBlocksAndEmptyRequestsAreNotPooled) {
  releasePooledBlocks();
  c10::Allocator* pool = tensorPool();
  const TensorPoolCounts before = tensorPoolCounts();
  {
    c10::DataPtr large = pool->allocate(kLargestPooledBlock + 1);
    ASSERT_NE(large.get(), nullptr);
    EXPECT_TRUE(aligned64(large.get()));
    static_cast<char*>(large.get())[kLargestPooledBlock] = 1;
    c10::DataPtr empty = pool->allocate(0);
    EXPECT_EQ(empty.get(), nullptr);
  }
  const TensorPoolCounts after = tensorPoolCounts();
  EXPECT_EQ(after.pooled_bytes, before.pooled_bytes);
  EXPECT_EQ(after.reused, before.reused);
}

TEST(TensorPoolTest, ARefusedAllocationIsOneClearResourceError) {
  try {
    tensorPool()->allocate(size_t{1} << 62);
    FAIL() << "4 EiB were allocated";
  } catch (const ResourceLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory: the system refused 4.0 EiB"),
              std::string::npos)
        << e.what();
  }
}

TEST(TensorPoolTest, ThePoolHoldsNoMoreThanItsBound) {
  releasePooledBlocks();
  c10::Allocator* pool = tensorPool();
  // Enough of the largest pooled blocks to pass the bound when all are freed.
  const size_t count = kMaxPooledBytes / kLargestPooledBlock + 8;
  {
    std::vector<c10::DataPtr> blocks;
    for (size_t i = 0; i < count; ++i)
      blocks.push_back(pool->allocate(kLargestPooledBlock));
  }
  EXPECT_LE(tensorPoolCounts().pooled_bytes, kMaxPooledBytes);
  EXPECT_GT(tensorPoolCounts().pooled_bytes, kMaxPooledBytes - kLargestPooledBlock);
  releasePooledBlocks();
  EXPECT_EQ(tensorPoolCounts().pooled_bytes, 0u);
}

TEST(TensorPoolTest, RawAllocationsAndFreesFromOtherThreadsComeBack) {
  releasePooledBlocks();
  c10::Allocator* pool = tensorPool();
  void* raw = pool->raw_allocate(300);
  ASSERT_NE(raw, nullptr);
  std::thread([&] { pool->raw_deallocate(raw); }).join();
  c10::DataPtr same_size = pool->allocate(300);
  EXPECT_EQ(same_size.get(), raw);
}

TEST(TensorPoolTest, InstalledItAllocatesAtensTensorsWhichComputeAsBefore) {
  releasePooledBlocks();
  const at::Tensor a = at::randn({7, 33});  // allocated by c10's default allocator
  const at::Tensor b = at::randn({33, 5});
  const at::Tensor expected = at::matmul(a, b);
  // ctest runs each test in a fresh process, where nothing has checked a tensor's size yet.
  ASSERT_FALSE(tensorSizeCheckInstalled()) << "run this test in a process of its own";
  ASSERT_TRUE(installTensorPool());
  EXPECT_EQ(c10::GetCPUAllocator(), tensorPool());
  const TensorPoolCounts before = tensorPoolCounts();
  for (int run = 0; run < 3; ++run) {
    const at::Tensor y = at::matmul(a, b);
    EXPECT_TRUE(aligned64(y.data_ptr()));
    EXPECT_TRUE(at::equal(y, expected));
  }
  const TensorPoolCounts after = tensorPoolCounts();
  EXPECT_GE(after.reused, before.reused + 2);  // the second and third results reuse the first's
  // Too late once the size check wraps the allocator of its time (an executor has run).
  { TensorAllocationLimit limit; }
  EXPECT_FALSE(installTensorPool());
}

}  // namespace
}  // namespace qforge
