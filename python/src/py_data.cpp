#include "py_data.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "algos/model_feeds.h"
#include "bindings.h"
#include "core/error.h"
#include "data/model_sources.h"

namespace py = pybind11;

namespace qforge::python {

namespace {

// A torch tensor for `obj`: itself, or torch.as_tensor of a numpy array, a number or a list
// (sharing a numpy array's memory).
at::Tensor tensorOf(const py::handle& obj, const std::string& where) {
  requireTorch();
  if (THPVariable_Check(obj.ptr())) return py::cast<at::Tensor>(obj);
  try {
    return py::cast<at::Tensor>(py::module_::import("torch").attr("as_tensor")(obj));
  } catch (const py::error_already_set&) {
    throw Error(where + " is a " + std::string(py::str(obj.get_type().attr("__name__"))) +
                ", not an array: give numpy arrays, torch tensors, dicts of them by input name "
                "or (inputs, labels) pairs");
  }
}

bool isLabelKey(const std::string& key) {
  return key == "label" || key == "labels";
}

}  // namespace

IterableDataset::IterableDataset(const py::handle& iterable, std::vector<data::InputSpec> inputs,
                                 std::map<std::string, int64_t> batch_axes, int64_t limit,
                                 std::string name)
    : inputs_(std::move(inputs)),
      batch_axes_(std::move(batch_axes)),
      limit_(limit),
      name_(std::move(name)) {
  // One item, not an iterable of items: an array of samples (every first-axis row a sample),
  // or a tuple (inputs, labels) - a tuple is a pair, a list a sequence of items.
  const bool one_item = THPVariable_Check(iterable.ptr()) || py::hasattr(iterable, "__array__") ||
                        py::isinstance<py::tuple>(iterable) || py::isinstance<py::dict>(iterable);
  if (one_item) {
    add(iterable, 0);
  } else {
    py::iterator it;
    try {
      it = py::iter(iterable);
    } catch (const py::error_already_set&) {
      throw Error(name_ + " is a " + std::string(py::str(iterable.get_type().attr("__name__"))) +
                  ", which is neither a data source string nor an iterable of samples");
    }
    int64_t index = 0;
    for (; it != py::iterator::sentinel(); ++it) {
      add(*it, index++);
      if (limit_ > 0 && size() >= limit_) break;
    }
  }
  require(!samples_.empty(), name_ + " holds no samples");
}

void IterableDataset::add(const py::handle& item, int64_t item_index) {
  const std::string where = name_ + " item " + std::to_string(item_index);
  py::handle x = item;
  at::Tensor labels;
  if (py::isinstance<py::tuple>(item) || py::isinstance<py::list>(item)) {
    const py::sequence pair = py::reinterpret_borrow<py::sequence>(item);
    require(pair.size() == 1 || pair.size() == 2,
            where + " is a sequence of " + std::to_string(pair.size()) +
                " values; give (inputs,) or (inputs, labels)");
    x = pair[0];
    if (pair.size() == 2 && !pair[1].is_none())
      labels = tensorOf(pair[1], where + "'s labels").to(at::kLong);
  }
  std::map<std::string, at::Tensor> arrays;
  if (py::isinstance<py::dict>(x)) {
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(x)) {
      const std::string name = py::str(key);
      if (isLabelKey(name)) {
        labels = tensorOf(value, where + "['" + name + "']").to(at::kLong);
        continue;
      }
      bool known = false;
      for (const data::InputSpec& in : inputs_)
        known = known || in.name == name;
      std::string names;
      for (const data::InputSpec& in : inputs_)
        names += (names.empty() ? "" : ", ") + in.name;
      require(known, where + " has the key '" + name + "', which is no model input (inputs: " +
                         names + "; labels go under 'label')");
      arrays[name] = tensorOf(value, where + "['" + name + "']");
    }
  } else {
    require(inputs_.size() == 1 || inputs_.empty(),
            where + " is one array, but the model has " + std::to_string(inputs_.size()) +
                " inputs: give a dict of arrays keyed by input name");
    arrays[inputs_.empty() ? std::string() : inputs_.front().name] = tensorOf(x, where);
  }
  addInputs(arrays, labels, item_index);
}

