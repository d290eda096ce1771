// The loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12 and 13). A
// model exported with its loss attached (for training, or to score inside the graph) runs to
// the end; qforge never quantizes them (no role in any backend).
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::op;

struct LossSettings {
  std::string reduction;  // none, sum or mean
  std::optional<int64_t> ignore_index;
};

LossSettings lossSettings(const OpContext& ctx) {
  LossSettings s;
  s.reduction = ctx.attrString("reduction", "mean");
  if (s.reduction != "none" && s.reduction != "sum" && s.reduction != "mean") {
    ctx.fail("unknown reduction '" + s.reduction + "' (expected none, sum or mean)");
  }
  if (ctx.hasAttr("ignore_index")) s.ignore_index = ctx.attrInt("ignore_index");
  return s;
}

// -input[n, target[n, d...], d...] * weight[target], zero where the target is ignore_index, then
// reduced: a mean divides by the sum of the weights that counted (ONNX's definition).
at::Tensor negativeLogLikelihood(const OpContext& ctx, const at::Tensor& input,
                                 const at::Tensor& target, const at::Tensor& weight,
                                 const LossSettings& s) {
  if (!at::isFloatingType(input.scalar_type())) ctx.fail("input must be a float tensor");
  if (at::isFloatingType(target.scalar_type())) ctx.fail("target must be an integer tensor");
  if (input.dim() < 2 || target.dim() != input.dim() - 1 || target.size(0) != input.size(0) ||
      target.sizes().slice(1) != input.sizes().slice(2)) {
    ctx.fail("target of shape " + ops::dimsText(target.sizes()) +
             " does not match input of shape " + ops::dimsText(input.sizes()) +
             " (expected [N, d1, ...] for input [N, C, d1, ...])");
  }
  const int64_t classes = input.size(1);
  const at::Tensor t = target.to(at::kLong);
  const at::Tensor counted = s.ignore_index ? t.ne(*s.ignore_index) : at::ones_like(t, at::kBool);
  const at::Tensor safe = at::where(counted, t, at::zeros_like(t));
  if (safe.numel() > 0 &&
      (safe.min().item<int64_t>() < 0 || safe.max().item<int64_t>() >= classes)) {
    ctx.fail("a target is outside [0, " + std::to_string(classes) + ") and is not ignore_index");
  }
  if (weight.defined() && (weight.dim() != 1 || weight.size(0) != classes)) {
    ctx.fail("weight must have shape [" + std::to_string(classes) + "], got " +
             ops::dimsText(weight.sizes()));
  }
  at::Tensor w =
      weight.defined()
          ? weight.to(input.scalar_type()).index_select(0, safe.reshape(-1)).reshape(safe.sizes())
          : at::ones(safe.sizes(), input.options());
  w = w * counted.to(input.scalar_type());
  const at::Tensor picked = input.gather(1, safe.unsqueeze(1)).squeeze(1);
  const at::Tensor loss = -picked * w;
  if (s.reduction == "none") return loss;
  if (s.reduction == "sum") return loss.sum();
  return loss.sum() / w.sum();
}

std::vector<at::Tensor> negativeLogLikelihoodLoss(const OpContext& ctx) {
  const at::Tensor weight = ctx.hasInput(2) ? ctx.input(2) : at::Tensor();
  return {negativeLogLikelihood(ctx, ctx.input(0), ctx.input(1), weight, lossSettings(ctx))};
}

// The NLL of log_softmax over the class axis (1); the log-probabilities are the second output.
std::vector<at::Tensor> softmaxCrossEntropyLoss(const OpContext& ctx) {
  const at::Tensor& scores = ctx.input(0);
  if (scores.dim() < 2)
    ctx.fail("scores must be [N, C, ...], got rank " + std::to_string(scores.dim()));
  const at::Tensor log_prob = at::log_softmax(scores, 1);
  const at::Tensor weight = ctx.hasInput(2) ? ctx.input(2) : at::Tensor();
  const at::Tensor loss =
      negativeLogLikelihood(ctx, log_prob, ctx.input(1), weight, lossSettings(ctx));
  if (ctx.outputCount() > 1) return {loss, log_prob};
  return {loss};
}

}  // namespace

void registerLossOps(OpRegistry& r) {
  r.add(op("NegativeLogLikelihoodLoss", 12, kLatestOpset, negativeLogLikelihoodLoss));
  r.add(op("SoftmaxCrossEntropyLoss", 12, kLatestOpset, softmaxCrossEntropyLoss));
}

}  // namespace qforge
