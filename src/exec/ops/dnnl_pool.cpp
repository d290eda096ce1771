#include "exec/ops/dnnl_pool.h"

#include <ATen/ATen.h>

#include <unordered_map>
#include <utility>

#include "exec/ops/dnnl_common.h"

namespace qforge::ops {

namespace {

using dnnl::memory;

struct PoolKernel {
  std::vector<int64_t> geometry;  // N, C, H, W, then the window
  memory::desc dst;
  dnnl::pooling_forward primitive;
  memory src_mem, dst_mem;
  std::unordered_map<int, memory> args;
};

struct PoolState {
  std::vector<PoolKernel> kernels;
};

// Kernels kept per node (keptKernel), as for convolutions.
constexpr size_t kMaxKernelsPerNode = 4;

// The end pads that make oneDNN's output count the given one (it derives the count from them).
memory::dims padsEnd(const at::Tensor& x, const MaxPoolWindow& w) {
  memory::dims pads(2);
  for (size_t i = 0; i < 2; ++i) {
    pads[i] = (w.output[i] - 1) * w.strides[i] + w.kernel[i] - x.size(2 + i) - w.pads_begin[i];
  }
  return pads;
}

PoolKernel buildKernel(const at::Tensor& x, const MaxPoolWindow& w, std::vector<int64_t> geometry) {
  const memory::desc src(dnnlDims(x.sizes()), memory::data_type::f32, memory::format_tag::nhwc);
  const memory::desc dst({x.size(0), x.size(1), w.output[0], w.output[1]}, memory::data_type::f32,
                         memory::format_tag::nhwc);
  const dnnl::pooling_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst,
      dnnlDims(w.strides), dnnlDims(w.kernel), dnnlDims(w.pads_begin), padsEnd(x, w));
  const dnnl::pooling_forward::primitive_desc pd(desc, cpuEngine());
  PoolKernel kernel;
  kernel.geometry = std::move(geometry);
  kernel.dst = dst;
  kernel.primitive = dnnl::pooling_forward(pd);
  kernel.src_mem = memory(src, cpuEngine(), nullptr);
  kernel.dst_mem = memory(dst, cpuEngine(), nullptr);
  kernel.args = {{DNNL_ARG_SRC, kernel.src_mem}, {DNNL_ARG_DST, kernel.dst_mem}};
  return kernel;
}

}  // namespace

bool dnnlMaxPoolApplies(const at::Tensor& x, const MaxPoolWindow& window) {
  if (!x.defined() || x.scalar_type() != at::kFloat || x.dim() != 4 || x.numel() == 0 ||
      x.requires_grad() || !x.is_contiguous(at::MemoryFormat::ChannelsLast) || x.is_contiguous()) {
    return false;
  }
  const memory::dims pads_end = padsEnd(x, window);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = window.kernel[i];
    if (window.output[i] <= 0 || window.pads_begin[i] >= k || pads_end[i] < 0 || pads_end[i] >= k)
      return false;
  }
  return true;
}

at::Tensor dnnlMaxPool2d(std::any* state, const at::Tensor& x, const MaxPoolWindow& window) {
  PoolState scratch;
  PoolState& ps = keptState(state, scratch);
  std::vector<int64_t> geometry(x.sizes().begin(), x.sizes().end());
  for (const auto* part : {&window.kernel, &window.strides, &window.pads_begin, &window.output})
    geometry.insert(geometry.end(), part->begin(), part->end());
  PoolKernel* kernel = &keptKernel(
      ps.kernels, kMaxKernelsPerNode, [&](const PoolKernel& k) { return k.geometry == geometry; },
      [&] { return buildKernel(x, window, geometry); });
  return executeIntoChannelsLast(kernel->primitive, kernel->args, kernel->src_mem, x,
                                 kernel->dst_mem, kernel->dst.dims());
}

}  // namespace qforge::ops
