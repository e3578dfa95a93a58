# tofuc: `make run` builds the compiler and runs its main job on the bundled
# examples; `make test` runs the whole suite. Both install what is missing.

GO        ?= go
BIN       := bin/tofuc
# DEB_PKGS: a C compiler and headers for cgo (go-z3), certificates for
# `go mod download`, llc-14 and the Z3 library.
DEB_PKGS  := gcc libc6-dev ca-certificates llvm-14 libz3-dev
FUZZTIME  ?= 60s
SHARED    ?= $(or $(TOFUC_SHARED),../shared)
# TEST_PKGS are installed by `make test` only (the report test opens
# report.html in headless Chromium).
TEST_PKGS := chromium

.PHONY: all deps build run test bench fuzz clean

all: build

# deps installs the Debian packages tofuc needs when they are missing (as
# root, or through sudo: scripts/deps.sh) and downloads the Go modules.
deps:
	@sh scripts/deps.sh $(DEB_PKGS) $(EXTRA_PKGS)
	@$(GO) mod download

build:
	$(GO) build -o $(BIN) ./cmd/tofuc

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
test: deps
	$(GO) vet ./...
	$(GO) test ./...

# bench also times rule generation (TASO §2.3.2), optimises the ONNX light
# models and checks every optimised light-random model against the original
# with the interpreter (docs/rules.md).
bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...
	@mkdir -p out
	./$(BIN) rules generate -o out/rules-generated.tdl
	for m in squeezenet inception_v1 resnet50; do ./$(BIN) optimize ../shared/onnx/light/light_$$m.onnx --report out/optimize-$$m || exit 1; done
	./$(BIN) optimize examples/sru.tdl
	TOFUC_LIGHT_MODELS=all $(GO) test -run TestOptimizedONNXEqualsOriginal -v -timeout 60m ./rewrite/search
	TOFUC_LONG=1 $(GO) test -run TestBacktrackingFindsExhaustiveOptimum -v -timeout 30m ./rewrite/search

fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./parser
	$(GO) test -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME) ./analysis/check
	$(GO) test -run '^$$' -fuzz FuzzImport -fuzztime $(FUZZTIME) ./parser/onnx

clean:
	rm -rf bin out
