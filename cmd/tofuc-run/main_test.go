package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"tofuc/codegen/toolchain"
	"tofuc/internal/fakecuda"
	"tofuc/internal/modelcase"
	"tofuc/internal/mpitest"
	"tofuc/lang/precision"
	"tofuc/runtime/cuda"
	"tofuc/runtime/executor"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// TestBuildsWithoutCgo: tofuc-run builds with CGO_ENABLED=0, and nothing
// of the compiler (Z3, LLVM IR, the analyses) is in its dependencies.
func TestBuildsWithoutCgo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip(err)
	}
	env := append(os.Environ(), "CGO_ENABLED=0")
	list := exec.Command(goTool, "list", "-deps", ".")
	list.Env = env
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/aclements/go-z3", "github.com/llir/", "tofuc/codegen", "tofuc/analysis", "tofuc/rewrite", "tofuc/parser", "runtime/cgo"} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("tofuc-run depends on %s", dep)
			}
		}
	}
	build := exec.Command(goTool, "build", "-o", filepath.Join(t.TempDir(), "tofuc-run"), ".")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}

func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	status := run(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "expected one DIR"},
		{[]string{"a", "b", "--out", "o"}, "expected one DIR"},
		{[]string{"dir"}, "--out DIR2 is required"},
		{[]string{"dir", "--out", "o", "--runs", "3"}, "go with --bench"},
		{[]string{"dir", "--out", "o", "--bench", "--runs", "0"}, "--runs must be at least 1"},
		{[]string{"dir", "--out", "o", "--in", "x"}, `--in "x": expected NAME=PATH.npy`},
		{[]string{"dir", "--out", "o", "--frobnicate"}, "unknown flag: --frobnicate"},
	} {
		status, _, stderr := runCmd(tc.args...)
		if status != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: status %d, stderr %q, want %q", tc.args, status, stderr, tc.want)
		}
	}
	if status, stdout, _ := runCmd("--help"); status != exitOK || !strings.Contains(stdout, "--bench") {
		t.Errorf("--help: status %d, %q", status, stdout)
	}
}

// compiled is the MLP compiled into a folder, with an input file and a
// parameter file.
type compiled struct {
	dir, input, params string
	plan               *plan.Plan
	x                  *tensor.Tensor
	weights            map[string]*tensor.Tensor
}

func compileMLP(t *testing.T) *compiled {
	return compileCase(t, modelcase.Case{File: "mlp", Devices: 1})
}

