package pipeline_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tofuc/lang/ir"
	"tofuc/pipeline"
	"tofuc/runtime/cpu"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// seqmix carries its batch in dimension 1 of x, and in blocks of three
// rows of its output; bias has no batch.
const seqmix = `model seqmix<batch = 2>(x: f32[3, batch, 4], bias: f32[4]) {
    w = param f32[4, 4]
    y = transpose<perm = [1, 0, 2]>(x)
    z = reshape<shape = [-1, 4]>(y)
    return softmax(matmul(z, w) + bias)
}
`

// A dynamic plan runs every batch size, compiled or not, in chunks and
// padded, with the interpreter's results at that size, on both host
// runtimes: exactly on simt (its kernels add in the interpreter's
// order), within the reordered-sum tolerance of the longest reduction
// (784) on cpu, whose contractions add in blocks (docs/testing.md).
func TestDynamicBatchMatchesInterpreter(t *testing.T) {
	dir := t.TempDir()
	seqPath := filepath.Join(dir, "seqmix.tdl")
	if err := os.WriteFile(seqPath, []byte(seqmix), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"../examples/mlp.tdl", seqPath} {
		out := filepath.Join(dir, filepath.Base(model)+".plan")
		d := pipeline.Dynamic{Symbol: "batch", Sizes: []int64{1, 4, 16}}
		res, err := pipeline.CompileDynamic(model, "", nil, d, out, pipeline.Options{Emit: []string{cpu.Kind.Module, simt.Kind.Module}})
		if err != nil {
			t.Fatal(err)
		}
		params := res.Results[0].Params
		for _, kind := range []string{cpu.Kind.Name, simt.Kind.Name} {
			r, err := dynamic.Open(out, dynamic.OnKind(kind, executor.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int64{1, 3, 4, 16, 21, 37} {
				m, err := pipeline.Load(model, "", map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: n}})
				if err != nil {
					t.Fatal(err)
				}
				inputs := randomInputs(m.Graph, n)
				want, err := exec.Run(m.Graph, exec.Interp{}, inputs, params, 0)
				if err != nil {
					t.Fatal(err)
				}
				got, err := r.Run(inputs, params)
				if err != nil {
					t.Fatalf("%s, batch %d: %v", kind, n, err)
				}
				for name, w := range want.Outputs {
					tol := tensor.Exact
					if kind == cpu.Kind.Name {
						tol = tensor.Reordered(w.DType, 784)
					}
					if err := tensor.Compare(got[name], w, tol); err != nil {
						t.Errorf("%s, %s, batch %d: output %s: %v", model, kind, n, name, err)
					}
				}
			}
			r.Close()
		}
	}
}

func randomInputs(g *ir.Graph, seed int64) map[string]*tensor.Tensor {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	out := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		shape := make([]int, len(v.Shape))
		for i, d := range v.Shape {
			n, _ := d.IsConst()
			shape[i] = int(n)
		}
		x := tensor.New(v.DType, shape)
		for i := range x.Len() {
			x.SetFlat(i, rng.Float64()*4-2)
		}
		out[v.Name] = x
	}
	return out
}

// Models that mix samples are refused before anything compiles, and a
// training plan or a partition with them.
func TestDynamicBatchRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		src  string
		opts pipeline.Options
		want string
	}{
		{"model m<batch = 4>(x: f32[batch, 8]) {\n    return softmax<axis = 0>(x)\n}\n", pipeline.Options{}, "cannot run a batch in parts"},
		{"model m<batch = 4>(x: f32[batch, 8]) {\n    return relu(x)\n}\n", pipeline.Options{Devices: 2}, "one device"},
		{"model m<batch = 4, scale = 2>(x: f32[batch, 8]) {\n    return relu(x)\n}\n", pipeline.Options{}, "no attribute or input extent size"},
	} {
		path := filepath.Join(dir, "m.tdl")
		if err := os.WriteFile(path, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		sym := "batch"
		if strings.Contains(tc.want, "size") {
			sym = "size"
		}
		_, err := pipeline.CompileDynamic(path, "", nil, pipeline.Dynamic{Symbol: sym, Sizes: []int64{1, 2}}, filepath.Join(dir, "out"), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.src, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "out", dynamic.ManifestFile)); err == nil {
			t.Errorf("%q: a refused compile wrote a manifest", tc.src)
		}
	}
}

