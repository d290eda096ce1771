"""Fashion-MNIST from Debian's dataset-fashion-mnist as a torch Dataset: (image, label) pairs,
images [1, 28, 28] float32 in [0, 1] as the zoo models were trained on."""
import gzip

import numpy as np
import torch

ROOT = "/usr/share/datasets/fashion-mnist"


class FashionMNIST(torch.utils.data.Dataset):
    def __init__(self, train):
        part = "train" if train else "t10k"
        with gzip.open(f"{ROOT}/{part}-images-idx3-ubyte.gz") as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
        with gzip.open(f"{ROOT}/{part}-labels-idx1-ubyte.gz") as f:
            self.labels = torch.from_numpy(np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64))
        self.images = torch.from_numpy(images.astype(np.float32) / 255)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]
