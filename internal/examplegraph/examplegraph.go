// Package examplegraph loads the example models as the partition
// search and the pipeline planner see them, for their tests.
package examplegraph

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
	"tofuc/runtime/tensor"
)

// Load loads an example model of examples/ (its training graph with train)
// with attributes overridden, decomposed as tofuc partition does.
func Load(tb testing.TB, name string, train bool, set map[string]int64) *cost.Graph {
	tb.Helper()
	var opts *autodiff.TrainOptions
	if train {
		opts = &autodiff.TrainOptions{}
	}
	return LoadTrained(tb, name, set, opts)
}

// LoadTrained is Load with the training graph's options (nil: the
// model's inference graph).
func LoadTrained(tb testing.TB, name string, set map[string]int64, opts *autodiff.TrainOptions) *cost.Graph {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	attrs := ints(set)
	if name == "wresnet" && opts != nil {
		attrs["train"] = ir.AttrValue{Kind: ir.AttrBool, Bool: true}
	}
	return load(tb, filepath.Join(filepath.Dir(file), "..", "..", "examples", name+".tdl"), opts, attrs)
}

// LoadFile is Load of the only model of a .tdl file.
func LoadFile(tb testing.TB, path string, train bool, set map[string]int64) *cost.Graph {
	tb.Helper()
	var opts *autodiff.TrainOptions
	if train {
		opts = &autodiff.TrainOptions{}
	}
	return load(tb, path, opts, ints(set))
}

func ints(set map[string]int64) map[string]ir.AttrValue {
	attrs := map[string]ir.AttrValue{}
	for k, v := range set {
		attrs[k] = ir.AttrValue{Kind: ir.AttrInt, Int: v}
	}
	return attrs
}

func load(tb testing.TB, path string, train *autodiff.TrainOptions, attrs map[string]ir.AttrValue) *cost.Graph {
	tb.Helper()
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := prog.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := m.Model("", attrs)
	if err != nil {
		tb.Fatal(err)
	}
	if g, err = partition.Decompose(g, m); err != nil {
		tb.Fatal(err)
	}
	if train != nil {
		if g, _, err = autodiff.TrainingGraph(g, m, *train); err != nil {
			tb.Fatal(err)
		}
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		tb.Fatal(err)
	}
	return cg
}

// RandomInputs draws the graph's inputs, the same for every call: floats
// in [-1, 1), integers (labels, token ids) below classes.
func RandomInputs(g *ir.Graph, classes int64) map[string]*tensor.Tensor {
	r := rand.New(rand.NewPCG(1, 2))
	out := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		shape, _ := lang.ConstShape(v.Shape)
		x := tensor.New(v.DType, shape)
		for i := range x.Len() {
			if v.DType.IsFloat() {
				x.SetFlat(i, 2*r.Float64()-1)
			} else {
				x.SetFlat(i, float64(r.Int64N(classes)))
			}
		}
		out[v.Name] = x
	}
	return out
}
