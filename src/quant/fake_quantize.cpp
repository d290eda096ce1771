#include "quant/fake_quantize.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/memory_order.h"
#include "quant/affine_kernels.h"
#include "quant/autograd_util.h"

namespace qforge {
namespace quant {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

AffineGrid gridFor(const at::Tensor& x, const QParams& params, const QScheme& scheme,
                   const char* who) {
  requireLazily(params.defined(),
                [&] { return std::string(who) + ": quantization parameters are not set"; });
  return makeAffineGrid(x, scheme, toDoubles(params.scale), toDoubles(params.zero_point), who);
}

void checkFloatingInput(const at::Tensor& x, const char* who) {
  requireLazily(x.defined(), [&] { return std::string(who) + ": input tensor is undefined"; });
  requireLazily(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, [&] {
    return std::string(who) + ": input must be float32 or float64, got " +
           std::string(c10::toString(x.scalar_type()));
  });
}

at::Tensor floatingContiguous(const at::Tensor& x, const char* who) {
  checkFloatingInput(x, who);
  return x.contiguous();
}

// The kernels walk contiguous memory. A per-tensor grid treats every element alike, so a
// channels-last tensor is read in memory order without a copy (and the result keeps its layout);
// a per-channel grid needs the channel axis where the tensor's shape says it is.
at::Tensor floatingKernelInput(const at::Tensor& x, const QScheme& scheme, const char* who) {
  checkFloatingInput(x, who);
  return scheme.perChannel() ? x.contiguous() : inMemoryOrder(x);
}

// The kernel's result for floatingKernelInput(x, scheme), in x's shape.
at::Tensor kernelResult(const at::Tensor& y, const at::Tensor& x, const QScheme& scheme) {
  return scheme.perChannel() ? y.view(x.sizes()) : fromMemoryOrder(y, x);
}

class FixedFakeQuantizeFn : public torch::autograd::Function<FixedFakeQuantizeFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const AffineGrid& grid) {
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    affineFakeQuantForward(x, grid, out);
    ctx->save_for_backward({x});
    saveGrid(ctx, grid);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor grad_y = grad_outputs[0].contiguous();
    at::Tensor grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
    affineFakeQuantBackward(x, grad_y, loadGrid(ctx), &grad_x, nullptr, nullptr);
    return {grad_x.view(x.sizes()), at::Tensor()};
  }
};

class LearnableFakeQuantizeFn : public torch::autograd::Function<LearnableFakeQuantizeFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& scale,
                            const at::Tensor& zero_point, const AffineGrid& grid,
                            double grad_factor) {
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    affineFakeQuantForward(x, grid, out);
    ctx->save_for_backward({x, scale, zero_point});
    saveGrid(ctx, grid);
    ctx->saved_data["grad_factor"] = grad_factor;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& scale = saved[1];
    const at::Tensor& zero_point = saved[2];
    const double factor = ctx->saved_data["grad_factor"].toDouble();
    const at::Tensor grad_y = grad_outputs[0].contiguous();
    at::Tensor grad_x;
    if (ctx->needs_input_grad(0)) grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
    std::vector<double> grad_scale;
    std::vector<double> grad_zp;
    affineFakeQuantBackward(x, grad_y, loadGrid(ctx), grad_x.defined() ? &grad_x : nullptr,
                            &grad_scale, &grad_zp);
    for (double& g : grad_scale)
      g *= factor;
    for (double& g : grad_zp)
      g *= factor;
    auto asTensor = [](const std::vector<double>& values, const at::Tensor& like) {
      return at::tensor(values, at::TensorOptions().dtype(at::kDouble))
          .to(like.scalar_type())
          .view(like.sizes());
    };
    return {grad_x.defined() ? grad_x.view(x.sizes()) : at::Tensor(), asTensor(grad_scale, scale),
            asTensor(grad_zp, zero_point), at::Tensor(), at::Tensor()};
  }
};

