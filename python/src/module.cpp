// The `qforge._qforge` extension module: qforge's library for Debian's /usr/bin/python3, which
// the `qforge` package (qforge/__init__.py) re-exports. Tensors cross as the same ATen tensors
// torch's Python bindings wrap; torch is imported when the first one does (requireTorch).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <string>

#include "bindings.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/resource_limits.h"
#include "core/threads.h"
#include "core/utf8.h"

namespace py = pybind11;

namespace {

// A size limit from Python: bytes as an int, or a string as the CLI takes ("512M", "16GiB").
void setBytes(int64_t& limit, const py::object& value, const std::string& name) {
  if (value.is_none()) return;
  if (py::isinstance<py::str>(value)) {
    limit = qforge::parseByteSize(value.cast<std::string>(), name);
    return;
  }
  qforge::require(py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value),
                  name + " must be a number of bytes or a size such as \"512M\"");
  int64_t bytes = 0;
  try {
    bytes = value.cast<int64_t>();
  } catch (const py::cast_error&) {
    bytes = -1;  // past int64_t
  }
  qforge::require(bytes >= 1, name + " must be from 1 byte to 8 EiB");
  limit = bytes;
}

// A count limit from Python: an int of at least 1.
void setCount(int64_t& limit, const py::object& value, const std::string& name) {
  if (value.is_none()) return;
  int64_t count = 0;
  if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
    try {
      count = value.cast<int64_t>();
    } catch (const py::cast_error&) {
      count = 0;
    }
  }
  qforge::require(count >= 1, name + " must be a whole number of at least 1");
  limit = count;
}

}  // namespace

PYBIND11_MODULE(_qforge, m) {
  m.doc() = "qforge: hardware-aware quantization of ONNX models";
  m.attr("__version__") = QFORGE_VERSION;
  // qforge::Error carries the CLI's one-line message; Python sees it as qforge.Error, the message
  // escaped as the CLI prints it (a Python str must be UTF-8). Never freed: the translator may
  // run until the interpreter ends.
  static auto* error = new py::exception<qforge::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const qforge::Error& e) {
      (*error)(qforge::printable(e.what()).c_str());
    }
  });
  qforge::configureThreads();
  // The CLI's malloc policy changes the whole process, so in Python it is the caller's choice.
  m.def("configure_allocator", &qforge::configureAllocator,
        "Applies the qforge command's malloc policy to this process: large blocks stay on the "
        "heap, freed memory is kept for reuse, and tensors come from qforge's pool of freed "
        "blocks (runs about 5-10% faster; memory is not returned to the system). Call it before "
        "running a model: afterwards the pool can no longer be installed. Off unless called; "
        "QFORGE_MALLOC_TUNING=0 makes it do nothing. Returns whether it was applied.");
  // The CLI's --max-* flags for a Python process (QFORGE_MAX_* set the defaults, as for the CLI).
  m.def(
      "set_limits",
      [](const py::object& max_model_bytes, const py::object& max_tensor_bytes,
         const py::object& max_subgraph_depth, const py::object& max_nodes) {
        qforge::ResourceLimits limits = qforge::resourceLimits();
        setBytes(limits.max_model_bytes, max_model_bytes, "max_model_bytes");
        setBytes(limits.max_tensor_bytes, max_tensor_bytes, "max_tensor_bytes");
        setCount(limits.max_subgraph_depth, max_subgraph_depth, "max_subgraph_depth");
        setCount(limits.max_nodes, max_nodes, "max_nodes");
        qforge::setResourceLimits(limits);
      },
      py::kw_only(), py::arg("max_model_bytes") = py::none(),
      py::arg("max_tensor_bytes") = py::none(), py::arg("max_subgraph_depth") = py::none(),
      py::arg("max_nodes") = py::none(),
      "Sets the resource limits of later calls, as the CLI's --max-* flags; None leaves one as "
      "it is. Sizes are bytes or strings such as \"512M\".");
  m.def(
      "limits",
      [] {
        const qforge::ResourceLimits& l = qforge::resourceLimits();
        py::dict d;
        d["max_model_bytes"] = l.max_model_bytes;
        d["max_tensor_bytes"] = l.max_tensor_bytes;
        d["max_subgraph_depth"] = l.max_subgraph_depth;
        d["max_nodes"] = l.max_nodes;
        return d;
      },
      "The resource limits in force.");
  qforge::python::bindCommands(m);
  qforge::python::bindPreparedModel(m);
}
