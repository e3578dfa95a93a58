package codegen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"tofuc/analysis/rounding"

	"tofuc/internal/modelcase"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/pipeline"
	"tofuc/runtime/cpu"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// gpuCheckModels are the models a GPU machine checks, each on 1 and 4
// devices: the MLP's and the RNN's training graphs, the MLP's forward
// pass (on one device its first two layers are a chained launch), Wide
// ResNet-50-2's and the Transformer's forward passes (the training
// graphs' outputs, the updated weights, would make the checks too large
// to carry; the Transformer's attention buffers its scores a row at a
// time).
var gpuCheckModels = []modelcase.Case{
	{File: "mlp", Train: true, Set: map[string]any{"batch": 32, "hidden": 256}},
	{File: "mlp", Set: map[string]any{"batch": 300, "hidden": 384}},
	{File: "transformer", Set: map[string]any{"hidden": 64, "seq": 64, "batch": 2, "vocab": 100}},
	{File: "wresnet", Set: map[string]any{"depth": 50, "width": 2, "batch": 2, "image": 64, "classes": 10}},
	{File: "rnn", Train: true, Set: map[string]any{"layers": 2, "hidden": 64, "steps": 8, "batch": 8, "classes": 10}},
}

// gpuCheckPipelines are the pipeline plans a GPU machine checks, on 4
// devices: the small multi-modal example's training graph, whose
// GraphPipe plan runs its branches on devices of their own.
var gpuCheckPipelines = []modelcase.Case{
	{File: "multimodal", Train: true, Pipeline: true, Devices: 4, Classes: 2, Set: map[string]any{"layers": 1, "hidden": 16, "heads": 2, "batch": 8,
		"vocab": 50, "text_len": 6, "patches": 4, "patch_dim": 12, "frames": 5, "mel": 7, "classes": 2}},
}

