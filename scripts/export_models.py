#!/usr/bin/env python3
"""Exports models with torch.onnx.export, random weights (seeded), at
opsets 13 and 17: the models of docs/benchmarks.md's "models as PyTorch
exports them" table (torchvision's mobile and modern CNNs, three
attention/MLP models, batch 1), and the models of the ONNX import tests
(a U-Net upsampling bilinearly and by nearest neighbour, torchvision's
Swin-T, GPT-2 blocks with a dynamic batch, a bidirectional two-layer
LSTM, a two-layer GRU).

    python3 scripts/export_models.py OUTDIR [--opsets 13,17] [--models a,b] [--tests]

Needs Debian's python3-torch and python3-torchvision (1.13, CPU). Each
model is written as OUTDIR/NAME-opsetN.onnx; with --tests, as the ONNX
test layout instead, OUTDIR/NAME-opsetN/model.onnx with
test_data_set_0/input_0.pb and output_0.pb, torch's output on a seeded
random input, which `tofuc onnx-test OUTDIR/*` checks. One that fails
to export is named on stderr and skipped (exit status 1).
"""

import argparse
import os
import sys

import torch
import torch.nn as nn
import torchvision.models as tvm


class Mixer(nn.Module):
    """An MLP-Mixer (Tolstikhin et al.): patches, then blocks mixing
    tokens and channels with MLPs of exact GELU, then a head."""

    def __init__(self, image=224, patch=16, dim=256, depth=4, tokens_hidden=128, channels_hidden=1024, classes=1000):
        super().__init__()
        n = (image // patch) ** 2
        self.stem = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(nn.ModuleList([
                nn.LayerNorm(dim),
                nn.Sequential(nn.Linear(n, tokens_hidden), nn.GELU(), nn.Linear(tokens_hidden, n)),
                nn.LayerNorm(dim),
                nn.Sequential(nn.Linear(dim, channels_hidden), nn.GELU(), nn.Linear(channels_hidden, dim)),
            ]))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)  # [B, tokens, dim]
        for norm1, tokens, norm2, channels in self.blocks:
            x = x + tokens(norm1(x).transpose(1, 2)).transpose(1, 2)
            x = x + channels(norm2(x))
        return self.head(self.norm(x).mean(dim=1))


class EncoderLayer(nn.Module):
    """A Transformer encoder layer (PyTorch's own), 128 tokens of 512."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class UNet(nn.Module):
    """A small U-Net: two downsampling stages, then one upsampling stage
    bilinear (align_corners False) and one by nearest neighbour, with skip
    connections concatenated."""

    def __init__(self, c=8):
        super().__init__()
        block = lambda i, o: nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
        self.enc1, self.enc2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.dec2, self.dec1 = block(6 * c, 2 * c), block(3 * c, c)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        m = self.mid(nn.functional.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([nn.functional.interpolate(m, scale_factor=2, mode="bilinear", align_corners=False), e2], 1))
        d1 = self.dec1(torch.cat([nn.functional.interpolate(d2, scale_factor=2, mode="nearest"), e1], 1))
        return self.head(d1)


class GPT2Blocks(nn.Module):
    """Two GPT-2 blocks (pre-norm, causal self-attention from one fused
    QKV projection split three ways, tanh-approximated GELU), 16 tokens
    of 64, 4 heads."""

    def __init__(self, dim=64, heads=4, tokens=16, depth=2):
        super().__init__()
        self.heads = heads
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
                "ln2": nn.LayerNorm(dim), "fc": nn.Linear(dim, 4 * dim), "out": nn.Linear(4 * dim, dim)}))
        self.register_buffer("mask", torch.tril(torch.ones(tokens, tokens)).bool())

    def forward(self, x):
        b, t, d = x.shape
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(d, dim=2)
            q, k, v = [z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v)]
            att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
            att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
            x = x + blk["proj"]((att @ v).transpose(1, 2).reshape(b, t, d))
            x = x + blk["out"](nn.functional.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh"))
        return x


class Recurrent(nn.Module):
    """A recurrent stack over 16 steps of 64 features, hidden 128: a
    bidirectional two-layer LSTM, or a two-layer GRU."""

    def __init__(self, kind):
        super().__init__()
        if kind == "lstm":
            self.rnn = nn.LSTM(64, 128, num_layers=2, bidirectional=True)
        else:
            self.rnn = nn.GRU(64, 128, num_layers=2)

    def forward(self, x):
        return self.rnn(x)[0]


def small_vit():
    """torchvision's VisionTransformer at a small size (ViT-S/16-like)."""
    return tvm.VisionTransformer(image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384, mlp_dim=1536)


