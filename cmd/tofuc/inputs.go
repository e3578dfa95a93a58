package main

import (
	"fmt"
	"path"
	"strings"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/npy"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

// checkInputs compares the tensors given with --in with the inputs of
// model g, before anything runs, and says what was expected in the
// model's own terms: `input x has shape [4, 784], want f32[64, 784]
// (batch = 64; set it with --set batch=4)`.
func checkInputs(m *check.Module, g *ir.Graph, given map[string]*tensor.Tensor) error {
	decl := modelDecl(m, g.Name)
	for i, in := range g.Inputs {
		t := given[in.Name]
		if t == nil {
			continue
		}
		want := in.DType.String() + lang.ShapeString(in.Shape)
		if t.DType != in.DType && npy.AsDType(t, in.DType).DType != in.DType {
			return fmt.Errorf("input %s is %s%v, want %s", in.Name, t.DType, t.Shape, want)
		}
		if len(t.Shape) != len(in.Shape) {
			return fmt.Errorf("input %s has shape %v, want %s (rank %d)", in.Name, t.Shape, want, len(in.Shape))
		}
		var hints []string
		for d, dim := range in.Shape {
			n, concrete := dim.IsConst()
			if !concrete || n == int64(t.Shape[d]) {
				continue // a symbolic extent is bound from the data
			}
			hints = append(hints, dimHint(decl, i, d, n, t.Shape[d]))
		}
		if len(hints) > 0 {
			return fmt.Errorf("input %s has shape %v, want %s (%s)", in.Name, t.Shape, want, strings.Join(hints, "; "))
		}
	}
	return nil
}

// dimHint explains extent d of input i: an attribute the user can set, or
// the expression that gives it.
func dimHint(decl *lang.ModelDecl, i, d int, want int64, got int) string {
	if decl == nil || i >= len(decl.Inputs) || d >= len(decl.Inputs[i].Shape) || decl.Inputs[i].Shape[d].Expr == nil {
		return fmt.Sprintf("dimension %d is %d", d, want)
	}
	e := decl.Inputs[i].Shape[d].Expr
	if id, ok := e.(*lang.Ident); ok && isAttribute(decl, id.Name) {
		return fmt.Sprintf("%s = %d; set it with --set %s=%d", id.Name, want, id.Name, got)
	}
	if _, ok := e.(*lang.Num); ok {
		return fmt.Sprintf("dimension %d is fixed at %d", d, want)
	}
	return fmt.Sprintf("dimension %d is %s = %d", d, lang.FormatExpr(e), want)
}

func modelDecl(m *check.Module, name string) *lang.ModelDecl {
	for _, md := range m.File.Models {
		if md.Name == name {
			return md
		}
	}
	return nil
}

func isAttribute(md *lang.ModelDecl, name string) bool {
	for _, a := range md.Attrs {
		if a.Name == name {
			return true
		}
	}
	return false
}

// readFiles lists the files --in and --params name.
func readFiles(specs map[string]string, params string) []string {
	var out []string
	for _, path := range specs {
		out = append(out, path)
	}
	if params != "" {
		out = append(out, params)
	}
	return out
}

// addDrawn adds an input drawn by --random-inputs to out as
// inputs/NAME.npy, where --in can read it again.
func addDrawn(out *planio.Folder, name string, t *tensor.Tensor) {
	out.Tensor(path.Join("inputs", planio.FileName(name)+".npy"), fmt.Sprintf("input %s: random %s%v", name, t.DType, t.Shape), t)
}
