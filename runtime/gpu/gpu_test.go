package gpu_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"tofuc/codegen"
	"tofuc/codegen/toolchain"
	"tofuc/internal/fakecuda"
	"tofuc/internal/modelcase"
	"tofuc/lang"
	"tofuc/runtime/cpu"
	"tofuc/runtime/cuda"
	"tofuc/runtime/gpu"
	"tofuc/runtime/gpu/emu"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// model is a compiled example with inputs and parameters to run it on.
type model struct {
	name string
	*modelcase.Compiled
}

// compile compiles a case for the GPU, the emulator and the host.
func compile(t *testing.T, c modelcase.Case) *model {
	t.Helper()
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	comp, err := c.Compile(t.TempDir(), codegen.Options{Emit: codegen.Emit{Host: true, SIMT: true, PTX: true}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return &model{name: c.String(), Compiled: comp}
}

// fakeDriver is the fake CUDA driver (internal/fakecuda) with two GPUs,
// built once.
var fakeDriver = sync.OnceValues(func() (*cuda.Driver, error) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		return nil, err
	}
	lib, err := fakecuda.Build(dir)
	if err != nil {
		return nil, err
	}
	os.Setenv("FAKECUDA_DEVICES", "2")
	return cuda.LoadFrom(lib)
})

// programs loads a compiled model on emulated devices and through the
// CUDA binding on the fake driver, whose two GPUs the logical devices
// share round-robin.
func programs(t *testing.T, m *model) map[string]*gpu.Program {
	t.Helper()
	out := map[string]*gpu.Program{"emu": emulated(t, m)}
	drv, err := fakeDriver()
	if err != nil {
		t.Logf("not through the CUDA binding: %v", err)
		return out
	}
	t.Setenv("FAKECUDA_SIMT", filepath.Join(m.Dir, m.Plan.Modules.SIMT))
	devs, err := drv.Open(m.Plan, m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := gpu.Load(m.Plan, devs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pr.Close(); err != nil {
			t.Error(err)
		}
	})
	out["fake-cuda"] = pr
	return out
}

