#!/usr/bin/python3
"""One BRECQ/QDrop block-reconstruction loop in PyTorch eager, the peer that qforge's C++
reconstruction engine is timed against (iterations per second, same block, same loss).

What one iteration does (MQBench's advanced_ptq with the Academic backend, written out plainly):
  - draw --batch sample indices without replacement from the --samples cached block inputs;
  - QDrop: input = where(rand < prob, quantized input, float input), elementwise, prob 0.5;
  - forward the block with soft AdaRound weights (per-output-channel asymmetric unsigned MinMax
    grid, rounding h(V) = clamp(sigmoid(V) (zeta - gamma) + gamma, 0, 1)), BatchNorm unfolded
    with its eval statistics, the second conv's input through a fixed per-tensor fake quant;
  - loss = sum over channels, mean over the rest, of (out - float out)^2, plus after the
    warm-up fraction 0.01 * sum (1 - |2h - 1|^beta), beta annealed linearly 20 -> 2;
  - backward, Adam(lr 1e-3) step on the rounding variables V.

The block is found in the zoo ResNet's ONNX graph (an Add closing a main path
Conv-BN-Relu-Conv-BN and an identity or Conv-BN shortcut, followed by Relu) and built from the
file's initializers with the `onnx` module. Block inputs and float outputs are computed once by
running the ONNX graph's prefix with torch modules built from its nodes.

  /usr/bin/python3 bench/reconstruction_vs_pytorch.py --list
  /usr/bin/python3 bench/reconstruction_vs_pytorch.py --check-float [--block 2]
  nice -n 19 /usr/bin/python3 bench/reconstruction_vs_pytorch.py [--block 2] [--wbits 4]
      [--abits 4] [--samples 1024] [--batch 32] [--iters 500] [--warmup 20] [--seed 0]
      [--json FILE]

Threads: QFORGE_NUM_THREADS, else every core.
"""
import argparse
import gzip
import json
import math
import os
import platform
import resource
import struct
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
DEFAULT_MODEL = os.path.join(ROOT, "models", "zoo", "resnet.onnx")
FASHION_DIR = "/usr/share/datasets/fashion-mnist"

# AdaRound's rectified sigmoid stretch (Nagel et al. 2020; MQBench's defaults).
ZETA, GAMMA = 1.1, -0.1
# MQBench's reconstruction defaults (config keys weight, warm_up, b_range, prob) and Adam's lr.
ROUND_LOSS_WEIGHT = 0.01
WARM_UP = 0.2
BETA_RANGE = (20.0, 2.0)
DROP_PROB = 0.5
LEARNING_RATE = 1e-3
# Float checks: the block may differ from the graph by summation order only.
BLOCK_ATOL = 1e-5
TOP1_TOLERANCE = 2  # test images, as bench/ptq_vs_pytorch_fx.py allows


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# Data: the first COUNT images of an IDX file, without decoding the rest of it

def read_idx_prefix(path, count):
    with gzip.open(path, "rb") as f:
        zero, dtype_code, ndim = struct.unpack(">HBB", f.read(4))
        if zero != 0 or dtype_code != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file")
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        if count > dims[0]:
            raise ValueError(f"{path} holds {dims[0]} items, {count} requested")
        item = int(np.prod(dims[1:], dtype=np.int64))
        payload = f.read(count * item)
    return np.frombuffer(payload, dtype=np.uint8).reshape((count,) + dims[1:])


def fashion_images(split, count):
    """float32 [count,1,28,28] = pixel/255, in dataset order (what qforge's calibration reads)."""
    prefix = "train" if split == "train" else "t10k"
    images = read_idx_prefix(os.path.join(FASHION_DIR, f"{prefix}-images-idx3-ubyte.gz"), count)
    return torch.from_numpy(images.astype(np.float32) / np.float32(255)).unsqueeze(1)


def fashion_labels(split, count):
    prefix = "train" if split == "train" else "t10k"
    labels = read_idx_prefix(os.path.join(FASHION_DIR, f"{prefix}-labels-idx1-ubyte.gz"), count)
    return torch.from_numpy(labels.astype(np.int64))


# ----------------------------------------------------------------------------------------------
# The float ONNX graph as torch modules, one per node

