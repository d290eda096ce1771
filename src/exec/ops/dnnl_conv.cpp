#include "exec/ops/dnnl_conv.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "exec/ops/common.h"
#include "exec/ops/dnnl_common.h"

namespace qforge::ops {

namespace {

using dnnl::memory;

// The kernel for one input shape, with the weight reordered into the layout it chose.
struct ShapeKernel {
  std::vector<int64_t> geometry;  // N, C, H, W, strides, dilations, pads
  std::optional<ConvActivation> activation;
  memory::desc src, dst, bias;  // bias: zero descriptor when the convolution has none
  dnnl::convolution_forward primitive;
  memory weights;
  // The execute arguments, built once: each run points src and dst at its tensors
  // (executeWithHandles) instead of creating memory objects and a map, a tenth of a batch-1 conv.
  memory src_mem, dst_mem;
  std::unordered_map<int, memory> args;
};

struct ConvState {
  std::vector<Stamp> sources;  // weight, bias, then the BatchNormalization's tensors
  at::Tensor weight, bias;     // the BatchNormalization folded in; contiguous (M, C/g, kH, kW)
  std::vector<ShapeKernel> kernels;
};

// Kernels kept per node (keptKernel).
constexpr size_t kMaxKernelsPerNode = 4;

std::vector<at::Tensor> sourcesOf(const at::Tensor& w, const at::Tensor& bias,
                                  const ConvEpilogue& epilogue) {
  std::vector<at::Tensor> sources = {w, bias};
  if (epilogue.batch_norm) {
    const ConvBatchNorm& bn = *epilogue.batch_norm;
    sources.insert(sources.end(), {bn.scale, bn.bias, bn.mean, bn.var});
  }
  return sources;
}

bool sameSources(const ConvState& state, const std::vector<at::Tensor>& sources) {
  if (state.sources.size() != sources.size()) return false;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!state.sources[i].matches(sources[i])) return false;
  }
  return true;
}

// The weight and bias the kernel uses: the node's own, or with the BatchNormalization folded in
// (in float32, as ONNX Runtime's Conv+BatchNormalization fusion folds them).
std::pair<at::Tensor, at::Tensor> effectiveWeightAndBias(const at::Tensor& w,
                                                         const at::Tensor& bias,
                                                         const ConvEpilogue& epilogue) {
  if (!epilogue.batch_norm) return {w.contiguous(), bias.defined() ? bias.contiguous() : bias};
  const ConvBatchNorm& bn = *epilogue.batch_norm;
  const at::Tensor factor = bn.scale.to(at::kFloat) * at::rsqrt(bn.var.to(at::kFloat) + bn.epsilon);
  const at::Tensor folded_w = (w * factor.reshape({-1, 1, 1, 1})).contiguous();
  const at::Tensor b = bias.defined() ? bias : at::zeros_like(factor);
  const at::Tensor folded_b = ((b - bn.mean.to(at::kFloat)) * factor + bn.bias.to(at::kFloat));
  return {folded_w, folded_b.contiguous()};
}

dnnl::post_ops postOpsOf(const std::optional<ConvActivation>& activation) {
  using dnnl::algorithm;
  dnnl::post_ops ops;
  if (!activation) return ops;
  const ConvActivation& a = *activation;
  switch (a.kind) {
    case ConvActivation::Kind::Relu:
      ops.append_eltwise(1.f, algorithm::eltwise_relu, a.alpha, 0.f);
      break;
    case ConvActivation::Kind::Clip:
      ops.append_eltwise(1.f, algorithm::eltwise_clip, a.alpha, a.beta);
      break;
    case ConvActivation::Kind::Sigmoid:
      ops.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f);
      break;
    case ConvActivation::Kind::HardSigmoid:
      ops.append_eltwise(1.f, algorithm::eltwise_linear, a.alpha, a.beta);
      ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 1.f);
      break;
    case ConvActivation::Kind::HardSwish:
      ops.append_eltwise(1.f, algorithm::eltwise_hardswish, 0.f, 0.f);
      break;
    case ConvActivation::Kind::Swish:
      ops.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f);
      break;
  }
  return ops;
}

std::vector<int64_t> outputSpatial(const at::Tensor& x, const at::Tensor& w,
                                   const WindowGeometry& g) {
  std::vector<int64_t> out(2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t extent = (w.size(2 + i) - 1) * g.dilations[i] + 1;
    out[i] = (x.size(2 + i) + g.pads_begin[i] + g.pads_end[i] - extent) / g.strides[i] + 1;
  }
  return out;
}

