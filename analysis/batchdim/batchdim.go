package batchdim

import (
	"fmt"
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// Axis is where a value carries the batch: dimension Dim, of extent
// Factor times the batch (sample s is the block [Factor·s,
// Factor·s+Factor−1]); Dim is -1 for a value that does not depend on the
// batch.
type Axis struct {
	Dim    int   `json:"dim"`
	Factor int64 `json:"factor,omitempty"`
}

// None is the axis of a value without a batch.
var None = Axis{Dim: -1}

// Named is a graph input's or output's axis.
type Named struct {
	Name string `json:"name"`
	Axis
}

// Result is what Check proved: the batch axis of every graph input and
// output, in the graph's order.
type Result struct {
	Symbol  string
	Inputs  []Named
	Outputs []Named
}

// Check proves that g, elaborated with the batch extent as the shape
// symbol sym, computes each sample on its own at every size of sizes
// (see the package comment); an error names what it cannot prove.
func Check(g *ir.Graph, sym string, sizes []int64) (*Result, error) {
	// A read clamped to the batch's end at every size compiled (the next
	// sample, at batch 1) shows at a larger one.
	sizes = append(slices.Clone(sizes), slices.Max(sizes)+2)
	c := &checker{sym: sym, sizes: sizes, axes: map[*ir.Value]Axis{}}
	res := &Result{Symbol: sym}
	for _, v := range g.Inputs {
		a, err := c.axisOf(v)
		if err != nil {
			return nil, fmt.Errorf("input %w", err)
		}
		c.axes[v] = a
		res.Inputs = append(res.Inputs, Named{v.Name, a})
	}
	if res.batchInputs() == 0 {
		return nil, fmt.Errorf("no input of %s has the extent %s", g.Name, sym)
	}
	for _, p := range g.Params {
		if mentions(p.Value.Shape, sym) {
			return nil, fmt.Errorf("parameter %s has the shape %s: a parameter cannot depend on the dynamic %s", p.Value.Name, lang.ShapeString(p.Value.Shape), sym)
		}
		c.axes[p.Value] = None
	}
	for _, n := range g.Nodes {
		if err := c.node(n); err != nil {
			return nil, fmt.Errorf("%s (%s at %s): %w", n.Name, n.Inst.Op, n.Pos, err)
		}
	}
	for _, v := range g.Outputs {
		a, ok := c.axes[v]
		if !ok { // a constant output
			a = None
		}
		res.Outputs = append(res.Outputs, Named{v.Name, a})
	}
	return res, nil
}

func (r *Result) batchInputs() int {
	n := 0
	for _, in := range r.Inputs {
		if in.Dim >= 0 {
			n++
		}
	}
	return n
}

type checker struct {
	sym   string
	sizes []int64
	// axes holds the axis of every value seen; a value derived from the
	// batch always has one (node refuses the others).
	axes map[*ir.Value]Axis
	// inputs are the inputs of the instance being proved.
	inputs map[*ir.Tensor]bool
}

// axisOf finds the dimension of v whose extent mentions the symbol: it
// must be a constant multiple of it, and the only one.
func (c *checker) axisOf(v *ir.Value) (Axis, error) {
	a := None
	for d, e := range v.Shape {
		if !slices.Contains(e.Symbols(), c.sym) {
			continue
		}
		coefs, constant, ok := e.Linear()
		if others := slices.DeleteFunc(e.Symbols(), func(s string) bool { return s == c.sym }); len(others) > 0 {
			return None, fmt.Errorf("%s: extent %s of its shape %s also depends on %s: give it with --set %s=N", v.Name, e, lang.ShapeString(v.Shape), others[0], others[0])
		}
		if !ok || constant != 0 || len(coefs) != 1 || coefs[c.sym] < 1 {
			return None, fmt.Errorf("%s: extent %s of its shape %s is not a multiple of %s", v.Name, e, lang.ShapeString(v.Shape), c.sym)
		}
		if a != None {
			return None, fmt.Errorf("%s: its shape %s has %s in two dimensions", v.Name, lang.ShapeString(v.Shape), c.sym)
		}
		a = Axis{Dim: d, Factor: coefs[c.sym]}
	}
	return a, nil
}

func mentions(shape []lang.Dim, sym string) bool {
	for _, d := range shape {
		if slices.Contains(d.Symbols(), sym) {
			return true
		}
	}
	return false
}

// node proves one operator sample-wise, and records its outputs' axes.
func (c *checker) node(n *ir.Node) error {
	batched := false
	for _, v := range n.Inputs {
		if c.axis(v) != None {
			batched = true
		}
	}
	var outs []Axis
	for _, v := range n.Outputs {
		a, err := c.axisOf(v)
		if err != nil {
			return fmt.Errorf("output %w", err)
		}
		if batched && a == None {
			return fmt.Errorf("its output %s has no batch dimension though it is computed from the batch: the operator mixes samples (a reduction over %s?)", v.Name, c.sym)
		}
		outs = append(outs, a)
	}
	if slices.Contains(outs, None) && slices.ContainsFunc(outs, func(a Axis) bool { return a != None }) {
		return fmt.Errorf("some of its outputs have a batch dimension and some do not")
	}
	for i, v := range n.Outputs {
		c.axes[v] = outs[i]
	}
	if len(outs) == 0 || outs[0] == None {
		// Computed without the batch, it must be the same at every
		// size: no extent or value of it may mention the symbol.
		if c.mentionsSymbol(n.Inst) {
			return fmt.Errorf("it is computed from the batch size %s without a batch dimension (a value that changes with the batch size)", c.sym)
		}
		return nil
	}
	if err := c.translationInvariant(n.Inst); err != nil {
		return err
	}
	return c.regions(n, outs)
}

// axis is the recorded axis of v (None for a constant or unseen value).
func (c *checker) axis(v *ir.Value) Axis {
	if a, ok := c.axes[v]; ok {
		return a
	}
	return None
}
