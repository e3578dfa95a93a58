package mathir

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
	"golang.org/x/sys/cpu"
)

// Prefix starts the name of every function and global the library
// defines (a GPU target's assembler may write the dots as `_$_`).
const Prefix = "tofuc.math."

// Lib adds TDL's math functions to an llir module on demand.
type Lib struct {
	m     *ir.Module
	funcs map[string]*ir.Func // by LLVM name: the library's and intrinsics
	// NativeFMA makes the library round a*b+c once with llvm.fma.f64,
	// one instruction on a target that has it (every sm_80 GPU; a host
	// CPU with FMA), instead of emulating it with plain double
	// operations. Both give the same bits; the instruction is faster.
	// Set it before the first Func.
	NativeFMA bool
}

// New returns the library of module m. Functions the module has (from
// another Lib of the same module, or intrinsics its other code
// declared) are reused, not declared again.
func New(m *ir.Module) *Lib {
	return &Lib{m: m, funcs: map[string]*ir.Func{}}
}

// HostHasFMA reports whether this machine's CPU has a fused multiply-add
// instruction, so that llc compiles llvm.fma.f64 to it for the host
// rather than to a call of libm's fma.
func HostHasFMA() bool {
	switch runtime.GOARCH {
	case "amd64":
		return cpu.X86.HasFMA
	case "arm64":
		return true // part of the base architecture
	}
	return false
}

// lookup finds the module's function of that LLVM name.
func (l *Lib) lookup(name string) *ir.Func {
	if f, ok := l.funcs[name]; ok {
		return f
	}
	for _, f := range l.m.Funcs {
		if f.Name() == name {
			l.funcs[name] = f
			return f
		}
	}
	return nil
}

