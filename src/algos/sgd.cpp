#include "algos/sgd.h"

#include "core/error.h"

namespace qforge::algos {

Sgd::Sgd(std::vector<at::Tensor> params, double lr, double momentum)
    : params_(std::move(params)), momentum_buffers_(params_.size()), lr_(lr), momentum_(momentum) {}

void Sgd::step() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const at::Tensor g = p.grad();
    at::Tensor direction = g;
    if (momentum_ != 0) {
      at::Tensor& buf = momentum_buffers_[i];
      if (!buf.defined()) {
        buf = g.clone().detach();
      } else {
        buf.mul_(momentum_).add_(g);
      }
      direction = buf;
    }
    p.add_(direction, -lr_);
    p.mutable_grad().zero_();
  }
}

std::map<std::string, at::Tensor> Sgd::state() const {
  std::map<std::string, at::Tensor> state;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (momentum_buffers_[i].defined()) state["buf." + std::to_string(i)] = momentum_buffers_[i];
  }
  return state;
}

void Sgd::loadState(const std::map<std::string, at::Tensor>& state) {
  for (const auto& [key, tensor] : state) {
    require(key.rfind("buf.", 0) == 0, "SGD state has an unknown entry '" + key + "'");
    size_t i = 0;
    try {
      i = std::stoul(key.substr(4));
    } catch (const std::exception&) {
      throw Error("SGD state has an unknown entry '" + key + "'");
    }
    require(i < params_.size() && tensor.sizes() == params_[i].sizes(),
            "SGD state entry '" + key + "' matches no parameter of that shape");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = state.find("buf." + std::to_string(i));
    momentum_buffers_[i] = it == state.end() ? at::Tensor() : it->second.clone().detach();
  }
}

}  // namespace qforge::algos
