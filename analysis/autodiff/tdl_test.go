package autodiff_test

import (
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/internal/opcase"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// TestBackwardPrintsAsCheckedTDL prints the backward operators of every
// differentiable stdlib operator (symbolic shapes) as TDL, and checks that
// the text passes the checker on its own. For concrete shapes it also runs
// the printed operator and compares it with the backward instance itself.
func TestBackwardPrintsAsCheckedTDL(t *testing.T) {
	ops, names, err := opcase.Stdlib()
	if err != nil {
		t.Fatal(err)
	}
	p, err := check.NewProgram(parser.Parse) // loads the printed files
	if err != nil {
		t.Fatal(err)
	}
	printed := 0
	for _, name := range names {
		sym, err := check.Standalone(ops[name])
		if err != nil {
			t.Fatal(err)
		}
		backs, _, err := autodiff.Backward(sym)
		if err != nil {
			continue
		}
		for _, back := range backs {
			if src, err := printChecked(p, back); err != nil {
				t.Errorf("%s: the printed backward does not check: %v\n%s", name, err, src)
				continue
			}
			printed++
		}
	}
	t.Logf("%d backward operators printed and checked", printed)
}

// printChecked prints backward operator back as TDL and checks the text
// with program p, returning it.
func printChecked(p *check.Program, back *ir.Instance) (string, error) {
	src := ir.FormatTDL(back, "g")
	m, err := p.LoadSource(back.Op+".tdl", []byte(src))
	if err == nil {
		err = m.Check("", nil)
	}
	return src, err
}

// TestPrintedBackwardComputesTheSame prints the symbolic backward
// operators (as tofuc grad does), reads them back, instantiates them for
// concrete shapes and compares them with the backward derived for those
// shapes directly.
func TestPrintedBackwardComputesTheSame(t *testing.T) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"matmul", "conv2d", "softmax", "layer_norm", "max_pool2d", "reduce_max", "gather",
		"attention_weights", "lstm_cell", "split3", "pad_edge2d", "pad_reflect2d", "flatten", "mse_loss"} {
		op := p.StdOps()[name]
		c, err := opcase.New(op, opcase.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		backs, _, err := autodiff.Backward(c.Inst)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sym, err := check.Standalone(op)
		if err != nil {
			t.Fatal(err)
		}
		symBacks, _, err := autodiff.Backward(sym)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k, back := range backs {
			inputs := append([]*tensor.Tensor(nil), c.Inputs...)
			for _, y := range c.Want {
				if y.DType.IsFloat() {
					inputs = append(inputs, y) // any values serve as gradients
				}
			}
			want, err := interp.EvalInstance(back, inputs, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			src := ir.FormatTDL(symBacks[k], "g")
			m, err := p.LoadSource(back.Op+".tdl", []byte(src))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, src)
			}
			types := make([]check.TensorType, len(back.Inputs))
			for i, in := range back.Inputs {
				types[i] = check.TensorType{DType: in.DType, Shape: in.Shape}
			}
			inst, err := check.Instantiate(m.Op("g"), nil, types, lang.Pos{})
			if err != nil {
				t.Fatalf("%s: the printed backward does not take the concrete shapes: %v\n%s", name, err, src)
			}
			got, err := interp.EvalInstance(inst, inputs, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := tensor.Compare(got[0], want[0], tensor.Exact); err != nil {
				t.Errorf("%s: %s printed and re-read differs: %v\n%s", name, back.Op, err, src)
			}
		}
	}
}
