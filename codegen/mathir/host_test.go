package mathir

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/toolchain"
)

// tested are the functions the tests compile: every name and the
// log1p helper (which Go exports, so it has a reference too).
func tested() []string { return append(Names(), "log1p") }

// testModule is a module with the whole library and, per function
// NAME, two exported wrappers: `double one_NAME(double[, double])` and
// `void vec_NAME(double* x, double* y, double* out, i64 n)`, which maps
// the function over arrays (y unused by unary functions).
func testModule(nativeFMA bool) *ir.Module {
	m := ir.NewModule()
	l := New(m)
	l.NativeFMA = nativeFMA
	for _, name := range tested() {
		f := l.define(name)
		one := m.NewFunc("one_"+name, types.Double, paramsOf(f)...)
		b := one.NewBlock("")
		var args []value.Value
		for _, p := range one.Params {
			args = append(args, p)
		}
		b.NewRet(b.NewCall(f, args...))
		vecWrapper(m, name, f)
	}
	return m
}

func paramsOf(f *ir.Func) []*ir.Param {
	var ps []*ir.Param
	for _, p := range f.Params {
		ps = append(ps, ir.NewParam("", p.Typ))
	}
	return ps
}

// vecWrapper defines vec_NAME: for i in [0, n): out[i] = f(x[i][, y[i]]).
func vecWrapper(m *ir.Module, name string, f *ir.Func) {
	ptr := types.NewPointer(types.Double)
	x, y, out, n := ir.NewParam("x", ptr), ir.NewParam("y", ptr), ir.NewParam("out", ptr), ir.NewParam("n", types.I64)
	w := m.NewFunc("vec_"+name, types.Void, x, y, out, n)
	entry, head, body, exit := w.NewBlock(""), w.NewBlock(""), w.NewBlock(""), w.NewBlock("")
	entry.NewBr(head)
	zero := &ir.Incoming{X: constant.NewInt(types.I64, 0), Pred: entry}
	i := head.NewPhi(zero)
	head.NewCondBr(head.NewICmp(enum.IPredSLT, i, n), body, exit)
	args := []value.Value{body.NewLoad(types.Double, body.NewGetElementPtr(types.Double, x, i))}
	if len(f.Params) == 2 {
		args = append(args, body.NewLoad(types.Double, body.NewGetElementPtr(types.Double, y, i)))
	}
	body.NewStore(body.NewCall(f, args...), body.NewGetElementPtr(types.Double, out, i))
	i.Incs = append(i.Incs, &ir.Incoming{X: body.NewAdd(i, constant.NewInt(types.I64, 1)), Pred: body})
	body.NewBr(head)
	exit.NewRet(nil)
}

// hostLib is the test module compiled for the host and loaded.
type hostLib struct {
	one1 map[string]func(float64) float64
	one2 map[string]func(float64, float64) float64
	vec  map[string]func(x, y, out *float64, n int64)
	obj  []byte // the host object
}

// hostBuild is the test module of one FMA setting, compiled once per
// test binary.
type hostBuild struct {
	once sync.Once
	lib  *hostLib
	skip string // why the tests cannot run here
	err  error
}

var hosts [2]hostBuild // emulated FMA, native FMA

// loadHost compiles and loads the test module with emulated FMA once per
// test binary; it skips the test where llc-14 or a C compiler is missing.
func loadHost(t testing.TB) *hostLib { return loadHostFMA(t, false) }

// loadHostFMA is loadHost for either FMA setting; native FMA needs a CPU
// that has it.
func loadHostFMA(t testing.TB, native bool) *hostLib {
	t.Helper()
	if native && !HostHasFMA() {
		t.Skip("this CPU has no fused multiply-add")
	}
	h := &hosts[0]
	if native {
		h = &hosts[1]
	}
	h.once.Do(func() { h.lib, h.skip, h.err = buildHost(native) })
	if h.skip != "" {
		t.Skip(h.skip)
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	return h.lib
}

func buildHost(nativeFMA bool) (*hostLib, string, error) {
	tools, err := toolchain.Find()
	if err != nil {
		return nil, "needs llc-14 and a C compiler: " + err.Error(), nil
	}
	text := []byte(testModule(nativeFMA).String())
	h := &hostLib{
		one1: map[string]func(float64) float64{},
		one2: map[string]func(float64, float64) float64{},
		vec:  map[string]func(x, y, out *float64, n int64){},
	}
	handle, obj, err := openHost(tools, text)
	if err != nil {
		return nil, "", err
	}
	h.obj = obj
	for _, name := range tested() {
		var vec func(x, y, out *float64, n int64)
		purego.RegisterLibFunc(&vec, handle, "vec_"+name)
		h.vec[name] = vec
		if len(defs[name].params) == 1 {
			var f func(float64) float64
			purego.RegisterLibFunc(&f, handle, "one_"+name)
			h.one1[name] = f
		} else {
			var f func(float64, float64) float64
			purego.RegisterLibFunc(&f, handle, "one_"+name)
			h.one2[name] = f
		}
	}
	return h, "", nil
}

// openHost compiles module text for the host, links it and loads it,
// returning its handle and object.
func openHost(tools *toolchain.Tools, text []byte) (uintptr, []byte, error) {
	ctx := context.Background()
	obj, err := tools.Compile(ctx, text, toolchain.Host)
	if err != nil {
		return 0, nil, err
	}
	so, err := tools.Link(ctx, [][]byte{obj}, nil)
	if err != nil {
		return 0, nil, err
	}
	dir, err := os.MkdirTemp("", "mathir-test-")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(dir) // the mapping stays
	path := filepath.Join(dir, "mathir.so")
	if err := os.WriteFile(path, so, 0o644); err != nil {
		return 0, nil, err
	}
	handle, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, nil, fmt.Errorf("dlopen %s: %v", path, err)
	}
	return handle, obj, nil
}

// apply evaluates name on the inputs (ys ignored for unary functions).
func (h *hostLib) apply(name string, xs, ys []float64) []float64 {
	out := make([]float64, len(xs))
	if len(xs) == 0 {
		return out
	}
	if ys == nil {
		ys = xs
	}
	h.vec[name](&xs[0], &ys[0], &out[0], int64(len(xs)))
	return out
}