// TestWriteGPUChecks writes into $TOFUC_GPU_CHECKS the plans that a GPU
// machine checks (docs/gpu.md), each folder a compiled plan (PTX, host
// and SIMT modules) with a executor.Check of the cpu runtime's outputs: the
// stdlib-wide compilation of every pass of TestStdlibCompiles (its PTX
// is what ptxas checks there) but for the operators calling opaque
// functions (cholesky, inverse: they run on a host), and gpuCheckModels
// on 1 and 4 devices, their inputs and weights executor.Filled's.
// Without $TOFUC_GPU_CHECKS it is skipped.
//
// The tolerance of an output is twice the one the tests hold the
// runtimes to against the interpreter: the cpu runtime and the GPU each
// keep within it, in directions of their own.
func TestWriteGPUChecks(t *testing.T) {
	root := os.Getenv("TOFUC_GPU_CHECKS")
	if root == "" {
		t.Skip("$TOFUC_GPU_CHECKS names no folder to write the checks into")
	}
	tools(t) // or skip
	emit := []string{"ptx", "host", "simt"}
	for _, ps := range []struct {
		dt    lang.DType
		large bool
		prec  precision.Mode
	}{{lang.F32, false, precision.Exact}, {lang.F32, true, precision.Exact}, {lang.F64, false, precision.Exact}, {lang.F16, false, precision.Exact},
		{lang.BF16, false, precision.Exact}, {lang.I32, false, precision.Exact}, {lang.I8, false, precision.Exact}, {lang.U8, false, precision.Exact},
		{lang.I64, false, precision.Exact}, {lang.Bool, false, precision.Exact}, {lang.F32, false, precision.F32}, {lang.F32, true, precision.F32},
		{lang.F32, false, precision.TF32}, {lang.F32, false, precision.BF16}, {lang.F32, false, precision.F16}} {
		name := "stdlib-" + ps.dt.String()
		if ps.large {
			name += "-large"
		}
		if ps.prec != precision.Exact {
			name += "-" + ps.prec.String()
		}
		t.Run(name, func(t *testing.T) {
			cases, _ := lowerable(stdlibCases(t, ps.dt, ps.large))
			cases = slices.DeleteFunc(cases, func(tc opTest) bool { return tc.c.Inst.CallsOpaque() })
			if ps.prec.FactorRounding() > 0 { // what differs from f32: the contractions
				cases = contractions(t, cases)
			}
			dir := freshDir(t, filepath.Join(root, name))
			// Each operator alone: the verified rewrites would change
			// what is checked.
			c, err := pipeline.Compile(&pipeline.Model{Graph: graphOf(cases)}, dir, pipeline.Options{NoOptimize: true, Emit: emit, Precision: ps.prec})
			if err != nil {
				t.Fatal(err)
			}
			check := &executor.Check{Inputs: map[string]*tensor.Tensor{}, Params: map[string]*tensor.Tensor{}, Tolerance: map[string]tensor.Tolerance{}, Bounds: map[string]*tensor.Tensor{}}
			for _, tc := range cases {
				for i, x := range tc.c.Inputs {
					check.Inputs[fmt.Sprintf("%s.in%d", tc.name, i)] = x
				}
				if ps.prec.InF32() {
					addBounds(t, check, tc, ps.prec)
					continue
				}
				for i, w := range tc.c.Want {
					check.Tolerance[fmt.Sprintf("%s.out%d", tc.name, i)] = twice(tensor.Reordered(w.DType, rounding.ReductionLength(tc.c.Inst)))
				}
			}
			writeCheck(t, c.Plan, dir, check)
		})
	}
	var models []modelcase.Case
	for _, m := range gpuCheckModels {
		for _, run := range []struct {
			devices int
			prec    precision.Mode
		}{{1, precision.Exact}, {4, precision.Exact}, {1, precision.F32}, {1, precision.TF32}, {1, precision.BF16}, {1, precision.F16}} {
			m.Devices, m.Precision = run.devices, run.prec
			models = append(models, m)
		}
	}
	for _, m := range append(models, gpuCheckPipelines...) {
		t.Run(m.String(), func(t *testing.T) {
			dir := freshDir(t, filepath.Join(root, m.String()))
			c, err := m.Compile(dir, emit)
			if err != nil {
				t.Fatal(err)
			}
			check := &executor.Check{Inputs: executor.Filled(c.Plan.Inputs), Params: executor.Filled(c.Plan.Params), Filled: true, Tolerance: map[string]tensor.Tolerance{}}
			for _, b := range c.Plan.Outputs {
				tol := tensor.Reordered(lang.ParseDType(b.DType), 1<<12)
				if m.Precision.InF32() {
					tol = rounding.ModelTolerance(m.Precision, c.Depth)
				}
				check.Tolerance[b.Name] = twice(tol)
			}
			writeCheck(t, c.Plan, dir, check)
		})
	}
}

// addBounds gives the outputs of a case compiled in mode p (one that
// computes in f32) their elements' rounding bounds, twice over (the cpu
// runtime and the GPU each within them of the interpreter, in directions
// of their own).
func addBounds(t *testing.T, check *executor.Check, tc opTest, p precision.Mode) {
	t.Helper()
	e, err := rounding.Expect(tc.c.Inst, tc.c.Inputs, p)
	if err != nil {
		t.Fatalf("%s: %v", tc.name, err)
	}
	for i, b := range e.Bounds {
		twice := tensor.New(lang.F64, b.Shape)
		for k := range b.Len() {
			twice.SetFlat(k, 2*rounding.U*b.Flat(k))
		}
		check.Bounds[fmt.Sprintf("%s.out%d", tc.name, i)] = twice
	}
}

// freshDir empties dir of an earlier run's files.
func freshDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func twice(tol tensor.Tolerance) tensor.Tolerance {
	return tensor.Tolerance{Rel: 2 * tol.Rel, Abs: 2 * tol.Abs}
}

// writeCheck runs the plan in dir on the cpu runtime for the check's
// expected outputs and writes the check.
func writeCheck(t *testing.T, p *plan.Plan, dir string, check *executor.Check) {
	t.Helper()
	prog, err := executor.Open(p, dir, cpu.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if check.Want, err = prog.Run(check.Inputs, check.Params); err != nil {
		t.Fatal(err)
	}
	if err := check.Write(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d kernels in %d PTX modules, %d outputs", dir, len(p.Kernels), len(p.Modules["nvptx"].Files), len(check.Want))
}
