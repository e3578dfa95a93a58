package exec

import (
	"fmt"
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/native"
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

// Prepare refuses a graph whose run needs more memory than the machine
// has available (Peak); the interpreter reads the graph as it runs.
func (b Interp) Prepare(g *ir.Graph, syms map[string]int64) (Program, error) {
	if err := CheckMemory("model "+g.Name, b.Peak(g)); err != nil {
		return nil, err
	}
	return &interpProgram{b: b, g: g, syms: syms}, nil
}

// CheckMemory refuses work of the interpreter that needs more memory
// than the machine has available (native.AvailableMemory), before
// anything is allocated: the Go runtime cannot recover from running out
// of memory.
func CheckMemory(what string, need int64) error {
	avail, ok := native.AvailableMemory()
	if !ok || need <= avail {
		return nil
	}
	return fmt.Errorf("%s needs about %s (counting %d bytes an element, as the reference interpreter stores them), more than the %s this machine has available; use smaller sizes (--set)",
		what, lang.FormatBytes(need), tensor.ElementBytes, lang.FormatBytes(avail))
}

type interpProgram struct {
	b    Interp
	g    *ir.Graph
	syms map[string]int64
}

func (p *interpProgram) Close() error { return nil }

// liveness is when the interpreter holds a graph's values: the graph's
// inputs, parameters and outputs throughout (kept), every other value
// from its node to its last use (lastUse: the index of the last node
// reading it; absent when none reads it).
type liveness struct {
	kept    map[*ir.Value]bool
	lastUse map[*ir.Value]int
}

func livenessOf(g *ir.Graph) liveness {
	l := liveness{kept: map[*ir.Value]bool{}, lastUse: map[*ir.Value]int{}}
	for _, v := range g.Inputs {
		l.kept[v] = true
	}
	for _, q := range g.Params {
		l.kept[q.Value] = true
	}
	for _, v := range g.Outputs {
		l.kept[v] = true
	}
	for i, n := range g.Nodes {
		for _, v := range n.Inputs {
			l.lastUse[v] = i
		}
	}
	return l
}

// dropped lists the values the interpreter drops after node i: its
// outputs that nothing reads and its inputs read for the last time.
func (l liveness) dropped(i int, n *ir.Node) []*ir.Value {
	var out []*ir.Value
	for _, v := range n.Outputs {
		if _, used := l.lastUse[v]; !used && !l.kept[v] {
			out = append(out, v)
		}
	}
	for _, v := range n.Inputs {
		if l.lastUse[v] == i && !l.kept[v] {
			out = append(out, v)
		}
	}
	return out
}

// Run evaluates the nodes in order, dropping each value after its last
// use.
func (p *interpProgram) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	g := p.g
	vals := map[*ir.Value]*tensor.Tensor{}
	for _, v := range g.Inputs {
		vals[v] = inputs[v.Name]
	}
	for _, q := range g.Params {
		vals[q.Value] = params[q.Value.Name]
	}
	live := livenessOf(g)
	for i, n := range g.Nodes {
		if p.b.Progress != nil {
			p.b.Progress(i, len(g.Nodes), n.Name)
		}
		if err := p.node(n, vals); err != nil {
			return nil, err
		}
		for _, v := range live.dropped(i, n) {
			delete(vals, v)
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

// Peak is the memory the interpreter holds at its peak when it runs g,
// as Run holds it: the kept values throughout, every other value from
// its node to its last use, and each node's outputs and locals
// (interp.DefBytes) while it runs; every element takes
// tensor.ElementBytes. A value of symbolic shape counts 0 (its size is
// bound from data already read); the sum saturates at math.MaxInt64
// rather than wrap.
func (Interp) Peak(g *ir.Graph) int64 {
	live := livenessOf(g)
	held := map[*ir.Value]bool{}
	var now int64
	hold := func(v *ir.Value) {
		if !held[v] && v.Const == nil {
			held[v] = true
			now = addSat(now, valueBytes(v.Shape))
		}
	}
	for v := range live.kept {
		hold(v)
	}
	peak := now // Resident(g)
	for i, n := range g.Nodes {
		for _, v := range n.Outputs {
			hold(v)
		}
		var locals int64
		if n.Inst != nil {
			locals = interp.DefBytes(n.Inst.Locals)
		}
		peak = max(peak, addSat(now, locals))
		for _, v := range live.dropped(i, n) {
			if held[v] {
				delete(held, v)
				now -= valueBytes(v.Shape)
			}
		}
	}
	return peak
}

// Resident is the memory a graph's inputs, parameters and outputs take as
// tensors (tensor.ElementBytes an element): what every backend's caller
// holds, the interpreter's peak without the values it computes on the
// way.
func Resident(g *ir.Graph) int64 {
	var kept []*ir.Value
	for v := range livenessOf(g).kept {
		kept = append(kept, v)
	}
	return ValuesBytes(kept)
}

// ValuesBytes is the memory values take as tensors (tensor.ElementBytes
// an element; constants none, a symbolic shape 0), saturating at
// math.MaxInt64.
func ValuesBytes(vals []*ir.Value) int64 {
	var n int64
	for _, v := range vals {
		if v.Const == nil {
			n = addSat(n, valueBytes(v.Shape))
		}
	}
	return n
}

// valueBytes is the interpreter's size of a value of shape s (0 for a
// symbolic shape, math.MaxInt64 past int64).
func valueBytes(s []lang.Dim) int64 {
	if _, concrete := lang.ConstShape(s); !concrete {
		return 0
	}
	n, ok := lang.ShapeElements(s)
	if ok {
		n, ok = lang.MulInt64(n, tensor.ElementBytes)
	}
	if !ok {
		return math.MaxInt64
	}
	return n
}

func addSat(a, b int64) int64 {
	if s, ok := lang.AddInt64(a, b); ok {
		return s
	}
	return math.MaxInt64
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
		if n.Pos.IsValid() { // the model's call site, then the operator's line
			return fmt.Errorf("%s: node %s: %w", n.Pos, n.Name, err)
		}
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
