package executor_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"tofuc/analysis/rounding"
	"tofuc/codegen/toolchain"
	"tofuc/internal/fakecuda"
	"tofuc/internal/modelcase"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/cpu"
	"tofuc/runtime/cuda"
	"tofuc/runtime/executor"
	"tofuc/runtime/hostlib"
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
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	comp, err := c.Compile(t.TempDir(), []string{"host", "simt", "ptx"})
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

// programs loads a compiled model on emulated devices (Strict, and as
// `tofuc run --backend simt` runs them) and through the CUDA binding on
// the fake driver, whose two GPUs the logical devices share round-robin.
func programs(t *testing.T, m *model) map[string]*executor.Program {
	t.Helper()
	out := map[string]*executor.Program{"strict": emulated(t, m), "simt": load(t, m, simt.Kind.Name, false)}
	drv, err := fakeDriver()
	if err != nil {
		t.Logf("not through the CUDA binding: %v", err)
		return out
	}
	out["fake-cuda"] = onFakeGPUs(t, drv, m)
	return out
}

// emulated loads a compiled model on emulated devices in the Strict mode
// (runtime/host), which runs the last device's queue first.
func emulated(t *testing.T, m *model) *executor.Program {
	t.Helper()
	return load(t, m, simt.Kind.Name, true)
}

// load loads a compiled model on devices of a kind.
func load(t *testing.T, m *model, kind string, strict bool) *executor.Program {
	t.Helper()
	return closedAtEnd(t)(executor.Open(m.Plan, m.Dir, kind, executor.Options{Strict: strict}))
}

// closedAtEnd returns a function that fails the test on a program's
// load error, else closes the program when the test ends.
func closedAtEnd(t *testing.T) func(*executor.Program, error) *executor.Program {
	return func(pr *executor.Program, err error) *executor.Program {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := pr.Close(); err != nil {
				t.Error(err)
			}
		})
		return pr
	}
}

