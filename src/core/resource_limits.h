// Caps on what a model may make qforge allocate or recurse into. A file from a stranger can declare
// a 4 TB initializer, nest If bodies a thousand deep, or Reshape to a huge shape at run time; past
// a cap qforge stops with one line naming the tensor or node, before the allocation. The defaults
// fit any real model on a workstation; each is raised by a flag (`qforge --max-tensor-bytes 32G
// ...`) or an environment variable (QFORGE_MAX_TENSOR_BYTES, for the Python module too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace qforge {

struct ResourceLimits {
  int64_t max_model_bytes = int64_t{16} << 30;  // initializers of a model, subgraphs included
  int64_t max_tensor_bytes = int64_t{8} << 30;  // any one tensor: initializer, input, or computed
  int64_t max_subgraph_depth = 32;              // If/Loop/Scan bodies inside bodies
  int64_t max_nodes = 1'000'000;                // nodes of a model, subgraphs included
};

// A cap was exceeded. A subclass so the executor can add the node that asked.
class ResourceLimitError : public Error {
 public:
  using Error::Error;
  ResourceLimitError within(const std::string& where) const {
    return ResourceLimitError(where + ": " + what());
  }
};

// The defaults, each overridden by its environment variable (QFORGE_MAX_MODEL_BYTES,
// QFORGE_MAX_TENSOR_BYTES, QFORGE_MAX_SUBGRAPH_DEPTH, QFORGE_MAX_NODES). Throws naming a variable
// that is not a size or a count.
ResourceLimits resourceLimitsFromEnvironment();
// The limits in force (from the environment until set).
const ResourceLimits& resourceLimits();
void setResourceLimits(const ResourceLimits& limits);

// "512M", "4G", "1.5GiB", "100" (bytes) -> bytes; `what` names the setting in the error.
int64_t parseByteSize(const std::string& text, const std::string& what);
// 8589934592 -> "8.0 GiB".
std::string byteSizeText(int64_t bytes);

// Elements x element size, saturating at INT64_MAX instead of overflowing (a declared shape may
// be anything). Negative dimensions count as zero.
int64_t tensorBytes(const std::vector<int64_t>& shape, int64_t element_size);

// Throws ResourceLimitError when one tensor of `bytes` is above max_tensor_bytes; `what` names it
// ("initializer 'w'").
void requireTensorBytes(int64_t bytes, const std::string& what);

// While one lives, every CPU tensor the calling thread allocates through ATen is checked against
// max_tensor_bytes (a pass-through wrapper of ATen's CPU allocator, installed on first use; outside
// such a scope, in a host program's own torch code, nothing is checked).
// True once the first TensorAllocationLimit has put that wrapper in place: it wraps the CPU
// allocator of that moment for the rest of the process (core/tensor_pool.h must come before).
bool tensorSizeCheckInstalled();

class TensorAllocationLimit {
 public:
  TensorAllocationLimit();
  ~TensorAllocationLimit();
  TensorAllocationLimit(const TensorAllocationLimit&) = delete;
  TensorAllocationLimit& operator=(const TensorAllocationLimit&) = delete;

 private:
  bool was_active_;
};

}  // namespace qforge
