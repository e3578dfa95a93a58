package search

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// FormatModel prints g as a TDL model: inputs, parameters with their
// initialisers, one binding per node, the outputs. Inputs and parameters
// keep their names, and output i is bound to outputs[i] (the names of the
// model g was optimised from; a rewrite may have replaced the value), so
// that input and parameter files, and output file names, still apply (a
// parameter whose name is no identifier, such as a block's `h.2/w1`, is
// bound to one and keeps its name with a `name "h.2/w1"` clause). It
// checks where the operators it calls are in scope (the standard library
// and any printed before it). The last len(updated) outputs of g are the
// updates of the parameters named in updated, printed as `update w =
// EXPR` statements rather than returned.
func FormatModel(g *ir.Graph, name string, outputs, updated []string) string {
	returned := g.Outputs[:len(g.Outputs)-len(updated)]
	p := &modelPrinter{names: map[*ir.Value]string{}, taken: map[string]bool{}}
	for _, v := range g.Inputs {
		p.keep(v, v.Name)
	}
	for _, prm := range g.Params {
		p.keep(prm.Value, prm.Value.Name)
	}
	for i, v := range returned {
		if i < len(outputs) && v.Const == nil {
			p.keep(v, outputs[i])
		}
	}
	var ins []string
	for _, v := range g.Inputs {
		ins = append(ins, p.name(v)+": "+v.DType.String()+lang.ShapeString(v.Shape))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "model %s(%s) {\n", ident(name), strings.Join(ins, ", "))
	for _, prm := range g.Params {
		v := prm.Value
		label := ""
		if p.name(v) != v.Name {
			label = " name " + strconv.Quote(v.Name)
		}
		fmt.Fprintf(&b, "    %s = param %s%s init %s(%s)%s\n", p.name(v), v.DType, lang.ShapeString(v.Shape), prm.Init.Kind, floats(prm.Init.Args), label)
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
	params := map[string]*ir.Value{}
	for _, prm := range g.Params {
		params[prm.Value.Name] = prm.Value
	}
	for i, name := range updated {
		fmt.Fprintf(&b, "    update %s = %s\n", p.name(params[name]), p.ref(g.Outputs[len(returned)+i]))
	}
	var rets []string
	for _, v := range returned {
		rets = append(rets, p.ref(v))
	}
	fmt.Fprintf(&b, "    return %s\n}\n", strings.Join(rets, ", "))
	return b.String()
}

type modelPrinter struct {
	names map[*ir.Value]string
	taken map[string]bool
}

// keep names v as the model does, when name is an identifier not taken
// (by an input returned as an output, say).
func (p *modelPrinter) keep(v *ir.Value, name string) {
	if _, named := p.names[v]; !named && ident(name) == name && !p.taken[name] {
		p.taken[name] = true
		p.names[v] = name
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
