package interp_test

import (
	"math/rand/v2"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// BenchmarkExamples times the interpreter on the example models (forward
// pass, parameters initialised outside the timing). `make bench` runs it;
// docs/performance.md records the figures.
func BenchmarkExamples(b *testing.B) {
	for _, bc := range []struct {
		name, file string
		set        map[string]ir.AttrValue
	}{
		{"mlp-b64", "../../examples/mlp.tdl", nil},
		{"resnet50-b1", "../../examples/wresnet.tdl", map[string]ir.AttrValue{"width": intAttr(1), "batch": intAttr(1)}},
		{"rnn", "../../examples/rnn.tdl", nil},
		{"transformer", "../../examples/transformer.tdl", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := check.NewProgram(parser.Parse)
			if err != nil {
				b.Fatal(err)
			}
			m, err := p.Load(bc.file)
			if err != nil {
				b.Fatal(err)
			}
			g, err := m.Model("", bc.set)
			if err != nil {
				b.Fatal(err)
			}
			inputs := map[string]*tensor.Tensor{}
			for _, in := range g.Inputs {
				inputs[in.Name] = sampleInput(b, in)
			}
			first, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := exec.Run(g, exec.Interp{}, inputs, first.Params, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func intAttr(n int64) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrInt, Int: n} }

// sampleInput fills an input with small values: floats uniform in [0, 1),
// integers in [0, 10) (valid token ids for the examples).
func sampleInput(b *testing.B, v *ir.Value) *tensor.Tensor {
	shape, ok := lang.ConstShape(v.Shape)
	if !ok {
		b.Fatalf("input %s has a symbolic shape", v.Name)
	}
	r := rand.New(rand.NewPCG(1, 2))
	t := tensor.New(v.DType, shape)
	for i := range t.Len() {
		if v.DType.IsFloat() {
			t.SetFlat(i, r.Float64())
		} else {
			t.SetFlat(i, float64(r.IntN(10)))
		}
	}
	return t
}
