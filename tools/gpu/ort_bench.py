#!/usr/bin/env python3
"""Time an ONNX model on ONNX Runtime's CUDA execution provider.

    ort_bench.py MODEL.onnx [--runs N] [--json FILE]

Feeds every graph input random values of its declared shape (symbolic
dimensions as 1), runs once to warm up, then --runs times, synchronising
after each, and prints the median and the minimum in seconds. Refuses to
run when the CUDA provider is not available (rather than timing the CPU).
"""
import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort

TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
         "tensor(int64)": np.int64, "tensor(int32)": np.int32}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise SystemExit("ONNX Runtime has no CUDA provider here: %s" % ort.get_available_providers())
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(args.model, opts, providers=["CUDAExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(TYPES[i.type])
    # IO binding keeps the outputs on the GPU, as tofuc-run's timings do.
    binding = sess.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0))
    for o in sess.get_outputs():
        binding.bind_output(o.name, "cuda")

    def run():
        sess.run_with_iobinding(binding)
        binding.synchronize_outputs()

    run()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    result = {"model": args.model, "provider": "CUDAExecutionProvider", "onnxruntime": ort.__version__,
              "inputs": {k: list(v.shape) for k, v in feeds.items()}, "runs": args.runs,
              "median_seconds": statistics.median(times), "min_seconds": min(times)}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
