#!/usr/bin/python3
"""Writes a calibration set of real photographs for an image model: crops and flips of the
pictures Debian's python3-skimage ships (skimage.data), resized to the model's input, as one .npy
per sample (float32, no batch axis) in OUT_DIR.

  /usr/bin/python3 bench/corpus/make_images.py OUT_DIR --shape 3,320,320 [--layout nchw|nhwc]
      [--count 64] [--norm imagenet|unit|pm1|raw255] [--seed 0] [--pictures photos|text]

--shape is the sample shape in the model's layout (channels 1, 3 or 4; a 4th channel is alpha,
all 1). --norm: imagenet (mean/std), unit ([0, 1]), pm1 ([-1, 1]), raw255 ([0, 255]).
--pictures text takes skimage's two pictures of printed text (`text`, `page`) instead of the
photographs, cropped at the input's aspect ratio and never mirrored, so that lines of text keep
their shape: what an OCR model's detector sees. --pictures lines cuts single lines of `page` (found
by their ink profile), one to all of a line's words each, resized to the input's height keeping
their aspect and padded on the right with zeros after normalisation, as PaddleOCR's line
classifier and recogniser are fed; --turn FRACTION turns that share of them upside down (what a
text-direction classifier must recognise).
"""
import argparse
import os

import numpy as np
import skimage.data
import skimage.filters
import skimage.transform

COLOUR = ["astronaut", "chelsea", "coffee", "hubble_deep_field", "immunohistochemistry", "retina",
          "rocket", "colorwheel"]
GREY = ["camera", "coins", "moon", "brick", "grass", "gravel"]


TEXT = ["text", "page"]


def text_lines(page):
    """(top, bottom, left, right) of each line of printed text in a grey page in [0, 1]: ink is
    what lies 0.08 below the page's blurred brightness; a line is a run of at least 8 rows with ink
    in over 5% of their pixels."""
    background = skimage.filters.gaussian(page, sigma=8)
    ink = (background - page) > 0.08
    rows = ink.mean(axis=1) > 0.05
    lines, top = [], None
    for y, inked in enumerate(list(rows) + [False]):
        if inked and top is None:
            top = y
        elif not inked and top is not None:
            if y - top >= 8:
                columns = np.flatnonzero(ink[top:y].any(axis=0))
                lines.append((top, y, int(columns[0]), int(columns[-1]) + 1))
            top = None
    return lines


def line_crops(count, height, width, rng):
    """(rgb, used width) pairs: a span of one line of `page` with a margin of 1-4 rows, at least
    twice as wide as high, resized to `height` keeping its aspect (squeezed to `width` when wider)
    and left-aligned; the columns from `used width` on are padding."""
    page = skimage.data.page().astype(np.float32) / 255.0
    lines = text_lines(page)
    for i in range(count):
        top, bottom, left, right = lines[i % len(lines)]
        margin = int(rng.integers(1, 5))
        top, bottom = max(0, top - margin), min(page.shape[0], bottom + margin)
        h = bottom - top
        span = int(rng.uniform(min(2 * h, right - left), right - left + 1))
        x = int(rng.integers(left, right - span + 1))
        crop = np.stack([page[top:bottom, x:x + span]] * 3, axis=-1)
        used = min(width, max(1, int(round(span * height / h))))
        rgb = np.full((height, width, 3), 0.5, np.float32)
        rgb[:, :used] = skimage.transform.resize(crop, (height, used), anti_aliasing=True)
        yield rgb, used


def photographs(names):
    for name in names:
        im = getattr(skimage.data, name)()
        if im.ndim == 2:
            im = np.stack([im] * 3, axis=-1)
        yield im[..., :3].astype(np.float32) / 255.0


def crops(count, height, width, rng, names=COLOUR + GREY, keep_aspect=False):
    pictures = list(photographs(names))
    for i in range(count):
        im = pictures[i % len(pictures)]
        h, w = im.shape[:2]
        side = rng.uniform(0.5, 1.0)  # a crop of 50-100% of the shorter side
        ch, cw = int(min(h, w) * side), int(min(h, w) * side)
        if keep_aspect:  # the largest crop of the input's aspect, scaled by `side`
            ch = int(min(h, w * height / width) * side)
            cw = min(w, int(round(ch * width / height)))
        y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = im[y:y + ch, x:x + cw]
        if rng.random() < 0.5 and not keep_aspect:  # text is not read mirrored
            crop = crop[:, ::-1]
        yield skimage.transform.resize(crop, (height, width), anti_aliasing=True).astype(np.float32)


def normalise(rgb, norm):
    if norm == "imagenet":
        return (rgb - np.array([0.485, 0.456, 0.406], np.float32)) / np.array(
            [0.229, 0.224, 0.225], np.float32)
    if norm == "pm1":
        return rgb * 2 - 1
    if norm == "raw255":
        return rgb * 255
    return rgb


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--shape", required=True)
    p.add_argument("--layout", default="nchw", choices=["nchw", "nhwc"])
    p.add_argument("--count", type=int, default=64)
    p.add_argument("--norm", default="imagenet", choices=["imagenet", "unit", "pm1", "raw255"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pictures", default="photos", choices=["photos", "text", "lines"])
    p.add_argument("--turn", type=float, default=0.0)
    a = p.parse_args()
    dims = [int(d) for d in a.shape.split(",")]
    channels, height, width = (dims if a.layout == "nchw" else [dims[2], dims[0], dims[1]])
    if channels not in (1, 3, 4):
        raise SystemExit(f"make_images.py: {channels} channels; only 1, 3 or 4 are images")
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    text = a.pictures == "text"
    if a.pictures == "lines":
        samples = line_crops(a.count, height, width, rng)
    else:
        samples = ((rgb, width) for rgb in crops(a.count, height, width, rng,
                                                 TEXT if text else COLOUR + GREY, keep_aspect=text))
    for i, (rgb, used) in enumerate(samples):
        x = normalise(rgb, a.norm)
        x[:, used:] = 0
        if a.turn and rng.random() < a.turn:  # no draw otherwise: the crops stay as they were
            x = x[::-1, ::-1]
        if channels == 1:
            x = x.mean(axis=-1, keepdims=True)
        elif channels == 4:
            x = np.concatenate([x, np.ones_like(x[..., :1])], axis=-1)
        if a.layout == "nchw":
            x = x.transpose(2, 0, 1)
        np.save(os.path.join(a.out, f"sample_{i:04d}.npy"), np.ascontiguousarray(x, np.float32))


if __name__ == "__main__":
    main()
