package mathir

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"tofuc/lang/ir"
)

// ref returns what the function means: what the reference interpreter
// computes (Go's math, on this machine), math.Mod for fmod (the
// interpreter's float %) and math.Log1p for the log1p helper. One of the
// two is nil.
func ref(name string) (unary func(float64) float64, binary func(float64, float64) float64) {
	switch name {
	case "fmod":
		return nil, math.Mod
	case "log1p":
		return math.Log1p, nil
	}
	return ir.FloatFunc(name)
}

// bounds are the largest errors in ulps allowed per function: every
// function follows Go's algorithm operation by operation, so none.
var bounds = map[string]float64{}

// The library reproduces Go's math as it runs on amd64 with FMA, where
// math.Exp takes the FMA path of exp_amd64.s (Go's own condition,
// useFMA). On amd64 without FMA Go's Exp rounds differently (up to 2
// ulps), and so do the functions that call it; other architectures run
// other algorithms. There the table is logged but not asserted.
var (
	goExpFMA  = runtime.GOARCH == "amd64" && cpu.X86.HasAVX && cpu.X86.HasFMA
	expFamily = map[string]bool{"exp": true, "sigmoid": true, "tanh": true, "sinh": true, "cosh": true, "erf": true, "pow": true}
)

// asserted tells whether name's results must equal Go's here.
func asserted(name string) bool {
	return goExpFMA || (runtime.GOARCH == "amd64" && !expFamily[name])
}

// ulps is the distance from got to want in units in the last place: 0
// for equal values and for two NaNs, +Inf for a NaN against a number or
// for zeros of opposite signs.
func ulps(got, want float64) float64 {
	switch {
	case math.IsNaN(got) || math.IsNaN(want):
		if math.IsNaN(got) && math.IsNaN(want) {
			return 0
		}
		return math.Inf(1)
	case got == want:
		if math.Signbit(got) != math.Signbit(want) {
			return math.Inf(1)
		}
		return 0
	}
	d := ordered(got) - ordered(want)
	if d < 0 {
		d = -d
	}
	return float64(d)
}

// ordered maps doubles to integers in their order, one apart per ulp.
func ordered(x float64) int64 {
	b := int64(math.Float64bits(x))
	if b < 0 {
		return -(b &^ signBit)
	}
	return b
}

// Inputs.

// specials are values every function meets: zeros, infinities, NaN,
// subnormals, the ends of the normal range, small integers, π's.
func specials() []float64 {
	v := []float64{0, math.Inf(1), math.NaN(), 5e-324, 1e-310, math.Float64frombits(fracMask), smallest,
		math.MaxFloat64, 1, 0.5, 2, 3, 10, 0.1, math.Pi, math.Pi / 2, math.Pi / 4, math.E,
		1e-300, 1e300, 1.0 / (1 << 28), 1 << 28, 1 << 29, 1 << 52, twoTo53, twoTo63, 1 << 64, 0x1p1023}
	return withNegatives(v)
}

func withNegatives(v []float64) []float64 {
	out := append([]float64(nil), v...)
	for _, x := range v {
		out = append(out, -x)
	}
	return out
}

// around is each edge with its neighbours up to 2 ulps away, both signs.
func around(edges ...float64) []float64 {
	var v []float64
	for _, e := range edges {
		lo, hi := e, e
		v = append(v, e)
		for i := 0; i < 2; i++ {
			lo, hi = math.Nextafter(lo, math.Inf(-1)), math.Nextafter(hi, math.Inf(1))
			v = append(v, lo, hi)
		}
	}
	return withNegatives(v)
}

// anyDouble draws doubles with uniformly random exponent fields, so
// that every binade (subnormals included) is as likely, and signs.
func anyDouble(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		e := uint64(r.Intn(2047))
		v[i] = math.Float64frombits(uint64(r.Int63n(2))<<63 | e<<52 | uint64(r.Int63())&fracMask)
	}
	return v
}

func uniform(r *rand.Rand, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = lo + (hi-lo)*r.Float64()
	}
	return v
}

// integers draws integers in [lo, hi] as doubles.
func integers(r *rand.Rand, n int, lo, hi int64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(lo + r.Int63n(hi-lo+1))
	}
	return v
}

// samples is the number of random inputs per range: 3000, or 300000
// with TOFUC_LONG=1.
var samples = func() int {
	if os.Getenv("TOFUC_LONG") != "" {
		return 300000
	}
	return 3000
}()

// unaryCase says where a unary function's algorithm changes and which
// ranges to sample besides all doubles.
type unaryCase struct {
	edges  []float64
	ranges [][2]float64
}

