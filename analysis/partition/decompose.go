package partition

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// A Decomposition runs an operator, when a graph is partitioned, as a
// chain of standard-library operators that compute the same outputs by
// the same formulas, so that the partitioner can split what the operator
// as a whole cannot: batch_norm_train's outputs share no dimension but
// C, so it only splits c; its statistics are sums over the batch, and run
// apart they get reduction strategies over n whose partial sums combine
// (2·C values per worker), and the normalisation an output split along n.
type Decomposition struct {
	Op    string
	Steps []DecompStep
	// Outputs gives, per output of the operator, the step output that
	// computes it.
	Outputs []Ref
	// Along is what the parts split that the operator cannot: dimension
	// Dim of input Input (batch_norm_train: the batch of x).
	Along struct{ Input, Dim int }
}

// DecompStep is one operator of a decomposition.
type DecompStep struct {
	// Suffix is appended to the node's name ("" for the step that keeps
	// the node's name).
	Suffix string
	Op     string
	// Attrs are the attributes of the decomposed operator the step takes
	// (by the same name).
	Attrs  []string
	Inputs []Ref
}

// Ref is an operand of a step: input Index of the decomposed operator
// (Step < 0) or output Index of an earlier step.
type Ref struct{ Step, Index int }

func opInput(i int) Ref          { return Ref{Step: -1, Index: i} }
func stepOutput(step, i int) Ref { return Ref{Step: step, Index: i} }
func (r Ref) input() bool        { return r.Step < 0 }

// Decompositions are the operators the partitioner runs decomposed.
//
// batch_norm_train(x, scale, bias, running_mean, running_var) is the
// two-pass algorithm of its own lets: the batch mean is a sum over the
// batch and *S divided by the count; the variance a sum of squares around
// that mean, divided by the count; y normalises with them exactly as the
// inference batch_norm does with given statistics; the running statistics
// are updated as running * momentum + batch * (1 - momentum). Split along
// n, each worker's partial sums of the mean are combined (C values), then
// its partial sums of squares around the global mean (C values): the
// same two passes over the same values as the whole operator, the sums
// only reordered, so no E[x²] − E[x]² cancellation (docs/decisions.md).
var Decompositions = map[string]*Decomposition{
	"batch_norm_train": {
		Op: "batch_norm_train",
		Steps: []DecompStep{
			{Suffix: ".mean", Op: "batch_mean", Inputs: []Ref{opInput(0)}},
			{Suffix: ".var", Op: "batch_var", Inputs: []Ref{opInput(0), stepOutput(0, 0)}},
			{Op: "batch_norm", Attrs: []string{"epsilon"}, Inputs: []Ref{opInput(0), opInput(1), opInput(2), stepOutput(0, 0), stepOutput(1, 0)}},
			{Suffix: ".running_mean", Op: "running_average", Attrs: []string{"momentum"}, Inputs: []Ref{opInput(3), stepOutput(0, 0)}},
			{Suffix: ".running_var", Op: "running_average", Attrs: []string{"momentum"}, Inputs: []Ref{opInput(4), stepOutput(1, 0)}},
		},
		Outputs: []Ref{stepOutput(2, 0), stepOutput(0, 0), stepOutput(1, 0), stepOutput(3, 0), stepOutput(4, 0)},
		Along:   struct{ Input, Dim int }{0, 0},
	},
}

// Ops resolves operator names (a module's scope).
type Ops interface {
	Op(name string) *lang.OpDecl
}