// hostRun runs a compiled model on host devices, with the host kernels
// (cpu) or the GPU kernels under the emulator (simt).
func hostRun(t *testing.T, m *model, kind string, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	t.Helper()
	pr, err := executor.Open(m.Plan, m.Dir, kind, executor.Options{})
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

// TestPlansMatchCPU runs compiled plans on emulated devices (Strict, and
// Inline or Streams as the simt backend runs them) and through the CUDA
// binding on the fake driver: they equal the same GPU kernels run once
// more under the emulator bit for bit, and the host kernels (the cpu
// backend) within the tolerance for reordered sums.
func TestPlansMatchCPU(t *testing.T) {
	for _, e := range examples {
		t.Run(e.String(), func(t *testing.T) {
			m := compile(t, e)
			same, err := hostRun(t, m, simt.Kind.Name, m.Params)
			if err != nil {
				t.Fatal(err)
			}
			host, err := hostRun(t, m, cpu.Kind.Name, m.Params)
			if err != nil {
				t.Fatal(err)
			}
			for name, pr := range programs(t, m) {
				got, err := pr.Run(m.Inputs, m.Params)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				compareAll(t, name+" against the simt backend", got, same, exact)
				compareAll(t, name+" against the cpu backend", got, host, reordered)
			}
			t.Logf("%d devices, %d kernels", m.Plan.Devices, len(m.Plan.Kernels))
		})
	}
}

// TestModesMatchExact compiles the examples (inference and training
// steps) in f32, tf32, bf16 and f16 and runs them on the host kernels
// (cpu, where the last three compute as f32) and the emulated GPU
// kernels (simt, their contractions on tensor cores): every output
// matches the exact mode's plan on the host, which matches the
// interpreter, under the policy's whole-model tolerance and arg-max
// (analysis/rounding; docs/precision.md). The training steps in f16
// scale their loss (precision.Mode.LossScale).
func TestModesMatchExact(t *testing.T) {
	for _, e := range examples {
		t.Run(e.String(), func(t *testing.T) {
			ref := compile(t, e)
			want, err := hostRun(t, ref, cpu.Kind.Name, ref.Params)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []precision.Mode{precision.F32, precision.TF32, precision.BF16, precision.F16} {
				c := e
				c.Precision = p
				m := compile(t, c)
				if m.Plan.Precision != p {
					t.Fatalf("the plan records precision %v, compiled in %v", m.Plan.Precision, p)
				}
				for _, kind := range []string{cpu.Kind.Name, simt.Kind.Name} {
					got, err := hostRun(t, m, kind, ref.Params)
					if err != nil {
						t.Fatalf("%s on %s: %v", p, kind, err)
					}
					for name, w := range want {
						if err := rounding.CompareModel(p, ref.Depth, got[name], w); err != nil {
							t.Errorf("%s on %s: output %s: %v", p, kind, name, err)
						}
					}
				}
			}
		})
	}
}

// TestPlacedTrainingStep compiles the MLP's and the CNN's training steps in f32 with
// the host libraries offered: its forward and backward products get
// placement groups, the CNN's convolutions too, and the step run with
// each variant in force (the generated kernels, each library) matches
// the exact mode's plan under the f32 policy.
func TestPlacedTrainingStep(t *testing.T) {
	backends := hostlib.Available()
	if len(backends) == 0 {
		t.Skip("no library backend on this machine (libopenblas0-pthread, libdnnl2)")
	}
	for _, e := range []modelcase.Case{
		{File: "mlp", Train: true, Devices: 1, Classes: 10, Set: map[string]any{"batch": 128, "hidden": 256}},
		{File: "cnn", Train: true, Devices: 1, Classes: 10, Set: map[string]any{"batch": 8}},
	} {
		t.Run(e.File, func(t *testing.T) { placedTrainingStep(t, e, backends) })
	}
}

// placedTrainingStep checks TestPlacedTrainingStep's case e: the MLP's
// forward and backward products, the CNN's convolutions (on oneDNN).
func placedTrainingStep(t *testing.T, e modelcase.Case, backends []string) {
	ref := compile(t, e)
	want, err := hostRun(t, ref, cpu.Kind.Name, ref.Params)
	if err != nil {
		t.Fatal(err)
	}
	e.Precision, e.Backends = precision.F32, backends
	m := compile(t, e)
	convs := 0
	for _, s := range m.Plan.Steps[0] {
		if s.Conv != nil {
			convs++
		}
	}
	switch {
	case e.File == "mlp" && len(m.Plan.Placement) < 4:
		t.Fatalf("%d placement groups, want the forward and backward products", len(m.Plan.Placement))
	case e.File == "cnn" && slices.Contains(backends, "onednn") && convs == 0:
		t.Fatal("no convolution placed on oneDNN")
	}
	for _, variant := range append([]string{plan.Generated}, backends...) {
		for g, pg := range m.Plan.Placement {
			m.Plan.Placement[g].Chosen = plan.Generated
			if slices.Contains(pg.Candidates, variant) {
				m.Plan.Placement[g].Chosen = variant
			}
		}
		got, err := hostRun(t, m, cpu.Kind.Name, ref.Params)
		if err != nil {
			t.Fatalf("%s: %v", variant, err)
		}
		for name, w := range want {
			if err := rounding.CompareModel(precision.F32, ref.Depth, got[name], w); err != nil {
				t.Errorf("%s: output %s: %v", variant, name, err)
			}
		}
	}
}

// TestDependenciesMatter removes the cross-device dependencies of a
// partitioned plan: Validate refuses it; removed after the plan was
// loaded, the emulated devices, which run the last device's queue first,
// read tiles before they are computed, and the result differs. (Without
// this, TestPlansMatchCPU could pass with waits that do nothing.)
func TestDependenciesMatter(t *testing.T) {
	m := compile(t, examples[1])
	want, err := emulated(t, m).Run(m.Inputs, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	pr := emulated(t, m)
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
	if err := m.Plan.Validate(); err == nil || !strings.Contains(err.Error(), "no `after` orders the two") {
		t.Errorf("the plan without its dependencies: %v", err)
	}
	got, err := pr.Run(m.Inputs, m.Params)
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
// map, then the first again: every run equals a fresh program's with the
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
		want, err := hostRun(t, m, simt.Kind.Name, params)
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

// TestLibraryWeightsRebound runs convolutions on oneDNN, which keeps
// their weights in its own layout from one run to the next while the
// parameters stay bound (per address: two convolutions of one shape
// share a primitive), with one set of parameters, another map, then
// the first again: each run matches the exact plan's with the same
// parameters under the f32 policy.
func TestLibraryWeightsRebound(t *testing.T) {
	if _, err := hostlib.Open("onednn"); err != nil {
		t.Skip(err)
	}
	e := modelcase.Case{File: "convs", Devices: 1, Source: `
model convs(x: f32[2, 8, 14, 14]) {
    w1 = param f32[16, 8, 3, 3] init glorot()
    w2 = param f32[16, 1, 3, 3] init glorot()
    w3 = param f32[16, 8, 3, 3] init glorot()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w1))
    return conv2d<pads = [1, 1, 1, 1], group = 16>(y, w2), conv2d<pads = [1, 1, 1, 1]>(x, w3)
}`}
	ref := compile(t, e)
	e.Precision, e.Backends = precision.F32, []string{"onednn"}
	m := compile(t, e)
	for g := range m.Plan.Placement {
		m.Plan.Placement[g].Chosen = "onednn"
	}
	if len(m.Plan.Placement) != 3 {
		t.Fatalf("%d placement groups, want the three convolutions'", len(m.Plan.Placement))
	}
	other := map[string]*tensor.Tensor{}
	for name, p := range m.Params {
		q := p.Clone()
		for i := range q.Len() {
			q.SetFlat(i, q.Flat(i)*-1.5+0.25)
		}
		other[name] = q
	}
	pr := load(t, m, cpu.Kind.Name, false)
	for i, params := range []map[string]*tensor.Tensor{m.Params, other, m.Params} {
		want, err := hostRun(t, ref, cpu.Kind.Name, params)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := pr.Run(m.Inputs, params)
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range want {
				if err := rounding.CompareModel(precision.F32, ref.Depth, got[name], w); err != nil {
					t.Errorf("run %d: output %s: %v", i, name, err)
				}
			}
		}
	}
}

// fakeLibrary builds a fake GPU library (internal/fakecuda) and names
// it in env, where runtime/cuda looks for the library; without a C
// compiler the test is skipped.
func fakeLibrary(t *testing.T, env string, build func(dir string) (string, error)) {
	t.Helper()
	lib, err := build(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	t.Setenv(env, lib)
}

// onFakeGPUs loads compiled model m on the fake driver's GPUs, its
// kernels under the SIMT emulator.
func onFakeGPUs(t *testing.T, drv *cuda.Driver, m *model) *executor.Program {
	t.Helper()
	t.Setenv("FAKECUDA_SIMT", filepath.Join(m.Dir, m.Plan.Modules[simt.Module].Files[0].Path))
	devs, err := drv.Open(m.Plan, m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return closedAtEnd(t)(executor.Load(m.Plan, devs))
}

// TestGPULibrarySteps compiles an MLP (f32), a transformer (tf32) and a
// CNN (f32) with cuBLAS and cuDNN offered and runs them on the fake
// driver's GPUs with the fake libraries, unmeasured: every group runs
// its library step (timed as a library call), the epilogues run on the GPU, and the
// outputs match the cpu runtime's plan, which runs the generated
// variants, under the mode's policy.
func TestGPULibrarySteps(t *testing.T) {
	drv, err := fakeDriver()
	if err != nil {
		t.Skip(err)
	}
	fakeLibrary(t, "TOFUC_LIBCUBLAS", fakecuda.BuildCUBLAS)
	fakeLibrary(t, "TOFUC_LIBCUDNN", fakecuda.BuildCUDNN)
	for _, e := range []modelcase.Case{
		{File: "mlp", Devices: 1, Classes: 10, Precision: precision.F32, Set: map[string]any{"batch": 16, "hidden": 64}},
		{File: "transformer", Devices: 1, Classes: 50, Precision: precision.TF32, Set: map[string]any{"hidden": 32, "seq": 8, "batch": 2, "vocab": 50}},
		{File: "cnn", Devices: 1, Classes: 10, Precision: precision.F32, Set: map[string]any{"batch": 2}},
	} {
		e.Backends = plan.GPUBackends
		m := compile(t, e)
		groups := len(m.Plan.Placement)
		if groups == 0 {
			t.Fatalf("%s: no placement group offered to cuBLAS", e)
		}
		want, err := hostRun(t, m, cpu.Kind.Name, m.Params)
		if err != nil {
			t.Fatal(err)
		}
		pr := onFakeGPUs(t, drv, m)
		pr.Unmeasured = true // the libraries in force (TestPlaceOnDevices measures)
		if len(pr.Notes) > 0 {
			t.Errorf("%s: %v", e, pr.Notes)
		}
		got, err := pr.Run(m.Inputs, m.Params)
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			if err := rounding.CompareModel(e.Precision, m.Depth, got[name], w); err != nil {
				t.Errorf("%s: output %s: %v", e, name, err)
			}
		}
		timing, err := pr.Bench(m.Inputs, m.Params, 1)
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]int{}
		for _, k := range timing.Kernels {
			if k.Kind == "library" {
				calls[k.Kernel]++
			}
		}
		if calls[plan.CUBLAS+" sgemm"]+calls[plan.CUDNN+" convolution"] != groups || e.File == "cnn" && calls[plan.CUDNN+" convolution"] == 0 {
			t.Errorf("%s: library calls timed %v, want one for each of the %d groups, cuDNN's among them in the CNN", e, calls, groups)
		}
	}
}

// TestGPULibraryRefused: where cuDNN offers no algorithm for a
// convolution, the program says so for each of its steps, runs that
// group's generated kernels, and the outputs match the cpu runtime's.
func TestGPULibraryRefused(t *testing.T) {
	drv, err := fakeDriver()
	if err != nil {
		t.Skip(err)
	}
	fakeLibrary(t, "TOFUC_LIBCUDNN", fakecuda.BuildCUDNN)
	t.Setenv("FAKECUDNN_NO_ALGORITHM", "1")
	m := compile(t, modelcase.Case{File: "cnn", Devices: 1, Classes: 10, Precision: precision.F32, Backends: []string{plan.CUDNN}, Set: map[string]any{"batch": 2}})
	want, err := hostRun(t, m, cpu.Kind.Name, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	pr := onFakeGPUs(t, drv, m)
	if len(pr.Notes) != len(m.Plan.Placement) || len(pr.Notes) == 0 || !strings.Contains(pr.Notes[0], "cuDNN offers no algorithm") {
		t.Errorf("notes %q, want one for each of the %d groups", pr.Notes, len(m.Plan.Placement))
	}
	got, err := pr.Run(m.Inputs, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	compareAll(t, "cnn", got, want, func(lang.DType) tensor.Tolerance { return rounding.ModelTolerance(precision.F32, m.Depth) })
	if placed := pr.Placement(); len(placed) != 0 {
		t.Errorf("placement timed %v with no library to run", placed)
	}
}

// TestPlaceOnDevices: on the fake GPUs, the first run times every
// group's cuBLAS step against its generated kernel and keeps the
// faster (Program.Placement): cuBLAS where each launch takes 50 ms more, the generated
// kernels where each product on cuBLAS does; the outputs stay the cpu
// runtime's either way. The model's products have no epilogue, so that
// a group on cuBLAS launches no kernel.
func TestPlaceOnDevices(t *testing.T) {
	drv, err := fakeDriver()
	if err != nil {
		t.Skip(err)
	}
	fakeLibrary(t, "TOFUC_LIBCUBLAS", fakecuda.BuildCUBLAS)
	m := compile(t, modelcase.Case{File: "products", Devices: 1, Precision: precision.F32, Backends: []string{plan.CUBLAS}, Source: `
model products(x: f32[32, 64]) {
    w1 = param f32[64, 48] init glorot()
    w2 = param f32[48, 40] init glorot()
    return matmul(matmul(x, w1), w2)
}`})
	want, err := hostRun(t, m, cpu.Kind.Name, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ slow, chosen string }{{"FAKECUDA_LAUNCH_DELAY_US", plan.CUBLAS}, {"FAKECUBLAS_DELAY_US", plan.Generated}} {
		t.Setenv(tc.slow, "50000")
		pr := onFakeGPUs(t, drv, m)
		got, err := pr.Run(m.Inputs, m.Params)
		if err != nil {
			t.Fatal(err)
		}
		choices := pr.Placement()
		if len(choices) != len(m.Plan.Placement) || len(choices) == 0 {
			t.Fatalf("%d choices for %d groups", len(choices), len(m.Plan.Placement))
		}
		for _, c := range choices {
			gen, lib := c.Millis[plan.Generated], c.Millis[plan.CUBLAS]
			if c.Chosen != tc.chosen || gen <= 0 || lib <= 0 {
				t.Errorf("%s: %s: %v, chose %s, want %s", tc.slow, c.Label, c.Millis, c.Chosen, tc.chosen)
			}
		}
		for name, w := range want {
			if err := rounding.CompareModel(precision.F32, m.Depth, got[name], w); err != nil {
				t.Errorf("%s: output %s: %v", tc.slow, name, err)
			}
		}
		t.Setenv(tc.slow, "")
	}
}

// TestIndexOutOfRange feeds a token id beyond the vocabulary: the error
// is the same on every device, word for word, and the host kernels' too.
// (One id only: with several, which failing thread reports first is up
// to the scheduling.)
func TestIndexOutOfRange(t *testing.T) {
	m := compile(t, examples[3])
	for _, x := range m.Inputs {
		x.SetFlat(x.Len()-3, 77) // vocab = 50
	}
	_, want := hostRun(t, m, cpu.Kind.Name, m.Params)
	if want == nil || !strings.Contains(want.Error(), "index 77 out of range [0, 50)") {
		t.Fatalf("the cpu backend accepts ids beyond the vocabulary: %v", want)
	}
	for name, pr := range programs(t, m) {
		_, err := pr.Run(m.Inputs, m.Params)
		if err == nil || err.Error() != want.Error() {
			t.Errorf("%s: got error %v\nwant %v", name, err, want)
		}
	}
}

// TestRefusals: plans the devices cannot run are refused when loaded,
// with the step named: an opaque step on a GPU (through the fake
// driver), more devices than the plan's.
func TestRefusals(t *testing.T) {
	m := compile(t, examples[0])
	opaque := *m.Plan
	out := m.Plan.Outputs[0].Tiles[0].Buffer // a step may write it
	call := &plan.OpaqueCall{Fn: "inverse", Shape: m.Plan.Buffers[out].Shape}
	opaque.Steps = [][]plan.Step{append([]plan.Step{{Op: plan.Opaque, To: out, Label: "inverse of m", Call: call}}, m.Plan.Steps[0]...)}
	open := func(p *plan.Plan, dir string, _ executor.Options) ([]executor.Device, error) {
		drv, err := fakeDriver()
		if err != nil {
			t.Skipf("no fake driver: %v", err)
		}
		t.Setenv("FAKECUDA_SIMT", filepath.Join(m.Dir, m.Plan.Modules[simt.Module].Files[0].Path))
		return drv.Open(p, dir)
	}
	for _, tc := range []struct {
		name string
		p    *plan.Plan
		open func(*plan.Plan, string, executor.Options) ([]executor.Device, error)
		devs int
		want string
	}{
		{"opaque", &opaque, open, 1, "device 0, step 0 (inverse of m): the opaque function inverse runs on a host"},
		{"devices", m.Plan, simt.Kind.Open, 2, "the plan runs on 1 devices, 2 given"},
	} {
		devs, err := tc.open(m.Plan, m.Dir, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for len(devs) < tc.devs {
			devs = append(devs, devs[0])
		}
		_, err = executor.Load(tc.p, devs)
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
	devs, err := simt.Kind.Open(m.Plan, m.Dir, executor.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if bw, err := executor.CopyBandwidth(devs[0], 1<<20, 3); err != nil || bw <= 0 {
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
	dirs, err := executor.CheckDirs(root)
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no checks under %s (%v)", root, err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if err := executor.RunCheck(dir, func(p *plan.Plan, dir string) ([]executor.Device, error) {
				return simt.Kind.Open(p, dir, executor.Options{Strict: true})
			}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDynamicShared: a tiled kernel whose stages take more than 48 KB
// (128 × 128 tiles in tf32, four stages: dynamic shared memory) is
// refused, naming it, by a GPU that gives a block less, and runs
// through the CUDA binding on the fake driver, which launches it only
// with its dynamic shared memory and once the binding has opted it in
// (cuFuncSetAttribute), equal to the emulated devices.
func TestDynamicShared(t *testing.T) {
	m := compile(t, modelcase.Case{File: "bmm", Devices: 1, Precision: precision.TF32,
		Source: "model bmm(a: f32[128, 128, 8], b: f32[128, 8, 128]) {\n    return batch_matmul(a, b)\n}\n"})
	k := m.Plan.Kernels[0]
	if len(m.Plan.Kernels) != 1 || !k.DynamicShared || k.Shared <= plan.MaxShared {
		t.Fatalf("kernels %+v, want one with more than %d bytes of dynamic shared memory", m.Plan.Kernels, plan.MaxShared)
	}
	drv, err := fakeDriver()
	if err != nil {
		t.Skipf("no fake driver: %v", err)
	}
	t.Setenv("FAKECUDA_SIMT", filepath.Join(m.Dir, m.Plan.Modules[simt.Module].Files[0].Path))
	t.Setenv("FAKECUDA_SHARED_OPTIN", fmt.Sprint(k.Shared-16))
	want := fmt.Sprintf("%d bytes of shared memory a block, the GPU gives at most %d", k.Shared, k.Shared-16)
	if _, err := drv.Open(m.Plan, m.Dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("on a GPU giving %d bytes: %v, want an error saying %q", k.Shared-16, err, want)
	}
	t.Setenv("FAKECUDA_SHARED_OPTIN", fmt.Sprint(plan.MaxDynamicShared))
	progs := programs(t, m)
	same, err := progs["simt"].Run(m.Inputs, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	got, err := progs["fake-cuda"].Run(m.Inputs, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	compareAll(t, "through the fake driver", got, same, exact)
}

// TestPlacedRebinding: a program whose products run on oneDNN's matmul
// primitive, their weights reordered once per binding of the
// parameters, computes with the parameters of each run: bound anew
// (other tensors), the weights are reordered again.
func TestPlacedRebinding(t *testing.T) {
	if _, err := hostlib.Open("onednn"); err != nil {
		t.Skip(err)
	}
	e := modelcase.Case{File: "mlp", Devices: 1, Classes: 10, Set: map[string]any{"batch": 64, "hidden": 256},
		Precision: precision.F32, Backends: []string{"onednn"}}
	m := compile(t, e)
	weighted := 0
	for _, s := range m.Plan.Steps[0] {
		if s.GEMM != nil && (m.Plan.HoldsParameter(s.GEMM.A.Buffer) || m.Plan.HoldsParameter(s.GEMM.B.Buffer)) {
			weighted++
		}
	}
	if weighted == 0 {
		t.Fatal("no product on oneDNN with a parameter as an operand")
	}
	for g := range m.Plan.Placement {
		m.Plan.Placement[g].Chosen = "onednn"
	}
	placed, err := executor.Open(m.Plan, m.Dir, cpu.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer placed.Close()
	second := map[string]*tensor.Tensor{}
	for name, p := range m.Params {
		q := p.Clone()
		for i := range q.Len() {
			q.SetFlat(i, 1.5*q.Flat(i)+0.01*float64(i%7))
		}
		second[name] = q
	}
	for run, params := range []map[string]*tensor.Tensor{m.Params, second, m.Params} {
		got, err := placed.Run(m.Inputs, params)
		if err != nil {
			t.Fatal(err)
		}
		for g := range m.Plan.Placement {
			m.Plan.Placement[g].Chosen = plan.Generated
		}
		want, err := hostRun(t, m, cpu.Kind.Name, params)
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			if err := rounding.CompareModel(precision.F32, m.Depth, got[name], w); err != nil {
				t.Errorf("run %d: output %s: %v", run, name, err)
			}
		}
	}
}
