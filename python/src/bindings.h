// The pieces of the `qforge._qforge` extension module, each binding one part of the library.
#pragma once

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "pipelines/progress.h"

namespace qforge::python {

void bindCommands(pybind11::module_& m);       // quantize, qat, deploy, verify, eval, inspect
void bindPreparedModel(pybind11::module_& m);  // PreparedModel, load

// A report as Python values: objects become dicts, arrays lists.
pybind11::object toPython(const nlohmann::json& value);

// Imports torch once, before the first tensor crosses to or from Python: torch's type caster
// needs its Python classes. Lazily, because `import torch` takes twice as long as loading qforge,
// and a job named by source strings and files never needs it.
void requireTorch();

// A path argument: str or os.PathLike; `what` names the argument in errors.
std::string pathOf(const pybind11::handle& path, const std::string& what);

// A Python object a C++ callback keeps, released with the GIL held whichever thread drops the
// last copy of the callback (pipelines run with the GIL released).
class HeldObject {
 public:
  explicit HeldObject(pybind11::object object) : object_(std::move(object)) {}
  HeldObject(const HeldObject&) = delete;
  HeldObject& operator=(const HeldObject&) = delete;
  ~HeldObject() {
    pybind11::gil_scoped_acquire gil;
    object_ = pybind11::object();
  }
  const pybind11::object& get() const { return object_; }

 private:
  pybind11::object object_;
};

// Progress for a pipeline run from Python: a bar on stderr as the CLI draws it (unless `quiet`
// or stderr is no terminal), or a caller's callable given each event as a dict. Either way a
// pending Ctrl-C (KeyboardInterrupt) stops the run at the next event.
pipelines::ProgressCallback progressFor(bool quiet, const pybind11::object& callback);

}  // namespace qforge::python
