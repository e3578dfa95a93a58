package search

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/frontend/onnx"
	"tofuc/internal/shared"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// lightRandom lists the ONNX light models with non-constant weights that
// TestOptimizedONNXEqualsOriginal checks: SqueezeNet by default (the
// interpreter takes seconds per run on these models), all six with
// TOFUC_LIGHT_MODELS=all (make bench), or a comma-separated list of
// names such as resnet50,inception_v1.
func lightRandom(t *testing.T) []string {
	dir := filepath.Join(shared.Dir(t), "onnx", "light-random")
	names := []string{"squeezenet"}
	switch env := os.Getenv("TOFUC_LIGHT_MODELS"); env {
	case "":
	case "all":
		names = []string{"squeezenet", "inception_v1", "resnet50", "bvlc_alexnet", "vgg19", "inception_v2"}
	default:
		names = strings.Split(env, ",")
	}
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join(dir, "light_"+n+"_random.onnx"))
	}
	return out
}

// TestOptimizedONNXEqualsOriginal: the optimiser lowers the estimated
// cost of real CNNs, and the optimised graph computes what the original
// does on random inputs with the model's weights (interpreter).
func TestOptimizedONNXEqualsOriginal(t *testing.T) {
	p, rules := setup(t)
	for _, path := range lightRandom(t) {
		m, err := onnx.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := onnx.Import(m, onnx.Options{Program: p})
		if err != nil {
			t.Fatal(err)
		}
		mod, err := p.LoadSource(path, res.Source)
		if err != nil {
			t.Fatal(err)
		}
		g, err := mod.Model("", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := New(p, rules, Options{MaxGraphs: 30}).Optimize(g)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// the models must get cheaper (AlexNet and VGG are chains
		// whose convolutions already fuse their relu: nothing to gain)
		lower := strings.Contains(path, "squeezenet") || strings.Contains(path, "inception") || strings.Contains(path, "resnet")
		if out.After.Time > out.Before.Time || lower && out.After.Time >= out.Before.Time {
			t.Errorf("%s: the optimiser did not lower the cost (%g -> %g)", path, out.Before.Time, out.After.Time)
		}
		sameOutputs(t, filepath.Base(path), g, out.Graph, res.Params)
		t.Logf("%s: %d -> %d kernels, %.1f -> %.1f MB, %.1f -> %.1f us, %d rewrites, %v", filepath.Base(path), out.Before.Launches, out.After.Launches,
			float64(out.Before.Bytes)/1e6, float64(out.After.Bytes)/1e6, out.Before.Time*1e6, out.After.Time*1e6, len(out.Steps), out.Time)
	}
}

// sameOutputs runs both graphs on one random input and compares every
// output within the tolerance for reordered additions (see docs/rules.md).
func sameOutputs(t *testing.T, what string, g, opt *ir.Graph, params map[string]*tensor.Tensor) {
	t.Helper()
	inputs := map[string]*tensor.Tensor{}
	for i, v := range g.Inputs {
		shape := make([]int, len(v.Shape))
		for d, x := range v.Shape {
			c, _ := x.IsConst()
			shape[d] = int(c)
		}
		x := tensor.New(v.DType, shape)
		for j := range x.Len() {
			x.SetFlat(j, float64((j*7+i*3)%11)/11-0.5)
		}
		inputs[v.Name] = x
	}
	a, err := exec.Run(g, exec.Interp{}, inputs, params, 1)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b, err := exec.Run(opt, exec.Interp{}, inputs, params, 1)
	if err != nil {
		t.Fatalf("%s optimised: %v", what, err)
	}
	for i, v := range g.Outputs {
		if opt.Outputs[i].Name != v.Name {
			t.Errorf("%s: output %d is named %s, want %s", what, i, opt.Outputs[i].Name, v.Name)
		}
		want, got := a.Outputs[v.Name], b.Outputs[v.Name]
		if got == nil {
			t.Errorf("%s: no output %s", what, v.Name)
			continue
		}
		if err := tensor.Compare(got, want, rewriteTolerance(g)); err != nil {
			t.Errorf("%s output %s: %v", what, v.Name, err)
		}
		t.Logf("%s output %s: %v", what, v.Name, maxErr(got, want))
	}
}

func maxErr(a, b *tensor.Tensor) float64 {
	m := 0.0
	for i := range a.Len() {
		m = max(m, abs(a.Flat(i)-b.Flat(i))/(1e-3+abs(b.Flat(i))))
	}
	return m
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// rewriteTolerance is tensor.Reordered for the graph's outputs' dtype with
// n the additions along the longest path: the sum, over the nodes of the
// path, of each node's longest reduction (rewrites reorder the additions
// of every layer, and relative errors add up along a path).
func rewriteTolerance(g *ir.Graph) tensor.Tolerance {
	prod := producers(g)
	memo := map[*ir.Node]int{}
	var longest func(n *ir.Node) int
	longest = func(n *ir.Node) int {
		if l, ok := memo[n]; ok {
			return l
		}
		best := 0
		for _, v := range n.Inputs {
			if p := prod[v]; p != nil {
				best = max(best, longest(p))
			}
		}
		memo[n] = best + reductionLength(n.Inst)
		return memo[n]
	}
	n := 1
	for _, v := range g.Outputs {
		if p := prod[v]; p != nil {
			n = max(n, longest(p))
		}
	}
	return tensor.Reordered(g.Outputs[0].DType, n)
}

// reductionLength is the largest number of elements one reduction of
// inst combines.
func reductionLength(inst *ir.Instance) int {
	n := 0
	for _, ds := range [][]*ir.Def{inst.Locals, inst.Outputs} {
		for _, d := range ds {
			ir.Walk(d.Body, func(e ir.Expr) bool {
				if r, ok := e.(*ir.Reduce); ok {
					k := 1
					for _, v := range r.Vars {
						c, _ := v.Extent.IsConst()
						k *= int(c)
					}
					n = max(n, k)
				}
				return true
			})
		}
	}
	return n
}