// Decompose returns g with every node of a decomposed operator
// (Decompositions) replaced by the decomposition's nodes, for
// partitioning a model; it is applied to the forward graph, before the
// training graph is derived, so that the backward operators are those of
// the decomposition's operators. The nodes keep the original's output
// values (the statistics and running statistics are the same values),
// their names derived from its name, and its position. A graph without
// such nodes is returned as it is.
func Decompose(g *ir.Graph, ops Ops) (*ir.Graph, error) {
	found := false
	for _, n := range g.Nodes {
		found = found || Decompositions[n.Inst.Op] != nil
	}
	if !found {
		return g, nil
	}
	names := map[string]bool{}
	for _, v := range g.Inputs {
		names[v.Name] = true
	}
	for _, p := range g.Params {
		names[p.Value.Name] = true
	}
	for _, n := range g.Nodes {
		names[n.Name] = true
		for _, o := range n.Outputs {
			names[o.Name] = true
		}
	}
	unique := func(name string) string {
		u := name
		for k := 1; names[u]; k++ {
			u = fmt.Sprintf("%s.%d", name, k)
		}
		names[u] = true
		return u
	}
	d := &decomposer{ops: ops, cache: map[string]*ir.Instance{}}
	out := *g
	out.Nodes = nil
	for _, n := range g.Nodes {
		dec := Decompositions[n.Inst.Op]
		if dec == nil {
			out.Nodes = append(out.Nodes, n)
			continue
		}
		insts, err := d.instances(dec, n.Inst, n.Pos)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: decomposing %s: %w", n.Pos, n.Name, n.Inst.Op, err)
		}
		// The step outputs that are the node's outputs keep its values.
		keep := map[Ref]*ir.Value{}
		for o, r := range dec.Outputs {
			keep[r] = n.Outputs[o]
		}
		steps := make([]*ir.Node, len(dec.Steps))
		for s, step := range dec.Steps {
			name := n.Name
			if step.Suffix != "" {
				name = unique(n.Name + step.Suffix)
			}
			sn := &ir.Node{Name: name, Inst: insts[s], Pos: n.Pos, Forward: n.Forward, Role: n.Role}
			for _, r := range step.Inputs {
				if r.input() {
					sn.Inputs = append(sn.Inputs, n.Inputs[r.Index])
				} else {
					sn.Inputs = append(sn.Inputs, steps[r.Step].Outputs[r.Index])
				}
			}
			for o, def := range insts[s].Outputs {
				v := keep[stepOutput(s, o)]
				if v == nil {
					v = &ir.Value{Name: unique(name + "." + def.Tensor.Name), DType: def.Tensor.DType, Shape: def.Tensor.Shape}
				}
				sn.Outputs = append(sn.Outputs, v)
			}
			steps[s] = sn
			out.Nodes = append(out.Nodes, sn)
		}
	}
	return &out, nil
}

// Parts instantiates the steps of inst's decomposition for its
// attributes and input types (symbolic ones too, as tofuc strategies
// instantiates operators), in order; nil when its operator is not
// decomposed.
func Parts(inst *ir.Instance, ops Ops) ([]*ir.Instance, error) {
	dec := Decompositions[inst.Op]
	if dec == nil {
		return nil, nil
	}
	d := &decomposer{ops: ops, cache: map[string]*ir.Instance{}}
	return d.instances(dec, inst, inst.Pos)
}

// decomposer instantiates decompositions' steps, one instance per
// distinct operator, attributes and input types (as the checker shares
// them), so that later passes share their work between identical layers.
type decomposer struct {
	ops   Ops
	cache map[string]*ir.Instance
}

// instances instantiates the steps of dec for inst's attributes and
// input types (concrete or symbolic).
func (d *decomposer) instances(dec *Decomposition, inst *ir.Instance, site lang.Pos) ([]*ir.Instance, error) {
	attrs := map[string]ir.AttrValue{}
	for _, a := range inst.Attrs {
		attrs[a.Name] = a.Value
	}
	var out []*ir.Instance
	for _, step := range dec.Steps {
		decl := d.ops.Op(step.Op)
		if decl == nil {
			return nil, fmt.Errorf("no operator %s", step.Op)
		}
		stepAttrs := map[string]ir.AttrValue{}
		for _, name := range step.Attrs {
			v, ok := attrs[name]
			if !ok {
				return nil, fmt.Errorf("%s has no attribute %s", inst.Op, name)
			}
			stepAttrs[name] = v
		}
		var ts []check.TensorType
		for _, r := range step.Inputs {
			if r.input() {
				t := inst.Inputs[r.Index]
				ts = append(ts, check.TensorType{DType: t.DType, Shape: t.Shape})
			} else {
				t := out[r.Step].Outputs[r.Index].Tensor
				ts = append(ts, check.TensorType{DType: t.DType, Shape: t.Shape})
			}
		}
		key := instanceKey(step.Op, stepAttrs, ts)
		si, ok := d.cache[key]
		if !ok {
			var err error
			if si, err = check.Instantiate(decl, stepAttrs, ts, site); err != nil {
				return nil, fmt.Errorf("%s: %w", step.Op, err)
			}
			d.cache[key] = si
		}
		out = append(out, si)
	}
	// The steps must compute outputs of the operator's types.
	for o, r := range dec.Outputs {
		got, want := out[r.Step].Outputs[r.Index].Tensor, inst.Outputs[o].Tensor
		if got.DType != want.DType || lang.ShapeString(got.Shape) != lang.ShapeString(want.Shape) {
			return nil, fmt.Errorf("output %s: the decomposition computes %s%s, not %s%s", want.Name,
				got.DType, lang.ShapeString(got.Shape), want.DType, lang.ShapeString(want.Shape))
		}
	}
	return out, nil
}

func instanceKey(op string, attrs map[string]ir.AttrValue, ts []check.TensorType) string {
	var b strings.Builder
	b.WriteString(op)
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		fmt.Fprintf(&b, " %s=%v", name, attrs[name])
	}
	for _, t := range ts {
		fmt.Fprintf(&b, " %s%s", t.DType, lang.ShapeString(t.Shape))
	}
	return b.String()
}
