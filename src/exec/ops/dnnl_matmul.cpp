#include "exec/ops/dnnl_matmul.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exec/ops/common.h"
#include "exec/ops/dnnl_common.h"

namespace qforge::ops {

namespace {

using dnnl::memory;

// One product shape: the operands' sizes and strides, and whether the weight is packed.
struct MatMulKernel {
  std::vector<int64_t> key;
  memory::desc src, weights, dst;
  dnnl::matmul primitive;
  std::optional<memory> packed;        // the weight reordered into `weights`, when packed
  std::optional<Stamp> packed_source;  // ... and the tensor it was reordered from
  // The execute arguments, built once; each run sets their data handles (as the conv kernel).
  memory src_mem, weights_mem, dst_mem, bias_mem;
  std::unordered_map<int, memory> args;
};

struct MatMulState {
  // The 2-D right operand of the last call: seen again unchanged, it is a weight worth packing.
  std::optional<Stamp> last_weight;
  std::vector<MatMulKernel> kernels;
};

// A node sees few shapes; past this many the kernels are rebuilt rather than kept without bound.
constexpr size_t kMaxKernelsPerNode = 6;

bool positiveStrides(const at::Tensor& t) {
  for (int64_t s : t.strides()) {
    if (s <= 0) return false;
  }
  return true;
}

// An operand as oneDNN reads it: its own strides when every one is positive (views such as
// transposes are read in place), else a contiguous copy.
at::Tensor readable(const at::Tensor& t) {
  return positiveStrides(t) ? t : t.contiguous();
}

memory::desc stridedDesc(const at::Tensor& t) {
  return memory::desc(dnnlDims(t.sizes()), memory::data_type::f32, dnnlDims(t.strides()));
}

std::vector<int64_t> keyOf(const at::Tensor& a, const at::Tensor& b, bool packed, bool bias) {
  std::vector<int64_t> key;
  for (const at::Tensor* t : {&a, &b}) {
    key.push_back(t->dim());
    key.insert(key.end(), t->sizes().begin(), t->sizes().end());
    key.insert(key.end(), t->strides().begin(), t->strides().end());
  }
  key.push_back(packed ? 1 : 0);
  key.push_back(bias ? 1 : 0);
  return key;
}

MatMulKernel buildKernel(const at::Tensor& a, const at::Tensor& b, bool packed, bool bias,
                         std::vector<int64_t> key) {
  std::vector<int64_t> dst_sizes = a.sizes().vec();
  dst_sizes.back() = b.size(-1);
  const memory::desc src = stridedDesc(a);
  const memory::desc plain_weights = stridedDesc(b);
  const memory::desc weights =
      packed ? memory::desc(dnnlDims(b.sizes()), memory::data_type::f32, memory::format_tag::any)
             : plain_weights;
  std::vector<int64_t> dst_strides(dst_sizes.size(), 1);  // row-major
  for (size_t d = dst_sizes.size() - 1; d > 0; --d)
    dst_strides[d - 1] = dst_strides[d] * dst_sizes[d];
  const memory::desc dst(dnnlDims(dst_sizes), memory::data_type::f32, dnnlDims(dst_strides));
  // A bias comes only with a 2-D weight, so the product is 2-D: (1, N).
  const memory::desc bias_desc({1, b.size(-1)}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(bias ? dnnl::matmul::desc(src, weights, bias_desc, dst)
                                             : dnnl::matmul::desc(src, weights, dst),
                                        cpuEngine());
  MatMulKernel kernel;
  kernel.key = std::move(key);
  kernel.src = src;
  kernel.weights = pd.weights_desc();
  kernel.dst = dst;
  kernel.primitive = dnnl::matmul(pd);
  if (packed) {
    memory plain(plain_weights, cpuEngine(), b.data_ptr());
    memory reordered(pd.weights_desc(), cpuEngine());
    dnnl::reorder(plain, reordered).execute(cpuStream(), plain, reordered);
    kernel.packed = reordered;
    kernel.packed_source.emplace(b);
  }
  kernel.src_mem = memory(src, cpuEngine(), nullptr);
  kernel.dst_mem = memory(dst, cpuEngine(), nullptr);
  kernel.weights_mem = packed ? *kernel.packed : memory(kernel.weights, cpuEngine(), nullptr);
  kernel.args = {{DNNL_ARG_SRC, kernel.src_mem},
                 {DNNL_ARG_WEIGHTS, kernel.weights_mem},
                 {DNNL_ARG_DST, kernel.dst_mem}};
  if (bias) {
    kernel.bias_mem = memory(bias_desc, cpuEngine(), nullptr);
    kernel.args.emplace(DNNL_ARG_BIAS, kernel.bias_mem);
  }
  return kernel;
}

}  // namespace

bool dnnlMatMulApplies(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || !float32WithoutGrad({a, b}) || a.dim() < 2 || b.dim() < 2 ||
      a.numel() == 0 || b.numel() == 0 || a.size(-1) != b.size(-2)) {
    return false;
  }
  if (b.dim() == 2) return true;
  // oneDNN takes up to 12 dims; the batch dims must agree exactly (no broadcasting here).
  return a.dim() == b.dim() && a.dim() <= 6 &&
         a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2);
}

