#!/bin/sh
# Runs issue 17's checks and benchmarks on a GPU machine, from the folder
# that `make gpu-bundle` wrote (docs/gpu.md): no Go is needed there, only
# the CUDA driver, ptxas, and Python with numpy, PyTorch and ONNX Runtime
# for the comparisons.
#
#     sh run.sh [RESULTS]      (default RESULTS: results)
#
# RESULTS/summary.txt collects one line per step; every step's full
# output is beside it.
set -u
cd "$(dirname "$0")"
OUT=${1:-results}
RUNS=${RUNS:-20}
PTXAS=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
mkdir -p "$OUT/in"
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }

{ nvidia-smi; ./tofuc-run --help | head -1; } >"$OUT/machine.txt" 2>&1
summary "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

# 1a. ptxas accepts every PTX module of the checks (the stdlib-wide
# compilation of every dtype, the models).
n=0 bad=0
for f in checks/*/kernels/*.ptx; do
	n=$((n + 1))
	if ! "$PTXAS" -arch=sm_90 "$f" -o /dev/null >>"$OUT/ptxas.txt" 2>&1; then
		echo "rejected: $f" >>"$OUT/ptxas.txt"
		bad=$((bad + 1))
	fi
done
summary "ptxas -arch=sm_90: $n modules, $bad rejected ($PTXAS)"

# 1b. Every check on the GPU: the stdlib kernels, the MLP, Wide
# ResNet-50 and RNN on 1 and 4 logical devices, against the cpu runtime.
TOFUC_GPU_CHECKS=checks ./cuda.test -test.v -test.timeout 30m >"$OUT/checks.txt" 2>&1
summary "cuda.test (checks, driver binding): exit $?, $(grep -c -- '--- PASS' "$OUT/checks.txt") passed, $(grep -c -- '--- FAIL' "$OUT/checks.txt") failed, $(grep -c -- '--- SKIP' "$OUT/checks.txt") skipped"

# 2. Benchmarks: tofuc-run --bench on each compiled plan, with random
# inputs and parameters, then PyTorch and ONNX Runtime.
for b in chain matmul softmax layernorm r50-b1 r50-b32; do
	flags=$(python3 make_inputs.py "bench/$b" "$OUT/in/$b") || { summary "$b: no inputs"; continue; }
	# shellcheck disable=SC2086 # flags are words
	./tofuc-run "bench/$b" $flags --out "$OUT/$b" --bench --runs "$RUNS" >"$OUT/$b.txt" 2>&1
	summary "tofuc $b: exit $?, $(grep -m1 ' on .* devices: median' "$OUT/$b.txt")"
done
summary "device-to-device copy (tofuc-run, chain): $(grep -m1 'device-to-device copy' "$OUT/chain.txt")"
for w in copy chain matmul softmax layernorm; do
	summary "torch $w: $(python3 torch_bench.py "$w" --runs "$RUNS" --json "$OUT/torch-$w.json" 2>&1 | tail -1)"
done
for batch in 1 32; do
	summary "torch resnet50 batch $batch: $(python3 torch_bench.py resnet50 --batch $batch --runs "$RUNS" --json "$OUT/torch-resnet50-b$batch.json" 2>&1 | tail -1)"
done
summary "onnxruntime resnet50 batch 1: $(python3 ort_bench.py light_resnet50_random.onnx --runs "$RUNS" --json "$OUT/ort-resnet50-b1.json" 2>&1 | tail -1)"
