// Adam (Kingma & Ba 2015) over a list of leaf tensors, with torch.optim.Adam's update exactly
// (bias corrections, eps added after the corrected square root, no weight decay), so runs can be
// compared with PyTorch's step for step. The learning rate may change between steps (schedules).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "algos/optimizer.h"

namespace qforge::algos {

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<at::Tensor> params, double lr = 1e-3, double beta1 = 0.9,
                double beta2 = 0.999, double eps = 1e-8);

  // Applies one update from the parameters' .grad() (parameters without a gradient are left
  // alone), then clears the gradients.
  void step() override;
  void setLearningRate(double lr) override { lr_ = lr; }
  double learningRate() const { return lr_; }
  int64_t steps() const { return steps_; }
  const std::vector<at::Tensor>& parameters() const { return params_; }

  // The moments and step count, for checkpoints ("m.3", "v.3", "steps"). loadState() refuses
  // missing entries and shapes that do not match the parameters.
  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> first_moment_, second_moment_;
  double lr_, beta1_, beta2_, eps_;
  int64_t steps_ = 0;
};

}  // namespace qforge::algos
