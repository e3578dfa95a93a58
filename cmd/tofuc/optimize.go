package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"tofuc/pipeline"
	"tofuc/runtime/safefile"

	"tofuc/analysis/check"
	"tofuc/analysis/report"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
	"tofuc/rewrite/search"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

func runOptimize(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("optimize", stderr)
	outPath := fs.StringP("output", "o", "", "write the optimised model as TDL to this file")
	reportDir := fs.String("report", "", "add the optimize section to the report in this directory (report.txt, report.json, report.html)")
	modelName := fs.String("model", "", "the model to optimise (default: the only one)")
	sets := fs.StringArray("set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	alpha := fs.Float64("alpha", 1.05, "relaxation: explore graphs up to alpha times the best cost")
	maxGraphs := fs.Int("max-graphs", 300, "graphs dequeued per searched part")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "optimize", "give one model file")
	}
	if *alpha < 1 || *maxGraphs < 1 {
		return usageError(stderr, "optimize", "--alpha must be at least 1 and --max-graphs positive")
	}
	if same, _ := sameFile(*outPath, fs.Arg(0)); same {
		return usageError(stderr, "optimize", "-o %s is the model's own file; write the optimised model to another", *outPath)
	}
	set, err := pipeline.ParseSets(*sets)
	if err != nil {
		return usageError(stderr, "optimize", "%v", err)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		printDiagnostics(stderr, lang.ErrorList{lang.Errorf(lang.Pos{}, "%v", err)})
		return exitUser
	}
	path := fs.Arg(0)
	m, weights, err := pipeline.LoadFile(prog, path)
	if err != nil {
		printDiagnostics(stderr, asErrorList(err))
		return exitUser
	}
	names := modelNames(m, *modelName)
	if len(names) != 1 {
		fmt.Fprintf(stderr, "tofuc optimize: %s has %d models; choose one with --model\n", path, len(names))
		return exitUser
	}
	g, err := m.Model(names[0], set)
	if err != nil {
		printDiagnostics(stderr, asErrorList(err))
		return exitUser
	}
	rules, errs := pipeline.LoadRules([]string{"std/rules.tdl"})
	if len(errs) > 0 {
		printDiagnostics(stderr, errs)
		return exitUser
	}
	p := newProgress(stderr)
	show := func(part, parts int) {
		if part > parts {
			p.Show("searching around the cuts between %d parts", parts)
		} else {
			p.Show("searching part %d of %d", part, parts)
		}
	}
	out, err := search.New(prog, rules, search.Options{Alpha: *alpha, MaxGraphs: *maxGraphs, Progress: show}).Optimize(withUpdates(g))
	p.done()
	if err != nil {
		fmt.Fprintf(stderr, "tofuc optimize: %v\n", err)
		return exitUser
	}
	fmt.Fprintln(stdout, strings.Join(out.Section(names[0]).Lines, "\n"))
	if *outPath != "" {
		if err := writeOptimized(*outPath, m, g, out, weights); err != nil {
			fmt.Fprintf(stderr, "tofuc optimize: %v\n", err)
			return exitUser
		}
	}
	if *reportDir != "" {
		if err := writeOptimizeReport(*reportDir, names[0], path, out); err != nil {
			fmt.Fprintf(stderr, "tofuc optimize: %v\n", err)
			return exitUser
		}
	}
	return exitOK
}

// withUpdates is g with the values of its parameters' updates (`update
// w = EXPR`) as outputs after its own, so that the rewrites keep what
// computes them and the optimised model can state them again.
func withUpdates(g *ir.Graph) *ir.Graph {
	out := *g
	out.Outputs = slices.Clone(g.Outputs)
	for _, p := range g.Params {
		if p.Update != nil {
			out.Outputs = append(out.Outputs, p.Update)
		}
	}
	return &out
}

// updated lists the parameters whose updates withUpdates added, in order.
func updated(g *ir.Graph) []string {
	var names []string
	for _, p := range g.Params {
		if p.Update != nil {
			names = append(names, p.Value.Name)
		}
	}
	return names
}

// writeOptimized writes the optimised model as TDL, after copies of the
// operators it calls that are not the standard library's (so that it
// checks on its own, wherever it is moved), with the names of the inputs,
// parameters and outputs of the model g, and its weights (the parameters
// keep their names) in the .npz beside it.
func writeOptimized(path string, m *check.Module, g *ir.Graph, out *search.Outcome, weights map[string]*tensor.Tensor) error {
	outputs := make([]string, len(g.Outputs))
	for i, v := range g.Outputs {
		outputs[i] = v.Name
	}
	ops, err := ownOperators(m, out.Graph)
	if err != nil {
		return err
	}
	src := ops + search.FormatModel(out.Graph, g.Name, outputs, updated(g))
	f, err := parser.Parse(path, []byte(src))
	if err != nil {
		return fmt.Errorf("internal error: the optimised model does not parse: %w", err)
	}
	if err := safefile.WriteFile(path, lang.Format(f, []byte(src)), 0o644); err != nil {
		return err
	}
	if len(weights) == 0 {
		return nil
	}
	return npy.WriteNPZ(strings.TrimSuffix(path, filepath.Ext(path))+".npz", weights)
}

// ownOperators prints the declarations of the operators g calls from
// outside the standard library (m's own, or imported), in the order of
// their positions, each after a comment saying where it comes from. It
// fails when the name of an operator g calls means another in m (a rule
// brought in the standard library's, which m shadows).
func ownOperators(m *check.Module, g *ir.Graph) (string, error) {
	seen := map[string]bool{}
	var decls []*lang.OpDecl
	for _, n := range g.Nodes {
		name := n.Inst.Op
		if seen[name] {
			continue
		}
		seen[name] = true
		d := m.Op(name)
		if d == nil || d.Pos != n.Inst.Pos {
			return "", fmt.Errorf("the optimised model calls the operator %s of %s, which %s shadows; rename that one", name, n.Inst.Pos, m.Path)
		}
		if !strings.HasPrefix(d.Pos.File, check.StdPrefix) {
			decls = append(decls, d)
		}
	}
	sort.Slice(decls, func(i, j int) bool { return decls[i].Pos.String() < decls[j].Pos.String() })
	var b strings.Builder
	for _, d := range decls {
		f := &lang.File{Ops: []*lang.OpDecl{d}, Order: []lang.Decl{d}}
		fmt.Fprintf(&b, "// %s, from %s\n", d.Name, d.Pos)
		b.Write(lang.Format(f, nil))
		b.WriteString("\n")
	}
	return b.String(), nil
}

// sameFile reports whether two paths name one file.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

func asErrorList(err error) lang.ErrorList {
	if l, ok := err.(lang.ErrorList); ok {
		return l
	}
	return lang.ErrorList{lang.Errorf(lang.Pos{}, "%v", err)}
}

// writeOptimizeReport adds the optimize section to the report in dir (the
// one tofuc partition writes), or starts a report with only that section.
func writeOptimizeReport(dir, name, file string, out *search.Outcome) error {
	rep, err := report.Read(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		rep = &report.Report{Version: report.Version, Model: name, File: file, Sections: []report.Section{}}
	case err != nil:
		return err
	case rep.Model != name:
		return fmt.Errorf("%s holds the report of model %s, not %s: give --report another directory", dir, rep.Model, name)
	}
	rep.SetSection(out.Section(name))
	return rep.Write(dir)
}
