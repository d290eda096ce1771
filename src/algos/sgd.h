// Stochastic gradient descent with momentum, torch.optim.SGD's update exactly (dampening 0, not
// Nesterov: buf = momentum * buf + g, the first step taking buf = g; p -= lr * buf), so QAT runs
// can be compared with PyTorch's step for step. Weight decay is the caller's (added to the
// gradient before step(), as torch's L2 does), so it can be limited to some parameters.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "algos/optimizer.h"

namespace qforge::algos {

class Sgd : public Optimizer {
 public:
  explicit Sgd(std::vector<at::Tensor> params, double lr, double momentum = 0.9);

  // Applies one update from the parameters' .grad() (parameters without a gradient are left
  // alone, their momentum too), then clears the gradients.
  void step() override;
  void setLearningRate(double lr) override { lr_ = lr; }
  double learningRate() const { return lr_; }
  const std::vector<at::Tensor>& parameters() const { return params_; }

  // The momentum buffers, for checkpoints ("buf.3"; absent until a parameter's first update).
  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> momentum_buffers_;  // undefined until the first update
  double lr_, momentum_;
};

}  // namespace qforge::algos