def attributes(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class Gemm(nn.Module):
    """ONNX Gemm with alpha = beta = 1 (what torch exports for nn.Linear)."""

    def __init__(self, weight, bias, trans_b):
        super().__init__()
        self.weight = nn.Parameter(weight if trans_b else weight.t().contiguous(), False)
        self.bias = nn.Parameter(bias, False)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Binary(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b):
        return self.fn(a, b)


class Unary(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class OnnxGraph:
    """Evaluates an ONNX CNN graph node by node with torch modules built from its initializers.
    Covers the ops of the zoo ResNet; anything else is refused by name."""

    def __init__(self, path):
        model = onnx.load(path)
        self.path = path
        self.initializers = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
                             for t in model.graph.initializer}
        self.nodes = []
        for node in model.graph.node:
            # The exporter stores equal parameters once and aliases the others with Identity.
            if node.op_type == "Identity" and node.input[0] in self.initializers:
                self.initializers[node.output[0]] = self.initializers[node.input[0]]
            else:
                self.nodes.append(node)
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.modules = {node.name: self._module(node) for node in self.nodes}
        self.graph_inputs = [i.name for i in model.graph.input if i.name not in self.initializers]
        self.graph_outputs = [o.name for o in model.graph.output]

    def tensor(self, name):
        return self.initializers[name]

    def conv_bias(self, node):
        return self.tensor(node.input[2]) if len(node.input) > 2 and node.input[2] else None

    def _module(self, node):
        op, attrs = node.op_type, attributes(node)
        if op == "Conv":
            weight, bias = self.tensor(node.input[1]), self.conv_bias(node)
            groups = attrs.get("group", 1)
            conv = nn.Conv2d(weight.shape[1] * groups, weight.shape[0], tuple(weight.shape[2:]),
                             stride=tuple(attrs.get("strides", (1, 1))),
                             padding=conv_padding(attrs),
                             dilation=tuple(attrs.get("dilations", (1, 1))), groups=groups,
                             bias=bias is not None)
            conv.weight = nn.Parameter(weight, False)
            if bias is not None:
                conv.bias = nn.Parameter(bias, False)
            return conv.eval()
        if op == "BatchNormalization":
            scale, bias, mean, var = (self.tensor(n) for n in node.input[1:5])
            bn = nn.BatchNorm2d(len(scale), eps=attrs.get("epsilon", 1e-5))
            bn.weight, bn.bias = nn.Parameter(scale, False), nn.Parameter(bias, False)
            bn.running_mean, bn.running_var = mean, var
            return bn.eval()
        if op == "Relu":
            return nn.ReLU()
        if op == "Add":
            return Binary(torch.add)
        if op == "GlobalAveragePool":
            return nn.AdaptiveAvgPool2d(1)
        if op == "Flatten":
            return nn.Flatten(attrs.get("axis", 1))
        if op == "Gemm":
            plain = attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0
            if not plain or attrs.get("transA", 0):
                raise ValueError(f"{node.name}: only Gemm with alpha = beta = 1, no transA")
            weight, bias = self.tensor(node.input[1]), self.tensor(node.input[2])
            return Gemm(weight, bias, attrs.get("transB", 0))
        if op == "Identity":
            return Unary(lambda x: x)
        raise ValueError(f"{self.path}: op {op} ({node.name}) is not supported by this bench")

    def activation_inputs(self, node):
        return [n for n in node.input if n and n not in self.initializers]

    @torch.no_grad()
    def run(self, env, outputs):
        """Computes OUTPUTS from the tensors in ENV (name -> tensor), evaluating only the nodes
        they need; returns ENV with every value computed on the way."""
        needed, stack = [], list(outputs)
        seen = set()
        while stack:
            name = stack.pop()
            if name in env or name in seen:
                continue
            seen.add(name)
            if name not in self.producer:
                raise KeyError(f"nothing computes {name!r} from {sorted(env)}")
            node = self.producer[name]
            needed.append(node.name)
            stack.extend(self.activation_inputs(node))
        needed = set(needed)
        for node in self.nodes:  # ONNX lists nodes in topological order
            if node.name in needed:
                args = [env[n] for n in self.activation_inputs(node)]
                env[node.output[0]] = self.modules[node.name](*args)
        return env


def conv_padding(attrs):
    pads = attrs.get("pads", (0, 0, 0, 0))
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise ValueError("Conv auto_pad is not supported by this bench")
    if pads[0] != pads[2] or pads[1] != pads[3]:
        raise ValueError(f"asymmetric Conv pads {pads} are not supported by this bench")
    return (pads[0], pads[1])


# ----------------------------------------------------------------------------------------------
# Residual blocks found in the graph's structure

@dataclass
class ResidualBlock:
    index: int  # 1-based, graph order
    name: str
    input: str  # tensor names
    output: str
    main: list  # ONNX nodes Conv, BN, Relu, Conv, BN
    shortcut: list = field(default_factory=list)  # [] (identity) or Conv, BN
    add: object = None

    def shortcut_kind(self):
        if not self.shortcut:
            return "identity"
        kernel = tuple(attributes(self.shortcut[0])["kernel_shape"])
        return f"{'x'.join(map(str, kernel))} conv-bn"


def chain_back(graph, tensor):
    """Tensors and nodes walked back from TENSOR through single-activation-input nodes, nearest
    first: ([tensor, input of its producer, ...], [producer, ...])."""
    tensors, nodes = [tensor], []
    while tensor in graph.producer:
        node = graph.producer[tensor]
        inputs = graph.activation_inputs(node)
        if len(inputs) != 1:
            break
        nodes.append(node)
        tensor = inputs[0]
        tensors.append(tensor)
    return tensors, nodes


def block_name(add_node, index):
    """'/layer2/Add' -> 'layer2' (the exporter's module path), else 'blockN'."""
    scope = os.path.dirname(add_node.name.strip("/"))
    return scope.replace("/", ".") if scope else f"block{index}"


def find_residual_blocks(graph):
    blocks = []
    for add in (n for n in graph.nodes if n.op_type == "Add"):
        readers = graph.consumers.get(add.output[0], [])
        if len(readers) != 1 or readers[0].op_type != "Relu":
            continue
        left, right = (chain_back(graph, t) for t in graph.activation_inputs(add))
        common = next((t for t in left[0] if t in right[0]), None)
        if common is None:
            continue
        branches = []
        for tensors, nodes in (left, right):
            branches.append(list(reversed(nodes[:tensors.index(common)])))
        branches.sort(key=len, reverse=True)
        main, shortcut = branches
        main_ops = [n.op_type for n in main]
        shortcut_ops = [n.op_type for n in shortcut]
        if main_ops != ["Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization"]:
            continue
        if shortcut_ops not in ([], ["Conv", "BatchNormalization"]):
            continue
        index = len(blocks) + 1
        blocks.append(ResidualBlock(index, block_name(add, index), common,
                                    readers[0].output[0], main, shortcut, add))
    return blocks


def pick_block(blocks, wanted):
    for block in blocks:
        if wanted in (str(block.index), block.name):
            return block
    names = ", ".join(f"{b.index} ({b.name})" for b in blocks)
    raise SystemExit(f"no residual block {wanted!r}; the graph has: {names}")


# ----------------------------------------------------------------------------------------------
# Quantization (MQBench Academic backend: weights per channel, BatchNorm not folded)

def affine_qparams(lo, hi, bits):
    """Asymmetric unsigned MinMax grid [0, 2^bits - 1] with the range extended to include 0:
    (scale, zero point) as float tensors shaped like LO."""
    qmax = 2 ** bits - 1
    lo, hi = torch.clamp(lo, max=0.0), torch.clamp(hi, min=0.0)
    scale = torch.clamp((hi - lo) / qmax, min=torch.finfo(torch.float32).eps)
    zero_point = torch.clamp(torch.round(-lo / scale), 0, qmax)
    return scale, zero_point


class AdaRoundConv(nn.Module):
    """Conv2d whose weight is s * (clamp(floor(w/s) + h(V) + z, 0, qmax) - z), with one
    rounding variable V per weight, initialised so that h(V) = frac(w/s)."""

    def __init__(self, conv_node, graph, bits):
        super().__init__()
        attrs = attributes(conv_node)
        self.stride = tuple(attrs.get("strides", (1, 1)))
        self.padding = conv_padding(attrs)
        self.dilation = tuple(attrs.get("dilations", (1, 1)))
        self.groups = attrs.get("group", 1)
        self.name = conv_node.name
        weight = graph.tensor(conv_node.input[1])
        self.register_buffer("float_weight", weight)
        self.register_buffer("bias", graph.conv_bias(conv_node))
        self.qmax = 2 ** bits - 1
        per_channel = weight.flatten(1)
        scale, zero_point = affine_qparams(per_channel.min(1).values, per_channel.max(1).values,
                                           bits)
        shape = (-1,) + (1,) * (weight.dim() - 1)
        self.register_buffer("scale", scale.reshape(shape))
        self.register_buffer("zero_point", zero_point.reshape(shape))
        # floor(w/s) + z is constant during reconstruction: computed once, not per iteration.
        self.register_buffer("floor_plus_zero_point",
                             torch.floor(weight / self.scale) + self.zero_point)
        self.V = nn.Parameter(torch.empty_like(weight))
        self.reset_rounding()

    def reset_rounding(self):
        scaled = self.float_weight / self.scale
        rest = scaled - torch.floor(scaled)
        with torch.no_grad():
            self.V.copy_(-torch.log((ZETA - GAMMA) / (rest - GAMMA) - 1))

    def soft_rounding(self):
        return torch.clamp(torch.sigmoid(self.V) * (ZETA - GAMMA) + GAMMA, 0, 1)

    def hard_rounding(self):
        return (self.V >= 0).to(self.V.dtype)

    def quantized_weight(self, h):
        levels = torch.clamp(self.floor_plus_zero_point + h, 0, self.qmax)
        return (levels - self.zero_point) * self.scale

    def forward(self, x, weight):
        return F.conv2d(x, weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class BatchNormEval(nn.Module):
    def __init__(self, bn_node, graph):
        super().__init__()
        scale, bias, mean, var = (graph.tensor(n) for n in bn_node.input[1:5])
        self.register_buffer("weight", scale)
        self.register_buffer("bias", bias)
        self.register_buffer("running_mean", mean)
        self.register_buffer("running_var", var)
        self.eps = attributes(bn_node).get("epsilon", 1e-5)

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=self.eps)


class ActFakeQuant:
    """Fixed per-tensor asymmetric fake quantization, straight-through rounding."""

    def __init__(self, lo, hi, bits):
        scale, zero_point = affine_qparams(torch.tensor(lo), torch.tensor(hi), bits)
        self.scale, self.zero_point, self.qmax = float(scale), int(zero_point), 2 ** bits - 1

    def __call__(self, x):
        return torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero_point, 0, self.qmax)

    def describe(self):
        return {"scale": self.scale, "zero_point": self.zero_point}


