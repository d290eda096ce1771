// The `qforge._qforge` extension module: qforge's library for Debian's /usr/bin/python3, which
// the `qforge` package (qforge/__init__.py) re-exports. Tensors cross as the same ATen tensors
// torch's Python bindings wrap; torch is imported when the first one does (requireTorch).
#include <pybind11/pybind11.h>

#include <exception>

#include "bindings.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/threads.h"
#include "core/utf8.h"

namespace py = pybind11;

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
        "heap and freed memory is kept for reuse (runs about 5% faster, memory is not returned "
        "to the system). Off unless called; QFORGE_MALLOC_TUNING=0 makes it do nothing. "
        "Returns whether it was applied.");
  qforge::python::bindCommands(m);
  qforge::python::bindPreparedModel(m);
}
