"""qforge: hardware-aware quantization of ONNX models, from Python.

The same pipelines as the ``qforge`` command, with the same options (flag names with
underscores) and the same reports (as dicts)::

    import qforge
    report = qforge.quantize("resnet.onnx", backend="TensorRT", calib=images, out="out/trt")
    model = qforge.load("out/trt")           # the prepared model: run, inspect, edit, save
    qforge.verify("out/trt", data=test_set)  # the deployed files in ONNX Runtime

Data arguments take a source string as the CLI does ("fashion-mnist:train", "folder:DIR",
"random:normal"), or any iterable of numpy arrays / torch tensors (one sample, or a batch),
dicts of them by model input name, or (inputs, labels) pairs: a torch DataLoader works as it is.
Errors raise qforge.Error with the CLI's one-line message.
"""

# Tensors cross as torch tensors (Debian's python3-torch, on the same libtorch qforge links).
# The extension imports torch itself the first time a tensor crosses, not here: `import torch`
# takes longer than loading qforge, and a job given source strings and files never needs it.
from ._qforge import (  # noqa: F401
    Error,
    PreparedModel,
    __version__,
    analyze,
    configure_allocator,
    deploy,
    eval,
    inspect,
    limits,
    qat,
    quantize,
    set_limits,
    verify,
)


def load(dir):
    """The prepared model a quantize/qat run (or PreparedModel.save) wrote into ``dir``."""
    return PreparedModel.load(dir)


__all__ = [
    "Error",
    "PreparedModel",
    "analyze",
    "configure_allocator",
    "deploy",
    "eval",
    "inspect",
    "limits",
    "load",
    "qat",
    "quantize",
    "set_limits",
    "verify",
]
