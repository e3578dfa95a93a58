package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"tofuc/lang/suggest"
	"tofuc/parser"
	"tofuc/pipeline"

	"tofuc/analysis/check"
	"tofuc/analysis/interval"
	"tofuc/analysis/partition"
	"tofuc/analysis/strategy"
	"tofuc/lang"
)

// strategiesVersion is the version of the --json document (docs/strategies.md).
const strategiesVersion = 1

// The --json document of `tofuc strategies`.
type strategiesDoc struct {
	Version    int               `json:"version"`
	Ops        []opStrategies    `json:"ops"`
	Unanalysed []unanalysedEntry `json:"unanalysed"`
}

type opStrategies struct {
	Op          string          `json:"op"`
	File        string          `json:"file"`
	Line        int             `json:"line"`
	Elementwise bool            `json:"elementwise"`
	Opaque      bool            `json:"opaque"`
	FLOPs       string          `json:"flops"`
	Strategies  []strategyEntry `json:"strategies"`
	// Decomposed is how tofuc partition runs the operator, when it runs
	// it as its parts (partition.Decompositions).
	Decomposed *decomposedEntry `json:"decomposed,omitempty"`
}

// decomposedEntry is the split of an operator run as its parts: each
// part's strategy along the same variable.
type decomposedEntry struct {
	Var            string      `json:"var"`
	Parts          []partEntry `json:"parts"`
	FLOPsPerWorker string      `json:"flops_per_worker"`
}

type partEntry struct {
	Op      string   `json:"op"`
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	// Strategy is the part's strategy along the variable (its inputs
	// named as the operator's tensors); null when every worker runs the
	// part whole (it has no such variable).
	Strategy       *strategyEntry `json:"strategy"`
	FLOPsPerWorker string         `json:"flops_per_worker"`
}

type strategyEntry struct {
	Kind           string       `json:"kind"`
	Var            string       `json:"var"`
	OutputDim      *int         `json:"output_dim,omitempty"`
	OutputDims     []int        `json:"output_dims,omitempty"`
	Reducer        string       `json:"reducer,omitempty"`
	Output         string       `json:"output"`
	Inputs         []inputEntry `json:"inputs"`
	FLOPsPerWorker string       `json:"flops_per_worker"`
}

type inputEntry struct {
	Name   string     `json:"name"`
	Region []dimEntry `json:"region"`
	Halo   string     `json:"halo,omitempty"`
}

type dimEntry struct {
	Lo    string      `json:"lo"`
	Hi    string      `json:"hi"`
	Whole bool        `json:"whole"`
	Halo  string      `json:"halo,omitempty"`
	Bands []bandEntry `json:"bands,omitempty"`
}

// bandEntry is one band of a region dimension read in several.
type bandEntry struct {
	Lo string `json:"lo"`
	Hi string `json:"hi"`
}