// A dynamic plan whose files changed after the compile is refused when
// it opens or runs, naming the file: a size's plan, a kernel module of a
// size loaded later, the shared parameters.
func TestDynamicPlanFaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seqmix.tdl")
	if err := os.WriteFile(path, []byte(seqmix), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plan")
	res, err := pipeline.CompileDynamic(path, "", nil, pipeline.Dynamic{Symbol: "batch", Sizes: []int64{1, 2}}, out, pipeline.Options{Emit: []string{cpu.Kind.Module}})
	if err != nil {
		t.Fatal(err)
	}
	one, err := pipeline.Load(path, "", map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: 1}})
	if err != nil {
		t.Fatal(err)
	}
	inputs := randomInputs(one.Graph, 1)
	for _, tc := range []struct {
		file string
		want string
	}{
		{"batch-2/plan.json", "batch-2/plan.json is not the file the plan was compiled with"},
		{"batch-1/" + res.Results[0].Plan.Modules[cpu.Kind.Module].Files[0].Path, "is not the file the plan was compiled with"},
		{"params.npz", "params.npz is not the file the plan was compiled with"},
	} {
		full := filepath.Join(out, tc.file)
		good, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full+".new", append(slices.Clone(good), ' '), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(full+".new", full); err != nil { // the links to params.npz stay the old file
			t.Fatal(err)
		}
		err = runOnce(out, inputs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s changed: got %v, want an error saying %q", tc.file, err, tc.want)
		}
		if err := os.WriteFile(full, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := runOnce(out, inputs); err != nil {
		t.Fatalf("restored: %v", err)
	}
}

// runOnce opens the dynamic plan in dir on cpu and runs inputs (one
// sample: the size-1 plan, loaded after the largest).
func runOnce(dir string, inputs map[string]*tensor.Tensor) error {
	r, err := dynamic.Open(dir, dynamic.OnKind(cpu.Kind.Name, executor.Options{}))
	if err != nil {
		return err
	}
	defer r.Close()
	params, err := r.Params("")
	if err != nil {
		return err
	}
	_, err = r.Run(inputs, params)
	return err
}

// BenchmarkDynamicBatch is issue 34's check of a dynamic batch: one
// plan per model compiled with --dynamic at 1, 8, 64 and 256 runs
// batches of 1, 7, 64 and 256 on cpu and simt equal to the interpreter
// (as TestDynamicBatchMatchesInterpreter compares), and at 64 and 256
// it is timed against a plan compiled for that batch alone, the two
// alternating; it reports the median time of each and their ratio.
func BenchmarkDynamicBatch(b *testing.B) {
	dir := b.TempDir()
	for _, model := range []string{"../examples/mlp.tdl", "../examples/cnn.tdl"} {
		out := filepath.Join(dir, filepath.Base(model))
		d := pipeline.Dynamic{Symbol: "batch", Sizes: []int64{1, 8, 64, 256}}
		res, err := pipeline.CompileDynamic(model, "", nil, d, out, pipeline.Options{Emit: []string{cpu.Kind.Module, simt.Kind.Module}})
		if err != nil {
			b.Fatal(err)
		}
		params := res.Results[0].Params
		for _, kind := range []string{cpu.Kind.Name, simt.Kind.Name} {
			r, err := dynamic.Open(out, dynamic.OnKind(kind, executor.Options{}))
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range []int64{1, 7, 64, 256} {
				m, err := pipeline.Load(model, "", map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: n}})
				if err != nil {
					b.Fatal(err)
				}
				inputs := randomInputs(m.Graph, n)
				want, err := exec.Run(m.Graph, exec.Interp{}, inputs, params, 0)
				if err != nil {
					b.Fatal(err)
				}
				got, err := r.Run(inputs, params)
				if err != nil {
					b.Fatal(err)
				}
				for name, w := range want.Outputs {
					tol := tensor.Exact
					if kind == cpu.Kind.Name {
						tol = tensor.Reordered(w.DType, 784)
					}
					if err := tensor.Compare(got[name], w, tol); err != nil {
						b.Fatalf("%s, %s, batch %d: output %s: %v", model, kind, n, name, err)
					}
				}
				if n >= 64 {
					compareWithFixed(b, r, m, kind, inputs, params)
				}
			}
			r.Close()
		}
	}
}

