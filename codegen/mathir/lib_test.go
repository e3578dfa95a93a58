package mathir

import (
	"bytes"
	"debug/elf"
	"sort"
	"strings"
	"testing"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"

	lir "tofuc/lang/ir"
)

// TestNames: the library has every element-wise function of TDL, with
// its arity, and fmod for float %.
func TestNames(t *testing.T) {
	names := Names()
	if !sort.StringsAreSorted(names) {
		t.Errorf("Names() not sorted: %v", names)
	}
	want := map[string]int{"fmod": 2}
	for n, a := range lir.MathFuncs {
		want[n] = a
	}
	if len(names) != len(want) {
		t.Errorf("Names() = %v, want the %d functions of lang/ir.MathFuncs and fmod", names, len(want))
	}
	for n, a := range want {
		if Arity(n) != a {
			t.Errorf("Arity(%q) = %d, want %d", n, Arity(n), a)
		}
	}
	if Arity("log1p") != 0 || Arity("nope") != 0 {
		t.Error("helpers and unknown names must have arity 0")
	}
}

func TestFuncOncePerModule(t *testing.T) {
	m := ir.NewModule()
	l := New(m)
	a, err := l.Func("tanh")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l.Func("tanh")
	c, _ := New(m).Func("tanh") // a second Lib of the same module
	if a != b || a != c {
		t.Error("Func defined tanh twice")
	}
	if _, err := l.Func("sinc"); err == nil || !strings.Contains(err.Error(), `"sinc"`) {
		t.Errorf("Func(sinc): error %v, want one naming it", err)
	}
	if _, err := l.Func("log1p"); err == nil {
		t.Error("Func offers the helper log1p")
	}
	for _, n := range Names() {
		if _, err := l.Func(n); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, f := range m.Funcs {
		if seen[f.Name()] {
			t.Errorf("%s defined twice", f.Name())
		}
		seen[f.Name()] = true
	}
}

// allowed are the only intrinsics the library may call: single
// instructions on sm_80 and on x86-64 with SSE4.1.
var allowed = map[string]bool{
	"llvm.sqrt.f64": true, "llvm.fabs.f64": true, "llvm.copysign.f64": true, "llvm.floor.f64": true,
	"llvm.ceil.f64": true, "llvm.trunc.f64": true, "llvm.rint.f64": true,
}

// TestModuleShape: the whole library is deterministic, internal,
// self-contained (declarations are allowed intrinsics only) and uses no
// address space.
func TestModuleShape(t *testing.T) {
	build := func() *ir.Module {
		m := ir.NewModule()
		l := New(m)
		for _, n := range Names() {
			l.Func(n)
		}
		return m
	}
	m := build()
	text := m.String()
	if text != build().String() {
		t.Error("two builds of the library differ")
	}
	for _, f := range m.Funcs {
		switch {
		case f.Blocks == nil && !allowed[f.Name()]:
			t.Errorf("declares %s, which is no allowed intrinsic", f.Name())
		case f.Blocks != nil && (!strings.HasPrefix(f.Name(), Prefix) || f.Linkage != enum.LinkageInternal):
			t.Errorf("%s: want an internal function named %s*", f.Name(), Prefix)
		}
	}
	if strings.Contains(text, "addrspace") {
		t.Error("the library uses an address space")
	}
}

// TestHostObjectSelfContained: the host object refers to no symbol it
// does not define (no libm).
func TestHostObjectSelfContained(t *testing.T) {
	h := loadHost(t)
	f, err := elf.NewFile(bytes.NewReader(h.obj))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF && s.Name != "" {
			t.Errorf("host object needs %s", s.Name)
		}
	}
}

// TestSharesDeclarations: an intrinsic the module's other code declared
// before is used, not declared again.
func TestSharesDeclarations(t *testing.T) {
	m := ir.NewModule()
	l := New(m)
	fabs := m.NewFunc("llvm.fabs.f64", types.Double, ir.NewParam("", types.Double))
	if _, err := l.Func("atan"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range m.Funcs {
		if f.Name() == fabs.Name() {
			n++
		}
	}
	if n != 1 {
		t.Errorf("llvm.fabs.f64 declared %d times", n)
	}
}