type unanalysedEntry struct {
	Op     string `json:"op"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func runStrategies(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("strategies", stderr)
	opName := fs.String("op", "", "only the operator NAME")
	asJSON := fs.Bool("json", false, "print one JSON document on stdout")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "strategies", "no files given")
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return fail(stderr, err)
	}
	// Files in sorted order, each once.
	seen := map[string]bool{}
	var paths []string
	for _, p := range fs.Args() {
		if c := filepath.Clean(p); !seen[c] {
			seen[c] = true
			paths = append(paths, c)
		}
	}
	sort.Strings(paths)

	doc := strategiesDoc{Version: strategiesVersion, Ops: []opStrategies{}, Unanalysed: []unanalysedEntry{}}
	var errs lang.ErrorList
	var analyses []*strategy.Analysis // beside doc.Ops, for the text output
	found := false
	var names []string // of the operators looked at
	for _, path := range paths {
		m, _, err := pipeline.LoadFile(prog, path)
		if err != nil {
			errs.Append(err)
			continue
		}
		ops := m.File.Ops
		if len(ops) == 0 && len(m.File.Models) > 0 {
			// A model file (an ONNX model, say): the operators it calls.
			if ops, err = calledOps(m); err != nil {
				errs.Append(err)
				continue
			}
			fmt.Fprintf(stderr, "%s defines no operators; these are the %s its models call\n", path, count(len(ops), "operator"))
		}
		for _, op := range ops {
			names = append(names, op.Name)
			if *opName != "" && op.Name != *opName {
				continue
			}
			found = true
			file := op.Pos.File
			if file == m.Path {
				file = path
			}
			a, reason := analyseOp(op)
			if a == nil {
				doc.Unanalysed = append(doc.Unanalysed, unanalysedEntry{Op: op.Name, File: file, Line: op.Pos.Line, Reason: reason})
				continue
			}
			entry := describeAnalysis(a, op.Name, file, op.Pos.Line)
			if entry.Decomposed, err = describeParts(a, m); err != nil {
				errs.Append(fmt.Errorf("%s: %s: %w", file, op.Name, err))
			}
			doc.Ops = append(doc.Ops, entry)
			analyses = append(analyses, a)
		}
	}
	if len(errs) > 0 {
		printDiagnostics(stderr, errs.Sort())
	}
	if *opName != "" && !found && len(errs) == 0 {
		fmt.Fprintf(stderr, "tofuc strategies: no operator %s in %s%s\n", *opName, strings.Join(paths, ", "), suggest.DidYouMean(*opName, names))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(doc)
	} else {
		printStrategies(stdout, doc, analyses)
	}
	if len(errs) > 0 || (*opName != "" && !found) {
		return exitUser
	}
	return exitOK
}

// calledOps lists the declarations of the operators m's models call (with
// their default attributes), by name.
func calledOps(m *check.Module) ([]*lang.OpDecl, error) {
	byName := map[string]*lang.OpDecl{}
	for _, name := range modelNames(m, "") {
		g, err := m.Model(name, nil)
		if err != nil {
			return nil, err
		}
		for _, n := range g.Nodes {
			if d := m.Op(n.Inst.Op); d != nil {
				byName[n.Inst.Op] = d
			}
		}
	}
	var out []*lang.OpDecl
	for _, name := range sortedKeys(byName) {
		out = append(out, byName[name])
	}
	return out, nil
}

// analyseOp instantiates op standalone and analyses it; on failure it
// returns the reason.
func analyseOp(op *lang.OpDecl) (*strategy.Analysis, string) {
	inst, err := check.Standalone(op)
	if err != nil {
		return nil, "does not instantiate: " + oneLine(err.Error())
	}
	a, err := strategy.Analyse(inst)
	if err != nil {
		return nil, oneLine(err.Error())
	}
	return a, ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// describeAnalysis is the JSON form of an analysis.
func describeAnalysis(a *strategy.Analysis, name, file string, line int) opStrategies {
	out := opStrategies{Op: name, File: file, Line: line, Elementwise: a.Elementwise, Opaque: a.Inst.CallsOpaque(),
		FLOPs: a.FLOPs.String(), Strategies: []strategyEntry{}}
	for _, s := range a.Strategies {
		e := strategyEntry{Kind: s.Kind.String(), Var: s.Name(), FLOPsPerWorker: s.PerWorker().String(), Inputs: []inputEntry{}}
		if s.Kind == strategy.SplitOutput {
			d := s.Dim
			e.OutputDim = &d
			if len(s.Dims) > 1 {
				e.OutputDims = s.Dims
			}
			e.Output = "concat"
		} else {
			e.Reducer = s.Reducer.String()
			e.Output = s.Reducer.String()
		}
		for _, r := range s.Regions {
			in := inputEntry{Name: r.Tensor.Name, Region: []dimEntry{}}
			var halos []string
			for d, iv := range r.Dims {
				de := dimEntry{Lo: iv.Lo.String(), Hi: iv.Hi.String(), Whole: r.WholeDim(d)}
				if len(r.Bands[d]) > 1 {
					for _, b := range r.Bands[d] {
						de.Bands = append(de.Bands, bandEntry{Lo: b.Lo.String(), Hi: b.Hi.String()})
					}
				} else if h, ok := a.Halo(s, r.Tensor, d, iv); ok {
					de.Halo = h.String()
					halos = append(halos, de.Halo)
				}
				in.Region = append(in.Region, de)
			}
			in.Halo = strings.Join(halos, ", ")
			e.Inputs = append(e.Inputs, in)
		}
		out.Strategies = append(out.Strategies, e)
	}
	return out
}

// describeParts describes how tofuc partition runs a decomposed
// operator (nil for the others): each part's strategy along the variable
// the decomposition splits (its extent that of Along), or none (the part
// runs whole on every worker), with regions of the operator's tensors.
func describeParts(a *strategy.Analysis, ops partition.Ops) (*decomposedEntry, error) {
	dec := partition.Decompositions[a.Inst.Op]
	if dec == nil {
		return nil, nil
	}
	parts, err := partition.Parts(a.Inst, ops)
	if err != nil {
		return nil, err
	}
	along := a.Inst.Inputs[dec.Along.Input].Shape[dec.Along.Dim]
	// The tensors by their names in the operator: its inputs, then the
	// parts' outputs (named as the operator's outputs they compute).
	names := map[partition.Ref]string{}
	for i, in := range a.Inst.Inputs {
		names[partition.Ref{Step: -1, Index: i}] = in.Name
	}
	for o, r := range dec.Outputs {
		names[r] = a.Inst.Outputs[o].Tensor.Name
	}
	out := &decomposedEntry{Parts: []partEntry{}}
	total := lang.Const(0)
	for p, part := range parts {
		pa, err := strategy.Analyse(part)
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", part.Op, err)
		}
		e := partEntry{Op: part.Op, Inputs: []string{}, Outputs: []string{}, FLOPsPerWorker: pa.FLOPs.String()}
		for _, r := range dec.Steps[p].Inputs {
			e.Inputs = append(e.Inputs, names[r])
		}
		for o := range part.Outputs {
			e.Outputs = append(e.Outputs, names[partition.Ref{Step: p, Index: o}])
		}
		work := pa.FLOPs
		for j, s := range pa.Strategies {
			if !s.Var.Extent.Equal(along) {
				continue
			}
			se := describeAnalysis(pa, part.Op, "", 0).Strategies[j]
			for i := range se.Inputs {
				se.Inputs[i].Name = e.Inputs[i]
			}
			e.Strategy, out.Var = &se, s.Name()
			work = s.PerWorker()
			e.FLOPsPerWorker = perWorkerText(pa, s)
			break
		}
		total = total.Add(work)
		out.Parts = append(out.Parts, e)
	}
	out.FLOPsPerWorker = total.String()
	return out, nil
}

// printStrategies writes the text report: per operator a header and a
// table of its strategies, then the operators the analysis could not
// handle.
func printStrategies(w io.Writer, doc strategiesDoc, analyses []*strategy.Analysis) {
	for i, op := range doc.Ops {
		if i > 0 {
			fmt.Fprintln(w)
		}
		a := analyses[i]
		kind := fmt.Sprintf("%d strategies", len(op.Strategies))
		if len(op.Strategies) == 1 {
			kind = "1 strategy"
		}
		if op.Elementwise {
			kind = "element-wise, " + kind
		}
		if op.Opaque {
			kind = "opaque, " + kind
		}
		fmt.Fprintf(w, "op %s (%s:%d) — %s, FLOPs %s\n", op.Op, op.File, op.Line, kind, op.FLOPs)
		if len(op.Strategies) == 0 {
			fmt.Fprintln(w, "  (nothing to split)")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		header := []string{"  strategy"}
		for _, in := range a.Inst.Inputs {
			header = append(header, in.Name)
		}
		header = append(header, "output", "FLOPs/worker")
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for j, s := range a.Strategies {
			e := op.Strategies[j]
			row := []string{"  " + e.Kind + " " + e.Var}
			if s.Kind == strategy.SplitReduction {
				row[0] += " (" + e.Reducer + ")"
			}
			for k, r := range s.Regions {
				row = append(row, regionText(r, e.Inputs[k]))
			}
			if s.Kind == strategy.SplitOutput {
				row = append(row, concatText(s.Dims))
			} else {
				row = append(row, e.Reducer+" of partials")
			}
			row = append(row, perWorkerText(a, s))
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
		if d := op.Decomposed; d != nil {
			printParts(w, d)
		}
	}
	if len(doc.Unanalysed) > 0 {
		if len(doc.Ops) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "unanalysed:")
		for _, u := range doc.Unanalysed {
			fmt.Fprintf(w, "  %s (%s:%d): %s\n", u.Op, u.File, u.Line, u.Reason)
		}
	}
}

// regionText prints a region: `all` for the whole tensor, `none` for an
// input the worker does not read, else one entry per dimension (`all` or
// `[lo, hi]`, with its halo).
// printParts writes how tofuc partition runs a decomposed operator: a
// table of its parts, each with its strategy along the variable split,
// the regions it reads of the operator's tensors and its work.
func printParts(w io.Writer, d *decomposedEntry) {
	fmt.Fprintf(w, "  run as its parts by tofuc partition (docs/partition.md), which split %s together; FLOPs/worker %s\n", d.Var, d.FLOPsPerWorker)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  part\tstrategy\treads\toutput\tFLOPs/worker")
	for _, p := range d.Parts {
		call := strings.Join(p.Outputs, ", ") + " = " + p.Op + "(" + strings.Join(p.Inputs, ", ") + ")"
		if p.Strategy == nil {
			fmt.Fprintf(tw, "  %s\twhole\tall\ton every worker\t%s\n", call, p.FLOPsPerWorker)
			continue
		}
		s := p.Strategy
		words, output := s.Kind+" "+s.Var+" ("+s.Reducer+")", s.Reducer+" of partials"
		if s.OutputDim != nil {
			words, output = s.Kind+" "+s.Var, fmt.Sprintf("concat along dim %d", *s.OutputDim)
		}
		var reads []string
		for _, in := range s.Inputs {
			if r := regionEntryText(in); r != "none" {
				reads = append(reads, in.Name+" "+r)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", call, words, strings.Join(reads, "; "), output, p.FLOPsPerWorker)
	}
	tw.Flush()
}

// regionEntryText is regionText from the JSON form alone.
func regionEntryText(e inputEntry) string {
	none := len(e.Region) > 0
	for _, de := range e.Region {
		none = none && de.Lo == "0" && de.Hi == "-1"
	}
	if none {
		return "none"
	}
	return regionText(strategy.Region{Dims: make([]interval.Interval, len(e.Region))}, e)
}

func regionText(r strategy.Region, e inputEntry) string {
	if r.Unread() {
		return "none"
	}
	var parts []string
	allWhole := true
	for _, de := range e.Region {
		if de.Whole {
			parts = append(parts, "all")
			continue
		}
		allWhole = false
		p := "[" + de.Lo + ", " + de.Hi + "]"
		if len(de.Bands) > 0 {
			var bands []string
			for _, b := range de.Bands {
				bands = append(bands, "["+b.Lo+", "+b.Hi+"]")
			}
			p = strings.Join(bands, " ∪ ")
		}
		if de.Halo != "" {
			p += " (halo " + de.Halo + ")"
		}
		parts = append(parts, p)
	}
	if allWhole {
		return "all"
	}
	return strings.Join(parts, ", ")
}

// concatText says along which dimension each output's parts concatenate.
func concatText(dims []int) string {
	if slices.Equal(dims, slices.Repeat(dims[:1], len(dims))) {
		return fmt.Sprintf("concat along dim %d", dims[0])
	}
	var ds []string
	for _, d := range dims {
		ds = append(ds, fmt.Sprint(d))
	}
	return "concat along dims " + strings.Join(ds, ", ")
}

// perWorkerText prints a worker's work: the expression when it is short,
// else, when the work is exactly proportional to the part, as the share
// of the total (`total * len(n)/N`).
func perWorkerText(a *strategy.Analysis, s *strategy.Strategy) string {
	w := s.PerWorker()
	if text := w.String(); len(text) <= 32 {
		return text
	}
	n := lang.Sym("len(" + s.Name() + ")")
	if w.Mul(s.Var.Extent).Equal(a.FLOPs.Mul(n)) {
		ext := s.Var.Extent.String()
		if strings.ContainsAny(ext, " */") {
			ext = "(" + ext + ")"
		}
		return "total * " + n.String() + "/" + ext
	}
	return w.String()
}
