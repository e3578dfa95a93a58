#!/usr/bin/env python3
"""Recomputes, with NumPy, the running statistics of examples/cnn.tdl's
first batch norm after a full-batch `tofuc train` run, and compares them
with the checkpoints' (docs/training.md):

    bin/tofuc eval examples/cnn.tdl --set batch=N ... --seed S --random-inputs --out INIT
    bin/tofuc train examples/cnn.tdl --data x=X.npy --data labels=L.npy --set batch=N ... \\
        --holdout 0 --checkpoint-every 1 --seed S --epochs E --out OUT
    scripts/check_running_stats.py X.npy INIT/params.npz OUT

With one batch of all N samples, a step's batch statistics are those of
the first convolution of every sample with the weights the step began
with: INIT's for step 1, checkpoint K-1's for step K. The running mean
and variance start at 0 and 1 and move by 0.9 * running + 0.1 * batch
(the population variance)."""

import glob
import os
import sys

import numpy as np


def conv3x3(x, w):
    """x [N, Cin, H, W], w [Cout, Cin, 3, 3], padding 1: [N, Cout, H, W]."""
    n, cin, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for dr in range(3):
        for dc in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, dr:dr + h, dc:dc + wd], w[:, :, dr, dc].astype(np.float64))
    return out


def main():
    x = np.load(sys.argv[1])
    weights = np.load(sys.argv[2])["h/w"]
    steps = sorted(glob.glob(os.path.join(sys.argv[3], "checkpoints", "step-*.npz")), key=lambda p: int(p.split("-")[-1][:-4]))
    mean, var = np.zeros(weights.shape[0]), np.ones(weights.shape[0])
    worst = 0.0
    for k, path in enumerate(steps, 1):
        y = conv3x3(x, weights)
        mean = 0.9 * mean + 0.1 * y.mean(axis=(0, 2, 3))
        var = 0.9 * var + 0.1 * y.var(axis=(0, 2, 3))
        ck = np.load(path)
        err = max(np.max(np.abs(ck["h/mean"] - mean) / (1 + np.abs(mean))), np.max(np.abs(ck["h/var"] - var) / (1 + var)))
        worst = max(worst, err)
        print("step %d: running mean and variance of %d channels, largest relative difference %.2e" % (k, len(mean), err))
        weights = ck["h/w"]
    print("largest relative difference over %d steps: %.2e (%s)" % (len(steps), worst, "equal within f32 rounding" if worst < 1e-5 else "DIFFERENT"))
    sys.exit(0 if worst < 1e-5 and steps else 1)


if __name__ == "__main__":
    main()
