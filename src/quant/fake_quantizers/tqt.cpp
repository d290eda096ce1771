#include "quant/fake_quantizers/tqt.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "quant/autograd_util.h"

namespace qforge {
namespace quant {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class TqtFn : public torch::autograd::Function<TqtFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& log2_t,
                            const AffineGrid& grid) {
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    affineFakeQuantForward(x, grid, out);
    ctx->save_for_backward({x, log2_t});
    saveGrid(ctx, grid);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& log2_t = saved[1];
    const AffineGrid grid = loadGrid(ctx);
    at::Tensor grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
    std::vector<double> grad_scale;
    affineFakeQuantBackward(x, grad_outputs[0].contiguous(), grid, &grad_x, &grad_scale, nullptr);
    // s = 2^ceil(l) / n with ceil straight-through: ds/dl = s ln 2.
    const double grad_l = grad_scale[0] * grid.scales[0] * std::log(2.0);
    return {grad_x.view(x.sizes()), sumsAsTensor({grad_l}, log2_t), at::Tensor()};
  }
};

}  // namespace

TqtFakeQuantizer::TqtFakeQuantizer(std::string name, QScheme scheme,
                                   std::unique_ptr<Observer> observer)
    : FakeQuantizer("TQT", std::move(name), scheme, std::move(observer)) {
  if (!scheme.symmetric) fail("TQT quantizes symmetrically (zero point 0); use a symmetric scheme");
  if (scheme.perChannel()) fail("TQT trains one threshold per tensor; use a per-tensor scheme");
  log2_t_ = at::zeros({1}, at::kFloat).set_requires_grad(true);
}

void TqtFakeQuantizer::setThreshold(double threshold) {
  if (!(threshold > 0.0) || !std::isfinite(threshold)) {
    fail("threshold " + std::to_string(threshold) + " must be positive and finite");
  }
  at::NoGradGuard no_grad;
  log2_t_.fill_(std::log2(threshold));
  initialized_ = true;
}

std::vector<at::Tensor> TqtFakeQuantizer::parameters() const {
  return {log2_t_};
}

float TqtFakeQuantizer::currentScale() const {
  // 2^(b-1) levels on each side for signed grids, 2^b for unsigned ones.
  const double levels = static_cast<double>(scheme().qmax() + 1);
  return static_cast<float>(std::ldexp(1.0, static_cast<int>(std::ceil(log2_t_.item<float>()))) /
                            levels);
}

QParams TqtFakeQuantizer::currentQParams() const {
  return makeQParams({currentScale()}, {0});
}

at::Tensor TqtFakeQuantizer::quantize(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble) {
    fail("input must be float32 or float64");
  }
  const at::Tensor input = x.contiguous();
  const AffineGrid grid =
      makeAffineGrid(input, scheme(), {static_cast<double>(currentScale())}, {0.0}, "TQT");
  return TqtFn::apply(input, log2_t_, grid).view(x.sizes());
}

void TqtFakeQuantizer::initFromObserver() {
  auto [lo, hi] = observer()->range();
  const double t = std::max(-lo.item<double>(), hi.item<double>());
  setThreshold(std::max(t, scheme().eps));
}

std::map<std::string, at::Tensor> TqtFakeQuantizer::state() const {
  if (!initialized_) return {};
  return {{"log2_threshold", log2_t_.detach().clone()}};
}

void TqtFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  const at::Tensor value = stateEntry(state, "log2_threshold", 1);
  at::NoGradGuard no_grad;
  log2_t_.copy_(value);
  initialized_ = true;
}

}  // namespace quant
}  // namespace qforge