// compileCase compiles case e's PTX and SIMT modules.
func compileCase(t *testing.T, e modelcase.Case) *compiled {
	t.Helper()
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	c := &compiled{dir: t.TempDir()}
	comp, err := e.Compile(c.dir, []string{"ptx", "simt"})
	if err != nil {
		t.Fatal(err)
	}
	c.plan, c.weights, c.x = comp.Plan, comp.Params, comp.Inputs["x"]
	c.input, c.params = filepath.Join(c.dir, "x.npy"), filepath.Join(c.dir, "weights.npz")
	if err := npy.WriteFile(c.input, c.x); err != nil {
		t.Fatal(err)
	}
	if err := npy.WriteNPZ(c.params, c.weights); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNoDriver: without a driver, the run stops with the driver's line.
func TestNoDriver(t *testing.T) {
	c := compileMLP(t)
	t.Setenv("TOFUC_LIBCUDA", "/nonexistent/libcuda.so.1")
	status, _, stderr := runCmd(c.dir, "--in", "x="+c.input, "--params", c.params, "--out", t.TempDir())
	if status != exitUser || stderr != "tofuc-run: no CUDA driver: /nonexistent/libcuda.so.1 not found\n" {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

// TestInputErrors: inputs the plan does not have, or lacks, are errors.
func TestInputErrors(t *testing.T) {
	c := compileMLP(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--params", c.params}, "input x (f32[64 784]) is missing: give it with --in x=PATH.npy"},
		{[]string{"--in", "x=" + c.input, "--in", "y=" + c.input, "--params", c.params}, "--in y: the plan has no input y"},
		{[]string{"--in", "x=" + c.input, "--params", c.input}, "parameters:"},
	} {
		status, _, stderr := runCmd(append([]string{c.dir, "--out", t.TempDir()}, tc.args...)...)
		if status != exitUser || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: status %d, stderr %q, want %q", tc.args, status, stderr, tc.want)
		}
	}
}

// onFakeDriver makes runCmd open the fake driver at lib, running c's
// kernels under the SIMT emulator.
func onFakeDriver(t *testing.T, c *compiled, lib string) {
	t.Setenv("FAKECUDA_SIMT", filepath.Join(c.dir, c.plan.Modules["simt"].Files[0].Path))
	open := openDevices
	t.Cleanup(func() { openDevices = open })
	openDevices = func(p *plan.Plan, dir string) ([]executor.Device, string, error) {
		d, err := cuda.LoadFrom(lib)
		if err != nil {
			return nil, "", err
		}
		devs, err := d.Open(p, dir)
		return devs, d.Describe(), err
	}
}

// TestMissingCUBLAS runs the MLP compiled with cuBLAS offered where
// there is no cuBLAS: one note says so, and the generated kernels give
// the simt runtime's outputs.
func TestMissingCUBLAS(t *testing.T) {
	c := compileCase(t, modelcase.Case{File: "mlp", Devices: 1, Precision: precision.F32, Backends: []string{plan.CUBLAS}})
	if len(c.plan.Placement) == 0 {
		t.Fatal("no placement group offered to cuBLAS")
	}
	lib, err := fakecuda.Build(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	onFakeDriver(t, c, lib)
	t.Setenv("TOFUC_LIBCUBLAS", "/nonexistent/libcublas.so.12")
	out := t.TempDir()
	status, stdout, stderr := runCmd(c.dir, "--in", "x="+c.input, "--params", c.params, "--out", out)
	if status != exitOK {
		t.Fatalf("status %d: %s", status, stderr)
	}
	notes := regexp.MustCompile(`(?m)^note: backend cublas: no cuBLAS .*/nonexistent/libcublas.so.12.*generated kernels instead$`).FindAllString(stdout, -1)
	if len(notes) != 1 {
		t.Errorf("want one note on cuBLAS, stdout:\n%s", stdout)
	}
	matchesSIMT(t, c, out)
}

// matchesSIMT compares the outputs tofuc-run wrote into out with the
// simt runtime's run of c, bit for bit.
func matchesSIMT(t *testing.T, c *compiled, out string) {
	t.Helper()
	ref, err := executor.Open(c.plan, c.dir, simt.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want, err := ref.Run(map[string]*tensor.Tensor{"x": c.x}, c.weights)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		got, err := npy.ReadFile(filepath.Join(out, name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.Compare(got, w, tensor.Exact); err != nil {
			t.Errorf("output %s: %v", name, err)
		}
	}
}

// TestRunAndBench runs the MLP through the CUDA binding on the fake
// driver (kernels under the SIMT emulator): the outputs equal the simt
// runtime's, and --bench times every launch and writes its JSON.
func TestRunAndBench(t *testing.T) {
	c := compileMLP(t)
	lib, err := fakecuda.Build(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	onFakeDriver(t, c, lib)
	out := t.TempDir()
	jsonPath := filepath.Join(t.TempDir(), "timings.json")
	status, stdout, stderr := runCmd(c.dir, "--in", "x="+c.input, "--params", c.params, "--out", out, "--bench", "--runs", "2", "--json", jsonPath, "--copy-bytes", "4096")
	if status != exitOK {
		t.Fatalf("status %d: %s", status, stderr)
	}
	matchesSIMT(t, c, out)
	var r benchReport
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	launches := 0 // those a GPU runs
	for _, s := range c.plan.Steps[0] {
		if s.Op == plan.Launch && c.plan.Kernels[s.Kernel].OnGPU() {
			launches++
		}
	}
	if len(r.Kernels) != launches || r.Runs != 2 || r.Plan.Median <= 0 || r.CopyGBps <= 0 || !strings.HasPrefix(r.Driver, "CUDA driver 13.0") {
		t.Errorf("bench report %s", b)
	}
	if !strings.Contains(stdout, "median ms") || !strings.Contains(stdout, "device-to-device copy of 4096 bytes on GPU 0: Fake GPU 0") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

// TestOneRankOnNCCL runs the MLP as one rank under mpirun (a machine of
// one GPU), on the fake driver with the fake NCCL: the rank opens its
// communicator from the id rank 0 makes, loads its device, runs, and
// writes the simt runtime's outputs; the same with the rank started by
// --nproc-per-node 1. Two ranks for a plan of one device are refused
// before they start; two ranks that both fail each say why. (The fake
// NCCL's ranks are threads of one process: two processes cannot meet
// in it.)
func TestOneRankOnNCCL(t *testing.T) {
	mpitest.Path(t)
	c := compileMLP(t)
	driver, err := fakecuda.Build(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	nccl, err := fakecuda.BuildNCCL(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "tofuc-run")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "out")
	cmd := mpitest.Command(context.Background(), t, "-np", "1", bin, c.dir, "--in", "x="+c.input, "--params", c.params, "--out", out, "--timeout", "30s")
	cmd.Env = append(cmd.Env, "TOFUC_LIBCUDA="+driver, "TOFUC_LIBNCCL="+nccl,
		"FAKECUDA_SIMT="+filepath.Join(c.dir, c.plan.Modules["simt"].Files[0].Path))
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "rank 0 of 1: device 0 of mlp on ") {
		t.Errorf("the rank did not say it loaded:\n%s", log)
	}
	matchesSIMT(t, c, out)

	// Started by tofuc-run itself, in torchrun's environment: NCCL's
	// id served over TCP, the host messages over NCCL.
	out = filepath.Join(t.TempDir(), "out")
	self := exec.Command(bin, c.dir, "--in", "x="+c.input, "--params", c.params, "--out", out, "--nproc-per-node", "1")
	self.Env = cmd.Env
	if log, err := self.CombinedOutput(); err != nil || !strings.Contains(string(log), "(torchrun's environment)") {
		t.Fatalf("--nproc-per-node 1: %v\n%s", err, log)
	}
	matchesSIMT(t, c, out)

	// Two ranks for a plan of one device: refused before any starts.
	self = exec.Command(bin, c.dir, "--in", "x="+c.input, "--params", c.params, "--out", out, "--nproc-per-node", "2")
	self.Env = cmd.Env
	if log, err := self.CombinedOutput(); err == nil || !strings.Contains(string(log), "ranks: 2, the plan's devices: 1") {
		t.Errorf("two ranks, one device: %v\n%s", err, log)
	}
	// Two ranks of a 2-device plan that both fail (an input missing):
	// each says why, and the first to fail is named.
	two := compileCase(t, modelcase.Case{File: "mlp", Devices: 2})
	self = exec.Command(bin, two.dir, "--in", "x=/nonexistent.npy", "--params", two.params, "--out", out, "--nproc-per-node", "2")
	self.Env = cmd.Env
	log, err = self.CombinedOutput()
	if err == nil || !regexp.MustCompile(`(?m)^tofuc-run: rank [01]: exit status 1$`).Match(log) {
		t.Errorf("two failing ranks: %v\n%s", err, log)
	}
	for r := range 2 {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^tofuc-run: rank %d of 2: .*nonexistent`, r)).Match(log) {
			t.Errorf("rank %d did not say why:\n%s", r, log)
		}
	}
}
