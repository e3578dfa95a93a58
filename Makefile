# tofuc: `make run` builds the compiler and runs its main job on the bundled
# examples; `make test` runs the whole suite. Both install what is missing.

GO        ?= go
BIN       := bin/tofuc
# DEB_PKGS: a C compiler and headers for cgo (go-z3), certificates for
# `go mod download`, llc-14, the Z3 library, and the host libraries
# placement may choose (OpenBLAS, oneDNN: loaded at run time, optional),
# Open MPI (mpirun, libmpi: plans run as ranks, docs/distributed.md).
DEB_PKGS  := gcc libc6-dev ca-certificates llvm-14 libz3-dev libopenblas0-pthread libdnnl2 openmpi-bin
FUZZTIME  ?= 60s
SHARED    ?= $(or $(TOFUC_SHARED),../shared)
# TEST_PKGS are installed by `make test` only: the report test opens
# report.html in headless Chromium; the Python package's test installs it
# into a virtual environment with Debian's NumPy.
TEST_PKGS := chromium python3-numpy python3-venv

.PHONY: all deps build python run test bench fuzz gpu-bundle clean

all: build

# deps installs the Debian packages tofuc needs when they are missing (as
# root, or through sudo: scripts/deps.sh) and downloads the Go modules.
deps:
	@sh scripts/deps.sh $(DEB_PKGS) $(EXTRA_PKGS)
	@$(GO) mod download

build:
	$(GO) build -o $(BIN) ./cmd/tofuc

# python builds the Python package's C library into python/tofuc, for
# PYTHONPATH=python; `pip install ./python` builds its own (docs/python.md).
python: deps
	$(GO) build -buildmode=c-shared -o python/tofuc/libtofuc.so ./cmd/libtofuc

