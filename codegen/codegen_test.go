package codegen_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/codegen"
	"tofuc/codegen/toolchain"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/cpu"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

func loadExample(t *testing.T, name string, train bool, set map[string]ir.AttrValue) *ir.Graph {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.Load(filepath.Join(filepath.Dir(file), "..", "examples", name+".tdl"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Model("", set)
	if err != nil {
		t.Fatal(err)
	}
	if train {
		if g, _, err = autodiff.TrainingGraph(g, m, autodiff.TrainOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// modelFromSource checks the TDL source src and returns its only model's
// graph.
func modelFromSource(t *testing.T, src string) *ir.Graph {
	t.Helper()
	_, g, err := check.LoadModel(parser.Parse, "test.tdl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func attrs(kv ...any) map[string]ir.AttrValue {
	out := map[string]ir.AttrValue{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case int:
			out[kv[i].(string)] = ir.AttrValue{Kind: ir.AttrInt, Int: int64(v)}
		case bool:
			out[kv[i].(string)] = ir.AttrValue{Kind: ir.AttrBool, Bool: v}
		}
	}
	return out
}

// inEachMode compiles g with opts in the exact and the f32 modes, each
// in a subtest of its own and a folder of its own, and runs check on
// the result.
func inEachMode(t *testing.T, g *ir.Graph, opts codegen.Options, check func(t *testing.T, mode precision.Mode, c *codegen.Compiled, dir string)) {
	t.Helper()
	for _, mode := range []precision.Mode{precision.Exact, precision.F32} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			opts.Precision = mode
			c, err := codegen.Compile(g, dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			check(t, mode, c, dir)
		})
	}
}

func tools(t *testing.T) *toolchain.Tools {
	t.Helper()
	tl, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	return tl
}

// TestExamplesOnOneDevice compiles the examples (the MLP's and the RNN's
// training graphs, a Wide ResNet, the Transformer; the MLP also at 64
// rows, where layers chain) for one device and
// runs them on the cpu and simt runtimes against the interpreter.
func TestExamplesOnOneDevice(t *testing.T) {
	tl := tools(t)
	for _, tc := range []struct {
		name  string
		train bool
		set   map[string]ir.AttrValue
	}{
		{"mlp", false, attrs("batch", 4)},
		{"mlp", true, attrs("batch", 4, "hidden", 16)},
		{"mlp", false, nil}, // 64 rows: two layers chained in one launch
		{"mlp", true, attrs("batch", 64, "hidden", 16)},
		{"wresnet", false, attrs("batch", 1, "width", 1, "image", 32, "classes", 10)},
		{"rnn", true, attrs("batch", 2, "hidden", 32, "steps", 4)},
		{"transformer", false, attrs("hidden", 32, "seq", 8, "batch", 2, "vocab", 50)},
	} {
		g := loadExample(t, tc.name, tc.train, tc.set)
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Tools: tl})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Logf("%s: %+v", tc.name, c.Stats)
		matchInterp(t, tc.name, g, c.Plan, dir, true, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 4096) })
	}
}

// compileMatching compiles the model of src for every flavour and checks
// it on the cpu runtime and the emulator against the interpreter, sums
// reordered over at most depth terms; label names it in messages.
func compileMatching(t *testing.T, tl *toolchain.Tools, label, src string, depth int) *codegen.Compiled {
	t.Helper()
	g := modelFromSource(t, src)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Tools: tl})
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	matchInterp(t, label, g, c.Plan, dir, true, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, depth) })
	return c
}

// matchInterp runs g on the interpreter, and plan p (compiled from g into
// dir) on the cpu runtime and, with emulated, the SIMT emulator, on the
// same random inputs, and reports each output that differs from the
// interpreter's beyond the tolerance tol gives for its dtype.
func matchInterp(t *testing.T, label string, g *ir.Graph, p *plan.Plan, dir string, emulated bool, tol func(lang.DType) tensor.Tolerance) {
	t.Helper()
	in := examplegraph.RandomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range loadPlan(t, p, dir, emulated) {
		got, err := l.p.Run(in, want.Params)
		if err != nil {
			t.Fatalf("%s %s: %v", label, l.name, err)
		}
		for k, w := range want.Outputs {
			if err := tensor.Compare(got[k], w, tol(w.DType)); err != nil {
				t.Errorf("%s %s output %s: %v", label, l.name, k, err)
			}
		}
	}
}

