#include "exec/ops/mlas_ops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "exec/ops/common.h"
#include "exec/ops/mlas_kernels.h"

namespace qforge::ops {

bool mlasKernelsApply(const at::Tensor& x) {
  return x.defined() && float32WithoutGrad({x});
}

at::Tensor mlasSoftmax(const at::Tensor& x, int64_t axis, bool flatten_from_axis) {
  const int64_t rank = x.dim();
  const at::Tensor rows = flatten_from_axis ? x.contiguous() : x.movedim(axis, -1).contiguous();
  at::Tensor y = at::empty_like(rows, at::MemoryFormat::Contiguous);
  if (rows.numel() == 0) return flatten_from_axis ? y : y.movedim(-1, axis);
  int64_t width = 1;  // the row: the axis, or everything from it on before opset 13
  for (int64_t d = flatten_from_axis ? axis : rank - 1; d < rank; ++d)
    width *= rows.size(d);
  const int64_t count = rows.numel() / width;
  const float* in = rows.data_ptr<float>();
  float* out = y.data_ptr<float>();
  const mlas::SumExpKernel kernel = mlas::sumExpKernelOfThisCpu();
  const int64_t grain = std::max<int64_t>(1, kParallelGrainElements / width);
  at::parallel_for(0, count, grain, [&](int64_t begin, int64_t end) {
    mlas::softmaxRows(in + begin * width, out + begin * width, end - begin, width, kernel);
  });
  return flatten_from_axis ? y : y.movedim(-1, axis);
}

namespace {

// An elementwise kernel over `x`'s values: a dense tensor in any layout is read in memory order,
// as it lies, in chunks split across threads. `kernel(in, out, count)` fills `out` from `in`.
template <typename Kernel>
at::Tensor elementwise(const at::Tensor& x, Kernel kernel) {
  const at::Tensor c = x.is_non_overlapping_and_dense() ? x : x.contiguous();
  at::Tensor y = at::empty_like(c);
  const float* in = c.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, c.numel(), kParallelGrainElements, [&](int64_t begin, int64_t end) {
    kernel(in + begin, out + begin, end - begin);
  });
  return y;
}

}  // namespace

at::Tensor mlasErf(const at::Tensor& x) {
  return elementwise(x, mlas::erfArray);
}

at::Tensor mlasLogistic(const at::Tensor& x) {
  return elementwise(x, mlas::logisticArray);
}

at::Tensor mlasGelu(const at::Tensor& x) {
  return elementwise(x, mlas::geluArray);
}

}  // namespace qforge::ops