class QuantBlock(nn.Module):
    """relu(bn2(conv2(q(relu(bn1(conv1(x)))))) + shortcut(x)) with AdaRound weights; x is the
    (already quantized or QDrop-mixed) block input, q the fixed fake quant of conv2's input."""

    def __init__(self, block, graph, wbits):
        super().__init__()
        conv1, bn1, _, conv2, bn2 = block.main
        self.conv1, self.bn1 = AdaRoundConv(conv1, graph, wbits), BatchNormEval(bn1, graph)
        self.conv2, self.bn2 = AdaRoundConv(conv2, graph, wbits), BatchNormEval(bn2, graph)
        self.shortcut_conv = self.shortcut_bn = None
        if block.shortcut:
            self.shortcut_conv = AdaRoundConv(block.shortcut[0], graph, wbits)
            self.shortcut_bn = BatchNormEval(block.shortcut[1], graph)
        self.mid_quant = None  # set by calibrate_mid_quant
        self.out_quant = None  # set by calibrate_out_quant
        self.generator = None  # QDrop's generator while training

    @torch.no_grad()
    def calibrate_mid_quant(self, fp_in, bits, batch=256):
        """conv2's input quantizer from the min/max of its float input, relu(bn1(conv1(x)))."""
        lo, hi = math.inf, -math.inf
        for i in range(0, len(fp_in), batch):
            mid = F.relu(self.bn1(self.conv1(fp_in[i:i + batch], self.conv1.float_weight)))
            lo, hi = min(lo, mid.min().item()), max(hi, mid.max().item())
        self.mid_quant = ActFakeQuant(lo, hi, bits)

    def calibrate_out_quant(self, fp_out, bits):
        """The block output's quantizer from the min/max of the float block output."""
        self.out_quant = ActFakeQuant(fp_out.min().item(), fp_out.max().item(), bits)

    def convs(self):
        return [c for c in (self.conv1, self.conv2, self.shortcut_conv) if c is not None]

    def forward(self, x, rounding="soft"):
        """Returns (output, [h of each conv]). rounding: soft (h(V)), hard (V >= 0) or float
        (the original weights and no activation quantization)."""
        roundings, weights = [], []
        for conv in self.convs():
            if rounding == "float":
                weights.append(conv.float_weight)
                continue
            h = conv.soft_rounding() if rounding == "soft" else conv.hard_rounding()
            roundings.append(h)
            weights.append(conv.quantized_weight(h))
        y = F.relu(self.bn1(self.conv1(x, weights[0])))
        if rounding != "float":
            y = self.dropped(self.mid_quant, y, rounding)
        y = self.bn2(self.conv2(y, weights[1]))
        if self.shortcut_conv is None:
            residual = x
        else:
            residual = self.shortcut_bn(self.shortcut_conv(x, weights[2]))
        out = F.relu(y + residual)
        if rounding != "float" and self.out_quant is not None:
            # The block's output quantizer (the next block's input quantizer) is part of the
            # block, as in qforge's block units.
            out = self.dropped(self.out_quant, out, rounding)
        return out, roundings

    def dropped(self, quant, x, rounding):
        """QDrop inside the block while training: each element keeps its quantized value with
        probability DROP_PROB, its float value otherwise."""
        q = quant(x)
        if rounding != "soft" or self.generator is None:
            return q
        return torch.where(torch.rand(x.shape, generator=self.generator) < DROP_PROB, q, x)


