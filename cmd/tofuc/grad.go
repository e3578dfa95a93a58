package main

import (
	"fmt"
	"io"
	"strings"
	"tofuc/lang/suggest"
	"tofuc/pipeline"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
)

func runGrad(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("grad", stderr)
	opName := fs.String("op", "", "the operator to differentiate (required)")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "grad", "expected one FILE, found %d", fs.NArg())
	}
	if *opName == "" {
		return usageError(stderr, "grad", "--op NAME is required")
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return fail(stderr, err)
	}
	m, _, err := pipeline.LoadFile(prog, fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	decl := m.Op(*opName)
	if decl == nil {
		return fail(stderr, fmt.Errorf("%s: no operator %s%s", fs.Arg(0), *opName, suggest.DidYouMean(*opName, m.OpNames())))
	}
	src, err := gradSource(decl)
	if err != nil {
		return fail(stderr, err)
	}
	io.WriteString(stdout, src)
	return exitOK
}

// gradSource derives the backward operators of decl and prints them as one
// formatted TDL file. They are for the operator's standalone instance:
// default attributes, f32 where the dtype is free, one dimension per pack.
func gradSource(decl *lang.OpDecl) (string, error) {
	inst, err := check.Standalone(decl)
	if err != nil {
		return "", err
	}
	backs, wrt, err := autodiff.Backward(inst)
	if err == nil && len(backs) == 0 {
		err = fmt.Errorf("it has no floating input")
	}
	if err != nil {
		return "", fmt.Errorf("%s: %s is not differentiable: %w", decl.Pos, decl.Name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Backward operators of %s (%s), derived by tofuc grad with its default\n", decl.Name, decl.Pos)
	fmt.Fprintf(&b, "// attributes: each takes the inputs of %s and the gradient of its outputs.\n", decl.Name)
	for i, back := range backs {
		fmt.Fprintf(&b, "\n// The gradient of %s.\n", inst.Inputs[wrt[i]].Name)
		b.WriteString(ir.FormatTDL(back, decl.Name+"_grad_"+inst.Inputs[wrt[i]].Name))
	}
	text := []byte(b.String())
	f, err := parser.Parse(decl.Name+"_grad.tdl", text)
	if err != nil {
		return "", fmt.Errorf("internal error: the derived operators do not parse: %w", err)
	}
	return string(lang.Format(f, text)), nil
}
