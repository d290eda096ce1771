"""Post-training quantization from a torch DataLoader: the zoo ResNet for TensorRT, int8.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/ptq_dataloader.py OUT_DIR
"""
import sys

import torch
from fashion_mnist import FashionMNIST

import qforge

calib = torch.utils.data.DataLoader(FashionMNIST(train=True), batch_size=64, shuffle=True)
test = torch.utils.data.DataLoader(FashionMNIST(train=False), batch_size=200)

report = qforge.quantize("models/zoo/resnet.onnx", backend="TensorRT", calib=calib,
                         calib_batches=16, calib_batch=64, eval=test, out=sys.argv[1])
print(f"float {report['float']['top1']:.2%}  int8 {report['quantized']['top1']:.2%}")
model = qforge.load(sys.argv[1])  # the prepared model: run it, read its quantizers
print(f"{len(model.quantizers())} quantizers, first: {model.quantizers()[0]['scheme']}")