# ----------------------------------------------------------------------------------------------
# Cached block data

@torch.no_grad()
def cache_block_data(graph, block, images, batch=64):
    """(float block input, float block output) over IMAGES, from the ONNX graph's own values,
    written into preallocated tensors (small prefix batches keep the setup's peak RSS low)."""
    inputs = outputs = None
    for i in range(0, len(images), batch):
        env = graph.run({graph.graph_inputs[0]: images[i:i + batch]}, [block.input, block.output])
        if inputs is None:
            inputs = torch.empty((len(images),) + env[block.input].shape[1:])
            outputs = torch.empty((len(images),) + env[block.output].shape[1:])
        inputs[i:i + batch] = env[block.input]
        outputs[i:i + batch] = env[block.output]
    return inputs, outputs


@torch.no_grad()
def lp_loss_over(block, x, target, rounding, batch=256):
    """MQBench's lp_loss (sum over channels, mean over the rest) on all cached samples."""
    total, count = 0.0, 0
    for i in range(0, len(x), batch):
        out, _ = block(x[i:i + batch], rounding)
        err = (out - target[i:i + batch]).pow(2).sum(1)
        total += err.sum().item()
        count += err.numel()
    return total / count


# ----------------------------------------------------------------------------------------------
# The reconstruction loop

