package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"tofuc/lang"
	"tofuc/runtime/safefile"

	"tofuc/analysis/partition"
)

// Write writes report.txt, report.json and report.html into dir, creating
// it if missing.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var txt, js, html bytes.Buffer
	r.Text(&txt)
	if err := r.JSON(&js); err != nil {
		return err
	}
	if err := r.HTML(&html, dir); err != nil {
		return err
	}
	for name, b := range map[string][]byte{"report.txt": txt.Bytes(), "report.json": js.Bytes(), "report.html": html.Bytes()} {
		if err := safefile.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// JSON writes report.json.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Summary writes the summary lines (also printed by tofuc partition).
func (r *Report) Summary(w io.Writer) {
	kind := "model"
	if r.Train {
		kind = "training graph"
	}
	fmt.Fprintf(w, "%s (%s of %s) on %d devices (steps %s)\n", r.Model, kind, r.File, r.Devices, joinInts(r.Factors, " x "))
	fmt.Fprintf(w, "  communication  %s per step\n", lang.FormatBytes(r.CommBytes))
	fmt.Fprintf(w, "  memory         %s per device (peak)\n", lang.FormatBytes(r.MaxMemoryBytes))
	if r.Topology != nil {
		fmt.Fprintf(w, "  step time      %s simulated on %s (objective: %s)\n", Seconds(r.StepSeconds), r.simulatedOn(), r.Objective)
	}
	if p := r.Pipelines; p != nil && p.Chosen {
		fmt.Fprintf(w, "  chosen         %s's pipeline plan, not this one: %s a step simulated (pipeline plans below)\n", p.Plans[0].Method, Seconds(p.Plans[0].StepSeconds))
	}
	if r.MemoryLimit > 0 {
		if r.OverLimitBytes > 0 {
			fmt.Fprintf(w, "  memory limit   %s: the best plan is %s over\n", lang.FormatBytes(r.MemoryLimit), lang.FormatBytes(r.OverLimitBytes))
		} else {
			fmt.Fprintf(w, "  memory limit   %s: fits\n", lang.FormatBytes(r.MemoryLimit))
		}
	}
	fmt.Fprintf(w, "  search         %.3f s, %s\n", r.SearchSeconds, r.Method)
	if m := r.MCMC; m != nil {
		fmt.Fprintf(w, "  refinement     %s -> %s per step (%.1f%% faster)\n", Seconds(m.BeforeSeconds), Seconds(m.AfterSeconds), 100*(1-m.AfterSeconds/m.BeforeSeconds))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  baseline\tbytes per step\tmemory per device\tstep time\ttofuc / baseline (bytes, time)\t")
	for _, name := range baselineOrder(r) {
		d := r.BaselineDetails[name]
		over := ""
		if d.OverMemory {
			over = " (over the limit)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\t%s\t%.3f, %.3f\t\n", name, lang.FormatBytes(d.CommBytes), lang.FormatBytes(d.MaxMemoryBytes), over, Seconds(d.StepSeconds), d.Ratio, d.TimeRatio)
	}
	tw.Flush()
	if c := r.Checked; c != nil {
		fmt.Fprintf(w, "  your plan (%s): %s per step, %s per device; the chosen plan communicates %s\n", c.File, lang.FormatBytes(c.CommBytes), lang.FormatBytes(c.MaxMemoryBytes), lang.FormatBytes(c.OptimumBytes))
	}
	if r.Pipelines != nil {
		r.Pipelines.summary(w, r.StepSeconds, r.Objective)
	}
}

func baselineOrder(r *Report) []string {
	var out []string
	for _, n := range partition.Baselines {
		if _, ok := r.BaselineDetails[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// Seconds writes a duration with a unit that keeps three digits.
func Seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3f ms", s*1e3)
	}
	return fmt.Sprintf("%.3f µs", s*1e6)
}

func joinInts(xs []int, sep string) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, sep)
}

// Text writes report.txt.
func (r *Report) Text(w io.Writer) {
	if r.Partitioned() {
		r.partitionText(w)
	} else {
		fmt.Fprintf(w, "%s (%s): not partitioned\n", r.Model, r.File)
	}
	for _, s := range r.Sections {
		fmt.Fprintf(w, "\n%s\n", s.Title)
		for _, l := range s.Lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

func (r *Report) partitionText(w io.Writer) {
	r.Summary(w)
	fmt.Fprintf(w, "\nBound: %s.\n", r.Bound)
	if len(r.MemoryTradeOff) > 0 {
		fmt.Fprintln(w, "\nMemory trade-off")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  memory limit\tbytes per step\tmemory per device\tstep time\tplan\t")
		for _, t := range r.MemoryTradeOff {
			if t.Plan == "" {
				fmt.Fprintf(tw, "  %s\t-\t-\t-\tnone fits\t\n", lang.FormatBytes(t.LimitBytes))
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", lang.FormatBytes(t.LimitBytes), lang.FormatBytes(t.CommBytes), lang.FormatBytes(t.MaxMemoryBytes), Seconds(t.StepSeconds), t.Plan)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nRecursion steps")
	for i, s := range r.Steps {
		fmt.Fprintf(w, "  %d. %d workers: %s (%s, %d variables, largest table %d)\n", i+1, s.Workers, lang.FormatBytes(s.Bytes), s.Method, s.Variables, s.LargestTable)
	}
	if c := r.Checked; c != nil && len(c.Worse) > 0 {
		fmt.Fprintln(w, "\nWhere your plan communicates more than the optimum")
		for _, x := range c.Worse {
			fmt.Fprintf(w, "  %s: +%s (%s)\n", x.Op, lang.FormatBytes(x.Bytes), x.Why)
		}
	}
	fmt.Fprintln(w, "\nLargest communication")
	for _, c := range r.Contributors {
		fmt.Fprintf(w, "  %s: %s (%.1f%%)\n    %s\n", c.Op, lang.FormatBytes(c.Bytes), 100*c.Share, c.Why)
	}
	fmt.Fprintln(w, "\nOperators")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\top\tat\tstrategy per step\tbytes\t")
	for _, o := range r.Ops {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", o.Name, o.Op, o.At(), strings.Join(o.Strategy, " | "), lang.FormatBytes(o.Bytes))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nTensors")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\tkind\tshape\tsplit per step\ttile\t")
	for _, t := range r.Tensors {
		if t.Repeat == 0 {
			continue
		}
		name := t.Name
		if t.Repeat > 1 {
			name += fmt.Sprintf(" (x%d)", t.Repeat)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%s\t%v\t\n", name, t.Kind, t.Shape, splitWords(t.Splits), t.Tile)
	}
	tw.Flush()
}

func splitWords(splits []int) string {
	var s []string
	for _, d := range splits {
		if d < 0 {
			s = append(s, "replicate")
		} else {
			s = append(s, fmt.Sprintf("dim %d", d))
		}
	}
	return strings.Join(s, " | ")
}

// simulatedOn names the devices the step was simulated on: the
// topology, or the plan's first devices of it where the plan uses fewer
// than it has (devices 0-3 of an 8-GPU machine at --devices 4).
func (r *Report) simulatedOn() string {
	if n := len(r.Topology.Devices); r.Devices > 0 && r.Devices < n {
		return fmt.Sprintf("devices 0–%d of %s", r.Devices-1, r.Topology.Name)
	}
	return r.Topology.Name
}
