"""Type stubs for qforge (the extension module qforge._qforge and its package)."""

import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy
import torch

__version__: str

PathLike = Union[str, "os.PathLike[str]"]
Array = Union[numpy.ndarray, torch.Tensor]
# A sample or a batch, a dict of them by model input name (labels under "label"), or a pair.
Item = Union[Array, Mapping[str, Array], Tuple[Any, Any]]
# A source string as the CLI takes it, one array of samples, or an iterable of items.
Data = Union[str, "os.PathLike[str]", Array, Iterable[Item]]
# Called with {"stage", "done", "total", "unit", "seconds", "note", "last"} per event.
Progress = Callable[[Dict[str, Any]], None]
Report = Dict[str, Any]

class Error(RuntimeError):
    """What qforge refuses, in the CLI's one line: what is wrong, where, and what to do."""

def quantize(
    model: PathLike,
    *,
    backend: str,
    calib: Data = "fashion-mnist:train",
    calib_batches: int = 32,
    calib_batch: int = 64,
    out: PathLike,
    eval: Optional[Data] = None,
    eval_limit: int = -1,
    eval_batch: int = 100,
    config: str = "",
    algo: str = "naive",
    iters: int = 0,
    recon_batch: int = 0,
    algo_config: str = "",
    cache_limit: str = "",
    seed: int = 0,
    passes: str = "",
    cle: bool = False,
    cle_relu6_to_relu: bool = False,
    bias_correction: bool = False,
    calib_shuffle: Optional[int] = None,
    target_drop: Optional[float] = None,
    target_sqnr: Optional[float] = None,
    tune_metric: str = "auto",
    tune_ranking: str = "isolated",
    metric_script: Optional[PathLike] = None,
    max_trials: int = 20,
    time_budget: float = 0.0,
    bits_budget: Optional[float] = None,
    size_budget: str = "",
    deploy: bool = True,
    quiet: bool = False,
    progress: Optional[Progress] = None,
) -> Report:
    """Post-training quantization, as `qforge quantize`: prepare the ONNX model for `backend`
    (a built-in name or a backend .json), calibrate on the first calib_batches * calib_batch
    samples of `calib` (a random subset with calib_shuffle=SEED), optionally reconstruct
    (algo="adaround", "brecq", "qdrop"), evaluate float against quantized on `eval`, deploy and
    save into `out`. Returns report.json's content (report["evaluation"] holds the float and
    quantized top-1 when `eval` is given).

    On `eval`: target_drop (top-1 points, or the metric_script's units) or target_sqnr (dB)
    tunes the config by trials (report["autotune"]); bits_budget (average weight bits) or
    size_budget ("2M") chooses one weight width per unit (report["mixed_precision"]). Either
    writes tuned_config.json into `out`."""

def analyze(
    model: PathLike,
    *,
    backend: str = "",
    config: str = "",
    calib: Data = "fashion-mnist:train",
    calib_batches: int = 8,
    calib_batch: int = 32,
    calib_shuffle: Optional[int] = None,
    data: Optional[Data] = None,
    samples: int = 32,
    batch: int = 8,
    isolated: bool = True,
    leave_one_out: bool = True,
    fisher: bool = True,
    fisher_probes: int = 4,
    outputs: Sequence[str] = (),
    top: int = 10,
    seed: int = 0,
    report: Optional[PathLike] = None,
    write_config: Optional[PathLike] = None,
    quiet: bool = False,
    progress: Optional[Progress] = None,
) -> Report:
    """Sensitivity analysis, as `qforge analyze --json`: `model` is an ONNX file (with `backend`)
    or a directory quantize wrote. Per quantizer the model's output SQNR with only it on
    (isolated) and with all but it on (leave-one-out), the Fisher estimate, range statistics;
    the ranking and the fixes the backend allows (schema in docs/ANALYZE.md). `report` writes
    the HTML page, `write_config` the fixes as a config for quantize(config=...)."""

def qat(
    model: PathLike,
    *,
    backend: str,
    data: Data = "fashion-mnist:train",
    out: Optional[PathLike] = None,
    epochs: int = 1,
    batch: int = 64,
    lr: float = 1e-3,
    optimizer: str = "sgd",
    schedule: str = "cosine",
    algo: str = "",
    loss: Union[str, Callable[[torch.Tensor, Dict[str, Any]], torch.Tensor]] = "auto",
    distill_temperature: float = 1.0,
    distill_at: Sequence[str] = (),
    distill_weight: float = 1.0,
    config: str = "",
    passes: str = "",
    limit: int = 0,
    max_steps: int = 0,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    step_epochs: int = 1,
    step_gamma: float = 0.1,
    freeze_bn_epoch: Optional[int] = None,
    augment_shift: int = 0,
    augment_flip: bool = False,
    label_smoothing: float = 0.0,
    freeze_weights: bool = False,
    quantizer_lr_scale: float = 1.0,
    calib: Optional[Data] = None,
    calib_batches: int = 16,
    calib_batch: int = 64,
    eval: Optional[Data] = None,
    eval_limit: int = 0,
    eval_batch: int = 200,
    seed: int = 0,
    resume: str = "",
    csv: str = "",
    world_size: int = 1,
    rank: int = 0,
    master: str = "127.0.0.1:29500",
    timeout: float = 300.0,
    deploy: bool = True,
    quiet: bool = False,
    progress: Optional[Progress] = None,
) -> Report:
    """Quantization-aware training, as `qforge qat`. `loss` is "auto" (cross entropy with labels
    and class scores, else distillation from the float model), "cross-entropy", "mse", "kl", or
    a callable loss(output, batch) -> scalar tensor computed with torch operations from `output`
    (the model's first output, with autograd); `batch` is {"inputs", "labels" (or None),
    "feeds": {input name: tensor}}. `distill_at` names intermediate values distilled as well
    (each one's MSE against the float model over its power, times `distill_weight`), with any
    loss. Data parallel over c10d as `qforge qat --world-size`: each
    rank calls qat with its rank and the same master address. Returns report.json's content."""