def annealed_beta(t, iters):
    """MQBench's LinearTempDecay for iteration t (1-based): None while the rounding loss is off
    (t < warm-up), then 20 -> 2 linearly until the last iteration."""
    start = WARM_UP * iters
    if t < start:
        return None
    progress = (t - start) / max(iters - start, 1e-12)
    high, low = BETA_RANGE
    return low + (high - low) * max(0.0, 1.0 - progress)


def reconstruct(block, fp_in, q_in, fp_out, iters, batch, generator):
    """ITERS iterations from fresh rounding variables and a fresh Adam; returns the last
    iteration's (total, rec, round) losses."""
    for conv in block.convs():
        conv.reset_rounding()
    optimizer = torch.optim.Adam([conv.V for conv in block.convs()], lr=LEARNING_RATE)
    block.generator = generator
    n = len(fp_in)
    last = (math.nan, math.nan, 0.0)
    for t in range(1, iters + 1):
        idx = torch.randperm(n, generator=generator)[:batch]
        x_fp, x_q, target = fp_in[idx], q_in[idx], fp_out[idx]
        drop = torch.rand(x_fp.shape, generator=generator) < DROP_PROB
        x = torch.where(drop, x_q, x_fp)

        optimizer.zero_grad(set_to_none=True)
        out, roundings = block(x, "soft")
        rec_loss = (out - target).pow(2).sum(1).mean()
        beta = annealed_beta(t, iters)
        if beta is None:
            loss, round_loss = rec_loss, None
        else:
            round_loss = ROUND_LOSS_WEIGHT * sum((1 - (2 * h - 1).abs().pow(beta)).sum()
                                                 for h in roundings)
            loss = rec_loss + round_loss
        loss.backward()
        optimizer.step()
        if t == iters:
            last = (loss.item(), rec_loss.item(), 0.0 if round_loss is None else round_loss.item())
    return last


# ----------------------------------------------------------------------------------------------
# Float checks