void IterableDataset::addInputs(const std::map<std::string, at::Tensor>& arrays,
                                const at::Tensor& labels, int64_t item_index) {
  const std::string where = name_ + " item " + std::to_string(item_index);
  // Batch or one sample: decided by the first batched input's rank against the model's.
  int64_t rows = -1;  // -1: one sample
  for (const data::InputSpec& in : inputs_) {
    auto found = arrays.find(in.name);
    if (found == arrays.end() || !in.batched) continue;
    const int64_t rank = static_cast<int64_t>(in.shape.size());
    const at::Tensor& a = found->second;
    if (a.dim() == rank + 1) {
      const int64_t n = a.size(batchAxis(in.name));
      require(rows < 0 || rows == n, where + ": input '" + in.name + "' has " + std::to_string(n) +
                                         " samples, another input " + std::to_string(rows));
      rows = n;
    } else {
      require(a.dim() == rank, where + ": input '" + in.name + "' has shape " +
                                   data::shapeText(a.sizes().vec()) +
                                   ", but the model takes samples of " + data::shapeText(in.shape) +
                                   " (or batches with one axis more)");
    }
  }
  if (inputs_.empty()) rows = arrays.begin()->second.size(0);  // no specs: items are batches
  const bool batch = rows >= 0;
  if (batch && labels.defined()) {
    require(labels.dim() == 1 && labels.size(0) == rows,
            where + ": labels of shape " + data::shapeText(labels.sizes().vec()) +
                " for a batch of " + std::to_string(rows) +
                " samples; give one class index per sample");
  } else if (labels.defined()) {
    require(labels.numel() == 1,
            where + ": one sample needs one label, not " + std::to_string(labels.numel()));
  }
  // Every item must agree on having labels, so accuracy counts all of them or none.
  if (!labels_seen_) {
    has_labels_ = labels.defined();
    labels_seen_ = true;
  }
  require(has_labels_ == labels.defined(),
          where + (labels.defined() ? " has labels and an earlier item had none"
                                    : " has no labels and an earlier item had them"));

  const int64_t count = batch ? rows : 1;
  for (int64_t r = 0; r < count; ++r) {
    if (limit_ > 0 && size() >= limit_) return;
    data::Sample s;
    s.origin = batch ? where + " row " + std::to_string(r) : where;
    for (const auto& [name, a] : arrays) {
      at::Tensor value = batch && a.dim() > 0 ? a.select(batchAxis(name), r) : a;
      const auto spec = std::find_if(inputs_.begin(), inputs_.end(),
                                     [&](const data::InputSpec& in) { return in.name == name; });
      if (spec != inputs_.end() && !spec->batched) value = a;  // fed whole with every batch
      if (arrays.size() == 1) {
        s.input = value;
      } else {
        s.inputs[name] = value;
        s.input_origins[name] = s.origin;
      }
    }
    if (labels.defined()) s.label = (batch ? labels[r] : labels.reshape({})).item<int64_t>();
    samples_.push_back(std::move(s));
  }
}

pipelines::DataSource dataSourceFrom(const py::handle& data, const Graph& graph, int64_t limit,
                                     const std::string& what) {
  if (data.is_none()) return {};
  if (py::isinstance<py::str>(data)) return pipelines::DataSource(py::cast<std::string>(data));
  if (py::isinstance<py::bytes>(data))
    throw Error(what + " is bytes: give a data source string or arrays");
  // os.PathLike: a folder or file as a source string.
  if (py::hasattr(data, "__fspath__"))
    return pipelines::DataSource(py::cast<std::string>(data.attr("__fspath__")()));
  return pipelines::DataSource(std::make_shared<IterableDataset>(
      data, algos::modelInputs(graph), algos::batchAxes(graph), limit, what));
}

}  // namespace qforge::python
