"""Shared fixtures: the bundled models, Fashion-MNIST as numpy arrays, the qforge CLI."""

import gzip
import os
import pathlib
import subprocess

import numpy as np
import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("QFORGE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
FASHION_DIR = pathlib.Path(os.environ.get("QFORGE_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))


def read_idx(name, offset):
    with gzip.open(FASHION_DIR / name) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


@pytest.fixture(scope="session")
def fashion():
    """Fashion-MNIST as qforge's IDX reader gives it: float32 in [0, 1], [N, 1, 28, 28]."""

    def images(name):
        return (read_idx(name, 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255).copy()

    return {
        "train": images("train-images-idx3-ubyte.gz"),
        "train_labels": read_idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64),
        "test": images("t10k-images-idx3-ubyte.gz"),
        "test_labels": read_idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64),
    }


@pytest.fixture(scope="session")
def resnet():
    return str(SOURCE_DIR / "models" / "zoo" / "resnet.onnx")


@pytest.fixture(scope="session")
def unet():
    return str(SOURCE_DIR / "models" / "zoo" / "unet.onnx")


@pytest.fixture(scope="session")
def cli():
    """Runs the qforge binary; returns the CompletedProcess."""
    binary = os.environ.get("QFORGE_CLI", "qforge")

    def run(*args, check=True):
        done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
        if check and done.returncode != 0:
            raise AssertionError(f"qforge {' '.join(map(str, args))} failed: {done.stderr}")
        return done

    return run