def deploy(prepared: PathLike, *, out: PathLike) -> Report:
    """The backend's deploy files of a saved prepared model, as `qforge deploy`:
    {"backend", "files", "notes"}."""

def verify(
    dir: PathLike,
    *,
    data: Data = "fashion-mnist:test",
    prepared: Optional[PathLike] = None,
    limit: int = 0,
    batch: int = 256,
    ort_dir: str = "",
    ort_optimization: str = "all",
    timeout: float = 1800.0,
    min_agreement: float = 0.999,
    max_accuracy_gap: float = 0.0005,
    min_exact: float = 0.999,
    min_sqnr: float = 30.0,
    min_cosine: float = 0.999,
    max_p99_steps: float = 1.0,
    iou_threshold: Optional[float] = None,
    min_iou: float = 0.99,
) -> Report:
    """The deployed models in ONNX Runtime against qforge's simulation and integer emulation,
    as `qforge verify --json`; report["passed"] says whether every criterion held."""

def eval(
    model: PathLike,
    *,
    data: Data = "fashion-mnist:test",
    limit: int = -1,
    batch: int = 100,
    metric: str = "auto",
    shuffle: Optional[int] = None,
    noise: float = 0.0,
    noise_seed: int = 0,
    peak: float = 1.0,
    labels: str = "",
    mean: Sequence[float] = (0.0,),
    std: Sequence[float] = (1.0,),
    resize: int = 0,
    crop: str = "",
    channels: int = 0,
    bgr: bool = False,
    nhwc: bool = False,
    dump_outputs: str = "",
    reference: str = "",
    iou_threshold: float = -1.0,
    quiet: bool = False,
    progress: Optional[Progress] = None,
) -> Report:
    """A model (ONNX file, or a prepared directory: its simulated quantization) scored over
    `data`, as `qforge eval --json`: top1/top5, psnr_db, or only throughput (metric="none"),
    and with `reference` SQNR/cosine against another model's outputs."""

def inspect(model: PathLike) -> Report:
    """An ONNX model's opsets, ops, inputs, outputs, parameters and the ops qforge cannot run,
    as `qforge inspect --json`."""

def configure_allocator() -> bool:
    """Applies the qforge command's malloc policy to this process: large blocks stay on the heap
    and freed memory is kept for reuse (runs about 5% faster; memory is not returned to the
    system). Off unless called, since it changes the whole process; QFORGE_MALLOC_TUNING=0 makes
    it do nothing. Returns whether it was applied."""

Size = Union[int, str]

def set_limits(
    *,
    max_model_bytes: Optional[Size] = None,
    max_tensor_bytes: Optional[Size] = None,
    max_subgraph_depth: Optional[int] = None,
    max_nodes: Optional[int] = None,
) -> None:
    """The resource limits of every later call in this process, as the CLI's --max-* flags:
    a model's initializers in all, any one tensor read or computed, control-flow nesting, nodes.
    Sizes are bytes or strings such as "512M" or "16GiB"; None leaves a limit as it is. The
    defaults come from QFORGE_MAX_MODEL_BYTES, QFORGE_MAX_TENSOR_BYTES, QFORGE_MAX_SUBGRAPH_DEPTH
    and QFORGE_MAX_NODES, else 16 GiB, 8 GiB, 32 and 1,000,000."""

def limits() -> Dict[str, int]:
    """The resource limits in force: max_model_bytes, max_tensor_bytes (bytes),
    max_subgraph_depth, max_nodes."""

def load(dir: PathLike) -> "PreparedModel":
    """The prepared model a quantize/qat run (or PreparedModel.save) wrote into `dir`."""

class PreparedModel:
    """A model with its fake quantizers, calibrated or trained."""

    @staticmethod
    def load(dir: PathLike) -> "PreparedModel": ...
    @property
    def backend(self) -> str: ...
    @property
    def inputs(self) -> List[str]: ...
    @property
    def outputs(self) -> List[str]: ...
    def run(
        self,
        inputs: Union[Array, Mapping[str, Array]],
        *,
        outputs: Optional[List[str]] = None,
        quantized: bool = True,
    ) -> Dict[str, torch.Tensor]:
        """Runs a batch (a tensor for a one-input model, else a dict by input name) in simulated
        quantization (quantized=False: the float model) and returns the outputs by name (any
        value of the graph may be named)."""
    def quantizers(self) -> List[Dict[str, Any]]:
        """Every quantizer: name, kind, value, unit, scheme, bits, observer, scale, zero_point,
        enabled, and its full state as tensors."""
    def set_quantizer(
        self,
        name: str,
        *,
        enabled: Optional[bool] = None,
        state: Optional[Mapping[str, Union[float, Sequence[float], Array]]] = None,
    ) -> None:
        """Switches a quantizer off or on (for run(); saving keeps parameters, not the switch)
        or sets parameters by state key ("scale", "zero_point" for affine quantizers)."""
    def save(self, dir: PathLike) -> List[str]:
        """Writes prepared.onnx and prepared.json into `dir`; returns the paths."""
    def deploy(self, *, out: PathLike) -> Report:
        """The backend's deploy files of this model: {"backend", "files", "notes"}."""