// compareWithFixed times the dynamic plan against m compiled for its
// batch alone, alternating, and reports both medians and their ratio.
func compareWithFixed(b *testing.B, r *dynamic.Runner, m *pipeline.Model, kind string, inputs, params map[string]*tensor.Tensor) {
	res, err := pipeline.Compile(m, b.TempDir(), pipeline.Options{Emit: []string{cpu.Kind.Module, simt.Kind.Module}})
	if err != nil {
		b.Fatal(err)
	}
	fixed, err := executor.Open(res.Plan, res.Dir, kind, executor.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer fixed.Close()
	runs := 15
	if kind == simt.Kind.Name {
		runs = 7 // the emulator is slow
	}
	var dyn, fix []float64
	for range runs {
		for _, p := range []struct {
			run   func(in, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
			times *[]float64
		}{{r.Run, &dyn}, {fixed.Run, &fix}} {
			start := time.Now()
			if _, err := p.run(inputs, params); err != nil {
				b.Fatal(err)
			}
			*p.times = append(*p.times, time.Since(start).Seconds())
		}
	}
	slices.Sort(dyn)
	slices.Sort(fix)
	dm, fm := dyn[len(dyn)/2], fix[len(fix)/2]
	b.Logf("%s, %s, batch %s: dynamic %.3f ms, fixed %.3f ms, ratio %.3f", m.Graph.Name, kind, m.Graph.Inputs[0].Shape[0], dm*1e3, fm*1e3, dm/fm)
}

// A compile into a folder that held a dynamic plan of other sizes, or a
// plan of one size into one that held a dynamic plan, leaves only its
// own files and folders.
func TestDynamicPlanReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seqmix.tdl")
	if err := os.WriteFile(path, []byte(seqmix), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plan")
	opts := pipeline.Options{Emit: []string{cpu.Kind.Module}}
	for _, sizes := range [][]int64{{1, 2}, {3}} {
		if _, err := pipeline.CompileDynamic(path, "", nil, pipeline.Dynamic{Symbol: "batch", Sizes: sizes}, out, opts); err != nil {
			t.Fatal(err)
		}
	}
	entries := func() []string {
		var names []string
		list, _ := os.ReadDir(out)
		for _, e := range list {
			names = append(names, e.Name())
		}
		return names
	}
	if got := entries(); !slices.Equal(got, []string{"batch-3", "dynamic.json", "params.npz"}) {
		t.Errorf("after sizes 1, 2 then 3: %v", got)
	}
	m, err := pipeline.Load(path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Compile(m, out, opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range entries() {
		if name == "dynamic.json" || strings.HasPrefix(name, "batch-") {
			t.Errorf("a plan of one size left %s of the dynamic plan", name)
		}
	}
}

func TestParseDynamic(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []int64
	}{
		{"batch", pipeline.DefaultDynamicSizes},
		{"batch=64,1,8,8", []int64{1, 8, 64}},
		{"batch=1..100", []int64{1, 2, 4, 8, 16, 32, 64, 100}},
		{"batch=3..16", []int64{3, 4, 8, 16}},
		{"batch=5..5", []int64{5}},
	} {
		d, err := pipeline.ParseDynamic(tc.spec)
		if err != nil || d.Symbol != "batch" || !slices.Equal(d.Sizes, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.spec, d, err, tc.want)
		}
	}
	for _, bad := range []string{"", "=4", "batch=0", "batch=x", "batch=8..2", "batch=1..", "batch=-1,4"} {
		if d, err := pipeline.ParseDynamic(bad); err == nil {
			t.Errorf("%q gave %v", bad, d)
		}
	}
}