MODELS = {
    "mobilenet_v2": (tvm.mobilenet_v2, (1, 3, 224, 224)),
    "mobilenet_v3_small": (tvm.mobilenet_v3_small, (1, 3, 224, 224)),
    "mobilenet_v3_large": (tvm.mobilenet_v3_large, (1, 3, 224, 224)),
    "efficientnet_b0": (tvm.efficientnet_b0, (1, 3, 224, 224)),
    "regnet_y_400mf": (tvm.regnet_y_400mf, (1, 3, 224, 224)),
    "shufflenet_v2_x1_0": (tvm.shufflenet_v2_x1_0, (1, 3, 224, 224)),
    "convnext_tiny": (tvm.convnext_tiny, (1, 3, 224, 224)),
    "vit_small": (small_vit, (1, 3, 224, 224)),
    "mixer": (Mixer, (1, 3, 224, 224)),
    "encoder_layer": (EncoderLayer, (1, 128, 512)),
    "unet": (UNet, (1, 3, 64, 64)),
    "swin_t": (tvm.swin_t, (1, 3, 224, 224)),
    "gpt2_blocks": (GPT2Blocks, (2, 16, 64)),
    "lstm": (lambda: Recurrent("lstm"), (16, 1, 64)),
    "gru": (lambda: Recurrent("gru"), (16, 1, 64)),
}

# The models exported with a dynamic batch (the axis of their input and
# output named "batch").
DYNAMIC_BATCH = {"gpt2_blocks": 0}

# The models whose attention needs exporting in training mode.
ATTENTION = {"vit_small", "encoder_layer"}


def write_test_data(folder, x, y):
    """Writes input x and torch's output y as the ONNX test layout's
    test_data_set_0 in folder."""
    from onnx import numpy_helper

    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for name, t in (("input_0.pb", numpy_helper.from_array(x.numpy(), "input")),
                    ("output_0.pb", numpy_helper.from_array(y.numpy(), "output"))):
        with open(os.path.join(data, name), "wb") as f:
            f.write(t.SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tests", action="store_true", help="write the ONNX test layout with torch's outputs")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name in args.models.split(","):
        make, shape = MODELS[name]
        torch.manual_seed(0)
        model = make().eval()
        mode = torch.onnx.TrainingMode.EVAL
        if name in ATTENTION:
            # PyTorch 1.13 runs attention in eval mode as fused operators
            # its exporter does not know; in training mode, its dropout
            # being 0, the model computes the same with exportable ones.
            model.train()
            mode = torch.onnx.TrainingMode.PRESERVE
        x = torch.randn(*shape)
        with torch.no_grad():
            y = model(x)
        dynamic = None
        if name in DYNAMIC_BATCH:
            axis = DYNAMIC_BATCH[name]
            dynamic = {"input": {axis: "batch"}, "output": {axis: "batch"}}
        for opset in [int(o) for o in args.opsets.split(",")]:
            path = os.path.join(args.out, f"{name}-opset{opset}.onnx")
            if args.tests:
                path = os.path.join(args.out, f"{name}-opset{opset}", "model.onnx")
                write_test_data(os.path.dirname(path), x, y)
            try:
                with torch.no_grad():
                    torch.onnx.export(model, x, path, opset_version=opset, training=mode, input_names=["input"],
                                      output_names=["output"], dynamic_axes=dynamic)
                print(path)
            except Exception as e:  # an exporter's failure is the model's, not the others'
                print(f"{name} at opset {opset}: {e}", file=sys.stderr)
                failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
