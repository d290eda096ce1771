"""Quantization-aware training with a loss written in Python: cross entropy plus a small
penalty on large logits, fine-tuning the zoo MobileNetV2 for an 8-bit TensorRT deployment.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/qat_custom_loss.py OUT_DIR
"""
import sys

import torch
import torch.nn.functional as F
from fashion_mnist import FashionMNIST

import qforge

train = torch.utils.data.Subset(FashionMNIST(train=True), range(1024))
test = torch.utils.data.DataLoader(FashionMNIST(train=False), batch_size=500)


def loss(output, batch):  # output: the logits, with autograd; batch: "inputs", "labels", "feeds"
    return F.cross_entropy(output, batch["labels"]) + 1e-4 * output.pow(2).mean()


report = qforge.qat("models/zoo/mobilenet.onnx", backend="TensorRT", out=sys.argv[1], loss=loss,
                    data=torch.utils.data.DataLoader(train, batch_size=64), epochs=1, batch=64,
                    lr=1e-4, calib_batches=4, eval=test, eval_limit=2000)
print(f"loss: {report['loss']}  QAT top-1 {report['qat_top1']:.2f}%")
