"""Writes the fuzz seeds that plain files make: NumPy arrays and archives, IDX files, images,
backend files and quantization configs, in OUT/<target>/ (fuzz/make_seeds.sh passes fuzz/corpus).
Run with Debian's python3 (numpy, torch, torchvision)."""
import gzip
import io
import os
import shutil
import struct
import sys
import zipfile

import numpy as np
import torch
import torchvision.io as tvio

out = sys.argv[1]
source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def put(target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data)


def npy(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def npz(compressed, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


rng = np.random.default_rng(0)
# npy: the input is tried as .npy and as .npz, so both kinds go in one corpus.
put("npy", "float32_2x3.npy", npy(rng.standard_normal((2, 3)).astype(np.float32)))
put("npy", "int64_4.npy", npy(np.arange(4, dtype=np.int64)))
put("npy", "uint8_2x2x2.npy", npy(np.arange(8, dtype=np.uint8).reshape(2, 2, 2)))
put("npy", "float16_3.npy", npy(np.array([1, 2, 3], dtype=np.float16)))
put("npy", "bool_2.npy", npy(np.array([True, False])))
put("npy", "scalar.npy", npy(np.array(5.0, dtype=np.float64)))
put("npy", "empty_0x3.npy", npy(np.zeros((0, 3), dtype=np.float32)))
put("npy", "stored.npz", npz(False, x=rng.standard_normal((2, 3)).astype(np.float32),
                             labels=np.array([1, 0], dtype=np.int64)))
put("npy", "deflated.npz", npz(True, x=np.ones((3, 2), dtype=np.float32)))

# idx: MNIST's header (magic 0x0000080N: unsigned bytes, N dims), plain and gzipped.
images = struct.pack(">IIII", 0x803, 3, 4, 4) + bytes(range(48))
labels = struct.pack(">II", 0x801, 3) + bytes([0, 1, 2])
put("idx", "images-idx3-ubyte", images)
put("idx", "labels-idx1-ubyte", labels)
put("idx", "images-idx3-ubyte.gz", gzip.compress(images, mtime=0))

# image: each format stb_image reads, a few pixels each.
pixels = torch.randint(0, 256, (3, 5, 7), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
put("image", "rgb.jpg", bytes(tvio.encode_jpeg(pixels, quality=80).numpy()))
put("image", "gray.jpg", bytes(tvio.encode_jpeg(pixels[:1], quality=80).numpy()))
put("image", "rgb.png", bytes(tvio.encode_png(pixels).numpy()))
put("image", "gray.png", bytes(tvio.encode_png(pixels[:1]).numpy()))
h, w = 5, 7
hwc = pixels.permute(1, 2, 0).numpy()
put("image", "rgb.ppm", b"P6\n%d %d\n255\n" % (w, h) + hwc.tobytes())
put("image", "gray.pgm", b"P5\n%d %d\n255\n" % (w, h) + hwc[:, :, 0].tobytes())
row = (w * 3 + 3) // 4 * 4
bmp_rows = b"".join(hwc[y, :, ::-1].tobytes().ljust(row, b"\0") for y in reversed(range(h)))
put("image", "rgb.bmp", b"BM" + struct.pack("<IHHI", 54 + len(bmp_rows), 0, 0, 54) +
    struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(bmp_rows), 2835, 2835, 0, 0) + bmp_rows)
put("image", "rgb.tga", struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, w, h, 24, 0x20) +
    hwc[:, :, ::-1].tobytes())


def gif(width, height, indices):
    """A 4-colour GIF whose LZW stream never grows its table: a clear code before every two
    pixels keeps every code 3 bits wide."""
    codes, bits, nbits = [], 0, 0
    for i in range(0, len(indices), 2):
        codes += [4] + indices[i:i + 2]
    codes.append(5)
    data = bytearray()
    for c in codes:
        bits |= c << nbits
        nbits += 3
        while nbits >= 8:
            data.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    if nbits:
        data.append(bits & 0xFF)
    blocks = b"".join(bytes([len(data[i:i + 255])]) + data[i:i + 255] for i in range(0, len(data), 255))
    palette = bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
    return (b"GIF89a" + struct.pack("<HHBBB", width, height, 0x81, 0, 0) + palette +
            b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + b"\x02" + blocks + b"\x00\x3b")


put("image", "tiny.gif", gif(3, 2, [0, 1, 2, 3, 1, 0]))

# backend_json: the built-in backends as users copy them, and one that extends another.
for name in ("tensorrt", "snpe", "vitis", "academic", "nnie"):
    shutil.copy(os.path.join(source, "backends", name + ".json"),
                os.path.join(out, "backend_json", name + ".json"))
put("backend_json", "extends.json", b'{"name": "mine", "extends": "tensorrt", '
    b'"weight": {"bits": 4, "observer": "Mse"}, "activation": {"bits": 6}}')

# quant_config: first byte 0 for JSON, 1 for YAML (the target's convention).
put("quant_config", "global.json", b"\0" + b'{"weight": {"bits": 4, "observer": "Mse"}, '
    b'"activation": {"bits": 8}, "extra_quantizable": ["Mul"]}')
put("quant_config", "overrides.json", b"\0" + b'{"overrides": [{"name": "conv1", "weight": '
    b'{"bits": 8}}, {"name_regex": "conv.*", "skip": true}, {"op_type": "Gemm", "activation": '
    b'{"observer": "Percentile", "observer_options": {"percentile": 99.9}}}]}')
put("quant_config", "config.yaml", b"\1" + b"""weight: {bits: 4, observer: Mse}
activation:
  bits: 8
  symmetric: false
extra_quantizable: [Mul, Sigmoid]
overrides:
  - {name: conv1, weight: {bits: 8}, activation: {bits: 8}}
  - {name_regex: "fc|conv2", skip: true}
  - op_type: Add
    activation: {observer: Percentile, observer_options: {percentile: 99.9}}
""")
