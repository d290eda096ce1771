// What the oneDNN kernels (exec/ops/dnnl_conv, exec/ops/dnnl_matmul) share: the CPU engine and
// stream, and the stamp that tells whether a tensor they derived something from has changed.
#pragma once

#include <ATen/core/Tensor.h>

#include <any>
#include <dnnl.hpp>
#include <initializer_list>
#include <unordered_map>
#include <vector>

namespace qforge::ops {

dnnl::engine& cpuEngine();

// oneDNN's CPU stream runs on the calling thread with libtorch's OpenMP threads; one per thread
// keeps executors on different threads apart.
dnnl::stream& cpuStream();

// What a cached tensor was derived from: the same storage, offset, sizes and strides, and no
// write since (the version counter, which views share with their base). A view made again on
// every run (a Transpose of a weight) therefore still matches. The source is held, so its
// storage cannot be freed and its address reused by another tensor.
class Stamp {
 public:
  explicit Stamp(const at::Tensor& t);
  bool matches(const at::Tensor& t) const;

 private:
  at::Tensor source_;
  int64_t version_ = 0;
};

dnnl::memory::dims dnnlDims(at::IntArrayRef sizes);

// A memory object a kernel keeps among its execute arguments, and this run's tensor for it
// (`memory` null: nothing to point, e.g. a packed weight the kernel owns).
struct RunHandle {
  dnnl::memory* memory;
  void* data;
};

// Runs `primitive` on the calling thread's stream with the arguments its kernel built once:
// the handles are pointed at this run's tensors first and cleared after, so a kernel that
// outlives the run keeps no dangling pointer.
void executeWithHandles(const dnnl::primitive& primitive,
                        const std::unordered_map<int, dnnl::memory>& args,
                        std::initializer_list<RunHandle> handles);

// Runs a channels-last kernel on `src` (already in the layout its `src_memory` describes) into a
// new channels-last tensor of `dst_dims`, the logical NCHW shape.
at::Tensor executeIntoChannelsLast(const dnnl::primitive& primitive,
                                   const std::unordered_map<int, dnnl::memory>& args,
                                   dnnl::memory& src_memory, const at::Tensor& src,
                                   dnnl::memory& dst_memory, const dnnl::memory::dims& dst_dims);

// The kernel state a node keeps between runs (OpContext::nodeState), made on first use; `scratch`
// when the node keeps none.
template <typename T>
T& keptState(std::any* state, T& scratch) {
  if (state == nullptr) return scratch;
  if (T* kept = std::any_cast<T>(state)) return *kept;
  *state = T{};
  return *std::any_cast<T>(state);
}

// The kernel among those a node keeps that `matches` picks, or a new one from `build`. A node
// sees few input shapes (one batch size for calibration, another for evaluation); past
// `capacity` kernels they are rebuilt rather than kept without bound.
template <typename Kernel, typename Matches, typename Build>
Kernel& keptKernel(std::vector<Kernel>& kernels, size_t capacity, Matches matches, Build build) {
  for (Kernel& k : kernels) {
    if (matches(k)) return k;
  }
  if (kernels.size() >= capacity) kernels.clear();
  kernels.push_back(build());
  return kernels.back();
}

}  // namespace qforge::ops
