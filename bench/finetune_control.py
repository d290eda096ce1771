#!/usr/bin/env python3
"""The control for W8A8 QAT: fine-tune a zoo model *in float*, in PyTorch, with the recipe of a
W8A8 QAT row (SGD with momentum, cosine learning rate per step, BN in inference mode unless
--train-bn, the zoo's shift+flip augmentation with --augment, the same batch and epochs), and
report test top-1 before and after. At 8 bits the quantization error is
far below what one more epoch of training moves, so a W8A8 QAT row is to be read against this
figure: what fine-tuning alone does to the float model, with no quantizer in the graph.

    /usr/bin/python3 bench/finetune_control.py --model resnet [--lr 2e-4] [--epochs 1]
        [--batch 64] [--seeds 0,1,2] [--label-smoothing 0] [--train-bn] [--augment]
        [--threads 1] [--json FILE]

The float weights are read from models/zoo/NAME.onnx into tools/zoo/zoo.py's module (the exporter
writes a parameter equal to another as an Identity of it; both get the value). Data order: a
torch.randperm per epoch from a generator seeded with the seed (not qforge's order, so seeds
here and in qforge qat sample the same noise, not the same path).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "zoo"))
import zoo  # noqa: E402


def onnx_parameters(path):
    graph = onnx.load(path).graph
    values = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in values:
            values[node.output[0]] = values[node.input[0]].clone()
    return values


def float_model(name):
    model = zoo.build(name)
    values = onnx_parameters(os.path.join(ROOT, "models", "zoo", name + ".onnx"))
    state = model.state_dict()
    missing = [k for k in state if k not in values and not k.endswith("num_batches_tracked")]
    if missing:
        raise SystemExit(f"{name}.onnx has no value for {', '.join(missing[:4])}: re-export the zoo")
    model.load_state_dict({k: values.get(k, v) for k, v in state.items()})
    return model


def top1(model, x, y, batch=500):
    model.eval()
    with torch.no_grad():
        right = sum((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
                    for i in range(0, len(x), batch))
    return 100.0 * right / len(x)


def finetune(a, seed, train, test):
    torch.manual_seed(seed)
    model = float_model(a.model)
    before = top1(model, *test)
    x, y = train
    steps_per_epoch = len(x) // a.batch
    total = a.epochs * steps_per_epoch
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    order = torch.Generator().manual_seed(seed)
    step = 0
    start = time.time()
    for _ in range(a.epochs):
        perm = torch.randperm(len(x), generator=order)
        model.train()
        for m in model.modules():  # BN frozen (qforge qat --freeze-bn-epoch 0) unless asked
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and not a.train_bn:
                m.eval()
        for i in range(steps_per_epoch):
            idx = perm[i * a.batch:(i + 1) * a.batch]
            for group in opt.param_groups:  # qforge qat's cosine: per step, from lr to 0
                group["lr"] = a.lr * 0.5 * (1 + math.cos(math.pi * step / total))
            xb = zoo.augment(x[idx], order) if a.augment else x[idx]
            loss = F.cross_entropy(model(xb), y[idx], label_smoothing=a.label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
    return {"seed": seed, "float_top1": before, "finetuned_top1": top1(model, *test),
            "steps": step, "seconds": time.time() - start}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="resnet", choices=["resnet", "mobilenet"])
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--train-bn", action="store_true", help="BN normalises with batch statistics")
    p.add_argument("--augment", action="store_true", help="the zoo's random shift and flip")
    p.add_argument("--seeds", default="0")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    train, test = zoo.load_split("train"), zoo.load_split("test")
    runs = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        runs.append(finetune(a, seed, train, test))
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    after = [r["finetuned_top1"] for r in runs]
    result = {"model": a.model, "lr": a.lr, "momentum": a.momentum, "epochs": a.epochs,
              "batch": a.batch, "label_smoothing": a.label_smoothing, "train_bn": a.train_bn,
              "augment": a.augment, "runs": runs,
              "float_top1": runs[0]["float_top1"], "finetuned_mean": float(np.mean(after)),
              "finetuned_min": min(after), "finetuned_max": max(after)}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
