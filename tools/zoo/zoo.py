#!/usr/bin/python3
"""The reference zoo: four small Fashion-MNIST models, defined, trained with fixed seeds and
exported to ONNX (opset 13, dynamic batch axis) for qforge to evaluate and quantize.

  resnet     ResNet-style CNN: conv-bn-relu, residual adds, global pool, linear
  mobilenet  MobileNetV2-style CNN: depthwise separable convs, inverted residuals, ReLU6
  vit        small Vision Transformer: patch-embedding conv, LayerNorm, MatMul+Softmax attention,
             GELU MLP (torch 1.13 exports GELU in its Erf form)
  unet       U-Net-style denoiser: ConvTranspose, Concat, Resize, Sigmoid; removes Gaussian noise

Every model reads `image`, float [N,1,28,28] with pixel/255 in [0,1] (no mean/std: what
`qforge eval --data fashion-mnist:test` feeds by default). Classifiers write `logits` [N,10];
the denoiser writes `denoised` [N,1,28,28] in [0,1] and is fed `image + sigma * noise`.

Uses Debian's python3-torch 1.13 and reads the IDX files of dataset-fashion-mnist itself.

  /usr/bin/python3 tools/zoo/zoo.py train resnet --out models/zoo           # full run
  /usr/bin/python3 tools/zoo/zoo.py train resnet --out /tmp/z --max-steps 200  # smoke test
"""
import argparse
import gzip
import json
import math
import os
import platform
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FASHION_DIR = "/usr/share/datasets/fashion-mnist"
NOISE_SIGMA = 0.2  # the denoiser's Gaussian noise, on the [0,1] pixel scale
OPSET = 13


# ----------------------------------------------------------------------------------------------
# Data

def read_idx(path):
    """Reads an IDX file (optionally gzipped) into a numpy array, checking its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    payload = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if payload.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {payload.size} bytes of data, header says {dims}")
    return payload.reshape(dims)


def load_split(split, data_dir=FASHION_DIR):
    """Returns (images float32 [N,1,28,28] in [0,1], labels int64 [N]) of 'train' or 'test'."""
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / np.float32(255)).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


def eval_noise(index, seed=0, shape=(1, 28, 28)):
    """The noise `qforge eval --noise` adds to sample `index` of a dataset: standard normal from
    ATen's CPU generator seeded with seed * 1000003 + index (same library, same numbers)."""
    g = torch.Generator().manual_seed(seed * 1000003 + index)
    return torch.randn(shape, generator=g)


def noisy_test_inputs(clean, sigma=NOISE_SIGMA, seed=0):
    noise = torch.stack([eval_noise(i, seed, tuple(clean.shape[1:])) for i in range(len(clean))])
    return clean + sigma * noise


def augment(x, gen):
    """Random shift by up to 2 pixels (zero padded) and horizontal flip, per sample."""
    n = x.shape[0]
    padded = F.pad(x, (2, 2, 2, 2))
    dx = torch.randint(0, 5, (n,), generator=gen)
    dy = torch.randint(0, 5, (n,), generator=gen)
    flip = torch.rand(n, generator=gen) < 0.5
    out = torch.empty_like(x)
    for i in range(n):
        crop = padded[i, :, dy[i]:dy[i] + 28, dx[i]:dx[i] + 28]
        out[i] = crop.flip(-1) if flip[i] else crop
    return out


# ----------------------------------------------------------------------------------------------
# Models