run: deps build
	@echo "== tofuc check: the standard library and every example"
	./$(BIN) check stdlib/*.tdl examples/*.tdl && echo "all clean"
	@echo "== tofuc eval: each example on a seeded random batch, with the reference interpreter"
	./$(BIN) eval examples/mlp.tdl --set batch=4 --random-inputs --seed 1 --out out/mlp
	./$(BIN) eval examples/wresnet.tdl --set width=1 --set batch=1 --set train=true --random-inputs --seed 1 --out out/resnet50
	./$(BIN) eval examples/rnn.tdl --random-inputs --seed 1 --out out/rnn
	./$(BIN) eval examples/transformer.tdl --random-inputs --seed 1 --out out/transformer
	@echo "== tofuc strategies: how matmul can be split across devices"
	./$(BIN) strategies stdlib/linalg.tdl --op matmul
	@echo "== tofuc eval --train: 20 SGD steps of the MLP on a synthetic task"
	./$(BIN) eval examples/mlp.tdl --train --steps 20 --set batch=32 --random-inputs --seed 1 --out out/mlp-train
	@echo "== tofuc partition: Wide ResNet-152-10's training graph over 8 devices"
	./$(BIN) partition examples/wresnet.tdl --train --set depth=152 --set width=10 --set train=true --devices 8 --report out/partition-wresnet
	@echo "== tofuc partition --pipeline: a three-tower network's pipeline plans (GraphPipe's stage graph, a sequential pipeline), simulated"
	./$(BIN) partition examples/uno.tdl --train --loss mse --devices 8 --topology pcie --pipeline --report out/partition-uno
	@echo "== tofuc compile and run: the MLP's training graph for 4 devices, run on the host runtime and under the SIMT emulator"
	./$(BIN) compile examples/mlp.tdl --train --set batch=32 --devices 4 -o out/mlp-4dev
	./$(BIN) run out/mlp-4dev --random-inputs --seed 1 --out out/mlp-4dev-cpu
	./$(BIN) run out/mlp-4dev --backend simt --random-inputs --seed 1 --out out/mlp-4dev-simt
	@echo "plan: out/mlp-4dev/plan.json (kernels in out/mlp-4dev/kernels), report: out/mlp-4dev/report.html"
	@if [ -d "$(SHARED)/onnx" ]; then \
		echo "== tofuc import and onnx-test: an ONNX SqueezeNet as TDL, and the op-level conformance tests"; \
		echo "./$(BIN) import $(SHARED)/onnx/light-random/light_squeezenet_random.onnx -o out/squeezenet.tdl"; \
		./$(BIN) import $(SHARED)/onnx/light-random/light_squeezenet_random.onnx -o out/squeezenet.tdl && \
		echo "./$(BIN) onnx-test $(SHARED)/onnx/node-random $(SHARED)/onnx/light-random/light_squeezenet_random.onnx" && \
		./$(BIN) onnx-test $(SHARED)/onnx/node-random $(SHARED)/onnx/light-random/light_squeezenet_random.onnx | tail -3; \
	else echo "== (no ONNX test data in $(SHARED): skipping tofuc import)"; fi
	@echo "outputs and parameters written under out/"

test: EXTRA_PKGS = $(TEST_PKGS)
# The largest package (cmd/tofuc) takes 5-8 minutes on two loaded
# cores: past go test's default 10-minute limit for one package only on
# a machine much slower than that, which the longer limit tolerates.
test: deps
	$(GO) vet ./...
	$(GO) test -timeout 20m ./...

# bench also times rule generation (TASO §2.3.2), optimises the ONNX light
# models and checks every optimised light-random model against the original
# with the interpreter (docs/rules.md), runs the long partitioned-plan test,
# and times the compiled host path beside ONNX Runtime (./bench, which
# installs npm's onnxruntime-node into bench/ort).
bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...
	@mkdir -p out
	./$(BIN) rules generate -o out/rules-generated.tdl
	for m in squeezenet inception_v1 resnet50; do ./$(BIN) optimize ../shared/onnx/light/light_$$m.onnx --report out/optimize-$$m || exit 1; done
	./$(BIN) optimize examples/sru.tdl
	TOFUC_LIGHT_MODELS=all $(GO) test -run TestOptimizedONNXEqualsOriginal -v -timeout 60m ./rewrite/search
	TOFUC_LONG=1 $(GO) test -run TestBacktrackingFindsExhaustiveOptimum -v -timeout 30m ./rewrite/search
	TOFUC_LONG=1 $(GO) test -run TestPartitionedPlans -v -timeout 60m ./codegen
	@echo "== tofuc's cpu backend beside ONNX Runtime (docs/benchmarks.md)"
	TOFUC_SHARED=$(SHARED) $(GO) run ./bench -interp

fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./parser
	$(GO) test -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME) ./analysis/check
	$(GO) test -run '^$$' -fuzz FuzzImport -fuzztime $(FUZZTIME) ./frontend/onnx

# gpu-bundle writes into GPU_BUNDLE what a GPU machine (no Go there) needs
# to finish issue 17: tofuc-run and runtime/cuda's tests built without
# cgo, the checks (plans with the cpu runtime's outputs, run first here on
# emulated devices), the benchmark plans and the scripts (docs/gpu.md).
GPU_BUNDLE ?= out/gpu-bundle
GPU_DIR     = $(abspath $(GPU_BUNDLE))
R50         = $(SHARED)/onnx/light-random/light_resnet50_random.onnx
gpu-bundle: deps build
	rm -rf $(GPU_DIR) && mkdir -p $(GPU_DIR)/bench $(GPU_DIR)/tmp
	CGO_ENABLED=0 $(GO) build -o $(GPU_DIR)/tofuc-run ./cmd/tofuc-run
	CGO_ENABLED=0 $(GO) test -c -o $(GPU_DIR)/cuda.test ./runtime/cuda
	TOFUC_GPU_CHECKS=$(GPU_DIR)/checks $(GO) test -count=1 -timeout 60m -run TestWriteGPUChecks ./codegen
	TOFUC_GPU_CHECKS=$(GPU_DIR)/checks $(GO) test -count=1 -timeout 30m -run TestChecks ./runtime/executor
	for m in chain matmul mlp softmax layernorm bert; do \
		./$(BIN) compile tools/gpu/bench/$$m.tdl -o $(GPU_DIR)/bench/$$m --emit ptx,plan || exit 1; \
		for p in f32 tf32 bf16 f16; do \
			./$(BIN) compile tools/gpu/bench/$$m.tdl -o $(GPU_DIR)/bench/$$m-$$p --precision $$p --emit ptx,plan || exit 1; \
		done; \
	done
	# The same products on cuBLAS where it loads, ResNet-50's convolutions
	# on cuDNN below (docs/placement.md, "GPU libraries").
	for m in matmul mlp bert; do for p in f32 tf32; do \
		./$(BIN) compile tools/gpu/bench/$$m.tdl -o $(GPU_DIR)/bench/$$m-$$p-cublas --precision $$p --backends cublas --emit ptx,plan || exit 1; \
	done; done
	# The MLP's training step for 1 to 8 GPUs, run as one rank a GPU on
	# NCCL (docs/distributed.md).
	for n in 1 2 4 8; do \
		./$(BIN) compile examples/mlp.tdl --train --set batch=64 --devices $$n -o $(GPU_DIR)/ranks/mlp-$$n --emit ptx,plan || exit 1; \
	done
	./$(BIN) import $(R50) -o $(GPU_DIR)/tmp/r50-b1.tdl
	sed 's/f32\[1, 3, 224, 224\]/f32[32, 3, 224, 224]/; s/reshape<shape = \[1, 2048\]>/reshape<shape = [32, 2048]>/' \
		$(GPU_DIR)/tmp/r50-b1.tdl > $(GPU_DIR)/tmp/r50-b32.tdl
	cp $(GPU_DIR)/tmp/r50-b1.npz $(GPU_DIR)/tmp/r50-b32.npz
	for b in 1 32; do for p in exact f32 tf32 bf16 f16; do \
		./$(BIN) compile $(GPU_DIR)/tmp/r50-b$$b.tdl -o $(GPU_DIR)/bench/r50-b$$b-$$p --precision $$p --emit ptx,plan || exit 1; \
	done; for p in f32 tf32; do \
		./$(BIN) compile $(GPU_DIR)/tmp/r50-b$$b.tdl -o $(GPU_DIR)/bench/r50-b$$b-$$p-libs --precision $$p --backends cublas,cudnn --emit ptx,plan || exit 1; \
	done; done
	# Weights are drawn on the GPU machine (make_inputs.py); the emulator's
	# shared objects stay here.
	rm -rf $(GPU_DIR)/tmp && find $(GPU_DIR) \( -name '*.so' -o -name params.npz \) -delete
	cp tools/gpu/*.py tools/gpu/run.sh $(R50) $(GPU_DIR)/
	# One compressed file to carry to the GPU machine (the device tool
	# carries at most 64 MiB): unpack it there with tar xzf.
	tar czf $(GPU_DIR).tar.gz -C $(dir $(GPU_DIR)) $(notdir $(GPU_DIR))
	@du -sh $(GPU_DIR) $(GPU_DIR).tar.gz

clean:
	rm -rf bin out
