// Lowerings of the normalization ops: BatchNormalization, LayerNormalization,
// InstanceNormalization. Inference paths call the ATen functions PyTorch eager calls
// (at::batch_norm, at::layer_norm, at::instance_norm); the rest is closed-form ATen math so that
// autograd can run through it.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "ir/dtype.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::shapeString;

// True when output `i` exists and is named, i.e. the model asks for it.
bool wantsOutput(const OpContext& ctx, size_t i) {
  return ctx.outputCount() > i && !ctx.node().output(i)->anonymous;
}

// Checks that the per-channel inputs (slots first..last) of X are 1-D of size C and of X's dtype.
std::vector<at::Tensor> channelParams(const OpContext& ctx, const at::Tensor& x, size_t first,
                                      size_t last, at::IntArrayRef expected_shape) {
  static const char* kNames[] = {"X", "scale", "B", "mean", "var"};
  std::vector<at::Tensor> params;
  for (size_t i = first; i <= last; ++i) {
    at::Tensor p = ctx.input(i);
    if (p.sizes() != expected_shape) {
      ctx.fail(std::string("input ") + kNames[i] + " must have shape " +
               shapeString(expected_shape) + ", got " + shapeString(p.sizes()));
    }
    // Opset 15 lets scale/B and mean/var have their own float types.
    params.push_back(p.scalar_type() == x.scalar_type() ? p : p.to(x.scalar_type()));
  }
  return params;
}

// Shape that puts a (C, ...) parameter on axis 1 of a rank-`rank` tensor.
std::vector<int64_t> channelShape(const at::Tensor& param, int64_t rank) {
  std::vector<int64_t> shape = {1};
  for (int64_t s : param.sizes())
    shape.push_back(s);
  shape.resize(rank, 1);
  return shape;
}

std::vector<at::Tensor> batchNormInference(const OpContext& ctx, const at::Tensor& x,
                                           bool spatial) {
  const double epsilon = ctx.attrFloat("epsilon", 1e-5);
  const double momentum = ctx.attrFloat("momentum", 0.9);
  if (spatial) {
    if (x.dim() < 2) ctx.fail("input X must be (N, C, ...), got rank " + std::to_string(x.dim()));
    const std::vector<at::Tensor> p = channelParams(ctx, x, 1, 4, {x.size(1)});
    return {at::batch_norm(x, p[0], p[1], p[2], p[3], /*training=*/false, momentum, epsilon,
                           /*cudnn_enabled=*/false)};
  }
  // spatial=0 (opsets <= 8): statistics per activation, parameters shaped like X[0].
  const std::vector<at::Tensor> p = channelParams(ctx, x, 1, 4, x.sizes().slice(1));
  return {(x - p[2]) * at::rsqrt(p[3] + epsilon) * p[0] + p[1]};
}

// Opsets 1-13: inference only. Their training outputs (mean, var, saved_mean, saved_var) were
// tied to is_test=0, which exporters stopped emitting; models that read them are refused.
std::vector<at::Tensor> batchNormLegacy(const OpContext& ctx) {
  for (size_t i = 1; i < ctx.outputCount(); ++i) {
    if (wantsOutput(ctx, i)) {
      ctx.fail(
          "training-mode outputs (mean, var, saved_mean, saved_var) are not supported before "
          "opset 14; convert the model to opset 14+ and use training_mode");
    }
  }
  const bool spatial = ctx.opset() >= 9 || ctx.attrInt("spatial", 1) != 0;
  return batchNormInference(ctx, ctx.input(0), spatial);
}

std::vector<at::Tensor> batchNorm(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (ctx.attrInt("training_mode", 0) == 0) {
    if (wantsOutput(ctx, 1) || wantsOutput(ctx, 2)) {
      ctx.fail("running_mean/running_var outputs are only defined when training_mode=1");
    }
    return batchNormInference(ctx, x, /*spatial=*/true);
  }
  // Training mode: normalize with the batch statistics (biased variance, as ONNX's reference)
  // and blend them into the running statistics, without touching the inputs in place.
  if (x.dim() < 2) ctx.fail("input X must be (N, C, ...), got rank " + std::to_string(x.dim()));
  const double epsilon = ctx.attrFloat("epsilon", 1e-5);
  const double momentum = ctx.attrFloat("momentum", 0.9);
  const std::vector<at::Tensor> p = channelParams(ctx, x, 1, 4, {x.size(1)});
  std::vector<int64_t> reduce_dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d)
    reduce_dims.push_back(d);
  auto [batch_var, batch_mean] = at::var_mean(x, reduce_dims, /*unbiased=*/false);
  const std::vector<int64_t> shape = channelShape(p[0], x.dim());
  at::Tensor y = (x - batch_mean.reshape(shape)) * at::rsqrt(batch_var.reshape(shape) + epsilon) *
                     p[0].reshape(shape) +
                 p[1].reshape(shape);
  const at::ScalarType stat_type = ctx.input(3).scalar_type();
  at::Tensor running_mean = (p[2] * momentum + batch_mean * (1 - momentum)).to(stat_type);
  at::Tensor running_var = (p[3] * momentum + batch_var * (1 - momentum)).to(stat_type);
  return {y, running_mean, running_var};
}

