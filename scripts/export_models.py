#!/usr/bin/env python3
"""Exports the models of docs/benchmarks.md's "models as PyTorch exports
them" table with torch.onnx.export: torchvision's mobile and modern CNNs
and three attention/MLP models, random weights (seeded), batch 1, at
opsets 13 and 17.

    python3 scripts/export_models.py OUTDIR [--opsets 13,17] [--models a,b]

Needs Debian's python3-torch and python3-torchvision (1.13, CPU). Each
model is written as OUTDIR/NAME-opsetN.onnx; one that fails to export is
named on stderr and skipped.
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
}

# The models whose attention needs exporting in training mode.
ATTENTION = {"vit_small", "encoder_layer"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--models", default=",".join(MODELS))
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
        for opset in [int(o) for o in args.opsets.split(",")]:
            path = os.path.join(args.out, f"{name}-opset{opset}.onnx")
            try:
                with torch.no_grad():
                    torch.onnx.export(model, x, path, opset_version=opset, training=mode, input_names=["input"], output_names=["output"])
                print(path)
            except Exception as e:  # an exporter's failure is the model's, not the others'
                print(f"{name} at opset {opset}: {e}", file=sys.stderr)
                failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
