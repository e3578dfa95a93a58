package search

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// FormatModel prints g as a TDL model that checks on its own: inputs,
// parameters with their initialisers, one binding per node, the outputs.
func FormatModel(g *ir.Graph, name string) string {
	p := &modelPrinter{names: map[*ir.Value]string{}, taken: map[string]bool{}}
	for _, v := range g.Inputs {
		p.keep(v)
	}
	for _, prm := range g.Params {
		p.keep(prm.Value)
	}
	var ins []string
	for _, v := range g.Inputs {
		ins = append(ins, p.name(v)+": "+v.DType.String()+lang.ShapeString(v.Shape))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "model %s(%s) {\n", ident(name), strings.Join(ins, ", "))
	for _, prm := range g.Params {
		v := prm.Value
		fmt.Fprintf(&b, "    %s = param %s%s init %s(%s)\n", p.name(v), v.DType, lang.ShapeString(v.Shape), prm.Init.Kind, floats(prm.Init.Args))
	}
	for _, n := range g.Nodes {
		var outs, args []string
		for _, v := range n.Outputs {
			outs = append(outs, p.name(v))
		}
		for _, v := range n.Inputs {
			args = append(args, p.ref(v))
		}
		fmt.Fprintf(&b, "    %s = %s%s(%s)\n", strings.Join(outs, ", "), n.Inst.Op, attrs(n.Inst.Attrs), strings.Join(args, ", "))
	}
	var rets []string
	for _, v := range g.Outputs {
		rets = append(rets, p.ref(v))
	}
	fmt.Fprintf(&b, "    return %s\n}\n", strings.Join(rets, ", "))
	return b.String()
}

type modelPrinter struct {
	names map[*ir.Value]string
	taken map[string]bool
}

// keep names inputs and parameters as the model does, so that inputs and
// parameter files still apply.
func (p *modelPrinter) keep(v *ir.Value) {
	if ident(v.Name) == v.Name && !p.taken[v.Name] {
		p.taken[v.Name] = true
		p.names[v] = v.Name
	}
}

func (p *modelPrinter) name(v *ir.Value) string {
	if s, ok := p.names[v]; ok {
		return s
	}
	base := "v_" + ident(v.Name)
	s := base
	for i := 1; p.taken[s]; i++ {
		s = base + "_" + strconv.Itoa(i)
	}
	p.taken[s] = true
	p.names[v] = s
	return s
}

// ref is how a node argument reads v: a literal for a constant.
func (p *modelPrinter) ref(v *ir.Value) string {
	if v.Const == nil {
		return p.name(v)
	}
	if v.DType.IsFloat() {
		s := strconv.FormatFloat(v.Const.Float, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatInt(v.Const.Int, 10)
}

func ident(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	return b.String()
}

func attrs(as []ir.Attr) string {
	if len(as) == 0 {
		return ""
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Name + " = " + a.Value.String()
	}
	return "<" + strings.Join(parts, ", ") + ">"
}

func floats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ", ")
}