std::vector<at::Tensor> layerNorm(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const int64_t rank = x.dim();
  if (rank < 1) ctx.fail("input X must have rank >= 1");
  const int64_t axis = ops::normalizeAxis(ctx, ctx.attrInt("axis", -1), rank);
  const double epsilon = ctx.attrFloat("epsilon", 1e-5);
  const at::IntArrayRef normalized_shape = x.sizes().slice(axis);

  // stash_type is the ONNX element type the statistics are computed (and returned) in.
  const int64_t stash_type = ctx.attrInt("stash_type", 1);
  if (stash_type != 1 && stash_type != 10 && stash_type != 11 && stash_type != 16) {
    ctx.fail("stash_type " + std::to_string(stash_type) + " is not a floating-point type");
  }
  const at::ScalarType compute_type = toScalarType(static_cast<DType>(stash_type));

  // Scale and B broadcast to X's normalized dims; ATen wants them exactly that shape.
  auto param = [&](size_t slot, const char* name) -> at::Tensor {
    if (!ctx.hasInput(slot)) return {};
    at::Tensor p = ctx.input(slot);
    if (!at::is_expandable_to(p.sizes(), normalized_shape)) {
      ctx.fail(std::string(name) + " of shape " + shapeString(p.sizes()) +
               " does not broadcast to the normalized shape " + shapeString(normalized_shape));
    }
    if (p.sizes() != normalized_shape) p = p.expand(normalized_shape).contiguous();
    return p.scalar_type() == compute_type ? p : p.to(compute_type);
  };
  const at::Tensor scale = param(1, "Scale");
  const at::Tensor bias = param(2, "B");
  const at::Tensor xc = x.scalar_type() == compute_type ? x : x.to(compute_type);

  if (!wantsOutput(ctx, 1) && !wantsOutput(ctx, 2)) {
    // The eager path: what torch.nn.functional.layer_norm runs.
    at::Tensor y = at::layer_norm(xc, normalized_shape, scale, bias, epsilon,
                                  /*cudnn_enable=*/false);
    return {y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type())};
  }
  auto [y, mean, inv_std_dev] = at::native_layer_norm(xc, normalized_shape, scale, bias, epsilon);
  // Mean and InvStdDev keep X's leading dims and have 1 in each normalized dim.
  std::vector<int64_t> stat_shape(x.sizes().begin(), x.sizes().begin() + axis);
  stat_shape.resize(rank, 1);
  return {y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type()), mean.reshape(stat_shape),
          inv_std_dev.reshape(stat_shape)};
}

std::vector<at::Tensor> instanceNorm(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.dim() < 3) {
    ctx.fail("input must be (N, C, D1, ...) of rank >= 3, got rank " + std::to_string(x.dim()));
  }
  const std::vector<at::Tensor> p = channelParams(ctx, x, 1, 2, {x.size(1)});
  const double epsilon = ctx.attrFloat("epsilon", 1e-5);
  // What torch.nn.functional.instance_norm runs without running statistics.
  return {at::instance_norm(x, p[0], p[1], /*running_mean=*/{}, /*running_var=*/{},
                            /*use_input_stats=*/true, /*momentum=*/0.1, epsilon,
                            /*cudnn_enabled=*/false)};
}

}  // namespace

void registerNormalizationOps(OpRegistry& registry) {
  // Opsets 1-13 differ in consumed_inputs / is_test / spatial, all handled by the legacy lowering.
  registry.add(ops::op("BatchNormalization", 1, 13, batchNormLegacy));
  registry.add(ops::op("BatchNormalization", 14, kLatestOpset, batchNorm));
  registry.add(ops::op("LayerNormalization", 17, kLatestOpset, layerNorm));
  // Opset 1 only adds consumed_inputs, which qforge ignores.
  registry.add(ops::op("InstanceNormalization", 1, kLatestOpset, instanceNorm));
}

}  // namespace qforge