ShapeKernel buildKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const WindowGeometry& g, int64_t group,
                        const std::optional<ConvActivation>& activation,
                        std::vector<int64_t> geometry) {
  const int64_t out_channels = weight.size(0);
  const std::vector<int64_t> spatial = outputSpatial(x, weight, g);
  const memory::desc src(dnnlDims(x.sizes()), memory::data_type::f32, memory::format_tag::nhwc);
  const memory::desc dst({x.size(0), out_channels, spatial[0], spatial[1]}, memory::data_type::f32,
                         memory::format_tag::nhwc);
  memory::dims weight_dims = dnnlDims(weight.sizes());
  if (group > 1) {
    weight_dims = {group, out_channels / group, weight.size(1), weight.size(2), weight.size(3)};
  }
  const memory::desc any_weights(weight_dims, memory::data_type::f32, memory::format_tag::any);
  const memory::desc bias_desc =
      bias.defined() ? memory::desc({out_channels}, memory::data_type::f32, memory::format_tag::x)
                     : memory::desc();
  const memory::dims dilations = {g.dilations[0] - 1, g.dilations[1] - 1};  // oneDNN counts gaps
  const memory::dims strides = dnnlDims(g.strides), pads_l = dnnlDims(g.pads_begin),
                     pads_r = dnnlDims(g.pads_end);
  // A zero bias descriptor is oneDNN's "no bias".
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, src, any_weights,
                                             bias_desc, dst, strides, dilations, pads_l, pads_r);
  dnnl::primitive_attr attr;
  attr.set_post_ops(postOpsOf(activation));
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, cpuEngine());

  const memory::desc plain_weights(
      weight_dims, memory::data_type::f32,
      group > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
  memory plain(plain_weights, cpuEngine(), weight.data_ptr());
  memory packed(pd.weights_desc(), cpuEngine());
  dnnl::reorder(plain, packed).execute(cpuStream(), plain, packed);
  ShapeKernel kernel;
  kernel.geometry = std::move(geometry);
  kernel.activation = activation;
  kernel.src = src;
  kernel.dst = dst;
  kernel.bias = bias_desc;
  kernel.primitive = dnnl::convolution_forward(pd);
  kernel.weights = packed;
  // Null handles until a run sets them; the bias stays the state's until its sources change,
  // and then every kernel is rebuilt.
  kernel.src_mem = memory(src, cpuEngine(), nullptr);
  kernel.dst_mem = memory(dst, cpuEngine(), nullptr);
  kernel.args = {{DNNL_ARG_SRC, kernel.src_mem},
                 {DNNL_ARG_WEIGHTS, kernel.weights},
                 {DNNL_ARG_DST, kernel.dst_mem}};
  if (bias.defined())
    kernel.args.emplace(DNNL_ARG_BIAS, memory(bias_desc, cpuEngine(), bias.data_ptr()));
  return kernel;
}

}  // namespace

bool dnnlConvApplies(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                     const WindowGeometry& g) {
  if (!float32WithoutGrad({x, w, bias}) || x.dim() != 4 || w.dim() != 4 || x.numel() == 0) {
    return false;
  }
  for (int64_t s : outputSpatial(x, w, g)) {
    if (s <= 0) return false;
  }
  return true;
}

at::Tensor dnnlConv2d(std::any* state, const at::Tensor& x, const at::Tensor& w,
                      const at::Tensor& bias, const WindowGeometry& g, int64_t group,
                      const ConvEpilogue& epilogue) {
  ConvState scratch;
  ConvState* cs = &keptState(state, scratch);
  const std::vector<at::Tensor> sources = sourcesOf(w, bias, epilogue);
  if (!sameSources(*cs, sources)) {
    cs->sources.clear();
    for (const at::Tensor& t : sources)
      cs->sources.emplace_back(t);
    std::tie(cs->weight, cs->bias) = effectiveWeightAndBias(w, bias, epilogue);
    cs->kernels.clear();
  }

  std::vector<int64_t> geometry(x.sizes().begin(), x.sizes().end());
  for (const auto* part : {&g.strides, &g.dilations, &g.pads_begin, &g.pads_end})
    geometry.insert(geometry.end(), part->begin(), part->end());
  ShapeKernel* kernel = &keptKernel(
      cs->kernels, kMaxKernelsPerNode,
      [&](const ShapeKernel& k) {
        return k.geometry == geometry && k.activation == epilogue.activation;
      },
      [&] {
        return buildKernel(x, cs->weight, cs->bias, g, group, epilogue.activation, geometry);
      });

  const at::Tensor src = x.contiguous(at::MemoryFormat::ChannelsLast);
  return executeIntoChannelsLast(kernel->primitive, kernel->args, kernel->src_mem, src,
                                 kernel->dst_mem, kernel->dst.dims());
}

}  // namespace qforge::ops
