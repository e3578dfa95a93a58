package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/emit"
	"tofuc/codegen/kernel"
	"tofuc/codegen/target"
	"tofuc/codegen/toolchain"
	"tofuc/lang/precision"
	"tofuc/pipeline"
	"tofuc/runtime/cpu"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/host"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// reversedForm is a toy kernel form: element-wise kernels computed from
// the last element to the first, on a GPU in a grid-stride loop of its
// own, on the host in a loop counting down.
type reversedForm struct{}

func (reversedForm) Name() string { return "reversed" }

func (reversedForm) Applies(k *kernel.Kernel, _ precision.Mode) bool {
	return k.Kind == kernel.Elementwise
}

func (reversedForm) Launch(k *kernel.Kernel, _ precision.Mode) emit.Launch {
	return emit.Launch{Grid: min((k.Elements+127)/128, 1000), Block: 128}
}

func (reversedForm) HostRange(k *kernel.Kernel) (items, grain int64) { return k.Elements, 1000 }

// GPU: thread t of the grid takes elements n-1-t, n-1-t-stride, ...
func (reversedForm) GPU(f *emit.Func) {
	b := f.Block()
	first := b.NewAdd(b.NewMul(f.Register(emit.BlockIndex), f.Register(emit.BlockThreads)), f.Register(emit.ThreadIndex))
	stride := b.NewMul(f.Register(emit.GridBlocks), f.Register(emit.BlockThreads))
	n := f.Kernel().Elements
	f.Loop(first, i64(n), stride, func(i value.Value) {
		f.Element(f.Block().NewSub(i64(n-1), i))
	})
}

// Host: items end-1 down to begin.
func (reversedForm) Host(f *emit.Func, begin, end value.Value) {
	b := f.Block()
	count := b.NewSub(end, begin)
	last := b.NewSub(end, i64(1))
	f.Loop(i64(0), count, i64(1), func(i value.Value) {
		f.Element(f.Block().NewSub(last, i))
	})
}

func i64(n int64) *constant.Int { return constant.NewInt(types.I64, n) }

// toyTarget is a toy target: the host flavour compiled without llc's
// optimisations, linked into toy-HASH.so.
type toyTarget struct{}

func (toyTarget) Name() string          { return "toy" }
func (toyTarget) Artefacts() []string   { return []string{"toy"} }
func (toyTarget) Machine() emit.Machine { return nil }

func (toyTarget) Compile(ctx context.Context, tools *toolchain.Tools, text string, _ []target.Kernel, _ target.Set) (target.Object, error) {
	return tools.Compile(ctx, []byte(text), toolchain.Target{Args: []string{"-O0", "-relocation-model=pic"}, Obj: true})
}

func (t toyTarget) Finish(ctx context.Context, tools *toolchain.Tools, dir string, objs []target.Object, _ target.Set) (plan.Module, bool, error) {
	return target.Link(ctx, tools, dir, t.Name(), objs, "")
}

// toyKind runs the toy target's shared object on host devices, with
// runtime/cpu's engine.
var toyKind = executor.Kind{Name: "toy", Module: "toy", Summary: "the toy target", Open: func(p *plan.Plan, dir string, opts executor.Options) ([]executor.Device, error) {
	e, err := cpu.NewHost(p, dir, "toy", opts.Threads)
	if err != nil {
		return nil, err
	}
	return host.Open(p, e, host.ModeOf(p.Devices, opts)), nil
}}

// TestRegistration adds a kernel form, a target and a kind of device
// through their registration points alone (emit.RegisterForm,
// target.Register, executor.Register: docs/architecture.md's
// checklists), compiles a model with them and runs it on the toy
// target and under the emulator: the element-wise kernels are in the
// new form, and the outputs equal the interpreter's.
func TestRegistration(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	checklistsName(t, emit.RegisterForm, target.Register, executor.Register)
	emit.RegisterForm(reversedForm{})
	target.Register(toyTarget{})
	executor.Register(toyKind)
	t.Cleanup(func() {
		emit.UnregisterForm(reversedForm{})
		target.Unregister(toyTarget{})
		executor.Unregister(toyKind.Name)
	})
	src := `model toy(x: f32[33, 70], y: f32[33, 70]) {
    w = param f32[70, 12] init glorot()
    h = tanh(x) * y + 1.0
    return matmul(h, w), exp(h)
}
`
	dir := t.TempDir()
	path := filepath.Join(dir, "toy.tdl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := pipeline.Load(path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pipeline.Compile(m, filepath.Join(dir, "plan"), pipeline.Options{Emit: []string{"toy", "simt"}, NoOptimize: true})
	if err != nil {
		t.Fatal(err)
	}
	reversed := 0
	for _, k := range res.Plan.Kernels {
		if k.Form == "reversed" {
			reversed++
		}
	}
	if reversed == 0 || len(res.Plan.Modules["toy"].Files) != 1 {
		t.Fatalf("%d kernels in the reversed form, toy module %v", reversed, res.Plan.Modules["toy"])
	}
	inputs := map[string]*tensor.Tensor{}
	for _, in := range m.Graph.Inputs {
		x := tensor.New(in.DType, []int{33, 70})
		for i := range x.Len() {
			x.SetFlat(i, float64(i%17)/8-1)
		}
		inputs[in.Name] = x
	}
	want, err := exec.Run(m.Graph, exec.Interp{}, inputs, res.Params, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{toyKind.Name, simt.Kind.Name} {
		pr, err := executor.Open(res.Plan, res.Dir, kind, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pr.Run(inputs, res.Params)
		pr.Close()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for name, w := range want.Outputs {
			if err := tensor.Compare(got[name], w, tensor.Reordered(w.DType, 70)); err != nil {
				t.Errorf("%s: output %s: %v", kind, name, err)
			}
		}
	}
}

// checklistsName checks that docs/architecture.md's checklists name the
// file of each registration function.
func checklistsName(t *testing.T, fns ...any) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, checklists, ok := strings.Cut(string(doc), "\n## Checklists\n")
	if !ok {
		t.Fatal("docs/architecture.md has no Checklists section")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range fns {
		f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
		file, _ := f.FileLine(f.Entry())
		rel, err := filepath.Rel(root, file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(checklists, "`"+filepath.ToSlash(rel)+"`") {
			t.Errorf("docs/architecture.md's checklists do not name %s, where %s is", rel, f.Name())
		}
	}
}
