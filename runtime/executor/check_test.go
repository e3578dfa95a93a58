package executor

import (
	"math"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// TestCheckRoundTrip writes checks and reads them back: stored inputs
// keep their values and dtypes (bf16 too), filled ones are Filled's
// again, and Compare holds outputs to the tolerance.
func TestCheckRoundTrip(t *testing.T) {
	p := &plan.Plan{
		Inputs:  []plan.Binding{{Name: "x", DType: "bf16", Shape: []int64{2}}},
		Params:  []plan.Binding{{Name: "w", DType: "f32", Shape: []int64{2, 3}}},
		Outputs: []plan.Binding{{Name: "y", DType: "f32", Shape: []int64{3}}},
	}
	want := map[string]*tensor.Tensor{"y": tensor.FromFloats(lang.F32, []int{3}, []float64{1, 2, 3})}
	tol := map[string]tensor.Tolerance{"y": {Rel: 1e-3}}
	for _, filled := range []bool{false, true} {
		dir := t.TempDir()
		c := &Check{Inputs: Filled(p.Inputs), Params: Filled(p.Params), Want: want, Tolerance: tol, Filled: filled}
		c.Inputs["x"] = tensor.FromFloats(lang.BF16, []int{2}, []float64{0.25, -3})
		if filled {
			c.Inputs = Filled(p.Inputs)
		}
		if err := c.Write(dir); err != nil {
			t.Fatal(err)
		}
		r, err := ReadCheck(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Filled != filled {
			t.Errorf("filled %v read as %v", filled, r.Filled)
		}
		for name, x := range c.Inputs {
			if err := tensor.Compare(r.Inputs[name], x, tensor.Exact); err != nil {
				t.Errorf("filled %v: input %s: %v", filled, name, err)
			}
		}
		if err := tensor.Compare(r.Params["w"], c.Params["w"], tensor.Exact); err != nil {
			t.Errorf("filled %v: parameter: %v", filled, err)
		}
		near := tensor.FromFloats(lang.F32, []int{3}, []float64{1, 2.001, 3})
		far := tensor.FromFloats(lang.F32, []int{3}, []float64{1, 2.01, 3})
		if err := r.Compare(map[string]*tensor.Tensor{"y": near}); err != nil {
			t.Errorf("within the tolerance: %v", err)
		}
		if err := r.Compare(map[string]*tensor.Tensor{"y": far}); err == nil || !strings.Contains(err.Error(), "output y") {
			t.Errorf("beyond the tolerance: %v", err)
		}
		if err := r.Compare(nil); err == nil || !strings.Contains(err.Error(), "output y: missing") {
			t.Errorf("missing output: %v", err)
		}
	}
}

// TestFilled: values in the ranges Filled promises, the same every time.
func TestFilled(t *testing.T) {
	bs := []plan.Binding{
		{Name: "labels", DType: "i64", Shape: []int64{1000}},
		{Name: "gamma", DType: "f32", Shape: []int64{1000}},
		{Name: "w", DType: "f32", Shape: []int64{8, 3, 5, 5}},
	}
	a, b := Filled(bs), Filled(bs)
	bound := math.Sqrt(3.0 / 75)
	for _, x := range bs {
		if err := tensor.Compare(a[x.Name], b[x.Name], tensor.Exact); err != nil {
			t.Errorf("%s differs between calls: %v", x.Name, err)
		}
	}
	seen := map[float64]bool{}
	for i := range 1000 {
		seen[a["labels"].Flat(i)] = true
		if g := a["gamma"].Flat(i); g < 0.5 || g >= 1.5 {
			t.Fatalf("gamma %v", g)
		}
	}
	if len(seen) != 2 || !seen[0] || !seen[1] {
		t.Errorf("labels take %v", seen)
	}
	sum, sq := 0.0, 0.0
	for i := range a["w"].Len() {
		v := a["w"].Flat(i)
		if math.Abs(v) > bound {
			t.Fatalf("weight %v beyond ±%v", v, bound)
		}
		sum, sq = sum+v, sq+v*v
	}
	n := float64(a["w"].Len())
	if v := sq/n - (sum/n)*(sum/n); math.Abs(v*75-1) > 0.2 {
		t.Errorf("weights' variance %v, want about 1/75", v)
	}
}

// TestCheckBounds: a check with per-element bounds keeps them through
// Write and ReadCheck, and Compare holds each element to its own bound
// (an element within another's bound but beyond its own fails).
func TestCheckBounds(t *testing.T) {
	p := &plan.Plan{Outputs: []plan.Binding{{Name: "y", DType: "f32", Shape: []int64{3}}}}
	want := map[string]*tensor.Tensor{"y": tensor.FromFloats(lang.F32, []int{3}, []float64{1, 2, 3})}
	bounds := map[string]*tensor.Tensor{"y": tensor.FromFloats(lang.F64, []int{3}, []float64{0.5, 0.01, 0})}
	dir := t.TempDir()
	c := &Check{Want: want, Tolerance: map[string]tensor.Tolerance{}, Bounds: bounds, Filled: true}
	if err := c.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCheck(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		got []float64
		ok  bool
	}{
		{[]float64{1.4, 2.005, 3}, true},
		{[]float64{1, 2.1, 3}, false},    // beyond its own bound, within the first's
		{[]float64{1, 2, 3.0001}, false}, // a bound of 0 is exact
	} {
		err := back.Compare(map[string]*tensor.Tensor{"y": tensor.FromFloats(lang.F32, []int{3}, tc.got)})
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok %v", tc.got, err, tc.ok)
		}
	}
}
