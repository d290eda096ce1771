#include "core/memory_order.h"

#include <algorithm>
#include <numeric>

namespace qforge {

std::vector<int64_t> memoryOrder(const at::Tensor& x) {
  std::vector<int64_t> order(static_cast<size_t>(x.dim()));
  std::iota(order.begin(), order.end(), 0);
  // Stable, so dims of equal stride (size-1 dims) keep their logical order.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });
  return order;
}

at::Tensor denseInOwnLayout(const at::Tensor& x) {
  if (x.is_non_overlapping_and_dense()) return x;
  return x.contiguous(x.suggest_memory_format());
}

at::Tensor inMemoryOrder(const at::Tensor& x) {
  if (x.is_contiguous()) return x;
  if (!x.is_non_overlapping_and_dense()) return x.contiguous();
  return x.permute(memoryOrder(x)).contiguous();  // already contiguous: no copy
}

at::Tensor fromMemoryOrder(const at::Tensor& y, const at::Tensor& like) {
  if (like.is_contiguous() || !like.is_non_overlapping_and_dense()) return y.view(like.sizes());
  const std::vector<int64_t> order = memoryOrder(like);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return y.permute(inverse);
}

}  // namespace qforge