var unaryCases = map[string]unaryCase{
	"exp": {
		// overflow test; k reaching 1024; subnormal results; k below -1075
		edges:  []float64{7.09782712893384e+02, 1023.5 / math.Log2E, -1022.5 / math.Log2E, -1075.5 / math.Log2E, 1e-20},
		ranges: [][2]float64{{-750, 750}, {-1, 1}, {-1e-10, 1e-10}},
	},
	"sigmoid": {ranges: [][2]float64{{-40, 40}, {-750, 750}}},
	"log":     {edges: []float64{math.Sqrt2 / 2, math.Sqrt2, 1}, ranges: [][2]float64{{0, 10}, {0.5, 2}, {0.99, 1.01}}},
	"log1p": {
		edges:  []float64{math.Sqrt2 - 1, math.Sqrt2/2 - 1, 1.0 / (1 << 29), 1.0 / (1 << 54), -1, math.Sqrt2, 1.0 / (1 << 20)},
		ranges: [][2]float64{{-1, 1}, {-1e-5, 1e-5}, {0, 1e6}, {-0.3, 0.42}},
	},
	"sqrt":  {ranges: [][2]float64{{0, 100}}},
	"rsqrt": {ranges: [][2]float64{{0, 100}}},
	"tanh":  {edges: []float64{0.625, 0.5 * 8.8029691931113054295988e+01}, ranges: [][2]float64{{-25, 25}, {-1, 1}}},
	"sinh":  {edges: []float64{0.5, 21, 710.475860073944}, ranges: [][2]float64{{-30, 30}, {-1, 1}, {-720, 720}}},
	"cosh":  {edges: []float64{21, 710.475860073944}, ranges: [][2]float64{{-30, 30}, {-720, 720}}},
	"asinh": {edges: []float64{1 << 28, 2, 1.0 / (1 << 28)}, ranges: [][2]float64{{-10, 10}, {-1e10, 1e10}}},
	"acosh": {edges: []float64{1, 2, 1 << 28}, ranges: [][2]float64{{1, 10}, {0.9, 2.1}, {1, 1e10}}},
	"atanh": {edges: []float64{0.5, 1, 1.0 / (1 << 28)}, ranges: [][2]float64{{-1, 1}, {-1e-3, 1e-3}}},
	"erf": {
		edges:  []float64{0.84375, 1.25, 6, 1 / 0.35, 1.0 / (1 << 28), 2.848094538889218e-306},
		ranges: [][2]float64{{-7, 7}, {-1.5, 1.5}},
	},
	"sin":  {edges: trigEdges(), ranges: trigRanges()},
	"cos":  {edges: trigEdges(), ranges: trigRanges()},
	"tan":  {edges: append(trigEdges(), 1e-7, math.Pi/2), ranges: trigRanges()},
	"asin": {edges: []float64{0.7, 1}, ranges: [][2]float64{{-1, 1}, {-1.1, 1.1}}},
	"acos": {edges: []float64{0.7, 1}, ranges: [][2]float64{{-1, 1}, {-1.1, 1.1}}},
	"atan": {edges: []float64{0.66, 2.41421356237309504880}, ranges: [][2]float64{{-10, 10}, {-1e3, 1e3}}},
	"round": {
		edges:  []float64{0.5, 1.5, 2.5, 1<<52 + 0.5, 1<<51 + 0.5, 0.49999999999999994},
		ranges: [][2]float64{{-10, 10}, {-1e16, 1e16}},
	},
	"floor":      {ranges: [][2]float64{{-10, 10}, {-1e16, 1e16}}},
	"ceil":       {ranges: [][2]float64{{-10, 10}, {-1e16, 1e16}}},
	"abs":        {ranges: [][2]float64{{-10, 10}}},
	"sign":       {ranges: [][2]float64{{-10, 10}}},
	"reciprocal": {ranges: [][2]float64{{-10, 10}}},
	"isnan":      {},
	"isinf":      {},
}

// trigEdges are multiples of π/4 and the switch to Payne-Hanek.
func trigEdges() []float64 {
	v := []float64{reduceThreshold}
	for k := 1; k <= 16; k++ {
		v = append(v, float64(k)*math.Pi/4)
	}
	return v
}

// trigRanges cover Cody-Waite reduction, its switch to Payne-Hanek at
// 2**29 and huge arguments (all binades come from anyDouble).
func trigRanges() [][2]float64 {
	return [][2]float64{{-10, 10}, {-1e6, 1e6}, {-1e9, 1e9}, {-1e22, 1e22}}
}

func unaryInputs(r *rand.Rand, name string) []float64 {
	c := unaryCases[name]
	v := append(specials(), around(c.edges...)...)
	v = append(v, anyDouble(r, samples)...)
	for _, rg := range c.ranges {
		v = append(v, uniform(r, samples, rg[0], rg[1])...)
	}
	return v
}