class StraightThroughFn : public torch::autograd::Function<StraightThroughFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& values,
                            const c10::optional<at::Tensor>& mask) {
    (void)x;
    const bool has_mask = mask.has_value() && mask->defined();
    if (has_mask) ctx->save_for_backward({*mask});
    ctx->saved_data["has_mask"] = has_mask;
    // A fresh tensor: returning `values` itself would alias a tensor the caller may reuse.
    return values.clone();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::Tensor grad = grad_outputs[0];
    if (ctx->saved_data["has_mask"].toBool()) {
      const at::Tensor mask = ctx->get_saved_variables()[0];
      grad = grad * mask.to(grad.scalar_type());
    }
    return {grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fakeQuantize(const at::Tensor& x, const QParams& params, const QScheme& scheme) {
  const at::Tensor input = floatingKernelInput(x, scheme, "fake quantize");
  const AffineGrid grid = gridFor(input, params, scheme, "fake quantize");
  return kernelResult(FixedFakeQuantizeFn::apply(input, grid), x, scheme);
}

void fakeQuantizeOut(const at::Tensor& x, const QParams& params, const QScheme& scheme,
                     at::Tensor& out) {
  const at::Tensor input = floatingContiguous(x, "fake quantize");
  affineFakeQuantForward(input, gridFor(input, params, scheme, "fake quantize"), out);
}

void fakeQuantizeInPlace(at::Tensor& x, const QParams& params, const QScheme& scheme) {
  require(x.is_contiguous(), "fake quantize in place: tensor must be contiguous");
  fakeQuantizeOut(x, params, scheme, x);
}

at::Tensor quantize(const at::Tensor& x, const QParams& params, const QScheme& scheme) {
  const at::Tensor input = floatingContiguous(x, "quantize");
  at::Tensor levels = at::empty(input.sizes(), input.options().dtype(at::kInt));
  affineQuantizeToLevels(input, gridFor(input, params, scheme, "quantize"), levels);
  return levels;
}

at::Tensor dequantize(const at::Tensor& levels, const QParams& params, const QScheme& scheme) {
  require(params.defined(), "dequantize: quantization parameters are not set");
  scheme.validate();
  std::vector<int64_t> shape(std::max<int64_t>(levels.dim(), 1), 1);
  if (scheme.perChannel()) {
    require(scheme.axis < levels.dim() && levels.size(scheme.axis) == params.numel(),
            "dequantize: " + std::to_string(params.numel()) +
                " scales do not match the levels on axis " + std::to_string(scheme.axis));
    shape[scheme.axis] = params.numel();
  } else {
    require(params.numel() == 1, "dequantize: per-tensor scheme needs one scale");
  }
  const at::Tensor scale = params.scale.to(at::kFloat).reshape(shape);
  const at::Tensor zp = params.zero_point.to(at::kFloat).reshape(shape);
  // Integer levels and zero points are exact in float32 for the supported <= 16-bit grids.
  return (levels.to(at::kFloat) - zp) * scale;
}

at::Tensor learnableFakeQuantize(const at::Tensor& x, const at::Tensor& scale,
                                 const at::Tensor& zero_point, const QScheme& scheme,
                                 double grad_factor) {
  scheme.validate();
  const at::Tensor input = floatingKernelInput(x, scheme, "learnable fake quantize");
  require(scale.defined() && zero_point.defined() && scale.numel() == zero_point.numel(),
          "learnable fake quantize: scale and zero point must have the same number of values");
  std::vector<double> zps = toDoubles(zero_point);
  for (double& z : zps) {
    z = std::clamp(std::nearbyint(z), static_cast<double>(scheme.qmin()),
                   static_cast<double>(scheme.qmax()));
  }
  const AffineGrid grid =
      makeAffineGrid(input, scheme, toDoubles(scale), std::move(zps), "learnable fake quantize");
  return kernelResult(LearnableFakeQuantizeFn::apply(input, scale, zero_point, grid, grad_factor),
                      x, scheme);
}

at::Tensor straightThrough(const at::Tensor& x, const at::Tensor& values, const at::Tensor& mask) {
  require(x.sizes() == values.sizes(), "straight-through: values must have the input's shape");
  c10::optional<at::Tensor> detached_mask;
  if (mask.defined()) {
    require(mask.sizes() == x.sizes(), "straight-through: mask must have the input's shape");
    detached_mask = mask.detach();
  }
  return StraightThroughFn::apply(x, values.detach(), detached_mask);
}

}  // namespace quant
}  // namespace qforge
