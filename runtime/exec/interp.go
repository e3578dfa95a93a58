package exec

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// Interp is the reference interpreter as a backend.
type Interp struct {
	// Progress, when not nil, is called before node i (0-based) of total
	// is evaluated, with the node's name.
	Progress func(node, total int, name string)
	// Workers is the number of goroutines per Def; 0 means GOMAXPROCS.
	Workers int
}

// Name is "interp".
func (Interp) Name() string { return "interp" }

// Prepare does nothing: the interpreter reads the graph as it runs.
func (b Interp) Prepare(g *ir.Graph, syms map[string]int64) (Program, error) {
	return &interpProgram{b: b, g: g, syms: syms}, nil
}

type interpProgram struct {
	b    Interp
	g    *ir.Graph
	syms map[string]int64
}

func (p *interpProgram) Close() error { return nil }

// Run evaluates the nodes in order, dropping each value after its last
// use.
func (p *interpProgram) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	g := p.g
	vals := map[*ir.Value]*tensor.Tensor{}
	keep := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		vals[v], keep[v] = inputs[v.Name], true
	}
	for _, q := range g.Params {
		vals[q.Value], keep[q.Value] = params[q.Value.Name], true
	}
	for _, v := range g.Outputs {
		keep[v] = true
	}
	lastUse := map[*ir.Value]int{}
	for i, n := range g.Nodes {
		for _, v := range n.Inputs {
			lastUse[v] = i
		}
	}
	for i, n := range g.Nodes {
		if p.b.Progress != nil {
			p.b.Progress(i, len(g.Nodes), n.Name)
		}
		if err := p.node(n, vals); err != nil {
			return nil, err
		}
		for _, v := range n.Outputs {
			if _, used := lastUse[v]; !used && !keep[v] {
				delete(vals, v)
			}
		}
		for _, v := range n.Inputs {
			if lastUse[v] == i && !keep[v] {
				delete(vals, v)
			}
		}
	}
	out := map[string]*tensor.Tensor{}
	for _, v := range g.Outputs {
		x := valueOf(v, vals)
		if x == nil {
			return nil, fmt.Errorf("graph %s: output %s is never computed", g.Name, v.Name)
		}
		out[v.Name] = x
	}
	return out, nil
}

// node evaluates one node, checking its outputs.
func (p *interpProgram) node(n *ir.Node, vals map[*ir.Value]*tensor.Tensor) error {
	if n.Inst == nil {
		return lang.Errorf(n.Pos, "node %s has no instance", n.Name)
	}
	ins := make([]*tensor.Tensor, len(n.Inputs))
	for j, v := range n.Inputs {
		if ins[j] = valueOf(v, vals); ins[j] == nil {
			return lang.Errorf(n.Pos, "node %s: value %s is not computed before it is used", n.Name, v.Name)
		}
	}
	outs, err := interp.EvalNode(n.Inst, ins, p.syms, p.b.Workers)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if len(outs) != len(n.Outputs) {
		return lang.Errorf(n.Pos, "node %s: the instance has %d outputs, the node %d", n.Name, len(outs), len(n.Outputs))
	}
	for j, v := range n.Outputs {
		if err := CheckValue(v, outs[j], p.syms); err != nil {
			return lang.Errorf(n.Pos, "node %s: %v", n.Name, err)
		}
		vals[v] = outs[j]
	}
	return nil
}

// valueOf is v's tensor: computed, or its literal constant.
func valueOf(v *ir.Value, vals map[*ir.Value]*tensor.Tensor) *tensor.Tensor {
	if x, ok := vals[v]; ok {
		return x
	}
	if v.Const == nil {
		return nil
	}
	if v.DType.IsFloat() {
		return tensor.Scalar(v.DType, v.Const.Float)
	}
	return tensor.FromInts(v.DType, nil, []int64{v.Const.Int})
}
