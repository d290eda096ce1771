# Debian packages, built by `cpack -G DEB` (or plain `cpack`) in the build directory:
#   qforge_<version>_amd64.deb      the install component runtime: bin/qforge, its man pages and
#                                   completion, and whatever installs without naming a component
#   qforge-dev_<version>_amd64.deb  the component dev: libqforge.a, include/qforge, lib/cmake/qforge
#   python3-qforge_<version>_amd64.deb  the component python: the qforge Python package
# Separate packages: the Python module is Debian's python3-* kind, and the qforge command needs only the shared libraries it links
# (libtorch, ...), while building against libqforge.a needs their -dev packages (libtorch-dev
# alone is hundreds of MB of headers and CMake files a user of the command never reads).
# Included at the end of the top-level CMakeLists.txt: include(CPack) lists the install
# components known at that point. The test is tests/packaging/deb.sh (ctest -R package_deb).
set(QFORGE_DEB_MAINTAINER "qforge maintainers <maintainers@qforge.invalid>"
    CACHE STRING "Maintainer field of the Debian packages (Name <email>)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME qforge)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${QFORGE_DEB_MAINTAINER}")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# <name>_<version>_<arch>.deb, the file name Debian tools expect.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends from the ELF files' NEEDED entries (dpkg-shlibdeps, from dpkg-dev): libtorchX.Y and the
# others, at least in the versions this build linked.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME qforge)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION science)
# The first line is the synopsis (CPack does not prepend a summary that is left at its default).
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "hardware-aware quantization of ONNX models
qforge takes an ONNX model, places fake quantization where the target hardware quantizes,
calibrates or trains it, and writes what the hardware's tools take: QDQ and QOperator ONNX,
TensorRT, SNPE/QNN, OpenVINO, PPL, Vitis, NNIE, Tengine and STPU files.
`qforge verify` runs ONNX Runtime through Node.js (nodejs, and onnxruntime-node from npm).")
# Run, not linked: Node.js for `qforge verify`; npm installs onnxruntime-node; Fashion-MNIST
# is the data of the `fashion-mnist:` sources; the Python module (python/, installed without a
# component of its own, so in this package) imports torch.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "nodejs")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "npm, dataset-fashion-mnist, python3-qforge")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME qforge-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "hardware-aware quantization of ONNX models (library and headers)
The static library libqforge.a, its C++17 headers under /usr/include/qforge and its CMake
package: find_package(qforge) and link qforge::qforge.")
# What qforgeConfig.cmake finds (cmake/qforgeConfig.cmake.in). qforge (= version) pins, through
# its shlibdeps Depends, the libtorch/libonnx/libprotobuf sonames libqforge.a was compiled for.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "qforge (= ${PROJECT_VERSION}), libtorch-dev, libonnx-dev, libprotobuf-dev"
    "nlohmann-json3-dev, libcli11-dev, zlib1g-dev, libyaml-cpp-dev, libdnnl-dev")
list(JOIN CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)

# python3-qforge: `import qforge` for Debian's python3 (python/). Its shlibdeps Depends are the
# libraries the extension links (libtorch, and libtorch_python from libtorch1.13); the module
# imports torch and numpy at run time.
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-qforge)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "hardware-aware quantization of ONNX models (Python 3 bindings)
import qforge: quantize, qat, deploy, verify, eval and inspect as Python functions with the
qforge command's options and reports, data from numpy arrays, torch tensors or DataLoaders,
QAT losses written in Python, and prepared models to run, inspect and edit.")
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3 (>= 3.11), python3 (<< 3.12), python3-torch, python3-numpy")

include(CPack)
