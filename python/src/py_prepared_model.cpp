// qforge.PreparedModel: a prepared (quantized) model in Python. Load it from a directory that
// `quantize`, `qat` or `save` wrote; run it in simulated quantization (or float) on tensors;
// list its quantizers with their parameters; switch a quantizer off or set its parameters;
// save it and deploy it.
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <set>

#include "algos/model_feeds.h"
#include "bindings.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "core/output_dir.h"
#include "core/strings.h"
#include "deploy/deploy.h"
#include "deploy/qdq_onnx.h"
#include "passes/prepared_io.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace qforge::python {

namespace {

class PyPreparedModel {
 public:
  static std::unique_ptr<PyPreparedModel> load(const py::object& dir) {
    const std::string path = pathOf(dir, "dir");
    auto self = std::make_unique<PyPreparedModel>();
    py::gil_scoped_release release;
    self->model_ = passes::loadPreparedModel(path);
    // The backend's resolved document, which save() writes back: as the directory holds it.
    const std::string json_path = (std::filesystem::path(path) / "prepared.json").string();
    self->backend_document_ = parseJson(readFile(json_path), json_path).at("backend");
    return self;
  }

  std::string backend() const { return model_->backend().name; }

  std::vector<std::string> inputs() const {
    std::vector<std::string> names;
    for (const data::InputSpec& in : algos::modelInputs(model_->graph()))
      names.push_back(in.name);
    return names;
  }

  std::vector<std::string> outputs() const {
    std::vector<std::string> names;
    for (const Value* v : model_->graph().outputs())
      names.push_back(v->name());
    return names;
  }

  // Every model input by name: a tensor for a one-input model, else a dict.
  py::dict run(const py::object& given, const std::optional<std::vector<std::string>>& wanted,
               bool quantized) {
    requireTorch();
    const std::vector<data::InputSpec> specs = algos::modelInputs(model_->graph());
    TensorMap feeds;
    if (py::isinstance<py::dict>(given)) {
      for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(given))
        feeds[py::cast<std::string>(key)] = tensorArgument(value);
    } else {
      require(specs.size() == 1, "the model has " + std::to_string(specs.size()) +
                                     " inputs: give a dict of tensors by input name");
      feeds[specs.front().name] = tensorArgument(given);
    }
    for (const auto& [name, t] : feeds) {
      require(std::any_of(specs.begin(), specs.end(),
                          [&](const data::InputSpec& in) { return in.name == name; }),
              "'" + name + "' is not an input of the model (inputs: " + join(inputs()) + ")");
    }
    for (const data::InputSpec& in : specs) {
      auto found = feeds.find(in.name);
      require(found != feeds.end(), "no value for the model input '" + in.name + "'");
      found->second = found->second.to(in.dtype);
    }
    const std::vector<std::string> names = wanted ? *wanted : outputs();
    TensorMap out;
    {
      py::gil_scoped_release release;
      applyMode(quantized);
      out =
          algos::runInBatches(model_->executor(), feeds, names, algos::fixedBatch(model_->graph()));
    }
    py::dict result;
    for (const std::string& name : names)
      result[py::str(name)] = out.at(name);
    return result;
  }

  // quantizerTable's rows (kind, value, unit, scheme, observer, scale, zero point) with whether
  // the quantizer is on and its full state.
  py::list quantizers() {
    requireTorch();
    py::list rows;
    const nlohmann::json table = deploy::quantizerTable(*model_);
    for (const nlohmann::json& row : table) {
      py::dict d(toPython(row));
      const std::string name = row.value("name", "");
      d["enabled"] = disabled_.count(name) == 0;
      if (quant::FakeQuantizer* q = model_->quantizer(name)) {
        py::dict state;
        for (const auto& [key, t] : q->state())
          state[py::str(key)] = t;
        d["state"] = state;
      }
      rows.append(d);
    }
    return rows;
  }

