#!/usr/bin/env python3
"""Time what tofuc's GPU benchmarks are compared with, in PyTorch eager.

    torch_bench.py WHAT [--runs N] [--batch B] [--json FILE]

WHAT is one of:
  copy       a device-to-device copy of 256 MiB (y.copy_(x)): the memory
             bandwidth, bytes read and written per second
  chain      tools/gpu/bench/chain.tdl's element-wise chain over 2^26 floats
  matmul     float32 4096x4096 @ 4096x4096 on cuBLAS, TF32 off (tofuc's
             kernels compute in float32 and double, never TF32)
  mlp        tools/gpu/bench/mlp.tdl: relu(linear(relu(linear(x)))), 16384
             rows of 1024 to 512 and 512 features, TF32 off
  softmax    torch.softmax over 4096 rows of 4096 floats
  layernorm  torch.nn.functional.layer_norm over 4096 rows of 4096 floats
  resnet50   ResNet-50's forward pass (torchvision's, else the same network
             defined here), eval mode, no autograd, at --batch
  bert       tools/gpu/bench/bert.tdl: one BERT-base encoder layer
             (nn.TransformerEncoderLayer(768, 12, 3072, dropout 0, GELU,
             post-norm), eval mode, no autograd, 8 sequences of 128 tokens

Each is run once to warm up, then --runs times between CUDA events; the
line printed (and the --json file) gives the median and the minimum in
seconds, with the GPU, the driver and PyTorch's version.
"""
import argparse
import json
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


def timed(fn, runs):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times), min(times)


def bottleneck(cin, mid, stride):
    """torchvision's Bottleneck (stride on the 3x3), with its projection."""
    cout = mid * 4
    body = nn.Sequential(
        nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
        nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
        nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
    project = None
    if stride != 1 or cin != cout:
        project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.project = body, project

        def forward(self, x):
            return F.relu(self.body(x) + (x if self.project is None else self.project(x)))

    return Block()


def resnet50():
    try:
        import torchvision
        return torchvision.models.resnet50()
    except ImportError:
        pass
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, (mid, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            layers.append(bottleneck(cin, mid, 2 if b == 0 and stage > 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def workload(what, batch):
    """Returns the function to time and a description of its size."""
    dev = "cuda"
    if what == "copy":
        x = torch.empty(64 << 20, device=dev)
        y = torch.empty_like(x)
        return (lambda: y.copy_(x)), {"bytes": 2 * x.numel() * 4}
    if what == "chain":
        x = torch.rand(1 << 26, device=dev) * 2 - 1

        def chain():
            y = (x + 1.0) * 0.5
            y = torch.relu(y - 0.25)
            y = torch.clamp(y * 3.0, max=4.0)
            return -y + 2.0
        return chain, {"bytes": 2 * x.numel() * 4}
    if what == "matmul":
        a, b = torch.randn(4096, 4096, device=dev), torch.randn(4096, 4096, device=dev)
        return (lambda: a @ b), {"flops": 2 * 4096 ** 3}
    if what == "mlp":
        x = torch.randn(16384, 1024, device=dev)
        l1, l2 = nn.Linear(1024, 512).to(dev), nn.Linear(512, 512).to(dev)

        def mlp():
            with torch.no_grad():
                return torch.relu(l2(torch.relu(l1(x))))
        return mlp, {"flops": 2 * 16384 * (1024 + 512) * 512}
    if what == "softmax":
        x = torch.randn(4096, 4096, device=dev)
        return (lambda: torch.softmax(x, -1)), {"bytes": 2 * x.numel() * 4}
    if what == "layernorm":
        x = torch.randn(4096, 4096, device=dev)
        w, b = torch.rand(4096, device=dev) + 0.5, torch.rand(4096, device=dev)
        return (lambda: F.layer_norm(x, (4096,), w, b)), {"bytes": 2 * x.numel() * 4}
    if what == "resnet50":
        model = resnet50().to(dev).eval()
        x = torch.randn(batch, 3, 224, 224, device=dev)

        def forward():
            with torch.no_grad():
                return model(x)
        return forward, {"batch": batch}
    if what == "bert":
        layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True).to(dev).eval()
        x = torch.randn(8, 128, 768, device=dev)

        def encode():
            with torch.no_grad():
                return layer(x)
        return encode, {"tokens": 8 * 128}
    raise SystemExit("unknown workload %r" % what)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["copy", "chain", "matmul", "mlp", "softmax", "layernorm", "resnet50", "bert"])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--precision", choices=["f32", "tf32", "bf16", "f16"], default="f32",
                    help="as tofuc's --precision: f32 with TF32 off in both cuBLAS and cuDNN, "
                    "tf32 with it on in both, bf16 and f16 under autocast")
    args = ap.parse_args()
    # cuDNN's convolutions use TF32 unless told not to (PyTorch's default);
    # both flags are set so that every precision is stated.
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    fn, size = workload(args.what, args.batch)
    if args.precision in ("bf16", "f16"):
        dtype = torch.bfloat16 if args.precision == "bf16" else torch.float16
        plain = fn

        def fn():
            with torch.autocast("cuda", dtype=dtype):
                return plain()
    median, best = timed(fn, args.runs)
    result = {"what": args.what, "precision": args.precision, "runs": args.runs, "median_seconds": median, "min_seconds": best,
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda, **size}
    if "bytes" in size:
        result["gbps"] = size["bytes"] / median / 1e9
    if "flops" in size:
        result["gflops"] = size["flops"] / median / 1e9
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
