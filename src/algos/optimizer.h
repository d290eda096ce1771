// What a training loop needs from an optimizer over a list of leaf tensors, so that it can hold
// SGD or Adam alike: one update from the gradients, a learning rate that schedules may change,
// and the state a checkpoint saves and restores.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace qforge::algos {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update from the parameters' .grad(), then clears the gradients.
  virtual void step() = 0;
  virtual void setLearningRate(double lr) = 0;
  virtual std::map<std::string, at::Tensor> state() const = 0;
  virtual void loadState(const std::map<std::string, at::Tensor>& state) = 0;
};

}  // namespace qforge::algos
