#include "algos/adam.h"

#include <cmath>

#include "core/error.h"

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

std::map<std::string, at::Tensor> Adam::state() const {
  std::map<std::string, at::Tensor> state;
  for (size_t i = 0; i < params_.size(); ++i) {
    state["m." + std::to_string(i)] = first_moment_[i];
    state["v." + std::to_string(i)] = second_moment_[i];
  }
  state["steps"] = at::tensor(steps_, at::kLong);
  return state;
}

void Adam::loadState(const std::map<std::string, at::Tensor>& state) {
  at::NoGradGuard no_grad;
  const auto entry = [&](const std::string& key, const at::Tensor& like) {
    auto it = state.find(key);
    require(it != state.end(), "Adam state has no entry '" + key + "'");
    require(!like.defined() || it->second.sizes() == like.sizes(),
            "Adam state entry '" + key + "' has shape " + c10::str(it->second.sizes()) +
                ", the parameter " + c10::str(like.sizes()));
    return it->second;
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    first_moment_[i].copy_(entry("m." + std::to_string(i), params_[i]));
    second_moment_[i].copy_(entry("v." + std::to_string(i), params_[i]));
  }
  steps_ = entry("steps", at::Tensor()).item<int64_t>();
}

}  // namespace qforge::algos