def conv_bn_relu(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    def __init__(self, widths=(24, 32, 64)):
        super().__init__()
        w1, w2, w3 = widths
        self.stem = conv_bn_relu(1, w1)
        self.layer1 = BasicBlock(w1, w2, 2)
        self.layer2 = BasicBlock(w2, w3, 2)
        self.layer3 = BasicBlock(w3, w3, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(w3, 10)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_residual else y


class MobileNetV2(nn.Module):
    # (expansion, out channels, repeats, first stride), as in the paper's table but for 28x28.
    SETTINGS = [(1, 16, 1, 1), (4, 24, 2, 2), (4, 32, 2, 2), (4, 64, 1, 1), (4, 96, 1, 1)]

    def __init__(self, stem=16, head=192):
        super().__init__()
        layers = [nn.Conv2d(1, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem),
                  nn.ReLU6(inplace=True)]
        cin = stem
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, head, 1, bias=False), nn.BatchNorm2d(head),
                   nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(head, 10)

    def forward(self, x):
        return self.fc(self.dropout(torch.flatten(self.pool(self.features(x)), 1)))


class Linear(nn.Linear):
    """nn.Linear whose training forward runs as a 1x1 convolution: Debian's torch multiplies
    matrices with the reference BLAS, several times slower than oneDNN's convolution. Eval mode
    (and so the export, and the cross-check) is the plain nn.Linear: Gemm/MatMul in ONNX."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        rows = x.reshape(-1, self.in_features, 1, 1)
        y = F.conv2d(rows, self.weight[:, :, None, None], self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)


class Attention(nn.Module):
    """Multi-head self-attention written out as MatMul + Softmax, so the export has exactly
    those nodes (no fused attention op). Shapes use Python ints except the batch (-1)."""

    def __init__(self, dim, heads, tokens):
        super().__init__()
        self.heads, self.head_dim, self.tokens = heads, dim // heads, tokens
        self.qkv = Linear(dim, 3 * dim)
        self.proj = Linear(dim, dim)

    def forward(self, x):
        n, h, d = self.tokens, self.heads, self.head_dim
        qkv = self.qkv(x).reshape(-1, n, 3, h, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (d ** -0.5), dim=-1)
        y = torch.matmul(attn, v).transpose(1, 2).reshape(-1, n, h * d)
        return self.proj(y)


class TransformerBlock(nn.Module):
    def __init__(self, dim, heads, mlp_dim, tokens):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, tokens)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(Linear(dim, mlp_dim), nn.GELU(), Linear(mlp_dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, patch=4, dim=48, depth=3, heads=3, mlp_dim=96):
        super().__init__()
        self.tokens = (28 // patch) ** 2
        self.dim = dim
        self.patch_embed = nn.Conv2d(1, dim, patch, patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.tokens, dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.blocks = nn.Sequential(
            *[TransformerBlock(dim, heads, mlp_dim, self.tokens) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch_embed(x).reshape(-1, self.dim, self.tokens).transpose(1, 2)
        x = self.blocks(x + self.pos_embed)
        return self.head(self.norm(x).mean(dim=1))


class ConvTranspose2x2(nn.ConvTranspose2d):
    """ConvTranspose2d(kernel 2, stride 2) whose training forward is a 1x1 convolution plus a
    pixel shuffle (the same sum): Debian's torch has no fast ConvTranspose backward. Eval mode,
    and so the export, is the plain ConvTranspose."""

    def __init__(self, cin, cout):
        super().__init__(cin, cout, 2, 2)

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        cin, cout = self.in_channels, self.out_channels
        w = self.weight.permute(1, 2, 3, 0).reshape(cout * 4, cin, 1, 1)
        return F.pixel_shuffle(F.conv2d(x, w, self.bias.repeat_interleave(4)), 2)


class UNet(nn.Module):
    """Two-level U-Net: the 7->14 upsampling is a ConvTranspose, the 14->28 one a bilinear
    Resize; skips are concatenated; the output is a Sigmoid image."""

    def __init__(self, w=(12, 24, 48)):
        super().__init__()
        w1, w2, w3 = w
        self.enc1 = nn.Sequential(conv_bn_relu(1, w1), conv_bn_relu(w1, w1))
        self.enc2 = nn.Sequential(conv_bn_relu(w1, w2, 2), conv_bn_relu(w2, w2))
        self.bottom = nn.Sequential(conv_bn_relu(w2, w3, 2), conv_bn_relu(w3, w3))
        self.up2 = ConvTranspose2x2(w3, w2)
        self.dec2 = nn.Sequential(conv_bn_relu(2 * w2, w2), conv_bn_relu(w2, w2))
        self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                 nn.Conv2d(w2, w1, 1))
        self.dec1 = nn.Sequential(conv_bn_relu(2 * w1, w1), conv_bn_relu(w1, w1))
        self.out = nn.Conv2d(w1, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        b = self.bottom(e2)
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return torch.sigmoid(self.out(d1))


# name -> (constructor, task, epochs, batch, peak lr, weight decay, augment)
MODELS = {
    "resnet": (ResNet, "classify", 15, 128, 4e-3, 5e-4, True),
    "mobilenet": (MobileNetV2, "classify", 8, 128, 4e-3, 5e-4, True),
    "vit": (ViT, "classify", 12, 128, 2e-3, 0.05, False),
    "unet": (UNet, "denoise", 5, 64, 3e-3, 1e-5, False),
}


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]()


# ----------------------------------------------------------------------------------------------
# Training and evaluation

def psnr_per_image(pred, target):
    mse = ((pred - target) ** 2).flatten(1).mean(1)
    return 10 * torch.log10(1.0 / mse), mse


@torch.no_grad()
def evaluate(model, name, x, y, batch=500):
    model.eval()
    task = MODELS[name][1]
    if task == "classify":
        correct = 0
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
        return {"top1": correct / len(x), "top1_count": correct, "samples": len(x)}
    noisy = noisy_test_inputs(x)
    psnrs, mses, in_psnrs = [], [], []
    for i in range(0, len(x), batch):
        p, m = psnr_per_image(model(noisy[i:i + batch]), x[i:i + batch])
        psnrs.append(p)
        mses.append(m)
        in_psnrs.append(psnr_per_image(noisy[i:i + batch], x[i:i + batch])[0])
    return {"psnr_db": torch.cat(psnrs).mean().item(), "mse": torch.cat(mses).mean().item(),
            "noisy_input_psnr_db": torch.cat(in_psnrs).mean().item(), "samples": len(x)}


def train(name, out_dir, max_steps=None, threads=2, log=print):
    ctor, task, epochs, batch, lr, wd, use_aug = MODELS[name]
    torch.set_num_threads(threads)
    x_train, y_train = load_split("train")
    x_test, y_test = load_split("test")
    model = build(name)
    params = sum(p.numel() for p in model.parameters())
    steps_per_epoch = len(x_train) // batch
    total = epochs * steps_per_epoch if max_steps is None else max_steps
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total,
                                                pct_start=0.2)
    gen = torch.Generator().manual_seed(1)
    log(f"{name}: {params} parameters, {total} steps of batch {batch}, {threads} threads")
    step, start = 0, time.time()
    while step < total:
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for i in range(steps_per_epoch):
            if step >= total:
                break
            idx = order[i * batch:(i + 1) * batch]
            xb = x_train[idx]
            if use_aug:
                xb = augment(xb, gen)
            if task == "classify":
                loss = F.cross_entropy(model(xb), y_train[idx], label_smoothing=0.1)
            else:
                noisy = xb + NOISE_SIGMA * torch.randn(xb.shape, generator=gen)
                loss = F.mse_loss(model(noisy), xb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0 or step == total:
                el = time.time() - start
                log(f"{name}: step {step}/{total} loss {loss.item():.4f} "
                    f"{el:.0f}s elapsed, eta {el / step * (total - step):.0f}s")
    model.eval()
    metrics = evaluate(model, name, x_test, y_test)
    log(f"{name}: final test {metrics}")
    os.makedirs(out_dir, exist_ok=True)
    path = export(model, name, out_dir)
    info = {
        "model": name, "file": os.path.basename(path), "task": task,
        "parameters": params, "bytes": os.path.getsize(path),
        "train": {"epochs": epochs if max_steps is None else total / steps_per_epoch,
                  "steps": total, "batch": batch, "optimizer": "AdamW + OneCycle",
                  "peak_lr": lr, "weight_decay": wd, "augment": use_aug,
                  "seed": 0, "data_seed": 1, "seconds": round(time.time() - start)},
        "test": metrics,
        "torch": torch.__version__, "python": platform.python_version(),
    }
    if task == "denoise":
        info["noise"] = {"sigma": NOISE_SIGMA, "seed": 0}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    return info


def export(model, name, out_dir):
    """Exports in eval mode, keeping BatchNormalization nodes (no folding) so the zoo exercises
    qforge's own fold-BN pass; initializer names stay the PyTorch parameter names."""
    model.eval()
    out_name = "denoised" if MODELS[name][1] == "denoise" else "logits"
    path = os.path.join(out_dir, name + ".onnx")
    tmp = path + ".tmp"
    torch.onnx.export(model, torch.rand(2, 1, 28, 28), tmp, opset_version=OPSET,
                      input_names=["image"], output_names=[out_name],
                      dynamic_axes={"image": {0: "batch"}, out_name: {0: "batch"}},
                      do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    os.replace(tmp, path)
    return path


def load_onnx_weights(model, path):
    """Loads the initializers of an exported zoo model back into its PyTorch module, so the
    cross-check runs PyTorch on exactly the weights qforge sees."""
    import onnx
    import onnx.numpy_helper
    graph = onnx.load(path).graph
    inits = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
             for t in graph.initializer}
    # The exporter stores equal parameters once and recreates the others with Identity nodes
    # (e.g. the two BatchNorm biases that meet at a residual Add get identical updates).
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            inits[node.output[0]] = inits[node.input[0]]
    state = model.state_dict()
    loaded = {k: inits[k] for k in state if k in inits}
    missing = [k for k in state if k not in inits and not k.endswith("num_batches_tracked")]
    if missing:
        raise ValueError(f"{path}: no initializer for {missing[:5]}")
    model.load_state_dict(loaded, strict=False)
    return model.eval()


DESCRIPTIONS = {
    "resnet": "ResNet-style CNN: conv-bn-relu stem, 3 basic blocks (residual Add, 1x1 projection "
              "shortcuts), global average pool, linear",
    "mobilenet": "MobileNetV2-style CNN: inverted residuals (1x1 expand, 3x3 depthwise, 1x1 "
                 "project), ReLU6 (Clip), residual Add, global average pool, linear",
    "vit": "Vision Transformer: 4x4 patch-embedding conv (49 tokens), learned positions, 3 "
           "pre-norm blocks of 3-head MatMul+Softmax attention and GELU (Erf) MLP, LayerNorm "
           "(exported as ReduceMean/Sub/Pow/Sqrt/Div at opset 13), mean pool, linear",
    "unet": "U-Net denoiser: two stride-2 encoder levels, ConvTranspose and bilinear Resize "
            "upsampling, Concat skips, Sigmoid output; input is image + N(0, 0.2^2) noise",
}


def write_readme(out_dir):
    """models/zoo/README.md from the NAME.json files the training runs wrote."""
    import onnx
    rows = []
    for name in MODELS:
        info_path = os.path.join(out_dir, name + ".json")
        if not os.path.exists(info_path):
            continue
        with open(info_path) as f:
            info = json.load(f)
        ops = sorted({n.op_type for n in onnx.load(os.path.join(out_dir, info["file"])).graph.node})
        t = info["train"]
        if info["task"] == "classify":
            metric = (f"top-1 **{100 * info['test']['top1']:.2f}%** "
                      f"({info['test']['top1_count']} / {info['test']['samples']})")
        else:
            metric = (f"PSNR **{info['test']['psnr_db']:.2f} dB** (noisy input "
                      f"{info['test']['noisy_input_psnr_db']:.2f} dB), MSE "
                      f"{info['test']['mse']:.5f}")
        rows.append(f"| `{info['file']}` | {DESCRIPTIONS[name]} | {info['parameters']:,} | "
                    f"{info['bytes'] / 1024:.0f} KiB | {metric} | {t['epochs']:g} epochs "
                    f"({t['steps']} steps of {t['batch']}), {t['optimizer']}, peak lr "
                    f"{t['peak_lr']:g}, wd {t['weight_decay']:g}"
                    f"{', shift+flip augmentation' if t['augment'] else ''}; "
                    f"{t['seconds'] / 60:.0f} min | {', '.join(ops)} |")
    text = f"""# The reference zoo

Four small models trained on Fashion-MNIST (Debian's `dataset-fashion-mnist`) by
`tools/zoo/zoo.py` with Debian's python3-torch 1.13 (fixed seeds: model init 0, data order and
augmentation 1; one thread), exported to ONNX opset 13 with a dynamic batch axis. BatchNormalization is kept
as its own node (no folding at export). Every model reads `image`, float [N,1,28,28] = pixel/255
(no mean/std), and writes `logits` [N,10] or, for the denoiser, `denoised` [N,1,28,28].

Rebuild: `make -C tools/zoo zoo` (trains at nice 19, then cross-checks). Each model's
`NAME.json` holds the full provenance (schedule, seeds, timings, torch version, test metrics).

| file | model | parameters | size | Fashion-MNIST test (10,000 images, PyTorch) | training | ONNX ops |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Evaluate with qforge:

    build/qforge eval models/zoo/resnet.onnx --data fashion-mnist:test
    build/qforge eval models/zoo/unet.onnx --data fashion-mnist:test --noise 0.2

The denoiser's test noise is reproducible: sample i gets `torch.randn` from a generator seeded
with `1000003 * seed + i` (seed 0), which is what `qforge eval --noise 0.2 --noise-seed 0` adds.

`tools/zoo/crosscheck.py` checks that qforge reproduces PyTorch on these files: the same top-1
count on all 10,000 test images and max |logit diff| <= 1e-4 (the denoiser: outputs within
1e-4 and the same PSNR).
"""
    check_path = os.path.join(out_dir, "crosscheck.json")
    if os.path.exists(check_path):
        with open(check_path) as f:
            checks = json.load(f)
        lines = []
        for c in checks:
            if "torch_top1_correct" in c:
                same = (f"top-1 correct: PyTorch {c['torch_top1_correct']}, qforge "
                        f"{c['qforge_top1_correct']}")
            else:
                same = (f"PSNR: PyTorch {c['torch_psnr_db']:.4f} dB, qforge "
                        f"{c['qforge_psnr_db']:.4f} dB")
            lines.append(f"| `{c['model']}` | {c['samples']} | {same} | "
                         f"{c['max_abs_diff']:.3g} | {'pass' if c['ok'] else 'FAIL'} |")
        text += f"""
Last cross-check (`tools/zoo/crosscheck.py --json models/zoo/crosscheck.json`):

| model | images | same result | max abs output diff | |
|---|---|---|---|---|
{chr(10).join(lines)}
"""
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train and export one model")
    t.add_argument("model", choices=sorted(MODELS))
    t.add_argument("--out", required=True, help="directory for NAME.onnx and NAME.json")
    t.add_argument("--max-steps", type=int, help="stop early (smoke test)")
    t.add_argument("--threads", type=int, default=2)
    r = sub.add_parser("readme", help="write OUT/README.md from the NAME.json files")
    r.add_argument("--out", required=True)
    args = p.parse_args()
    if args.cmd == "train":
        def log(msg):
            print(time.strftime("%H:%M:%S"), msg, flush=True)
        train(args.model, args.out, args.max_steps, args.threads, log)
    else:
        write_readme(args.out)


if __name__ == "__main__":
    sys.exit(main())
