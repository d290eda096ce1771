// Activation lowerings: Relu family, Clip, sigmoid-like ops and (Log)Softmax.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/mlas_ops.h"

namespace qforge {

namespace {

using ops::floatInput;
using ops::kLatestOpset;
using ops::op;

std::vector<at::Tensor> prelu(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& slope = ctx.input(1);
  // Slope broadcasts to X only one way (X's shape is the output shape). at::prelu wants a
  // per-channel 1-D slope, so the general form is written out.
  const std::vector<int64_t> out_shape = at::infer_size(x.sizes(), slope.sizes());
  if (out_shape != x.sizes().vec()) {
    ctx.fail("slope of shape " + c10::str(slope.sizes()) + " does not broadcast to X of shape " +
             c10::str(x.sizes()));
  }
  return {at::where(x < 0, x * slope, x)};
}

// A Clip bound given as an (optional) scalar input, opset 11+.
c10::optional<at::Scalar> clipBound(const OpContext& ctx, size_t i) {
  if (!ctx.hasInput(i)) return c10::nullopt;
  const at::Tensor& bound = ctx.input(i);
  if (bound.numel() != 1) {
    ctx.fail(std::string(i == 1 ? "min" : "max") + " must be a scalar, got shape " +
             c10::str(bound.sizes()));
  }
  if (bound.scalar_type() != ctx.input(0).scalar_type()) {
    ctx.fail(std::string(i == 1 ? "min" : "max") + " has element type " +
             c10::toString(bound.scalar_type()) + ", input has " +
             c10::toString(ctx.input(0).scalar_type()));
  }
  return bound.item();
}

at::Tensor clip(const OpContext& ctx, const at::Tensor& x) {
  c10::optional<at::Scalar> low, high;
  if (ctx.opset() < 11) {
    // Opsets 6-10 give the bounds as attributes, defaulting to the float range.
    low = ctx.attrFloat("min", std::numeric_limits<float>::lowest());
    high = ctx.attrFloat("max", std::numeric_limits<float>::max());
  } else {
    low = clipBound(ctx, 1);
    high = clipBound(ctx, 2);
  }
  if (!low && !high) return x;
  // Like ONNX, at::clamp gives `max` everywhere when min > max.
  if (ctx.mayOverwriteInput(0) && x.is_same(ctx.input(0))) return x.clamp_(low, high);
  return at::clamp(x, low, high);
}

// Opsets 1-12: X is seen as 2-D [d0*...*d(axis-1), d(axis)*...*dn] and normalized per row.
// Opset 13+: normalized along the single axis.
at::Tensor softmaxFamily(const OpContext& ctx, const at::Tensor& x, bool log) {
  const int64_t rank = x.dim();
  auto apply = [log](const at::Tensor& t, int64_t dim) {
    return log ? at::log_softmax(t, dim) : at::softmax(t, dim);
  };
  const bool per_axis = ctx.opset() >= 13;
  const int64_t axis = ops::normalizeAxis(ctx, ctx.attrInt("axis", per_axis ? -1 : 1), rank);
  // Softmax computes as ONNX Runtime does wherever the MLAS kernel applies (exec/ops/mlas_ops.h):
  // rows along an axis, which a scalar does not have.
  if (!log && rank > 0 && ops::mlasKernelsApply(x)) return ops::mlasSoftmax(x, axis, !per_axis);
  if (per_axis) return apply(x, axis);
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) {
    rows *= x.size(d);
  }
  // reshape({rows, -1}) cannot infer the width of an empty tensor.
  const int64_t cols = rows == 0 ? 0 : x.numel() / rows;
  return apply(x.reshape({rows, cols}), 1).reshape(x.sizes());
}

// Clip's output is >= 0 where its lower bound is: a constant input (opset 11+) or the `min`
// attribute (opsets 6-10).
OutputSign clipSign(const Node& clip) {
  const Value* low = clip.input(1);
  if (low != nullptr && low->isInitializer()) {
    return low->initializer().item<double>() >= 0 ? OutputSign::NonNegative : OutputSign::Unknown;
  }
  const Attribute* min = clip.attributes.find("min");
  return min != nullptr && min->f >= 0 ? OutputSign::NonNegative : OutputSign::Unknown;
}

using Activation = std::function<at::Tensor(const OpContext&, const at::Tensor&)>;

// Registers a one-input activation for opsets `since`..latest. libtorch 1.13 has no CPU float16
// kernels for most of these, so float16 runs in float32 and is rounded back (still differentiable).
OpInfo activation(const std::string& name, int64_t since, bool float_only, Activation fn) {
  return op(name, since, kLatestOpset, [fn, float_only](const OpContext& ctx) {
    const at::Tensor& x = float_only ? floatInput(ctx, 0) : ctx.input(0);
    if (x.scalar_type() == at::kHalf) {
      return std::vector<at::Tensor>{fn(ctx, x.to(at::kFloat)).to(at::kHalf)};
    }
    return std::vector<at::Tensor>{fn(ctx, x)};
  });
}

void addActivation(OpRegistry& registry, const std::string& name, int64_t since, bool float_only,
                   Activation fn) {
  registry.add(activation(name, since, float_only, std::move(fn)));
}

// ONNX's max(0, min(1, alpha * x + beta)) in one pass over a dense float tensor, in memory order
// (a convolution's channels-last output stays so): ATen's three ops (mul, add, clamp) read and
// wrote the tensor three times. The product and the sum are rounded separately, as ATen's and ONNX
// Runtime's kernels round them.
at::Tensor hardSigmoidFloat(const at::Tensor& x, float alpha, float beta) {
  at::Tensor y = at::empty_like(x);  // the same strides: element i of memory maps to element i
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, x.numel(), ops::kParallelGrainElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float scaled = in[i] * alpha;
      const float v = scaled + beta;
      // NaN stays NaN: both comparisons are false.
      out[i] = v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
    }
  });
  return y;
}

