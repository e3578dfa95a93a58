package codegen

import (
	"fmt"
	"sort"

	"tofuc/analysis/cost"
	"tofuc/analysis/report"
	"tofuc/runtime/plan"
)

// KernelRow is one kernel of the report's kernels section.
type KernelRow struct {
	Name     string  `json:"name"`
	Label    string  `json:"label"`
	Kind     string  `json:"kind"`
	Form     string  `json:"form"`
	Launches int     `json:"launches"`
	Grid     int64   `json:"grid"`
	Block    int64   `json:"block"`
	Shared   int64   `json:"shared_bytes"`
	FLOPs    int64   `json:"flops"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"estimated_seconds"` // one launch on the device's roofline
}

// KernelsData is the kernels section's data in report.json.
type KernelsData struct {
	Device   string      `json:"device"`
	Launches int         `json:"launches"`
	Seconds  float64     `json:"estimated_seconds"` // every launch of a run, one after the other
	Kernels  []KernelRow `json:"kernels"`
}

// KernelsSection is the compiler report's section on a plan's kernels
// as a GPU runs them (not the host-only ones, packing and chained
// launches, nor those of empty outputs): per kernel, what it computes, its form and launch
// geometry, its FLOPs and bytes and its time on device d's roofline (the
// longer of compute and memory time, plus the launch overhead), longest
// first.
func KernelsSection(p *plan.Plan, d cost.Device) report.Section {
	launches := map[int]int{}
	for _, steps := range p.Steps {
		for _, s := range steps {
			if s.Op == plan.Launch {
				launches[s.Kernel]++
			}
		}
	}
	data := KernelsData{Device: d.Name}
	for i, k := range p.Kernels {
		if !k.OnGPU() {
			continue
		}
		row := KernelRow{Name: k.Name, Label: k.Label, Kind: k.Kind, Form: k.Form, Launches: launches[i],
			Grid: k.Grid, Block: k.Block, Shared: k.Shared, FLOPs: k.FLOPs, Bytes: k.Bytes}
		row.Seconds = max(float64(k.FLOPs)/d.PeakFLOPS, float64(k.Bytes)/d.Bandwidth) + d.Launch
		data.Kernels = append(data.Kernels, row)
		data.Launches += row.Launches
		data.Seconds += row.Seconds * float64(row.Launches)
	}
	sort.SliceStable(data.Kernels, func(i, j int) bool {
		return data.Kernels[i].Seconds*float64(data.Kernels[i].Launches) > data.Kernels[j].Seconds*float64(data.Kernels[j].Launches)
	})
	lines := []string{fmt.Sprintf("%d kernels, %d launches a run, %.1f us estimated on the %s roofline", len(data.Kernels), data.Launches, data.Seconds*1e6, d.Name),
		fmt.Sprintf("%-18s %-12s %-7s %9s %6s %10s %10s %9s  %s", "kernel", "kind", "form", "grid", "block", "MFLOP", "MB", "us", "computes")}
	for _, r := range data.Kernels {
		label := r.Label
		if r.Launches > 1 {
			label += fmt.Sprintf(" (x%d)", r.Launches)
		}
		lines = append(lines, fmt.Sprintf("%-18s %-12s %-7s %9d %6d %10.3f %10.3f %9.2f  %s", r.Name, r.Kind, r.Form, r.Grid, r.Block,
			float64(r.FLOPs)/1e6, float64(r.Bytes)/1e6, r.Seconds*1e6, label))
	}
	return report.Section{Name: "kernels", Title: "Kernels", Lines: lines, Data: data}
}
