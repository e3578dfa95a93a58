package codegen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"math/rand/v2"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/rounding"
	"tofuc/analysis/schedule"
	"tofuc/codegen"
	"tofuc/codegen/emit"
	"tofuc/codegen/kernel"
	"tofuc/codegen/target"
	"tofuc/internal/opcase"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// opTest is one instance to compile and run, with its inputs and the
// interpreter's outputs.
type opTest struct {
	name string
	c    *opcase.Case
}

// stdlibCases instantiates every stdlib operator on random shapes, and
// every backward operator derived from it, in dtype dt (f32: every
// operator; other dtypes: the operators that accept them).
func stdlibCases(t *testing.T, dt lang.DType, large bool) []opTest {
	ops, names, err := opcase.Stdlib()
	if err != nil {
		t.Fatal(err)
	}
	var out []opTest
	for _, name := range names {
		c, err := opcase.New(ops[name], opcase.Options{Any: dt, Float: floatOr(dt), Large: large})
		if name == "cholesky" && dt == lang.F32 {
			c, err = choleskyCase(ops[name])
		}
		if err != nil {
			if dt == lang.F32 && !large {
				t.Logf("%s: not instantiated: %v", name, err)
			}
			continue
		}
		out = append(out, opTest{name, c})
		if dt != lang.F32 {
			continue
		}
		backs, wrt, err := autodiff.Backward(c.Inst)
		if err != nil {
			t.Logf("%s: no backward operators: %v", name, err)
			continue
		}
		for i, b := range backs {
			bc, err := opcase.FromInstance(b, uint64(i))
			if err != nil {
				t.Logf("%s: backward %d not evaluated: %v", name, wrt[i], err)
				continue
			}
			out = append(out, opTest{fmt.Sprintf("%s.grad%d", name, wrt[i]), bc})
		}
	}
	return out
}

// choleskyCase is cholesky on a batch of positive-definite matrices
// M·Mᵀ + 4·I (random inputs are not).
func choleskyCase(op *lang.OpDecl) (*opcase.Case, error) {
	const b, n = 3, 4
	dims := []lang.Dim{lang.Const(b), lang.Const(n), lang.Const(n)}
	inst, err := check.Instantiate(op, nil, []check.TensorType{{DType: lang.F32, Shape: dims}}, op.Pos)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(7, 8))
	m := make([]float64, b*n*n)
	for i := range m {
		m[i] = r.NormFloat64()
	}
	a := tensor.New(lang.F32, []int{b, n, n})
	for k := range b {
		for i := range n {
			for j := range n {
				v := 0.0
				for l := range n {
					v += m[k*n*n+i*n+l] * m[k*n*n+j*n+l]
				}
				if i == j {
					v += 4
				}
				a.SetFlat(k*n*n+i*n+j, v)
			}
		}
	}
	want, err := interp.EvalInstance(inst, []*tensor.Tensor{a}, nil)
	if err != nil {
		return nil, err
	}
	return &opcase.Case{Inst: inst, Inputs: []*tensor.Tensor{a}, Want: want}, nil
}

func floatOr(dt lang.DType) lang.DType {
	if dt.IsFloat() {
		return dt
	}
	return lang.F32
}

