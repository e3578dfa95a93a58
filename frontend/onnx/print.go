package onnx

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// printer writes the imported model as TDL.
type printer struct {
	imp      *importer
	names    *namer
	consts   strings.Builder // parameter and constant bindings
	body     strings.Builder
	params   map[string]*tensor.Tensor
	returned []string
	origins  map[string]string // by the names a statement binds (Result.Origins)
}

func newPrinter(imp *importer) *printer {
	ops := imp.prog.StdOps()
	n := &namer{taken: map[string]bool{}, avoid: func(s string) bool { return ops[s] != nil }}
	for _, a := range imp.dimAttrs {
		n.taken[a] = true
	}
	return &printer{imp: imp, names: n, params: map[string]*tensor.Tensor{}, origins: map[string]string{}}
}

// model prints the whole model returning outs.
func (p *printer) model(outs []*value) ([]byte, map[string]*tensor.Tensor) {
	var ins []string
	for _, v := range p.imp.inputs {
		ins = append(ins, p.name(v)+": "+v.typ.String())
	}
	for _, s := range p.imp.stmts {
		p.stmt(s)
	}
	seen := map[*value]bool{}
	for _, v := range outs {
		if seen[v] {
			// A second graph output aliasing the same value (through
			// Identity, say) needs a tensor of its own.
			copied := &value{onnx: v.onnx, typ: v.typ}
			p.stmt(&stmt{op: "identity", args: []*value{v}, outs: []*value{copied}})
			v = copied
		}
		seen[v] = true
		p.returned = append(p.returned, p.ref(v))
	}
	var b strings.Builder
	m := p.imp.model
	fmt.Fprintf(&b, "// Imported by tofuc import from %s (ONNX IR version %d, opset %d", filepath.Base(m.Path), m.Proto.GetIrVersion(), p.imp.opset)
	if prod := strings.TrimSpace(m.Proto.GetProducerName() + " " + m.Proto.GetProducerVersion()); prod != "" {
		fmt.Fprintf(&b, ", produced by %s", prod)
	}
	fmt.Fprintf(&b, ").\n// %d nodes: %d folded at import, %d calls.", len(m.Proto.GetGraph().GetNode()), p.imp.folded, len(p.imp.stmts))
	if len(p.params) > 0 {
		fmt.Fprintf(&b, " The values of its %d parameters are in the .npz beside this file.", len(p.params))
	}
	b.WriteString("\n")
	name := p.imp.opts.Name
	if name == "" {
		name = ModelName(m.Path)
	}
	fmt.Fprintf(&b, "model %s", name)
	if len(p.imp.dimAttrs) > 0 {
		attrs := make([]string, len(p.imp.dimAttrs))
		for i, a := range p.imp.dimAttrs {
			attrs[i] = a + " = 1"
		}
		fmt.Fprintf(&b, "<%s>", strings.Join(attrs, ", "))
	}
	fmt.Fprintf(&b, "(%s) {\n", strings.Join(ins, ", "))
	b.WriteString(p.consts.String())
	b.WriteString(p.body.String())
	fmt.Fprintf(&b, "    return %s\n}\n", strings.Join(p.returned, ", "))
	return []byte(b.String()), p.params
}

func (p *printer) stmt(s *stmt) {
	args := make([]string, len(s.args))
	for i, a := range s.args {
		args[i] = p.ref(a)
	}
	outs := make([]string, len(s.outs))
	for i, o := range s.outs {
		outs[i] = p.name(o)
	}
	call := s.op
	if len(s.attrs) > 0 {
		as := make([]string, len(s.attrs))
		for i, a := range s.attrs {
			as[i] = a.name + " = " + attrString(a.val)
		}
		call += "<" + strings.Join(as, ", ") + ">"
	}
	fmt.Fprintf(&p.body, "    %s = %s(%s)\n", strings.Join(outs, ", "), call, strings.Join(args, ", "))
	if s.origin != "" {
		p.origins[strings.Join(outs, ",")] = s.origin
	}
}

// name assigns v its TDL name.
func (p *printer) name(v *value) string {
	if v.name == "" {
		base := v.onnx
		if base == "" {
			base = "t"
		}
		v.name = p.names.ident(base)
	}
	return v.name
}

// ref names v where it is used, first binding a known value: uniform
// f32 values as full(), the others as parameters whose values go to the
// .npz.
func (p *printer) ref(v *value) string {
	if v.name != "" || v.konst == nil {
		return p.name(v)
	}
	name := p.name(v)
	t := v.konst
	if fill, ok := uniform(t); ok && t.DType == lang.F32 && !v.init {
		fmt.Fprintf(&p.consts, "    %s = full<shape = %s, value = %s>()\n", name, intsString(t.Shape), floatString(float32Value(float32(fill))))
		return name
	}
	fmt.Fprintf(&p.consts, "    %s = param %s\n", name, v.typ.String())
	p.params[name] = t
	return name
}

// uniform reports whether every element of t is the same value.
func uniform(t *tensor.Tensor) (float64, bool) {
	if t.Len() == 0 {
		return 0, false
	}
	first := t.Flat(0)
	for i := 1; i < t.Len(); i++ {
		if v := t.Flat(i); v != first && !(math.IsNaN(v) && math.IsNaN(first)) {
			return 0, false
		}
	}
	return first, true
}

func intsString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// attrString prints an attribute value as TDL source.
func attrString(a ir.AttrValue) string {
	switch a.Kind {
	case ir.AttrFloat:
		return floatString(a.Float)
	case ir.AttrList:
		parts := make([]string, len(a.List))
		for i, e := range a.List {
			parts[i] = attrString(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return a.String()
}

// floatString prints a float as a TDL float literal.
func floatString(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}