// loaded is a compiled plan loaded on one runtime.
type loaded struct {
	name string
	p    *executor.Program
}

// loadPlan loads plan p, compiled into dir, on the cpu backend and, with
// emulated, on the SIMT emulator too; they are closed when the test ends.
func loadPlan(t *testing.T, p *plan.Plan, dir string, emulated bool) []loaded {
	t.Helper()
	kinds := []string{cpu.Kind.Name}
	if emulated {
		kinds = append(kinds, simt.Kind.Name)
	}
	var out []loaded
	for _, kind := range kinds {
		pr, err := executor.Open(p, dir, kind, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Close() })
		out = append(out, loaded{kind, pr})
	}
	return out
}

// loadStrict loads plan p on the cpu runtime's strict mode, which runs a
// device's queue only when it must and starts its memory as NaNs.
func loadStrict(t *testing.T, p *plan.Plan, dir string) loaded {
	t.Helper()
	pr, err := executor.Open(p, dir, cpu.Kind.Name, executor.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	return loaded{"cpu, strict", pr}
}

// runsEqual runs each loaded plan on the inputs and the parameters want
// started from, and compares every output with want's under the
// tolerance for reordered sums.
func runsEqual(t *testing.T, runs []loaded, inputs map[string]*tensor.Tensor, want *exec.Result) {
	t.Helper()
	for _, run := range runs {
		got, err := run.p.Run(inputs, want.Params)
		if err != nil {
			t.Fatalf("%s: %v", run.name, err)
		}
		for name, w := range want.Outputs {
			if err := tensor.Compare(got[name], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
				t.Errorf("%s: output %s: %v", run.name, name, err)
			}
		}
	}
}

// TestNegativeExtentIsAnError: a tensor whose extent comes out negative
// (a convolution's kernel taller than its padded input) is an error
// naming it when the plan is built, before anything is compiled or
// written, as on the interpreter; not an internal error of the plan.
func TestNegativeExtentIsAnError(t *testing.T) {
	g := modelFromSource(t, "model neg(x: f32[1, 3, 1, 5]) {\n    w = param f32[5, 3, 7, 3]\n    return conv2d(x, w)\n}\n")
	dir := filepath.Join(t.TempDir(), "out")
	_, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tools(t)})
	if err == nil || !strings.Contains(err.Error(), "negative extent") || strings.Contains(err.Error(), "internal error") {
		t.Fatalf("compiling a tensor of negative extent: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the failed compile wrote %s", dir)
	}
}

// TestFailedModuleIsKept: when a module's compile fails for one target,
// the compile fails naming the tool's message, and the module's text is
// kept where the error says, for the person reading it.
func TestFailedModuleIsKept(t *testing.T) {
	tl := *tools(t)
	fake := filepath.Join(t.TempDir(), "opt")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'opt: out of luck' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tl.Opt, tl.Cache = fake, nil // opt runs for the host and simt targets only
	g := loadExample(t, "mlp", false, attrs("batch", 4))
	failed := t.TempDir()
	_, err := codegen.Compile(g, t.TempDir(), codegen.Options{Tools: &tl, FailedDir: failed})
	if err == nil || !strings.Contains(err.Error(), "out of luck") || !strings.Contains(err.Error(), "failed.ll") {
		t.Fatalf("a compile whose opt fails: %v", err)
	}
	kept, _ := filepath.Glob(filepath.Join(failed, "kernels", "*.failed.ll"))
	if len(kept) == 0 {
		t.Fatal("no module kept")
	}
	text, err := os.ReadFile(kept[0])
	if err != nil || !strings.Contains(string(text), "define") {
		t.Errorf("the kept module %s: %d bytes, %v", kept[0], len(text), err)
	}
}