at::Tensor asColumnBias(const at::Tensor& c, int64_t columns, int64_t rank) {
  if (!c.defined() || c.scalar_type() != at::kFloat || c.requires_grad() || c.dim() > rank) {
    return {};
  }
  return valuesAlongLastAxis(c, columns);
}

at::Tensor dnnlMatMul(std::any* state, const at::Tensor& a_in, const at::Tensor& b_in,
                      const at::Tensor& bias) {
  MatMulState scratch;
  MatMulState* ms = &keptState(state, scratch);
  // A 2-D right operand takes a's leading dims as rows of one product: [..., M, K] -> [R, K].
  const bool rows_product = b_in.dim() == 2;
  at::Tensor a = rows_product ? a_in.reshape({-1, a_in.size(-1)}) : a_in;
  a = readable(a);
  const at::Tensor b = readable(b_in);

  // Pack a 2-D weight only when it comes back unchanged: a right operand computed afresh on
  // every run would be reordered for one use.
  bool packed = false;
  if (rows_product) {
    packed = ms->last_weight && ms->last_weight->matches(b);
    ms->last_weight.emplace(b);
  }
  const bool with_bias = bias.defined();
  if (with_bias && (!rows_product || bias.numel() != b.size(-1) || !bias.is_contiguous())) {
    throw qforge::Error("dnnlMatMul: the bias must be " + std::to_string(b.size(-1)) +
                        " contiguous values for a 2-D weight (a qforge bug)");
  }
  std::vector<int64_t> key = keyOf(a, b, packed, with_bias);
  auto found = std::find_if(ms->kernels.begin(), ms->kernels.end(),
                            [&](const MatMulKernel& k) { return k.key == key; });
  // A packed kernel holds the weight's values of its time: another weight, or this one changed
  // in place, needs it rebuilt.
  if (found != ms->kernels.end() && packed && !found->packed_source->matches(b)) {
    ms->kernels.erase(found);
    found = ms->kernels.end();
  }
  if (found == ms->kernels.end()) {
    if (ms->kernels.size() >= kMaxKernelsPerNode) ms->kernels.clear();
    ms->kernels.push_back(buildKernel(a, b, packed, with_bias, std::move(key)));
    found = ms->kernels.end() - 1;
  }
  MatMulKernel* kernel = &*found;

  at::Tensor out =
      at::empty(kernel->dst.dims(), a.options().memory_format(at::MemoryFormat::Contiguous));
  executeWithHandles(
      kernel->primitive, kernel->args,
      {{&kernel->src_mem, a.data_ptr()},
       {&kernel->dst_mem, out.data_ptr()},
       {kernel->packed ? nullptr : &kernel->weights_mem, b.data_ptr()},
       {with_bias ? &kernel->bias_mem : nullptr, with_bias ? bias.data_ptr() : nullptr}});
  if (!rows_product) return out;
  std::vector<int64_t> result_sizes = a_in.sizes().vec();
  result_sizes.back() = b.size(-1);
  return out.view(result_sizes);
}

}  // namespace qforge::ops
