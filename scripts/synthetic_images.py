#!/usr/bin/env python3
"""Writes a synthetic image classification dataset for tofuc train
(docs/training.md): N grey images of SIZE x SIZE, each of one of 10
classes, whose class sets where a bright 4x4 square lies (a 5 x 2 grid of
places, moved by up to a pixel), on Gaussian noise.

    scripts/synthetic_images.py OUT_DIR [--samples N] [--size S] [--seed K]

writes OUT_DIR/x.npy (f32 [N, 1, S, S]) and OUT_DIR/labels.npy (i64 [N])."""

import argparse
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    n, s = a.samples, a.size
    labels = rng.integers(0, 10, n)
    x = rng.normal(0, 1.0, (n, 1, s, s)).astype(np.float32)
    for i, c in enumerate(labels):
        r0 = 1 + (c // 5) * (s // 2) + rng.integers(-1, 2) + (s // 2 - 4) // 2
        c0 = 1 + (c % 5) * ((s - 4) // 5) + rng.integers(0, 2)
        r0, c0 = np.clip(r0, 0, s - 4), np.clip(c0, 0, s - 4)
        x[i, 0, r0:r0 + 4, c0:c0 + 4] += 0.6
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "x.npy"), x)
    np.save(os.path.join(a.out, "labels.npy"), labels.astype(np.int64))
    print("%d samples of %dx%d, 10 classes -> %s/x.npy, %s/labels.npy" % (n, s, s, a.out, a.out))


if __name__ == "__main__":
    main()
