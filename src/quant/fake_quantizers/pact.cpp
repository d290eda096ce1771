#include "quant/fake_quantizers/pact.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "quant/autograd_util.h"
#include "quant/qparams.h"

namespace qforge {
namespace quant {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

enum class PactLowerBound { Zero, MinusAlpha, Beta };

class PactFn : public torch::autograd::Function<PactFn> {
 public:
  // alpha and beta carry autograd; lo/hi are their (clamped) values and grid the quantization
  // grid of [lo, hi].
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& alpha,
                            const at::Tensor& beta, double lo, double hi, const AffineGrid& grid,
                            int64_t lower_bound) {
    at::Tensor out = at::clamp(x, lo, hi).contiguous();
    affineFakeQuantForward(out, grid, out);
    ctx->save_for_backward({x});
    ctx->saved_data["lo"] = lo;
    ctx->saved_data["hi"] = hi;
    ctx->saved_data["lower_bound"] = lower_bound;
    (void)alpha;
    (void)beta;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor& g = grad_outputs[0];
    const double lo = ctx->saved_data["lo"].toDouble();
    const double hi = ctx->saved_data["hi"].toDouble();
    const auto lower = static_cast<PactLowerBound>(ctx->saved_data["lower_bound"].toInt());
    const at::Tensor above = x >= hi;
    const at::Tensor below = x <= lo;
    const at::Tensor grad_x = g * (~above & ~below).to(g.scalar_type());
    at::Tensor grad_alpha = (g * above.to(g.scalar_type())).sum();
    at::Tensor grad_beta;
    if (lower == PactLowerBound::MinusAlpha) {
      grad_alpha = grad_alpha - (g * below.to(g.scalar_type())).sum();
    } else if (lower == PactLowerBound::Beta) {
      grad_beta = (g * below.to(g.scalar_type())).sum().reshape({1});
    }
    return {
        grad_x,      grad_alpha.reshape({1}), grad_beta, at::Tensor(), at::Tensor(), at::Tensor(),
        at::Tensor()};
  }
};

}  // namespace

PactFakeQuantizer::PactFakeQuantizer(std::string name, QScheme scheme, double alpha,
                                     std::unique_ptr<Observer> observer)
    : FakeQuantizer("PACT", std::move(name), scheme, std::move(observer)) {
  if (scheme.perChannel()) fail("PACT clips activations per tensor; use a per-tensor scheme");
  if (!(alpha > 0.0)) fail("initial alpha must be positive");
  alpha_ = at::full({1}, alpha, at::kFloat).set_requires_grad(true);
  if (!scheme.is_unsigned && !scheme.symmetric) {
    beta_ = at::full({1}, -alpha, at::kFloat).set_requires_grad(true);
  }
}

std::vector<at::Tensor> PactFakeQuantizer::parameters() const {
  if (beta_.defined()) return {alpha_, beta_};
  return {alpha_};
}

std::pair<float, float> PactFakeQuantizer::clipRange() const {
  const float eps = static_cast<float>(scheme().eps);
  const float hi = std::max(alpha_.item<float>(), eps);
  if (scheme().is_unsigned) return {0.0f, hi};
  if (scheme().symmetric) return {-hi, hi};
  return {std::min(beta_.item<float>(), -eps), hi};
}

QParams PactFakeQuantizer::currentQParams() const {
  auto [lo, hi] = clipRange();
  return qparamsFromMinMax(lo, hi, scheme());
}

at::Tensor PactFakeQuantizer::quantize(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble) {
    fail("input must be float32 or float64");
  }
  auto [lo, hi] = clipRange();
  const QParams params = qparamsFromMinMax(lo, hi, scheme());
  const at::Tensor input = x.contiguous();
  const AffineGrid grid = makeAffineGrid(input, scheme(), toDoubles(params.scale),
                                         toDoubles(params.zero_point), "PACT");
  const PactLowerBound lower = scheme().is_unsigned ? PactLowerBound::Zero
                               : scheme().symmetric ? PactLowerBound::MinusAlpha
                                                    : PactLowerBound::Beta;
  const at::Tensor beta = beta_.defined() ? beta_ : at::zeros({1}, at::kFloat);
  return PactFn::apply(input, alpha_, beta, static_cast<double>(lo), static_cast<double>(hi), grid,
                       static_cast<int64_t>(lower))
      .view(x.sizes());
}

void PactFakeQuantizer::initFromObserver() {
  auto [lo, hi] = observer()->range();
  const float l = lo.item<float>(), h = hi.item<float>();
  at::NoGradGuard no_grad;
  const float eps = static_cast<float>(scheme().eps);
  alpha_.fill_(std::max(scheme().symmetric && !scheme().is_unsigned ? std::max(-l, h) : h, eps));
  if (beta_.defined()) beta_.fill_(std::min(l, -eps));
}

std::map<std::string, at::Tensor> PactFakeQuantizer::state() const {
  std::map<std::string, at::Tensor> s{{"alpha", alpha_.detach().clone()}};
  if (beta_.defined()) s["beta"] = beta_.detach().clone();
  return s;
}

void PactFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  const at::Tensor alpha = stateEntry(state, "alpha", 1);
  at::NoGradGuard no_grad;
  alpha_.copy_(alpha);
  if (beta_.defined()) beta_.copy_(stateEntry(state, "beta", 1));
}

}  // namespace quant
}  // namespace qforge