def zoo_block_output(graph, block, images):
    """The block's output from tools/zoo/zoo.py's own PyTorch ResNet (an independent definition
    of the same model) holding the ONNX file's weights, or None when it has no such module."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "zoo"))
    try:
        import zoo
    except ImportError:
        return None
    model = zoo.load_onnx_weights(zoo.build("resnet"), graph.path)
    module = model
    for part in block.name.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    captured = []
    handle = module.register_forward_hook(lambda m, i, o: captured.append(o))
    with torch.no_grad():
        for i in range(0, len(images), 256):
            model(images[i:i + 256])
    handle.remove()
    return torch.cat(captured)


@torch.no_grad()
def check_weight_grid(conv):
    """At V's initial value the soft weight is the float weight clipped to the grid's range (the
    rounded zero point can cut up to half a step off either end) and the hardened weight is
    ATen's per-channel fake quantization (round to nearest; ties, where the two roundings may
    differ, are excluded)."""
    conv.reset_rounding()
    w = conv.float_weight
    levels = torch.clamp(w / conv.scale + conv.zero_point, 0, conv.qmax)
    clipped = (levels - conv.zero_point) * conv.scale
    soft_diff = (conv.quantized_weight(conv.soft_rounding()) - clipped).abs().max().item()
    scale, zero_point = conv.scale.flatten(), conv.zero_point.flatten().to(torch.int32)
    aten = torch.fake_quantize_per_channel_affine(w, scale, zero_point, 0, 0, conv.qmax)
    scaled = w / conv.scale
    not_tie = (scaled - torch.floor(scaled) - 0.5).abs() > 1e-4
    hard_diff = ((conv.quantized_weight(conv.hard_rounding()) - aten).abs() * not_tie).max().item()
    tolerance = 1e-5 * w.abs().max().item()
    ok = soft_diff <= tolerance and hard_diff <= tolerance
    print(f"{conv.name}: soft weight at V0 vs clipped float max |diff| {soft_diff:.3g}, "
          f"hardened vs torch.fake_quantize_per_channel_affine max |diff| {hard_diff:.3g} "
          f"({'ok' if ok else 'FAIL'})")
    return ok


@torch.no_grad()
def check_float(graph, block, qblock, samples):
    """Checks, in float, that the block built for the bench computes the graph's block output and
    that the whole model with it classifies the test split as the zoo reports; also that the
    AdaRound weight grid starts where it should. Returns ok."""
    ok = True
    images = fashion_images("train", samples)
    fp_in, fp_out = cache_block_data(graph, block, images)
    diff = (qblock(fp_in, "float")[0] - fp_out).abs().max().item()
    verdict = diff <= BLOCK_ATOL
    ok &= verdict
    print(f"block {block.index} ({block.name}) in float vs the ONNX graph's {block.output} on "
          f"{samples} train images: max |diff| {diff:.3g} "
          f"({'ok' if verdict else 'FAIL'}, atol {BLOCK_ATOL})")

    zoo_out = zoo_block_output(graph, block, images)
    if zoo_out is None:
        print("tools/zoo/zoo.py's ResNet has no module of that name: independent check skipped")
    else:
        diff = (zoo_out - fp_out).abs().max().item()
        verdict = diff <= BLOCK_ATOL
        ok &= verdict
        print(f"graph's {block.output} vs tools/zoo/zoo.py's ResNet.{block.name} output: "
              f"max |diff| {diff:.3g} ({'ok' if verdict else 'FAIL'})")

    for conv in qblock.convs():
        ok &= check_weight_grid(conv)

    test_images, labels = fashion_images("test", 10000), fashion_labels("test", 10000)
    correct = 0
    for i in range(0, len(test_images), 500):
        env = graph.run({graph.graph_inputs[0]: test_images[i:i + 500]}, [block.input])
        env[block.output] = qblock(env[block.input], "float")[0]
        logits = graph.run(env, graph.graph_outputs)[graph.graph_outputs[0]]
        correct += (logits.argmax(1) == labels[i:i + 500]).sum().item()
    info_path = os.path.splitext(graph.path)[0] + ".json"
    expected = None
    if os.path.exists(info_path):
        with open(info_path) as f:
            expected = json.load(f)["test"]["top1_count"]
    verdict = expected is None or abs(correct - expected) <= TOP1_TOLERANCE
    ok &= verdict
    reference = "no reference"
    if expected is not None:
        reference = f"zoo's {os.path.basename(info_path)}: {expected}"
    print(f"full model with the bench's block {block.index} in float: top-1 {correct} / 10000 "
          f"({reference}; {'ok' if verdict else 'FAIL'})")
    return ok


# ----------------------------------------------------------------------------------------------

def resident_bytes():
    """Current RSS (not the peak): what the setup left resident before the timed loop."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def thread_count():
    value = os.environ.get("QFORGE_NUM_THREADS", "")
    return int(value) if value.strip() else os.cpu_count()