  // Changes one quantizer: on or off (a run-time switch for experiments; saving keeps the
  // parameters, not the switch), and parameters by state key, "scale" and "zero_point" for the
  // affine quantizers.
  void setQuantizer(const std::string& name, std::optional<bool> enabled,
                    const std::optional<py::dict>& state) {
    quant::FakeQuantizer* q = model_->quantizer(name);
    require(q != nullptr, "no quantizer '" + name + "' in the model (see quantizers())");
    if (enabled) {
      if (*enabled) {
        disabled_.erase(name);
      } else {
        disabled_.insert(name);
      }
    }
    if (state) {
      std::map<std::string, at::Tensor> current = q->state();
      for (const auto& [key, value] : *state) {
        const std::string k = py::cast<std::string>(key);
        require(current.count(k) > 0, "quantizer '" + name + "' has no parameter '" + k +
                                          "' (it has: " + join(keysOf(current)) + ")");
        at::Tensor t = tensorArgument(value).to(current[k].scalar_type()).reshape(-1);
        require(t.numel() == current[k].numel(), "quantizer '" + name + "': '" + k + "' takes " +
                                                     std::to_string(current[k].numel()) +
                                                     " values, not " + std::to_string(t.numel()));
        current[k] = t.reshape(current[k].sizes()).clone();
      }
      q->loadState(current);
    }
  }

  std::vector<std::string> save(const py::object& dir) {
    const std::string path = pathOf(dir, "dir");
    py::gil_scoped_release release;
    // As one unit, like every output directory (core/output_dir.h).
    OutputDirectory out(path, OutputDirectory::kModelRole, {OutputDirectory::kModelRole});
    std::vector<std::string> files =
        passes::savePreparedModel(*model_, backend_document_, out.staging());
    for (std::string& f : files)
      f = out.finalPath(f);
    out.commit();
    return files;
  }

  py::object deploy(const py::object& out) {
    const std::string path = pathOf(out, "out");
    nlohmann::json result;
    {
      py::gil_scoped_release release;
      model_->setMode(quant::FakeQuantMode::Quantization);
      const deploy::DeployResult r = deploy::deployPreparedModel(*model_, path);
      result = {{"backend", backend()}, {"files", r.files}, {"notes", r.notes}};
    }
    return toPython(result);
  }

 private:
  static at::Tensor tensorArgument(const py::handle& value) {
    requireTorch();
    if (THPVariable_Check(value.ptr())) return py::cast<at::Tensor>(value);
    return py::cast<at::Tensor>(py::module_::import("torch").attr("as_tensor")(value));
  }

  static std::vector<std::string> keysOf(const std::map<std::string, at::Tensor>& m) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : m)
      keys.push_back(k);
    return keys;
  }

  void applyMode(bool quantized) {
    model_->setMode(quantized ? quant::FakeQuantMode::Quantization : quant::FakeQuantMode::Float);
    if (!quantized) return;
    for (const std::string& name : disabled_)
      model_->quantizer(name)->setFakeQuantEnabled(false);
  }

  std::unique_ptr<passes::PreparedModel> model_;
  nlohmann::json backend_document_;
  std::set<std::string> disabled_;
};

}  // namespace

void bindPreparedModel(py::module_& m) {
  py::class_<PyPreparedModel>(m, "PreparedModel",
                              "A model with its fake quantizers, as quantize or qat saved it.")
      .def_static("load", &PyPreparedModel::load, "The prepared model saved in `dir`.", "dir"_a)
      .def_property_readonly("backend", &PyPreparedModel::backend)
      .def_property_readonly("inputs", &PyPreparedModel::inputs)
      .def_property_readonly("outputs", &PyPreparedModel::outputs)
      .def("run", &PyPreparedModel::run,
           "Outputs by name for a batch, in simulated quantization (quantized=False: float).",
           "inputs"_a, py::kw_only(), "outputs"_a = py::none(), "quantized"_a = true)
      .def("quantizers", &PyPreparedModel::quantizers,
           "Every quantizer: scheme, scale, zero point, state, whether it is on.")
      .def("set_quantizer", &PyPreparedModel::setQuantizer,
           "Switches a quantizer on or off for run(), or sets its parameters by state key.",
           "name"_a, py::kw_only(), "enabled"_a = py::none(), "state"_a = py::none())
      .def("save", &PyPreparedModel::save, "Writes prepared.onnx and prepared.json into `dir`.",
           "dir"_a)
      .def("deploy", &PyPreparedModel::deploy, "The backend's deploy files of this model.",
           py::kw_only(), "out"_a);
}

}  // namespace qforge::python
