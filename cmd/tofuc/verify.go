package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
	"tofuc/pipeline"

	"tofuc/analysis/check"
	"tofuc/rewrite/smt"
	"tofuc/runtime/tensor"
)

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("verify", stderr)
	asJSON := fs.Bool("json", false, "print the results as JSON on stdout")
	timeout := fs.Duration("timeout", 10*time.Second, "time limit of one rule (a rule still open then is unknown)")
	maxShapes := fs.Int("max-shapes", 1024, "shape assignments a bounded check may try (the bounds come from the rule's constants)")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "verify", "no files given")
	}
	if *maxShapes < 1 || *timeout <= 0 {
		return usageError(stderr, "verify", "--timeout and --max-shapes must be positive")
	}
	// The rules that check are verified even when others do not (or a
	// file has none), so that the summary line is always printed.
	rules, errs := pipeline.LoadRules(fs.Args())
	printDiagnostics(stderr, errs.Sort())
	results := smt.VerifyAll(rules, smt.Options{Timeout: *timeout, MaxShapes: *maxShapes})
	if *asJSON {
		writeVerifyJSON(stdout, rules, results)
	} else {
		writeVerifyText(stdout, rules, results)
	}
	status := exitOK
	if len(errs) > 0 {
		status = exitUser
	}
	for _, r := range results {
		if r.Status == smt.Refuted || r.Status == smt.Unknown {
			status = exitUser
		}
	}
	return status
}

func summaryLine(results []smt.Result) string {
	counts := map[smt.Status]int{}
	for _, r := range results {
		counts[r.Status]++
	}
	return fmt.Sprintf("%d proved, %d bounded, %d refuted, %d unknown",
		counts[smt.Proved], counts[smt.Bounded], counts[smt.Refuted], counts[smt.Unknown])
}

func writeVerifyText(w io.Writer, rules []*check.Rule, results []smt.Result) {
	for i, r := range results {
		fmt.Fprintf(w, "%s: %-26s %-8s %-12s %s\n", rules[i].Decl.Pos, r.Rule, r.Status, r.Level(), formatDuration(r.Time))
		if r.Reason != "" && r.Status != smt.Bounded {
			fmt.Fprintf(w, "    %s\n", r.Reason)
		}
		if r.Cex != nil {
			writeCounterexample(w, r)
		}
	}
	fmt.Fprintln(w, summaryLine(results))
}

func formatDuration(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d.Microseconds())/1000)
}

func writeCounterexample(w io.Writer, r smt.Result) {
	c := r.Cex
	fmt.Fprintf(w, "    counterexample at %v (confirmed by the interpreter): %s\n", shapeText(c.Shape), c.Where)
	for _, name := range sortedKeys(c.Inputs) {
		fmt.Fprintf(w, "      %s = %s\n", name, tensorLine(c.Inputs[name]))
	}
	if c.LHS != nil {
		fmt.Fprintf(w, "      lhs = %s\n", tensorLine(c.LHS))
	}
	if c.RHS != nil {
		fmt.Fprintf(w, "      rhs = %s\n", tensorLine(c.RHS))
	}
}

func shapeText(s map[string]int64) string {
	out := ""
	for i, k := range sortedKeys(s) {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s=%d", k, s[k])
	}
	return out
}

// tensorLine prints a small tensor's shape and values on one line.
func tensorLine(t *tensor.Tensor) string {
	vals := make([]float64, t.Len())
	for i := range vals {
		vals[i] = t.Flat(i)
	}
	if len(vals) > 32 {
		return fmt.Sprintf("%v %v ...", t.Shape, vals[:32])
	}
	return fmt.Sprintf("%v %v", t.Shape, vals)
}

type verifyJSON struct {
	Version int              `json:"version"`
	Rules   []verifyRuleJSON `json:"rules"`
	Summary string           `json:"summary"`
}

type verifyRuleJSON struct {
	Pos    string         `json:"pos"`
	Name   string         `json:"name"`
	Status string         `json:"status"`
	Level  string         `json:"level"`
	Bounds map[string]int `json:"bounds,omitempty"`
	Need   map[string]int `json:"need,omitempty"`
	Shapes int            `json:"shapes,omitempty"`
	TimeMS float64        `json:"time_ms"`
	Reason string         `json:"reason,omitempty"`
	Cex    *cexJSON       `json:"counterexample,omitempty"`
}

type cexJSON struct {
	Shape  map[string]int64      `json:"shape"`
	Inputs map[string]tensorJSON `json:"inputs"`
	LHS    *tensorJSON           `json:"lhs,omitempty"`
	RHS    *tensorJSON           `json:"rhs,omitempty"`
	Where  string                `json:"where"`
}

type tensorJSON struct {
	Shape  []int     `json:"shape"`
	Values []float64 `json:"values"`
}

func toTensorJSON(t *tensor.Tensor) *tensorJSON {
	if t == nil {
		return nil
	}
	out := &tensorJSON{Shape: t.Shape, Values: make([]float64, t.Len())}
	for i := range out.Values {
		out.Values[i] = t.Flat(i)
	}
	return out
}

func writeVerifyJSON(w io.Writer, rules []*check.Rule, results []smt.Result) {
	out := verifyJSON{Version: 2, Summary: summaryLine(results)}
	for i, r := range results {
		j := verifyRuleJSON{Pos: rules[i].Decl.Pos.String(), Name: r.Rule, Status: string(r.Status), Level: r.Level(),
			Bounds: r.Bounds, Need: r.Need, Shapes: r.Shapes, TimeMS: float64(r.Time.Microseconds()) / 1000, Reason: r.Reason}
		if c := r.Cex; c != nil {
			j.Cex = &cexJSON{Shape: c.Shape, Inputs: map[string]tensorJSON{}, LHS: toTensorJSON(c.LHS), RHS: toTensorJSON(c.RHS), Where: c.Where}
			for k, t := range c.Inputs {
				j.Cex.Inputs[k] = *toTensorJSON(t)
			}
		}
		out.Rules = append(out.Rules, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
