// Data from Python: any iterable of arrays becomes a qforge dataset. An item is a tensor (one
// sample, or a batch of them when it has one axis more than the model input), a dict of tensors
// keyed by model input name (several inputs; a key "label" or "labels" gives labels), or a
// (inputs, labels) pair as a torch DataLoader yields. numpy arrays arrive as torch tensors
// sharing their memory (torch.as_tensor), and samples are views of them: nothing is copied
// until the loader batches. Given directly (not inside an iterable), an array, a dict or a tuple
// is one item: `(images, labels)` is a labelled set, `[a, b]` two items.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "ir/graph.h"
#include "pipelines/model_data.h"

namespace qforge::python {

// A dataset read from a Python iterable up to `limit` samples (0: to its end). Reading happens
// here, with the GIL held; get() needs no Python afterwards, so pipelines run without the GIL.
class IterableDataset : public data::Dataset {
 public:
  // `batch_axes`: the inputs whose batch is not on axis 0 (algos::batchAxes).
  IterableDataset(const pybind11::handle& iterable, std::vector<data::InputSpec> inputs,
                  std::map<std::string, int64_t> batch_axes, int64_t limit, std::string name);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  data::Sample get(int64_t index) override { return samples_.at(index); }
  bool hasLabels() const override { return has_labels_; }
  std::string describe() const override { return name_; }

 private:
  void add(const pybind11::handle& item, int64_t item_index);
  int64_t batchAxis(const std::string& input) const {
    auto found = batch_axes_.find(input);
    return found == batch_axes_.end() ? 0 : found->second;
  }
  void addInputs(const std::map<std::string, at::Tensor>& arrays, const at::Tensor& labels,
                 int64_t item_index);

  std::vector<data::InputSpec> inputs_;
  std::map<std::string, int64_t> batch_axes_;
  int64_t limit_;
  std::string name_;
  std::vector<data::Sample> samples_;
  bool has_labels_ = false;
  bool labels_seen_ = false;  // whether the first item decided has_labels_
};

// What a Python argument names as data for `graph`'s inputs: None (no data), a source string
// ("fashion-mnist:test", "random:normal"), or anything IterableDataset reads, up to `limit`
// samples (0: all). `what` names the argument in errors ("calib").
pipelines::DataSource dataSourceFrom(const pybind11::handle& data, const Graph& graph,
                                     int64_t limit, const std::string& what);

}  // namespace qforge::python
