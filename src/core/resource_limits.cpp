#include "core/resource_limits.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>

namespace qforge {

namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

ResourceLimits& currentLimits() {
  static ResourceLimits limits = resourceLimitsFromEnvironment();
  return limits;
}

int64_t envSize(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  return text && *text ? parseByteSize(text, name) : fallback;
}

int64_t envCount(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(text, &end, 10);
  require(*end == '\0' && n > 0, std::string(name) + "='" + text + "' is not a positive count");
  return n;
}

// Whether the calling thread is inside a TensorAllocationLimit scope.
thread_local bool t_limit_active = false;

// ATen's CPU allocator with a size check in front; the memory and its deleter stay the wrapped
// allocator's, so tensors allocated before or after are interchangeable.
class SizeCheckingAllocator final : public c10::Allocator {
 public:
  explicit SizeCheckingAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(size_t n) const override {
    if (t_limit_active && n > static_cast<size_t>(currentLimits().max_tensor_bytes)) {
      requireTensorBytes(n > static_cast<size_t>(kSaturated) ? kSaturated : static_cast<int64_t>(n),
                         "a tensor");
    }
    return wrapped_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return wrapped_->raw_deleter(); }

 private:
  c10::Allocator* wrapped_;
};

std::atomic<bool> size_check_installed{false};

void installSizeCheckingAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    size_check_installed = true;
    // Static lifetime, as c10 expects of an allocator; the highest priority so it stays in front.
    static SizeCheckingAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, std::numeric_limits<uint8_t>::max());
  });
}

}  // namespace

bool tensorSizeCheckInstalled() {
  return size_check_installed;
}

ResourceLimits resourceLimitsFromEnvironment() {
  ResourceLimits l;
  l.max_model_bytes = envSize("QFORGE_MAX_MODEL_BYTES", l.max_model_bytes);
  l.max_tensor_bytes = envSize("QFORGE_MAX_TENSOR_BYTES", l.max_tensor_bytes);
  l.max_subgraph_depth = envCount("QFORGE_MAX_SUBGRAPH_DEPTH", l.max_subgraph_depth);
  l.max_nodes = envCount("QFORGE_MAX_NODES", l.max_nodes);
  return l;
}

const ResourceLimits& resourceLimits() {
  return currentLimits();
}

void setResourceLimits(const ResourceLimits& limits) {
  currentLimits() = limits;
}

int64_t parseByteSize(const std::string& text, const std::string& what) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  const std::string suffix = text.substr(std::min(used, text.size()));
  const double unit = suffix.empty() || suffix == "B"    ? 1
                      : suffix == "K" || suffix == "KiB" ? 1024.0
                      : suffix == "M" || suffix == "MiB" ? 1024.0 * 1024
                      : suffix == "G" || suffix == "GiB" ? 1024.0 * 1024 * 1024
                      : suffix == "T" || suffix == "TiB" ? 1024.0 * 1024 * 1024 * 1024
                                                         : -1;
  require(std::isfinite(value) && value >= 0 && unit > 0 && value * unit < 9.2e18,
          what + " '" + text + "' is not a size; write bytes or e.g. 512M, 4G");
  return static_cast<int64_t>(value * unit);
}

std::string byteSizeText(int64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[48];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

int64_t tensorBytes(const std::vector<int64_t>& shape, int64_t element_size) {
  int64_t bytes = element_size;
  for (int64_t d : shape) {
    if (d <= 0) return 0;
    if (bytes > kSaturated / d) return kSaturated;
    bytes *= d;
  }
  return bytes;
}

void requireTensorBytes(int64_t bytes, const std::string& what) {
  const int64_t limit = resourceLimits().max_tensor_bytes;
  if (bytes <= limit) return;
  throw ResourceLimitError(
      what + " would take " +
      (bytes == kSaturated ? std::string("more than 8 EiB") : byteSizeText(bytes)) +
      ", above the limit of " + byteSizeText(limit) +
      " for one tensor; if the model really needs it, raise the limit with "
      "--max-tensor-bytes (or QFORGE_MAX_TENSOR_BYTES)");
}

TensorAllocationLimit::TensorAllocationLimit() : was_active_(t_limit_active) {
  installSizeCheckingAllocator();
  t_limit_active = true;
}

TensorAllocationLimit::~TensorAllocationLimit() {
  t_limit_active = was_active_;
}

}  // namespace qforge
