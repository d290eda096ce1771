#include "core/tensor_pool.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/resource_limits.h"

namespace qforge {

namespace {

// ATen's CPU tensors are 64-byte aligned (c10::gAlignment); the block's size sits in a header of
// that length before the data, so the data stays aligned and the deleter finds the size.
constexpr size_t kAlignment = 64;
constexpr size_t kHeader = kAlignment;

size_t roundedUp(size_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

struct FreeLists {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<char*>> blocks;  // by data size, each a header's start
  TensorPoolCounts counts;
};

FreeLists& freeLists() {
  // Never destroyed: tensors freed during exit still come back here.
  static FreeLists* lists = new FreeLists();
  return *lists;
}

char* takeBlock(size_t size) {
  FreeLists& lists = freeLists();
  if (size <= kLargestPooledBlock) {
    std::lock_guard<std::mutex> lock(lists.mutex);
    auto it = lists.blocks.find(size);
    if (it != lists.blocks.end() && !it->second.empty()) {
      char* block = it->second.back();
      it->second.pop_back();
      lists.counts.pooled_bytes -= size;
      ++lists.counts.reused;
      return block;
    }
    ++lists.counts.allocated;
  }
  void* block = nullptr;
  if (posix_memalign(&block, kAlignment, kHeader + size) != 0) {
    // A resource error: the executor names the node it happened in, the CLI prints one line.
    throw ResourceLimitError("out of memory: the system refused " +
                             byteSizeText(static_cast<int64_t>(size)) +
                             " for a tensor; try a smaller --batch, or more memory");
  }
  *static_cast<size_t*>(block) = size;
  return static_cast<char*>(block);
}

void releaseData(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeader;
  const size_t size = *reinterpret_cast<size_t*>(block);
  if (size <= kLargestPooledBlock) {
    FreeLists& lists = freeLists();
    std::lock_guard<std::mutex> lock(lists.mutex);
    if (lists.counts.pooled_bytes + size <= kMaxPooledBytes) {
      lists.blocks[size].push_back(block);
      lists.counts.pooled_bytes += size;
      return;
    }
  }
  std::free(block);
}

class TensorPool final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    // As c10's default allocator, an empty tensor has no data at all.
    if (n == 0) return {nullptr, nullptr, &releaseData, c10::Device(c10::DeviceType::CPU)};
    char* data = takeBlock(roundedUp(n)) + kHeader;
    return {data, data, &releaseData, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &releaseData; }
};

}  // namespace

c10::Allocator* tensorPool() {
  static TensorPool* pool = new TensorPool();
  return pool;
}

bool installTensorPool() {
  if (tensorSizeCheckInstalled()) return false;
  // Above c10's default (priority 0), below the size check, which wraps it when installed.
  constexpr uint8_t kPriority = 1;
  c10::SetCPUAllocator(tensorPool(), kPriority);
  return c10::GetCPUAllocator() == tensorPool();
}

TensorPoolCounts tensorPoolCounts() {
  FreeLists& lists = freeLists();
  std::lock_guard<std::mutex> lock(lists.mutex);
  return lists.counts;
}

void releasePooledBlocks() {
  FreeLists& lists = freeLists();
  std::lock_guard<std::mutex> lock(lists.mutex);
  for (auto& [size, blocks] : lists.blocks) {
    for (char* block : blocks)
      std::free(block);
  }
  lists.blocks.clear();
  lists.counts.pooled_bytes = 0;
}

}  // namespace qforge
