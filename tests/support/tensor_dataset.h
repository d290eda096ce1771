// A dataset held in memory, for tests that feed pipelines and trainers their own data; labelled
// unless `labels` is undefined.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "data/dataset.h"

namespace qforge::testing {

class TensorDataset : public data::Dataset {
 public:
  TensorDataset(at::Tensor inputs, at::Tensor labels, std::string name = "tensors")
      : inputs_(std::move(inputs)), labels_(std::move(labels)), name_(std::move(name)) {}
  int64_t size() const override { return inputs_.size(0); }
  data::Sample get(int64_t i) override {
    const int64_t label = labels_.defined() ? labels_[i].item<int64_t>() : -1;
    return {inputs_[i].clone(), label, "sample " + std::to_string(i)};
  }
  bool hasLabels() const override { return labels_.defined(); }
  std::string describe() const override { return name_; }

 private:
  at::Tensor inputs_, labels_;
  std::string name_;
};

}  // namespace qforge::testing
