package smt

import (
	"fmt"
	"math"
	"math/big"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// lowerer expands a rule side into normal form by inlining every operator
// lambda into its consumer: a read of an intermediate tensor becomes the
// producer's body with its index variables bound to the read's indices.
type lowerer struct {
	producer map[*ir.Value]producer
	dtypes   map[string]lang.DType // of the rule's inputs, by name
	fresh    int
	dl       *deadline
}

type producer struct {
	node *ir.Node
	out  int
}

// frame is the node whose lambdas are being read and the values of its
// index variables.
type frame struct {
	node *ir.Node
	env  map[*ir.Var]lin
}

// unsupported is the error for IR the normal form cannot express.
type unsupported struct{ what string }

func (u *unsupported) Error() string { return "cannot verify: " + u.what }

func newLowerer(dl *deadline, graphs ...*ir.Graph) *lowerer {
	l := &lowerer{producer: map[*ir.Value]producer{}, dtypes: map[string]lang.DType{}, dl: dl}
	for _, g := range graphs {
		for _, v := range g.Inputs {
			l.dtypes[v.Name] = v.DType
		}
		for _, n := range g.Nodes {
			for i, v := range n.Outputs {
				l.producer[v] = producer{n, i}
			}
		}
	}
	return l
}

// outputVars names the free index variables of an output of rank r.
func outputVars(r int) []lin {
	idx := make([]lin, r)
	for i := range idx {
		idx[i] = linName(fmt.Sprintf("%%o%d", i))
	}
	return idx
}

// value reads graph value v at idx.
func (l *lowerer) value(v *ir.Value, idx []lin) (poly, error) {
	if v.Const != nil {
		if v.DType.IsFloat() {
			return floatPoly(v.Const.Float)
		}
		return constPoly(ratInt(v.Const.Int)), nil
	}
	p, ok := l.producer[v]
	if !ok {
		return atomPoly(newAccess(v.Name, idx)), nil
	}
	return l.def(p.node, p.node.Inst.Outputs[p.out], idx)
}

func (l *lowerer) def(n *ir.Node, d *ir.Def, idx []lin) (poly, error) {
	env := map[*ir.Var]lin{}
	for i, v := range d.Vars {
		env[v] = idx[i]
	}
	p, err := l.expr(d.Body, &frame{n, env})
	if err != nil {
		return nil, err
	}
	return l.store(d.Tensor.DType, p), nil
}

// store is p as a tensor of dtype t holds it: rounded (an uninterpreted
// function) when t is a float dtype narrower than an input of the rule.
// The rule's arithmetic is in its inputs' precision and its rounding is
// not modelled; a narrower tensor (after cast_bf16 of f32 inputs) rounds
// every value stored in it, and that is the rule's semantics.
func (l *lowerer) store(t lang.DType, p poly) poly {
	if !t.IsFloat() || l.holds(t, p) {
		return p
	}
	for _, in := range l.dtypes {
		if !floatHolds(t, in) {
			return fnPoly("round:"+t.String(), p)
		}
	}
	return p
}

func floatPoly(f float64) (poly, error) {
	switch {
	case math.IsNaN(f):
		return nil, &unsupported{"a NaN constant"}
	case math.IsInf(f, 1):
		return atomPoly(&atom{kind: aInf, name: "inf", key: "inf"}), nil
	case math.IsInf(f, -1):
		return atomPoly(&atom{kind: aInf, name: "-inf", key: "-inf"}), nil
	}
	return constPoly(new(big.Rat).SetFloat64(f)), nil
}

// read evaluates an access of tensor t of the frame's instance.
func (l *lowerer) read(fr *frame, t *ir.Tensor, idx []lin) (poly, error) {
	inst := fr.node.Inst
	for i, in := range inst.Inputs {
		if in == t {
			return l.value(fr.node.Inputs[i], idx)
		}
	}
	for _, ds := range [][]*ir.Def{inst.Locals, inst.Outputs} {
		for _, d := range ds {
			if d.Tensor == t {
				return l.def(fr.node, d, idx)
			}
		}
	}
	return nil, &unsupported{"a read of unknown tensor " + t.Name}
}

func (l *lowerer) access(fr *frame, a *ir.Access) (poly, error) {
	idx := make([]lin, len(a.Index))
	for i, x := range a.Index {
		v, err := l.index(fr, x)
		if err != nil {
			return nil, err
		}
		idx[i] = v
	}
	p, err := l.read(fr, a.T, idx)
	if err != nil || a.Default == nil {
		return p, err
	}
	inb, ik := inBounds(a.T.Shape, idx, nil)
	def, err := l.expr(a.Default, fr)
	if err != nil {
		return nil, err
	}
	if ik.known {
		if ik.val {
			return p, nil
		}
		return def, nil
	}
	out, _ := inb.not()
	return p.withGuard(inb, ik).add(def.withGuard(out, condConst{})), nil
}

// inBounds is the condition that idx lies inside shape, leaving out the
// bounds that known already holds.
func inBounds(shape []lang.Dim, idx []lin, known guard) (*cond, condConst) {
	var cs []*cond
	var ks []condConst
	for i, x := range idx {
		lo, lk := mkGE(x)
		hi, hk := mkGE(dimLin(shape[i]).sub(x).add(linConst(-1)))
		for _, b := range []struct {
			c *cond
			k condConst
		}{{lo, lk}, {hi, hk}} {
			if b.k.known || !known.hasAll([]*cond{b.c}) {
				cs, ks = append(cs, b.c), append(ks, b.k)
			}
		}
	}
	return mkJunction(cAnd, cs, ks)
}

// indexPure reports whether e is integer or boolean index arithmetic that
// reads no tensor.
func indexPure(e ir.Expr) bool {
	if e.Type().IsFloat() {
		return false
	}
	pure := true
	ir.Walk(e, func(x ir.Expr) bool {
		switch x.(type) {
		case *ir.Access, *ir.Reduce, *ir.Call, *ir.Opaque:
			pure = false
		}
		if x.Type().IsFloat() {
			pure = false
		}
		return pure
	})
	return pure
}

func (l *lowerer) freshVar() string {
	l.fresh++
	return fmt.Sprintf("%%b%d", l.fresh)
}
