#!/usr/bin/env python3
"""Write random inputs and parameters for a compiled tofuc plan.

    make_inputs.py PLAN_DIR OUT_DIR [--seed S]

Reads PLAN_DIR/plan.json and writes OUT_DIR/NAME.npy for every input and
OUT_DIR/params.npz with every parameter, then prints the tofuc-run flags
that pass them. Values follow runtime/executor.Filled's rule (random here):
integers 0 or 1, vectors uniform in [0.5, 1.5), matrices and kernels
uniform with variance 1/fan-in. For timing: the values do not matter, but
they stay finite. Needs numpy only.
"""
import argparse
import json
import os

import numpy as np

DTYPES = {"f16": np.float16, "f32": np.float32, "bf16": np.float32, "f64": np.float64,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
          "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}


def fill(rng, binding):
    shape, dtype = tuple(binding["shape"]), DTYPES[binding["dtype"]]
    if not np.issubdtype(dtype, np.floating):
        return rng.integers(0, 2, size=shape).astype(dtype)
    if len(shape) < 2:
        return rng.uniform(0.5, 1.5, size=shape).astype(dtype)
    bound = np.sqrt(3.0 / max(1, int(np.prod(shape[1:]))))
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def file_name(name):
    return name.replace("/", "_").replace(":", "_")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(os.path.join(args.plan_dir, "plan.json")) as f:
        plan = json.load(f)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    flags = []
    for b in plan["inputs"]:
        path = os.path.join(args.out_dir, file_name(b["name"]) + ".npy")
        np.save(path, fill(rng, b))
        flags.append("--in %s=%s" % (b["name"], path))
    if plan["params"]:
        path = os.path.join(args.out_dir, "params.npz")
        np.savez(path, **{b["name"]: fill(rng, b) for b in plan["params"]})
        flags.append("--params %s" % path)
    print(" ".join(flags))


if __name__ == "__main__":
    main()