// emulated loads a compiled model on emulated devices.
func emulated(t *testing.T, m *model) *gpu.Program {
	t.Helper()
	devs, err := emu.Open(m.Plan, m.Dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := gpu.Load(m.Plan, devs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	return pr
}

// cpuRun runs a compiled model on the cpu runtime, with the host kernels
// or (simt) the GPU kernels under the emulator.
func cpuRun(t *testing.T, m *model, withSIMT bool, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	t.Helper()
	var engine cpu.Engine
	var err error
	if withSIMT {
		engine, err = simt.New(m.Plan, m.Dir, 0)
	} else {
		engine, err = cpu.NewHost(m.Plan, m.Dir, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	pr, err := cpu.Load(m.Plan, engine)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	return pr.Run(m.Inputs, params)
}

// compareAll compares every output of got with want.
func compareAll(t *testing.T, what string, got, want map[string]*tensor.Tensor, tol func(dt lang.DType) tensor.Tolerance) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for name, w := range want {
		if err := tensor.Compare(got[name], w, tol(w.DType)); err != nil {
			t.Errorf("%s: output %s: %v", what, name, err)
		}
	}
}

func exact(lang.DType) tensor.Tolerance { return tensor.Exact }

func reordered(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 1<<12) }

// examples are the plans the tests run; the first, an MLP of 64 rows,
// has a chained launch, which a GPU runs as its two kernels' launches.
var examples = []modelcase.Case{
	{File: "mlp", Devices: 1, Classes: 10, Set: map[string]any{"batch": 64}},
	{File: "mlp", Train: true, Devices: 4, Classes: 10, Set: map[string]any{"batch": 8, "hidden": 16}},
	{File: "rnn", Train: true, Devices: 4, Classes: 4, Set: map[string]any{"layers": 2, "hidden": 8, "steps": 3, "batch": 4, "classes": 4}},
	{File: "transformer", Devices: 1, Classes: 50, Set: map[string]any{"hidden": 32, "seq": 8, "batch": 2, "vocab": 50}},
}

// TestPlansMatchCPU runs compiled plans on emulated devices and through
// the CUDA binding on the fake driver: they equal the cpu runtime running
// the same GPU kernels (the SIMT emulator) bit for bit, and the cpu
// runtime's host kernels within the tolerance for reordered sums.
func TestPlansMatchCPU(t *testing.T) {
	for _, e := range examples {
		t.Run(e.String(), func(t *testing.T) {
			m := compile(t, e)
			same, err := cpuRun(t, m, true, m.Params)
			if err != nil {
				t.Fatal(err)
			}
			host, err := cpuRun(t, m, false, m.Params)
			if err != nil {
				t.Fatal(err)
			}
			for name, pr := range programs(t, m) {
				got, err := pr.Run(m.Inputs, m.Params)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				compareAll(t, name+" against the simt runtime", got, same, exact)
				compareAll(t, name+" against the cpu runtime", got, host, reordered)
			}
			t.Logf("%d devices, %d kernels", m.Plan.Devices, len(m.Plan.Kernels))
		})
	}
}

// TestDependenciesMatter removes the cross-device dependencies of a
// partitioned plan: the emulated devices, which run the last device's
// queue first, then read tiles before they are computed, and the result
// differs. (Without this, TestPlansMatchCPU could pass with waits that do
// nothing.)
func TestDependenciesMatter(t *testing.T) {
	m := compile(t, examples[1])
	want, err := emulated(t, m).Run(m.Inputs, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for d := range m.Plan.Steps {
		for i := range m.Plan.Steps[d] {
			removed += len(m.Plan.Steps[d][i].After)
			m.Plan.Steps[d][i].After = nil
		}
	}
	if removed == 0 {
		t.Fatal("the partitioned plan has no dependencies between devices")
	}
	got, err := emulated(t, m).Run(m.Inputs, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if tensor.Compare(got[name], w, tensor.Exact) != nil {
			return
		}
	}
	t.Errorf("removing %d dependencies changed no output", removed)
}

// TestParamsRebound runs a model with one set of parameters, then another
// map, then the first again: every run equals the cpu runtime's with the
// same parameters (the init steps rerun when the parameters change).
func TestParamsRebound(t *testing.T) {
	e := modelcase.Case{File: "prep", Devices: 1, Source: `
model prep(x: f32[4, 8]) {
    w = param f32[8, 8] init glorot()
    return matmul(x, exp(transpose(w)))
}`}
	m := compile(t, e)
	inits := 0
	for _, steps := range m.Plan.Init {
		inits += len(steps)
	}
	if inits == 0 {
		t.Fatal("the plan has no init steps to rerun")
	}
	other := map[string]*tensor.Tensor{}
	for name, p := range m.Params {
		q := p.Clone()
		for i := range q.Len() {
			q.SetFlat(i, q.Flat(i)*1.5+0.25)
		}
		other[name] = q
	}
	progs := programs(t, m)
	for i, params := range []map[string]*tensor.Tensor{m.Params, other, m.Params} {
		want, err := cpuRun(t, m, true, params)
		if err != nil {
			t.Fatal(err)
		}
		for name, pr := range progs {
			got, err := pr.Run(m.Inputs, params)
			if err != nil {
				t.Fatal(err)
			}
			compareAll(t, fmt.Sprintf("%s run %d", name, i), got, want, exact)
		}
	}
}

// TestIndexOutOfRange feeds a token id beyond the vocabulary: the error
// is the cpu runtime's, word for word. (One id only: with several, which
// failing thread reports first is up to the scheduling.)
func TestIndexOutOfRange(t *testing.T) {
	m := compile(t, examples[3])
	for _, x := range m.Inputs {
		x.SetFlat(x.Len()-3, 77) // vocab = 50
	}
	_, want := cpuRun(t, m, true, m.Params)
	if want == nil {
		t.Fatal("the cpu runtime accepts ids beyond the vocabulary")
	}
	for name, pr := range programs(t, m) {
		_, err := pr.Run(m.Inputs, m.Params)
		if err == nil || err.Error() != want.Error() {
			t.Errorf("%s: got error %v\nwant %v", name, err, want)
		}
	}
}

// TestRefusals: plans a GPU cannot run are refused when loaded, with the
// step named.
func TestRefusals(t *testing.T) {
	m := compile(t, examples[0])
	opaque := *m.Plan
	opaque.Steps = [][]plan.Step{append([]plan.Step{{Op: plan.Opaque, To: 0, Label: "inverse of m", Call: &plan.OpaqueCall{Fn: "inverse"}}}, m.Plan.Steps[0]...)}
	for _, tc := range []struct {
		name string
		p    *plan.Plan
		devs int
		want string
	}{
		{"opaque", &opaque, 1, "device 0, step 0 (inverse of m): the opaque function inverse runs on a host"},
		{"devices", m.Plan, 2, "the plan runs on 1 devices, 2 given"},
	} {
		devs, err := emu.Open(m.Plan, m.Dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for len(devs) < tc.devs {
			devs = append(devs, devs[0])
		}
		_, err = gpu.Load(tc.p, devs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestBench times a plan on emulated devices: every launch a GPU runs is
// timed (a chained launch's two kernels, not it), the plan too.
func TestBench(t *testing.T) {
	m := compile(t, examples[0])
	pr := emulated(t, m)
	tm, err := pr.Bench(m.Inputs, m.Params, 3)
	if err != nil {
		t.Fatal(err)
	}
	launches := 0
	for _, s := range m.Plan.Steps[0] {
		if s.Op == plan.Launch && m.Plan.Kernels[s.Kernel].OnGPU() {
			launches++
		}
	}
	if len(tm.Kernels) != launches || tm.Plan.Median <= 0 {
		t.Fatalf("%d kernels timed of %d launches, plan %+v", len(tm.Kernels), launches, tm.Plan)
	}
	for _, k := range tm.Kernels {
		if k.Time.Min <= 0 || k.Time.Min > k.Time.Median || k.Time.Median > tm.Plan.Mean*float64(tm.Runs) {
			t.Errorf("kernel %s: times %+v", k.Label, k.Time)
		}
	}
	devs, err := emu.Open(m.Plan, m.Dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if bw, err := gpu.CopyBandwidth(devs[0], 1<<20, 3); err != nil || bw <= 0 {
		t.Errorf("copy bandwidth %v, %v", bw, err)
	}
}

// TestChecks runs the checks under $TOFUC_GPU_CHECKS (written by
// codegen's TestWriteGPUChecks, docs/gpu.md) on emulated devices: what
// runtime/cuda's TestChecks runs on a GPU.
func TestChecks(t *testing.T) {
	root := os.Getenv("TOFUC_GPU_CHECKS")
	if root == "" {
		t.Skip("$TOFUC_GPU_CHECKS names no folder of checks")
	}
	dirs, err := gpu.CheckDirs(root)
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no checks under %s (%v)", root, err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if err := gpu.RunCheck(dir, func(p *plan.Plan, dir string) ([]gpu.Device, error) { return emu.Open(p, dir, 0) }); err != nil {
				t.Error(err)
			}
		})
	}
}
