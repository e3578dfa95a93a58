package check

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// mapEnv is a compile-time environment backed by a map.
type mapEnv map[string]cval

func (m mapEnv) lookupConst(name string) (cval, bool) { v, ok := m[name]; return v, ok }
func (m mapEnv) names() []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	return out
}

// checkOp checks an operator on its own: attributes take their defaults
// (required ones a neutral sample value), every dimension of the inputs is a
// shape symbol, and each pack of unknown length is given one that fits.
func checkOp(op *lang.OpDecl, errs *lang.ErrorList) *ir.Instance {
	env := mapEnv{}
	ev := &evaluator{env: env, errs: errs}
	attrs := map[string]cval{}
	ok := try(func() {
		for _, a := range op.Attrs {
			v := sampleAttr(a)
			if a.Default != nil {
				v = ev.eval(a.Default)
			}
			env[a.Name] = v
			attrs[a.Name] = v
		}
	})
	if !ok {
		return nil
	}
	var inputs []TensorType
	shared := map[int][]lang.Dim{} // free packs of each length share their symbols
	ok = try(func() {
		for _, in := range op.Inputs {
			dt := lang.F32
			if in.DType != "" {
				if _, dt = dtypeClass(in.DType); dt == lang.Invalid {
					ev.fail(in.Pos, "unknown dtype %s%s", in.DType, suggest.DidYouMean(in.DType, dtypeClassNames()))
				}
			}
			inputs = append(inputs, TensorType{DType: dt, Shape: symbolicShape(ev, env, in, shared)})
		}
	})
	if !ok {
		return nil
	}
	return instantiate(op, attrs, nil, inputs, op.Pos, errs)
}

// Standalone instantiates an operator on its own, as check does: default
// attributes (required ones a neutral sample) and symbolic input shapes.
func Standalone(op *lang.OpDecl) (*ir.Instance, error) {
	var errs lang.ErrorList
	inst := checkOp(op, &errs)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return inst, nil
}

func sampleAttr(a *lang.AttrDecl) cval {
	switch a.Type {
	case "float":
		return cval{kind: cFloat, f: 1}
	case "bool":
		return cval{kind: cBool}
	case "string":
		return cval{kind: cString}
	case "list":
		return cval{kind: cList}
	}
	return intVal(1)
}

// symbolicShape invents a shape that matches a pattern: symbols for named
// dimensions, symbols NAME0, NAME1, ... for the dimensions of packs. Packs
// of unknown length in different inputs get the same symbols (as
// element-wise operators expect equal shapes), recorded in shared.
func symbolicShape(ev *evaluator, env mapEnv, in *lang.TensorDecl, shared map[int][]lang.Dim) []lang.Dim {
	fixed, free := 0, -1
	known := 0
	lens := make([]int, len(in.Shape))
	negative := map[int]int64{}
	for i, p := range in.Shape {
		switch {
		case p.Func != nil:
			ev.fail(p.Pos, "a shape function cannot appear in an input shape")
		case p.Pack == "":
			fixed++
		case env[p.Pack].kind == cList:
			lens[i] = len(env[p.Pack].list)
			known += lens[i]
		case p.Len != nil:
			n := ev.constInt(p.Len)
			if n > maxRank || n < -maxRank {
				ev.fail(p.Pos, "pack *%s of length %d is too long (at most %d dimensions)", p.Pack, n, maxRank)
			}
			if n < 0 {
				negative[i] = n
				continue
			}
			lens[i] = int(n)
			known += lens[i]
		default:
			free = i
		}
	}
	// A negative pack length counts from the rank: len = rank + L. Give such
	// packs one dimension and size the free pack so that the ranks agree.
	for i := range negative {
		lens[i] = 1
		known++
	}
	if free >= 0 {
		lens[free] = 1
		if len(negative) > 0 {
			var sumL int64
			for _, l := range negative {
				sumL += l
			}
			// rank = known + fixed + f and, for each negative pack, 1 = rank + L.
			rank := 1 - int(sumL)/len(negative)
			lens[free] = max(0, rank-known-fixed)
		}
	}
	var shape []lang.Dim
	for i, p := range in.Shape {
		switch {
		case p.Pack != "":
			if v, ok := env[p.Pack]; ok && v.kind == cList {
				ds, _ := v.dims()
				shape = append(shape, ds...)
				continue
			}
			ds := shared[lens[i]]
			if ds == nil || i != free {
				ds = nil
				for k := range lens[i] {
					ds = append(ds, lang.Sym(fmt.Sprintf("%s%d", p.Pack, k)))
				}
			}
			if i == free {
				shared[lens[i]] = ds
			}
			env[p.Pack] = dimsVal(ds)
			shape = append(shape, ds...)
		default:
			walkIdents(p.Expr, func(name string) {
				if _, bound := env[name]; !bound {
					env[name] = dimVal(lang.Sym(name)) // a symbol, also in `heads * D`
				}
			})
			d := ev.eval(p.Expr)
			if d.kind != cInt {
				ev.fail(p.Pos, "a dimension must be an integer, found %s %s", d.kind, d)
			}
			shape = append(shape, d.dim)
		}
	}
	return shape
}
