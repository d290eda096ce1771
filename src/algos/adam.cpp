#include "algos/adam.h"

#include <cmath>

namespace qforge::algos {

Adam::Adam(std::vector<at::Tensor> params, double lr, double beta1, double beta2, double eps)
    : params_(std::move(params)), lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const at::Tensor& p : params_) {
    first_moment_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve).detach());
    second_moment_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve).detach());
  }
}

void Adam::step() {
  at::NoGradGuard no_grad;
  ++steps_;
  const double correction1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
  const double correction2 = 1.0 - std::pow(beta2_, static_cast<double>(steps_));
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const at::Tensor g = p.grad();
    first_moment_[i].mul_(beta1_).add_(g, 1.0 - beta1_);
    second_moment_[i].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
    const at::Tensor denom = (second_moment_[i].sqrt() / std::sqrt(correction2)).add_(eps_);
    p.addcdiv_(first_moment_[i], denom, -lr_ / correction1);
    p.mutable_grad().zero_();
  }
}

}  // namespace qforge::algos