// An activation whose output is >= 0 whatever its input.
OpInfo nonNegative(OpInfo info) {
  return ops::withSign(std::move(info), OutputSign::NonNegative);
}

}  // namespace

void registerActivationOps(OpRegistry& registry) {
  // Relu and Clip reuse a released input's memory, as eager PyTorch's in-place activations do.
  registry.add(
      nonNegative(activation("Relu", 1, false, [](const OpContext& ctx, const at::Tensor& x) {
        return ctx.mayOverwriteInput(0) && x.is_same(ctx.input(0)) ? x.relu_() : at::relu(x);
      })));
  addActivation(registry, "LeakyRelu", 1, true, [](const OpContext& ctx, const at::Tensor& x) {
    return at::leaky_relu(x, ctx.attrFloat("alpha", 0.01));
  });
  // The slope is learned, per channel when not shared, but has no output channels of its own; a
  // slope computed at run time is an activation.
  registry.add(ops::combinesActivations(
      ops::withWeights(op("PRelu", 1, kLatestOpset, prelu), {1}, -1, WeightLayout::None)));
  addActivation(registry, "Elu", 1, true, [](const OpContext& ctx, const at::Tensor& x) {
    return at::elu(x, ctx.attrFloat("alpha", 1.0));
  });
  OpInfo clip_info = activation("Clip", 1, false, clip);
  clip_info.output_sign_of = clipSign;
  registry.add(std::move(clip_info));
  registry.add(
      nonNegative(activation("Sigmoid", 1, true, [](const OpContext&, const at::Tensor& x) {
        // ORT's rounding where it can be had (an Equal of a sigmoid map with its MaxPool keeps
        // what ORT keeps); ATen's under autograd.
        return ops::mlasKernelsApply(x) ? ops::mlasLogistic(x) : at::sigmoid(x);
      })));
  addActivation(registry, "Tanh", 1, true,
                [](const OpContext&, const at::Tensor& x) { return at::tanh(x); });
  addActivation(registry, "HardSigmoid", 1, true, [](const OpContext& ctx, const at::Tensor& x) {
    const double alpha = ctx.attrFloat("alpha", 0.2), beta = ctx.attrFloat("beta", 0.5);
    if (ops::float32WithoutGrad({x}) && x.is_non_overlapping_and_dense()) {
      return hardSigmoidFloat(x, static_cast<float>(alpha), static_cast<float>(beta));
    }
    return at::clamp(x * alpha + beta, 0.0, 1.0);
  });
  // x * HardSigmoid(x) with alpha = 1/6, beta = 1/2, which is exactly at::hardswish.
  addActivation(registry, "HardSwish", 14, true,
                [](const OpContext&, const at::Tensor& x) { return at::hardswish(x); });
  registry.add(
      nonNegative(activation("Softmax", 1, true, [](const OpContext& ctx, const at::Tensor& x) {
        return softmaxFamily(ctx, x, /*log=*/false);
      })));
  addActivation(registry, "LogSoftmax", 1, true, [](const OpContext& ctx, const at::Tensor& x) {
    return softmaxFamily(ctx, x, /*log=*/true);
  });
}

}  // namespace qforge