def list_blocks(graph, blocks):
    env = graph.run({graph.graph_inputs[0]: torch.zeros(1, 1, 28, 28)}, [b.output for b in blocks])
    print(f"residual blocks of {os.path.relpath(graph.path)} (select with --block INDEX or NAME):")
    for b in blocks:
        convs = [n for n in b.main + b.shortcut if n.op_type == "Conv"]
        weights = sum(graph.tensor(n.input[1]).numel() for n in convs)
        shapes = f"{tuple(env[b.input].shape[1:])} -> {tuple(env[b.output].shape[1:])}"
        print(f"  {b.index}  {b.name:10s} {shapes}  conv-bn-relu-conv-bn + {b.shortcut_kind()} "
              f"shortcut, {len(convs)} convs, {weights} weights"
              f"  (input {b.input})")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL, help="ONNX file (default: the zoo ResNet)")
    p.add_argument("--block", default="2",
                   help="residual block index (1-based) or name, see --list")
    p.add_argument("--list", action="store_true", help="list the residual blocks and exit")
    p.add_argument("--check-float", action="store_true",
                   help="check the block built here against the ONNX graph and the zoo's "
                        "top-1, and exit")
    p.add_argument("--wbits", type=int, default=4)
    p.add_argument("--abits", type=int, default=4)
    p.add_argument("--samples", type=int, default=1024,
                   help="calibration images (train split, dataset order)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iters", type=int, default=500, help="measured iterations")
    p.add_argument("--warmup", type=int, default=20,
                   help="untimed iterations before the measured run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="write the results and the configuration to FILE")
    p.add_argument("--qforge", metavar="PATH",
                   help="also time qforge's engine (qforge quantize --algo qdrop, learned "
                        "activation scales off as here) on the same block and print the ratio")
    args = p.parse_args()

    for name in ("wbits", "abits"):
        if not 2 <= getattr(args, name) <= 8:
            p.error(f"--{name} must be in 2..8")
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        p.error("--batch and --iters must be >= 1, --warmup >= 0")
    if args.samples < args.batch:
        p.error(f"--samples {args.samples} is fewer than one --batch of {args.batch}")

    threads = thread_count()
    torch.set_num_threads(threads)
    graph = OnnxGraph(args.model)
    blocks = find_residual_blocks(graph)
    if not blocks:
        raise SystemExit(f"{args.model}: no Conv-BN-Relu-Conv-BN residual block with an Add + Relu")
    if args.list:
        list_blocks(graph, blocks)
        return 0
    block = pick_block(blocks, args.block)
    qblock = QuantBlock(block, graph, args.wbits)
    if args.check_float:
        return 0 if check_float(graph, block, qblock, args.samples) else 1

    load = os.getloadavg()[0]
    if threads > 1 and load >= 1.0 and os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        # libgomp's threads spin between ops; on a busy machine (nice 19 especially) they spin
        # against other processes and the loop runs up to 20x slower than on one thread.
        log(f"warning: load average {load:.1f} with {threads} OpenMP threads: timings are "
            f"unreliable; use QFORGE_NUM_THREADS=1 or OMP_WAIT_POLICY=PASSIVE (bench/README.md)")
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    fp_in, fp_out = cache_block_data(graph, block, fashion_images("train", args.samples))
    # Each quantizer's range is its tensor's min/max over the calibration inputs in float.
    input_quant = ActFakeQuant(fp_in.min().item(), fp_in.max().item(), args.abits)
    qblock.calibrate_mid_quant(fp_in, args.abits)
    qblock.calibrate_out_quant(fp_out, args.abits)
    # The quantized block input is cached beside the float one, as MQBench caches both for
    # QDrop; conv1 and the shortcut conv read the same (mixed) input tensor.
    q_in = input_quant(fp_in)
    cache_bytes = sum(t.numel() * t.element_size() for t in (fp_in, q_in, fp_out))

    nearest_loss = lp_loss_over(qblock, q_in, fp_out, "hard")  # V initial: V >= 0 iff frac >= 0.5
    log(f"block {block.index} ({block.name}), W{args.wbits}A{args.abits}, {args.samples} samples, "
        f"batch {args.batch}, {threads} threads: {args.warmup} warm-up + {args.iters} measured "
        f"iterations")
    if args.warmup:
        reconstruct(qblock, fp_in, q_in, fp_out, args.warmup, args.batch, generator)
    generator.manual_seed(args.seed)
    rss_before_loop = resident_bytes()
    start = time.perf_counter()
    total_loss, rec_loss, round_loss = reconstruct(qblock, fp_in, q_in, fp_out, args.iters,
                                                   args.batch, generator)
    seconds = time.perf_counter() - start
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    hardened_loss = lp_loss_over(qblock, q_in, fp_out, "hard")

    results = {
        "iterations_per_second": args.iters / seconds,
        "seconds": seconds,
        "final_loss": total_loss,
        "final_rec_loss": rec_loss,
        "final_round_loss": round_loss,
        "rec_loss_all_samples_nearest_rounding": nearest_loss,
        "rec_loss_all_samples_hardened": hardened_loss,
        "peak_rss_bytes": peak_rss,
        "rss_before_loop_bytes": rss_before_loop,
        "cache_bytes": cache_bytes,
    }
    config = {
        "model": os.path.relpath(args.model, ROOT), "block": block.index, "block_name": block.name,
        "block_input": block.input, "block_input_shape": list(fp_in.shape[1:]),
        "block_output_shape": list(fp_out.shape[1:]), "shortcut": block.shortcut_kind(),
        "weights": sum(c.float_weight.numel() for c in qblock.convs()),
        "wbits": args.wbits, "abits": args.abits, "samples": args.samples, "batch": args.batch,
        "iters": args.iters, "warmup_iters": args.warmup, "seed": args.seed, "threads": threads,
        "prob": DROP_PROB, "round_loss_weight": ROUND_LOSS_WEIGHT, "warm_up": WARM_UP,
        "b_range": list(BETA_RANGE), "lr": LEARNING_RATE, "zeta": ZETA, "gamma": GAMMA,
        "input_quant": input_quant.describe(), "mid_quant": qblock.mid_quant.describe(),
        "torch": torch.__version__, "python": platform.python_version(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "load_average_at_start": load,
    }
    print(f"PyTorch eager reconstruction, block {block.index} ({block.name}) "
          f"{tuple(fp_in.shape[1:])} -> {tuple(fp_out.shape[1:])}, W{args.wbits}A{args.abits}, "
          f"batch {args.batch}, {threads} threads")
    print(f"  iterations/s          {results['iterations_per_second']:.1f}  "
          f"({args.iters} iterations in {seconds:.2f} s)")
    print(f"  final loss            {total_loss:.5g}  (rec {rec_loss:.5g}, round {round_loss:.5g})")
    print(f"  rec loss, all samples nearest rounding {nearest_loss:.5g} -> hardened AdaRound "
          f"{hardened_loss:.5g}")
    print(f"  peak RSS              {peak_rss / 2**20:.1f} MiB  (resident before the loop "
          f"{rss_before_loop / 2**20:.1f} MiB, of which cache {cache_bytes / 2**20:.1f} MiB)")
    if args.qforge:
        results["qforge"] = time_qforge(args, block, threads)
        q = results["qforge"]
        q["ratio_vs_pytorch"] = q["iterations_per_second"] / results["iterations_per_second"]
        print(f"qforge engine, unit {q['unit']!r}: {q['iterations_per_second']:.1f} it/s "
              f"({q['iterations']} iterations in {q['seconds']:.2f} s; caching "
              f"{q['cache_seconds']:.2f} s more), {q['ratio_vs_pytorch']:.2f}x PyTorch eager; peak RSS "
              f"{q['peak_rss_bytes'] / 2**20:.1f} MiB, unit cache {q['cached_bytes'] / 2**20:.1f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": config, "results": results}, f, indent=2)
            f.write("\n")
    return 0


def time_qforge(args, block, threads):
    """Runs qforge's QDrop on the same model, bits, samples and batch; returns the timing of the
    unit that reconstructs `block` (the unit whose weighted nodes are the block's convs)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        config = os.path.join(out, "bits.yaml")
        with open(config, "w") as f:
            f.write(f"weight: {{bits: {args.wbits}, observer: MinMax}}\n"
                    f"activation: {{bits: {args.abits}, observer: MinMax}}\n")
        recon = os.path.join(out, "recon.json")
        with open(recon, "w") as f:
            json.dump({"scale_lr": 0, "prob": DROP_PROB, "batch": args.batch}, f)
        env = dict(os.environ, QFORGE_NUM_THREADS=str(threads))
        cmd = [args.qforge, "quantize", args.model, "--backend", "Academic", "--config", config,
               "--calib", "fashion-mnist:train", "--calib-batches", str(args.samples // 64),
               "--calib-batch", "64", "--algo", "qdrop", "--algo-config", recon,
               "--iters", str(args.iters), "--seed", str(args.seed), "--no-deploy", "--json",
               "--quiet", "--out", os.path.join(out, "q")]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"qforge failed: {done.stderr.strip()}")
        report = json.loads(done.stdout)
    units = report["reconstruction"]["units"]
    mine = [u for u in units if block.name in u["name"]]
    if not mine:
        raise SystemExit(f"no qforge unit reconstructs {block.name}: {[u['name'] for u in units]}")
    u = mine[0]
    # The PyTorch loop is timed without its caching; so is this one (the unit's seconds minus the
    # time it took to compute its cached inputs and outputs).
    loop = u["seconds"] - u["cache_seconds"]
    return {"unit": u["name"], "iterations": args.iters, "seconds": loop,
            "cache_seconds": u["cache_seconds"],
            "iterations_per_second": args.iters / loop, "cached_bytes": u["cached_bytes"],
            "peak_rss_bytes": report["peak_rss_bytes"], "threads": threads}


if __name__ == "__main__":
    sys.exit(main())