// binaryInputs are every pair of specials and the function's own
// random pairs.
func binaryInputs(r *rand.Rand, name string) (xs, ys []float64) {
	sp := append(specials(), -1, 1.5, -1.5, 0.75, -3)
	for _, x := range sp {
		for _, y := range sp {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	add := func(x, y []float64) {
		xs, ys = append(xs, x...), append(ys, y...)
	}
	add(anyDouble(r, samples), anyDouble(r, samples))
	add(uniform(r, samples, -10, 10), uniform(r, samples, -10, 10))
	switch name {
	case "pow":
		add(uniform(r, samples, 0, 10), uniform(r, samples, -20, 20))
		add(uniform(r, samples, -10, 10), integers(r, samples, -40, 40))
		add(uniform(r, samples, 0.9, 1.1), uniform(r, samples, -1e4, 1e4))
		add(anyDouble(r, samples), uniform(r, samples, -3, 3))
		add(uniform(r, samples, 0, 2), integers(r, samples, -1100, 1100))
		add(uniform(r, samples, 0, 2), uniform(r, samples, -1100, 1100))
		add(integers(r, samples, -3, 3), integers(r, samples, -1<<40, 1<<40))
		add(anyDouble(r, samples), integers(r, samples, -100, 100))
	case "fmod":
		add(uniform(r, samples, -1e6, 1e6), uniform(r, samples, -10, 10))
		add(integers(r, samples, -1000, 1000), integers(r, samples, -20, 20))
	case "atan2":
		add(uniform(r, samples, -1, 1), uniform(r, samples, -1, 1))
	}
	return xs, ys
}

// stat is one function's measured error.
type stat struct {
	name        string
	inputs      int
	differ      int     // results not bit-identical (NaNs aside)
	maxULP      float64 // the largest error
	worstX      float64
	worstY      float64
	worstGot    float64
	worstWanted float64
}

func measure(h *hostLib, name string, seed int64) stat {
	r := rand.New(rand.NewSource(seed))
	var xs, ys, want []float64
	if f, f2 := ref(name); f != nil {
		xs = unaryInputs(r, name)
		for _, x := range xs {
			want = append(want, f(x))
		}
	} else {
		xs, ys = binaryInputs(r, name)
		for i := range xs {
			want = append(want, f2(xs[i], ys[i]))
		}
	}
	got := h.apply(name, xs, ys)
	s := stat{name: name, inputs: len(xs)}
	for i := range xs {
		u := ulps(got[i], want[i])
		if u > 0 {
			s.differ++
		}
		if u > s.maxULP || (u > 0 && s.differ == 1) {
			s.maxULP, s.worstX, s.worstGot, s.worstWanted = u, xs[i], got[i], want[i]
			if ys != nil {
				s.worstY = ys[i]
			}
		}
	}
	return s
}

// TestAccuracy compares every function with Go's math on special
// values, the edges of each algorithm's branches with their neighbours,
// doubles from every binade and each function's own ranges, and logs the
// table of docs/math.md (go test -v -run TestAccuracy ./codegen/mathir).
func TestAccuracy(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(map[bool]string{false: "emulated-fma", true: "native-fma"}[native], func(t *testing.T) {
			testAccuracy(t, loadHostFMA(t, native))
		})
	}
}

func testAccuracy(t *testing.T, h *hostLib) {
	var rows []string
	names := tested()
	sort.Strings(names)
	for i, name := range names {
		s := measure(h, name, int64(i+1))
		bound := bounds[name]
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %g | %g |", name, s.inputs, s.differ, s.maxULP, bound))
		if s.maxULP > bound && asserted(name) {
			t.Errorf("%s: %d of %d results differ from Go's, up to %g ulps (bound %g): %s(%v, %v) = %v, Go gives %v",
				name, s.differ, s.inputs, s.maxULP, bound, name, s.worstX, s.worstY, s.worstGot, s.worstWanted)
		}
	}
	if !goExpFMA {
		t.Logf("Go's math.Exp here is not the FMA path the library reproduces: differences not asserted for %s",
			strings.Join(unasserted(names), ", "))
	}
	t.Logf("measured against Go %s on this machine\n| function | inputs | differ | max ulps | bound |\n|---|---|---|---|---|\n%s",
		goVersion(), strings.Join(rows, "\n"))
}

// TestScalarWrappers calls each function one value at a time, through
// purego's float64 calling convention, on the special values.
func TestScalarWrappers(t *testing.T) {
	h := loadHost(t)
	sp := specials()
	for name, f := range h.one1 {
		want1, _ := ref(name)
		for _, x := range sp {
			if got, want := f(x), want1(x); ulps(got, want) > bounds[name] && asserted(name) {
				t.Errorf("%s(%v) = %v, Go gives %v", name, x, got, want)
			}
		}
	}
	for name, f := range h.one2 {
		_, want2 := ref(name)
		for _, x := range sp {
			for _, y := range sp {
				if got, want := f(x, y), want2(x, y); ulps(got, want) > bounds[name] && asserted(name) {
					t.Errorf("%s(%v, %v) = %v, Go gives %v", name, x, y, got, want)
				}
			}
		}
	}
}

func unasserted(names []string) []string {
	var out []string
	for _, n := range names {
		if !asserted(n) {
			out = append(out, n)
		}
	}
	return out
}

func goVersion() string { return runtime.Version() + " " + runtime.GOARCH }
