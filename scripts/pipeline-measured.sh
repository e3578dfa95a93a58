#!/bin/bash
# docs/partition.md, "The simulator against measured pipeline plans":
# this host calibrated as 4 devices of one process (tofuc bench
# --calibrate --devices 4), then GraphPipe's plan of the MLP and of the
# multi-modal example (their default attributes, training, 4 devices,
# compile --pipeline=always), in each precision mode of PRECISIONS
# (default: exact and f32), timed by tofuc run --runs on --threads 2
# against the step simulated on that topology, ROUNDS times in turn.
# MODELS names other examples (default: mlp multimodal); each runs
# --runs 30 if its name is mlp, else 5.
set -e
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-2}
precisions=${PRECISIONS:-exact f32}
models=${MODELS:-mlp multimodal}
work=$(mktemp -d)
bin=$work/tofuc
go build -o "$bin" ./cmd/tofuc
export TOFUC_CACHE=off
for p in $precisions; do
  for m in $models; do
    "$bin" compile examples/$m.tdl --train --devices 4 --pipeline=always --precision $p -o "$work/$m-$p" --emit host,report >/dev/null
  done
done
for r in $(seq "$rounds"); do
  "$bin" bench --calibrate --threads 2 --devices 4 >"$work/host4.json" 2>/dev/null
  echo "round $r at $(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg): $(grep -o '"peak_flops": [0-9.]*' "$work/host4.json" | head -1)"
  for p in $precisions; do
    for m in $models; do
      runs=5
      [ $m = mlp ] && runs=30
      echo "$m ($p):"
      "$bin" run "$work/$m-$p" --random-inputs --out "$work/out" --threads 2 --runs $runs --topology "$work/host4.json" |
        sed -n '/^step:/,/^simulated with/p'
    done
  done
done
