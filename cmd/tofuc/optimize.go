package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/lang"
	"tofuc/rewrite/search"
)

func runOptimize(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("optimize", stderr)
	outPath := fs.StringP("output", "o", "", "write the optimised model as TDL to this file")
	reportDir := fs.String("report", "", "write report.txt and report.json (the optimize section) into this directory")
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
	set, err := parseSets(*sets)
	if err != nil {
		return usageError(stderr, "optimize", "%v", err)
	}
	prog, err := check.NewProgram()
	if err != nil {
		printDiagnostics(stderr, lang.ErrorList{lang.Errorf(lang.Pos{}, "%v", err)})
		return exitUser
	}
	m, err := prog.Load(fs.Arg(0))
	if err != nil {
		printDiagnostics(stderr, asErrorList(err))
		return exitUser
	}
	names := modelNames(m, *modelName)
	if len(names) != 1 {
		fmt.Fprintf(stderr, "tofuc optimize: %s has %d models; choose one with --model\n", fs.Arg(0), len(names))
		return exitUser
	}
	g, err := m.Model(names[0], set)
	if err != nil {
		printDiagnostics(stderr, asErrorList(err))
		return exitUser
	}
	rules, errs := loadRules([]string{"std/rules.tdl"})
	if len(errs) > 0 {
		printDiagnostics(stderr, errs)
		return exitUser
	}
	out, err := search.New(prog, rules, search.Options{Alpha: *alpha, MaxGraphs: *maxGraphs}).Optimize(g)
	if err != nil {
		fmt.Fprintf(stderr, "tofuc optimize: %v\n", err)
		return exitUser
	}
	text := optimizeText(names[0], out)
	fmt.Fprint(stdout, text)
	if *outPath != "" {
		if err := os.WriteFile(*outPath, []byte(search.FormatModel(out.Graph, names[0])), 0o644); err != nil {
			fmt.Fprintf(stderr, "tofuc optimize: %v\n", err)
			return exitUser
		}
	}
	if *reportDir != "" {
		if err := writeOptimizeReport(*reportDir, names[0], text, out); err != nil {
			fmt.Fprintf(stderr, "tofuc optimize: %v\n", err)
			return exitUser
		}
	}
	return exitOK
}

func asErrorList(err error) lang.ErrorList {
	if l, ok := err.(lang.ErrorList); ok {
		return l
	}
	return lang.ErrorList{lang.Errorf(lang.Pos{}, "%v", err)}
}

func costLine(what string, e *cost.Estimate) string {
	return fmt.Sprintf("%-7s %9.2f us  %8.3f GFLOP  %9.3f MB moved  %4d kernels\n",
		what, e.Time*1e6, float64(e.FLOPs)/1e9, float64(e.Bytes)/1e6, e.Launches)
}

func optimizeText(name string, out *search.Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %s: roofline on %s\n", name, out.Before.Device.Name)
	b.WriteString(costLine("before", out.Before))
	b.WriteString(costLine("after", out.After))
	fmt.Fprintf(&b, "%d rewrites; %d graphs explored in %d part(s), %s\n", len(out.Steps), out.Explored, out.Parts, formatDuration(out.Time))
	for _, s := range out.Steps {
		fmt.Fprintf(&b, "  %s at %s\n", s.Rule, s.Site)
	}
	return b.String()
}

// optimizeReport is the optimize section of the report (version 1).
type optimizeReport struct {
	Version  int            `json:"version"`
	Model    string         `json:"model"`
	Device   string         `json:"device"`
	Before   *cost.Estimate `json:"before"`
	After    *cost.Estimate `json:"after"`
	Rules    []search.Step  `json:"rules_applied"`
	Explored int            `json:"graphs_explored"`
	Parts    int            `json:"parts"`
	TimeMS   float64        `json:"time_ms"`
}

func writeOptimizeReport(dir, name, text string, out *search.Outcome) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(text), 0o644); err != nil {
		return err
	}
	r := optimizeReport{Version: 1, Model: name, Device: out.Before.Device.Name, Before: out.Before, After: out.After,
		Rules: out.Steps, Explored: out.Explored, Parts: out.Parts, TimeMS: float64(out.Time.Microseconds()) / 1000}
	data, err := json.MarshalIndent(map[string]any{"optimize": r}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.json"), append(data, '\n'), 0o644)
}
