package main

import (
	"encoding/json"
	"fmt"
	"io"
	"tofuc/parser"
	"tofuc/pipeline"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("check", stderr)
	asJSON := fs.Bool("json", false, "print diagnostics as JSON on stdout")
	model := fs.String("model", "", "the model to check with --set (default: the only one)")
	sets := fs.StringArray("set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	summary := fs.Bool("summary", false, "print each model's operator counts on stdout")
	var tf trainFlags
	tf.register(fs)
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "check", "no files given")
	}
	if !tf.train && tf.changed(fs) {
		return usageError(stderr, "check", "--loss, --optimizer, --lr, --loss-scale, --lr-schedule and --clip-norm go with --train")
	}
	if err := tf.validate(); err != nil {
		return usageError(stderr, "check", "%v", err)
	}
	set, err := pipeline.ParseSets(*sets)
	if err != nil {
		return usageError(stderr, "check", "%v", err)
	}
	prog, err := check.NewProgram(parser.Parse)
	var errs lang.ErrorList
	errs.Append(err)
	for _, path := range fs.Args() {
		m, _, err := pipeline.LoadFile(prog, path)
		if err != nil {
			errs.Append(err)
			continue
		}
		err = m.Check(*model, set)
		errs.Append(err)
		if err == nil && (tf.train || *summary) {
			errs.Append(checkModels(m, *model, set, &tf, *summary, stdout))
		}
	}
	errs = errs.Sort()
	if *asJSON {
		writeDiagnosticsJSON(stdout, errs)
	} else {
		printDiagnostics(stderr, errs)
	}
	if len(errs) > 0 {
		return exitUser
	}
	return exitOK
}

// checkModels builds each model's graph (its training graph with
// --train) and prints its operator counts with --summary.
func checkModels(m *check.Module, only string, set map[string]ir.AttrValue, tf *trainFlags, summary bool, stdout io.Writer) error {
	var errs lang.ErrorList
	for _, name := range modelNames(m, only) {
		over := set
		if only == "" && len(m.File.Models) != 1 {
			over = nil
		}
		g, err := m.Model(name, over)
		if err != nil {
			errs.Append(err)
			continue
		}
		if tf.train {
			if g, _, err = trainingGraph(m, g, tf, precision.Exact); err != nil {
				errs.Append(err)
				continue
			}
		}
		if summary {
			summarise(stdout, m.Path, g)
		}
	}
	return errs.Err()
}

func printDiagnostics(w io.Writer, errs lang.ErrorList) {
	if len(errs) > 0 {
		fmt.Fprintln(w, errs.Error())
	}
}

type diagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

func writeDiagnosticsJSON(w io.Writer, errs lang.ErrorList) {
	out := struct {
		Diagnostics []diagnostic `json:"diagnostics"`
	}{Diagnostics: []diagnostic{}}
	for _, e := range errs {
		out.Diagnostics = append(out.Diagnostics, diagnostic{File: e.Pos.File, Line: e.Pos.Line, Col: e.Pos.Col, Message: e.Msg})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}
