// Conversions and callbacks every binding shares.
#include <unistd.h>

#include "bindings.h"
#include "cli/eval_support.h"
#include "core/error.h"

namespace py = pybind11;

namespace qforge::python {

py::object toPython(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(value.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(value.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(value.get<std::string>());
    case nlohmann::json::value_t::binary:
      return py::bytes(std::string(value.get_binary().begin(), value.get_binary().end()));
    case nlohmann::json::value_t::array: {
      py::list list;
      for (const nlohmann::json& item : value)
        list.append(toPython(item));
      return std::move(list);
    }
    case nlohmann::json::value_t::object: {
      py::dict dict;
      for (const auto& [key, item] : value.items())
        dict[py::str(key)] = toPython(item);
      return std::move(dict);
    }
  }
  return py::none();
}

void requireTorch() {
  static bool imported = false;
  if (imported) return;
  py::module_::import("torch");
  imported = true;
}

std::string pathOf(const py::handle& path, const std::string& what) {
  if (py::isinstance<py::str>(path)) return py::cast<std::string>(path);
  if (py::hasattr(path, "__fspath__")) {
    const py::object p = path.attr("__fspath__")();
    if (py::isinstance<py::str>(p)) return py::cast<std::string>(p);
  }
  throw Error(what + " must be a path (str or os.PathLike), not a " +
              std::string(py::str(path.get_type().attr("__name__"))));
}

pipelines::ProgressCallback progressFor(bool quiet, const py::object& callback) {
  if (!callback.is_none()) {
    auto held = std::make_shared<HeldObject>(callback);
    return [held](const pipelines::ProgressEvent& e) {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      py::dict event;
      event["stage"] = e.stage;
      event["done"] = e.done;
      event["total"] = e.total;
      event["unit"] = e.unit;
      event["seconds"] = e.seconds;
      event["note"] = e.note;
      event["last"] = e.last;
      held->get()(event);
    };
  }
  auto bar = std::make_shared<cli::StageProgress>(!quiet && ::isatty(STDERR_FILENO));
  return [bar](const pipelines::ProgressEvent& e) {
    {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    (*bar)(e);
  };
}

}  // namespace qforge::python
