package codegen_test

import (
	"testing"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// TestHostSumOrder: the host adds a float sum's terms in any order, but
// a product inside the sum keeps the interpreter's: twelve factors of
// 1e-30 then twelve of 1e30 underflow to 0 in order, where a reordered
// product would meet 1e30 · 1e-30 and give 1 for each term.
func TestHostSumOrder(t *testing.T) {
	const src = `op o(x: [M, A, N]) -> [M] = lambda i: sum(lambda a: prod(lambda k: x[i, a, k]))
model m(x: f32[2, 2, 256]) {
    return o(x)
}`
	g := modelFromSource(t, src)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tools(t)})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(lang.F32, []int{2, 2, 256})
	for i := range x.Len() {
		switch k := i % 256; {
		case k < 12:
			x.SetFlat(i, 1e-30)
		case k < 24:
			x.SetFlat(i, 1e30)
		default:
			x.SetFlat(i, 1)
		}
	}
	in := map[string]*tensor.Tensor{"x": x}
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range loadPlan(t, c.Plan, dir, false) {
		got, err := l.p.Run(in, want.Params)
		if err != nil {
			t.Fatal(err)
		}
		for k, w := range want.Outputs {
			if err := tensor.Compare(got[k], w, tensor.Exact); err != nil {
				t.Errorf("%s output %s: %v", l.name, k, err)
			}
		}
	}
}