// graphOf puts every case in one graph of independent nodes, so that one
// compilation covers them all.
func graphOf(cases []opTest) *ir.Graph {
	g := &ir.Graph{Name: "stdlib"}
	for _, tc := range cases {
		n := &ir.Node{Name: tc.name, Inst: tc.c.Inst}
		for i, in := range tc.c.Inst.Inputs {
			v := &ir.Value{Name: fmt.Sprintf("%s.in%d", tc.name, i), DType: in.DType, Shape: in.Shape}
			g.Inputs = append(g.Inputs, v)
			n.Inputs = append(n.Inputs, v)
		}
		for i, d := range tc.c.Inst.Outputs {
			v := &ir.Value{Name: fmt.Sprintf("%s.out%d", tc.name, i), DType: d.Tensor.DType, Shape: d.Tensor.Shape}
			n.Outputs = append(n.Outputs, v)
			g.Outputs = append(g.Outputs, v)
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g
}

// lowerable splits cases into those whose every kernel lowers and the
// errors of the others.
func lowerable(cases []opTest) (ok []opTest, errs []string) {
	for _, tc := range cases {
		if err := lowerInstance(tc.c.Inst); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", tc.name, err))
			continue
		}
		ok = append(ok, tc)
	}
	return ok, errs
}

// contractions are the cases one of whose kernels is a contraction
// (kernel.GEMM).
func contractions(t *testing.T, cases []opTest) []opTest {
	var out []opTest
	for _, tc := range cases {
		ks, err := kernelsOf(tc.c.Inst)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if slices.ContainsFunc(ks, func(k *kernel.Kernel) bool { return k.GEMM != nil }) {
			out = append(out, tc)
		}
	}
	return out
}

// kernelsOf builds the kernels of an instance's schedule, alone.
func kernelsOf(inst *ir.Instance) ([]*kernel.Kernel, error) {
	var ks []*kernel.Kernel
	for _, d := range schedule.Launches(inst) {
		k, err := kernel.Build(inst.Op, d, []kernel.Stage{{Inst: inst, Def: d, Bind: func(t *ir.Tensor) (kernel.Binding, error) {
			return kernel.Binding{Buffer: t}, nil
		}}})
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
	}
	return ks, nil
}

func lowerInstance(inst *ir.Instance) error {
	ks, err := kernelsOf(inst)
	if err != nil {
		return err
	}
	for _, k := range ks {
		for _, p := range []precision.Mode{precision.Exact, precision.F32} {
			for _, m := range []*emit.Module{emit.NewGPUModule(target.Naming(), p), emit.NewHostModule(p)} {
				if err := m.Add("k", k); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
		}
	}
	return nil
}

// TestStdlibCompiles compiles every stdlib operator and every backward
// operator derived from it, for random shapes, in both flavours: the PTX
// has no external function, and the cpu and simt runtimes equal the
// interpreter under the tolerance for reordered sums. Other dtypes run
// the operators that take them.
func TestStdlibCompiles(t *testing.T) {
	tl := tools(t)
	type pass struct {
		dt    lang.DType
		large bool
		prec  precision.Mode
	}
	passes := []pass{{lang.F32, false, precision.Exact}, {lang.F32, true, precision.Exact}, {lang.F32, false, precision.F32}, {lang.F32, true, precision.F32},
		{lang.F32, false, precision.TF32}, {lang.F32, true, precision.TF32}, {lang.F32, false, precision.BF16}, {lang.F32, false, precision.F16}}
	if !testing.Short() {
		for _, dt := range []lang.DType{lang.F64, lang.F16, lang.BF16, lang.I32, lang.I8, lang.U8, lang.I64, lang.Bool} {
			passes = append(passes, pass{dt, false, precision.Exact})
		}
		for _, dt := range []lang.DType{lang.F64, lang.F16, lang.BF16} {
			passes = append(passes, pass{dt, false, precision.F32})
		}
	}
	for _, ps := range passes {
		dt := ps.dt
		name := dt.String()
		if ps.large {
			name += "-large"
		}
		if ps.prec != precision.Exact {
			name += "-" + ps.prec.String()
		}
		t.Run(name, func(t *testing.T) {
			cases, unsupported := lowerable(stdlibCases(t, dt, ps.large))
			for _, e := range unsupported {
				t.Errorf("does not lower: %s", e)
			}
			if ps.prec.FactorRounding() > 0 { // what differs from f32: the contractions
				cases = contractions(t, cases)
			}
			dir := t.TempDir()
			c, err := codegen.Compile(graphOf(cases), dir, codegen.Options{Tools: tl, Precision: ps.prec})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d cases, %d launches, %d distinct kernels in %d modules", len(cases), c.Stats.Kernels, c.Stats.Distinct, c.Stats.Modules)
			blocks, tiled, tensorCores := 0, 0, 0
			for _, k := range c.Plan.Kernels {
				switch k.Form {
				case "blocks", "rows":
					blocks++
				case "tiled":
					tiled++
				case "tiled-tf32", "tiled-bf16", "tiled-f16":
					tiled++
					tensorCores++
				}
			}
			t.Logf("%d kernels split reductions over blocks, %d contractions are tiled, %d on tensor cores", blocks, tiled, tensorCores)
			if dt == lang.F32 && tiled < 10 {
				t.Errorf("only %d kernels are tiled contractions", tiled)
			}
			if ps.prec.FactorRounding() > 0 && tensorCores != tiled {
				t.Errorf("only %d of %d tiled contractions are on tensor cores", tensorCores, tiled)
			}
			if ps.large && blocks < 20 && ps.prec.FactorRounding() == 0 {
				t.Errorf("only %d kernels of the long-row pass reduce over blocks", blocks)
			}
			for _, ptx := range c.Plan.Modules["nvptx"].Files {
				b, err := os.ReadFile(filepath.Join(dir, ptx.Path))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), ".extern .func") || !strings.Contains(string(b), ".visible .entry") {
					t.Errorf("%s: an external function, or no entry", ptx.Path)
				}
			}
			inputs := map[string]*tensor.Tensor{}
			for _, tc := range cases {
				for i, x := range tc.c.Inputs {
					inputs[fmt.Sprintf("%s.in%d", tc.name, i)] = x
				}
			}
			expected := make([]*rounding.Expected, len(cases))
			for i, tc := range cases {
				if expected[i], err = rounding.Expect(tc.c.Inst, tc.c.Inputs, ps.prec); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
			}
			for _, run := range loadPlan(t, c.Plan, dir, true) {
				got, err := run.p.Run(inputs, nil)
				if err != nil {
					t.Fatalf("%s: %v", run.name, err)
				}
				var bad []string
				used, closest := 0.0, ""
				for k, tc := range cases {
					for i := range tc.c.Want {
						name := fmt.Sprintf("%s.out%d", tc.name, i)
						if err := expected[k].Compare(i, got[name]); err != nil {
							bad = append(bad, fmt.Sprintf("%s: %s: %v", run.name, name, err))
						}
						if u := expected[k].Used(i, got[name]); u > used {
							used, closest = u, name
						}
					}
				}
				t.Logf("%s: the closest output to its tolerance, %s, uses %.2g of it", run.name, closest, used)
				sort.Strings(bad)
				for _, b := range bad {
					t.Error(b)
				}
			}
		})
	}
}