// Func returns the module's internal function `double
// @tofuc.math.NAME(double[, double])`, defining it (and any helper it
// calls) on first use, once per module.
func (l *Lib) Func(name string) (*ir.Func, error) {
	if d, ok := defs[name]; !ok || d.helper {
		return nil, fmt.Errorf("mathir: unknown math function %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return l.define(name), nil
}

// FuncConstY returns the module's internal function `double
// @tofuc.math.NAME.y<bits>(double)`: the two-argument function name with
// its second argument fixed at y, defined on first use. Its body is
// name's with y a constant, which pow turns into code without a branch
// (powConstY), so that a loop calling it can be vectorised; the bits are
// Func's.
func (l *Lib) FuncConstY(name string, y float64) (*ir.Func, error) {
	if d, ok := defs[name]; !ok || d.helper || len(d.params) != 2 {
		return nil, fmt.Errorf("mathir: %q is not a function of two arguments", name)
	}
	full := fmt.Sprintf("%s%s.y%016x", Prefix, name, math.Float64bits(y))
	if f := l.lookup(full); f != nil {
		return f, nil
	}
	x := ir.NewParam("a0", types.Double)
	f := l.m.NewFunc(full, types.Double, x)
	f.Linkage = enum.LinkageInternal
	f.FuncAttrs = append([]ir.FuncAttribute(nil), attrs...)
	l.funcs[full] = f
	g := &fnb{l: l, f: f}
	g.b = f.NewBlock("")
	g.b.NewRet(defs[name].body(g, []value.Value{x, g.k(y)}))
	return f, nil
}

// Arity is the number of double arguments of the function name, 0 for
// a name the library does not have.
func Arity(name string) int {
	if d, ok := defs[name]; ok && !d.helper {
		return len(d.params)
	}
	return 0
}

// Names returns every supported name, sorted.
func Names() []string {
	var names []string
	for n, d := range defs {
		if !d.helper {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// def is how to build one function.
type def struct {
	params []types.Type // nil: one double
	ret    types.Type   // nil: double
	helper bool         // used by other functions, not offered by Func
	body   func(g *fnb, args []value.Value) value.Value
}

// defs holds every function, filled in init: bodies call other
// functions through it.
var defs map[string]def

func unary(body func(g *fnb, x value.Value) value.Value) def {
	return def{params: []types.Type{types.Double}, body: func(g *fnb, a []value.Value) value.Value { return body(g, a[0]) }}
}

func binary(body func(g *fnb, x, y value.Value) value.Value) def {
	return def{params: []types.Type{types.Double, types.Double}, body: func(g *fnb, a []value.Value) value.Value { return body(g, a[0], a[1]) }}
}

func helper(d def) def {
	d.helper = true
	return d
}

func init() {
	defs = map[string]def{
		// basic.go
		"sqrt":       unary(func(g *fnb, x value.Value) value.Value { return g.sqrt(x) }),
		"rsqrt":      unary(func(g *fnb, x value.Value) value.Value { return g.div(g.k(1), g.sqrt(x)) }),
		"abs":        unary(func(g *fnb, x value.Value) value.Value { return g.fabs(x) }),
		"floor":      unary(func(g *fnb, x value.Value) value.Value { return g.floor(x) }),
		"ceil":       unary(func(g *fnb, x value.Value) value.Value { return g.ceil(x) }),
		"round":      unary(func(g *fnb, x value.Value) value.Value { return g.rint(x) }),
		"reciprocal": unary(func(g *fnb, x value.Value) value.Value { return g.div(g.k(1), x) }),
		"sign":       unary(sign),
		"isnan":      unary(func(g *fnb, x value.Value) value.Value { return g.sel(g.isNaN(x), g.k(1), g.k(0)) }),
		"isinf":      unary(func(g *fnb, x value.Value) value.Value { return g.sel(g.isInf(x, 0), g.k(1), g.k(0)) }),
		"max":        binary(max64),
		"min":        binary(min64),
		"fmod":       binary(fmod),
		// exp.go, log.go
		"exp":     unary(exp),
		"log":     unary(log),
		"log1p":   helper(unary(log1p)),
		"sigmoid": unary(sigmoid),
		"pow":     binary(pow),
		// hyperbolic.go
		"tanh":  unary(tanh),
		"sinh":  unary(sinh),
		"cosh":  unary(cosh),
		"asinh": unary(asinh),
		"acosh": unary(acosh),
		"atanh": unary(atanh),
		"erf":   unary(erf),
		// trig.go
		"sin":        unary(sin),
		"cos":        unary(cos),
		"tan":        unary(tan),
		"trigreduce": helper(trigReduceDef()),
		"asin":       unary(asin),
		"acos":       unary(acos),
		"atan":       unary(atan),
		"atan2":      binary(atan2),
	}
}

// attrs are the attributes of every library function: pure, no
// exceptions, and every input returns (loops are bounded).
var attrs = []ir.FuncAttribute{enum.FuncAttrReadNone, enum.FuncAttrNoUnwind, enum.FuncAttrWillReturn}

// define returns the function or helper name, defining it on first use.
func (l *Lib) define(name string) *ir.Func {
	if f := l.lookup(Prefix + name); f != nil {
		return f
	}
	d := defs[name]
	ret := d.ret
	if ret == nil {
		ret = types.Double
	}
	var params []*ir.Param
	var args []value.Value
	for i, t := range d.params {
		p := ir.NewParam(fmt.Sprintf("a%d", i), t)
		params = append(params, p)
		args = append(args, p)
	}
	f := l.m.NewFunc(Prefix+name, ret, params...)
	f.Linkage = enum.LinkageInternal
	f.FuncAttrs = append([]ir.FuncAttribute(nil), attrs...)
	l.funcs[f.Name()] = f
	g := &fnb{l: l, f: f}
	g.b = f.NewBlock("")
	g.b.NewRet(d.body(g, args))
	return f
}

// intrinsic returns the declaration of llvm.NAME.f64 with n double
// arguments.
func (l *Lib) intrinsic(name string, n int) *ir.Func {
	full := "llvm." + name + ".f64"
	if f := l.lookup(full); f != nil {
		return f
	}
	var params []*ir.Param
	for i := 0; i < n; i++ {
		params = append(params, ir.NewParam("", types.Double))
	}
	f := l.m.NewFunc(full, types.Double, params...)
	f.FuncAttrs = []ir.FuncAttribute{enum.FuncAttrNoUnwind, enum.FuncAttrReadNone}
	l.funcs[full] = f
	return f
}
