#!/bin/sh
# Runs issue 17's checks and benchmarks on a GPU machine, from the folder
# that `make gpu-bundle` wrote (docs/gpu.md): no Go is needed there, only
# the CUDA driver, ptxas, and Python with numpy, PyTorch and ONNX Runtime
# for the comparisons.
#
#     sh run.sh [RESULTS]      (default RESULTS: results)
#
# RESULTS/summary.txt collects one line per step; every step's full
# output is beside it. Each step has a time limit (a GPU machine is lent
# for minutes): CHECK_TIMEOUT seconds for the checks (default 300),
# STEP_TIMEOUT for each benchmark (default 90); a step past its limit is
# reported as exit 124 and the next one runs. BENCH names the plans of
# bench/ to time (default: all of them). COMPARE=0 skips PyTorch and
# ONNX Runtime (when their figures from an earlier run on the same GPU
# are at hand).
set -u
cd "$(dirname "$0")"
OUT=${1:-results}
RUNS=${RUNS:-20}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-300}
STEP_TIMEOUT=${STEP_TIMEOUT:-90}
COMPARE=${COMPARE:-1}
BENCH=${BENCH:-$(ls bench)}
PTXAS=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
mkdir -p "$OUT/in"
# cuBLAS and cuDNN for the plans compiled with --backends cublas,cudnn,
# NCCL for the ranks: the toolkit's, or PyTorch's wheels'
# (docs/placement.md, "GPU libraries"; docs/distributed.md).
# No empty entry: it would name the current folder.
libs=$(python3 -c 'import importlib, os
dirs = ["/usr/local/cuda/lib64"]
for n in ("cublas", "cudnn", "nccl"):
    try: dirs.append(os.path.join(list(importlib.import_module("nvidia." + n).__path__)[0], "lib"))
    except Exception: pass
print(":".join(dirs))' 2>/dev/null || echo /usr/local/cuda/lib64)
export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }

{ nvidia-smi; ./tofuc-run --help | head -1; } >"$OUT/machine.txt" 2>&1
summary "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

# 1a. ptxas accepts every PTX module of the checks (the stdlib-wide
# compilation of every dtype, the models), on every core.
n=$(ls checks/*/kernels/*.ptx | wc -l)
ls checks/*/kernels/*.ptx | xargs -P "$(nproc)" -n 4 sh -c '
	for f; do "$0" -arch=sm_90 "$f" -o /dev/null 2>&1 || echo "rejected: $f"; done' "$PTXAS" >"$OUT/ptxas.txt"
bad=$(grep -c '^rejected: ' "$OUT/ptxas.txt")
summary "ptxas -arch=sm_90: $n modules, $bad rejected ($PTXAS)"

# 1b. Every check on the GPU: the stdlib kernels, the MLP's and the RNN's
# training graphs and the MLP's, Wide ResNet-50's and the Transformer's
# forward passes on 1 and 4 logical devices, against the cpu runtime.
TOFUC_GPU_CHECKS=checks timeout "$CHECK_TIMEOUT" ./cuda.test -test.v >"$OUT/checks.txt" 2>&1
summary "cuda.test (checks, driver binding): exit $?, $(grep -c -- '--- PASS' "$OUT/checks.txt") passed, $(grep -c -- '--- FAIL' "$OUT/checks.txt") failed, $(grep -c -- '--- SKIP' "$OUT/checks.txt") skipped"

# 1c. GPU ranks on NCCL (docs/distributed.md): the MLP's training step as
# one rank (and as one rank a GPU where there are several), started by
# tofuc-run itself, against the same plan in one process.
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
for n in $(printf '%s\n' 1 "$gpus" | sort -un); do
	[ -d "ranks/mlp-$n" ] || continue
	flags=$(python3 make_inputs.py "ranks/mlp-$n" "$OUT/in/ranks-$n") || { summary "ranks on $n GPUs: no inputs"; continue; }
	# shellcheck disable=SC2086 # flags are words
	timeout "$STEP_TIMEOUT" ./tofuc-run "ranks/mlp-$n" $flags --out "$OUT/one-$n" >"$OUT/ranks-$n.txt" 2>&1
	# shellcheck disable=SC2086
	timeout "$STEP_TIMEOUT" ./tofuc-run "ranks/mlp-$n" $flags --out "$OUT/ranks-$n" --nproc-per-node "$n" --timeout 60s >>"$OUT/ranks-$n.txt" 2>&1
	st=$?
	same=$(for f in "$OUT/one-$n"/*.npy; do cmp -s "$f" "$OUT/ranks-$n/$(basename "$f")" || echo "$(basename "$f") differs;"; done)
	summary "NCCL ranks, the MLP's training step on $n GPUs: exit $st, ${same:-every output equal to one process's bit for bit}"
done

# 2. Benchmarks: tofuc-run --bench on each compiled plan, with random
# inputs and parameters, then PyTorch and ONNX Runtime.
for b in $BENCH; do
	flags=$(python3 make_inputs.py "bench/$b" "$OUT/in/$b") || { summary "$b: no inputs"; continue; }
	# shellcheck disable=SC2086 # flags are words
	timeout "$STEP_TIMEOUT" ./tofuc-run "bench/$b" $flags --out "$OUT/$b" --bench --runs "$RUNS" >"$OUT/$b.txt" 2>&1
	summary "tofuc $b: exit $?, $(grep -m1 ' on .* devices: median' "$OUT/$b.txt") $(grep -m1 '^note:' "$OUT/$b.txt")"
done
[ -f "$OUT/chain.txt" ] && summary "device-to-device copy (tofuc-run, chain): $(grep -m1 'device-to-device copy' "$OUT/chain.txt")"
[ "$COMPARE" = 1 ] || exit 0
# PyTorch in each precision tofuc's plans were compiled in or will be
# (docs/precision.md): f32 with TF32 off in cuBLAS and cuDNN, tf32 on in
# both, bf16 and f16 under autocast.
for p in f32 tf32 bf16 f16; do
	for w in copy chain matmul mlp softmax layernorm bert; do
		summary "torch $w $p: $(timeout "$STEP_TIMEOUT" python3 torch_bench.py "$w" --precision $p --runs "$RUNS" --json "$OUT/torch-$w-$p.json" 2>&1 | tail -1)"
	done
	for batch in 1 32; do
		summary "torch resnet50 batch $batch $p: $(timeout "$STEP_TIMEOUT" python3 torch_bench.py resnet50 --precision $p --batch $batch --runs "$RUNS" --json "$OUT/torch-resnet50-b$batch-$p.json" 2>&1 | tail -1)"
	done
done
summary "onnxruntime resnet50 batch 1: $(timeout "$STEP_TIMEOUT" python3 ort_bench.py light_resnet50_random.onnx --runs "$RUNS" --json "$OUT/ort-resnet50-b1.json" 2>&1 | tail -1)"
