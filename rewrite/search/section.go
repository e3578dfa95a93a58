package search

import (
	"fmt"
	"time"

	"tofuc/analysis/cost"
	"tofuc/analysis/report"
)

// costLine describes a roofline estimate in one line.
func costLine(what string, e *cost.Estimate) string {
	return fmt.Sprintf("%-7s %9.2f us  %8.3f GFLOP  %9.3f MB moved  %4d kernels  (%d precomputed, %d views)",
		what, e.Time*1e6, float64(e.FLOPs)/1e9, float64(e.Bytes)/1e6, e.Launches, e.Precomputed, e.Views)
}

// Section is the compiler report's optimize section on the outcome of
// optimising model name: its lines and data (docs/report.md).
func (out *Outcome) Section(name string) report.Section {
	data := optimizeData{Model: name, Device: out.Before.Device.Name, Before: summarize(out.Before), After: summarize(out.After),
		Rules: out.Steps, Explored: out.Explored, Parts: out.Parts, Seconds: out.Time.Seconds()}
	for _, r := range out.Verified {
		data.Verified = append(data.Verified, verifiedEntry{Rule: r.Rule, Status: string(r.Status), Level: r.Level()})
	}
	return report.Section{Name: "optimize", Title: "Graph optimisation", Lines: out.lines(name), Data: data}
}

// lines describe the outcome of optimising model name.
func (out *Outcome) lines(name string) []string {
	lines := []string{
		fmt.Sprintf("model %s: roofline on %s", name, out.Before.Device.Name),
		costLine("before", out.Before),
		costLine("after", out.After),
		fmt.Sprintf("%d rewrites; %d graphs explored in %d part(s), %s", len(out.Steps), out.Explored, out.Parts, milliseconds(out.Time)),
	}
	for _, s := range out.Steps {
		lines = append(lines, fmt.Sprintf("  %s at %s", s.Rule, s.Site))
	}
	if len(out.Verified) > 0 {
		lines = append(lines, fmt.Sprintf("verified before use (rules, rule instances, split lemmas): %d", len(out.Verified)))
		for _, r := range out.Verified {
			lines = append(lines, fmt.Sprintf("  %s: %s (%s), %s", r.Rule, r.Status, r.Level(), milliseconds(r.Time)))
		}
	}
	return lines
}

// optimizeData is the data of the report's optimize section
// (docs/report.md).
type optimizeData struct {
	Model    string          `json:"model"`
	Device   string          `json:"device"`
	Before   costSummary     `json:"before"`
	After    costSummary     `json:"after"`
	Rules    []Step          `json:"rules_applied"`
	Verified []verifiedEntry `json:"verified"`
	Explored int             `json:"graphs_explored"`
	Parts    int             `json:"parts"`
	Seconds  float64         `json:"search_seconds"`
}

// costSummary is a roofline estimate without its kernel list.
type costSummary struct {
	Seconds     float64 `json:"seconds"`
	FLOPs       int64   `json:"flops"`
	Bytes       int64   `json:"bytes"`
	Kernels     int     `json:"kernels"`
	Precomputed int     `json:"precomputed"`
	Views       int     `json:"views"`
}

func summarize(e *cost.Estimate) costSummary {
	return costSummary{Seconds: e.Time, FLOPs: e.FLOPs, Bytes: e.Bytes, Kernels: e.Launches, Precomputed: e.Precomputed, Views: e.Views}
}

type verifiedEntry struct {
	Rule   string `json:"rule"`
	Status string `json:"status"`
	Level  string `json:"level"`
}

// milliseconds writes a duration in whole milliseconds.
func milliseconds(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d.Microseconds())/1000)
}
