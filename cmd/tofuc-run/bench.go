package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"tofuc/runtime/safefile"

	"tofuc/runtime/executor"
	"tofuc/runtime/tensor"
)

// benchReport is what --bench writes as JSON (docs/executor.md).
type benchReport struct {
	Model   string `json:"model"`
	Devices int    `json:"devices"`
	GPUs    string `json:"gpus"`
	Driver  string `json:"driver"`
	// CopyBytes and CopyGBps are the device-to-device copy measured on
	// device 0 and its bandwidth (bytes read and written per second, in
	// 10^9), the yardstick of memory-bound kernels.
	CopyBytes int64   `json:"copy_bytes"`
	CopyGBps  float64 `json:"copy_gbps"`
	// Placement is each placement group's variants as timed on the GPU
	// and the one chosen (executor.Program.Placement).
	Placement []executor.GroupChoice `json:"placement,omitempty"`
	*executor.Timing
}

// bench times the plan and its kernels, prints the table and writes the
// JSON.
func bench(prog *executor.Program, dev executor.Device, driver string, inputs, params map[string]*tensor.Tensor, placed []executor.GroupChoice, f flags, stdout io.Writer) error {
	t, err := prog.Bench(inputs, params, f.runs)
	if err != nil {
		return err
	}
	r := &benchReport{Model: prog.Plan.Model, Devices: prog.Plan.Devices, GPUs: dev.Name(), Driver: driver, CopyBytes: f.copyBytes, Placement: placed, Timing: t}
	if f.copyBytes > 0 {
		if r.CopyGBps, err = executor.CopyBandwidth(dev, f.copyBytes, f.runs); err != nil {
			return fmt.Errorf("copy bandwidth: %w", err)
		}
	}
	printBench(stdout, r)
	path := f.json
	if path == "" {
		path = filepath.Join(f.out, "bench.json")
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := safefile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "timings -> %s\n", path)
	return nil
}

func printBench(w io.Writer, r *benchReport) {
	p := r.Plan
	fmt.Fprintf(w, "%s on %d devices: median %.3f ms, min %.3f ms, mean %.3f ms over %d runs\n", r.Model, r.Devices, p.Median*1e3, p.Min*1e3, p.Mean*1e3, r.Runs)
	if r.CopyBytes > 0 {
		fmt.Fprintf(w, "device-to-device copy of %d bytes on %s: %.1f GB/s\n", r.CopyBytes, r.GPUs, r.CopyGBps)
	}
	fmt.Fprintf(w, "%4s %5s %10s %10s %9s  %-12s %-12s %s\n", "dev", "step", "median ms", "GFLOP/s", "GB/s", "kind", "grid×block", "kernel")
	for _, k := range r.Kernels {
		fmt.Fprintf(w, "%4d %5d %10.4f %10.1f %9.1f  %-12s %-12s %s %s\n", k.Device, k.Step, k.Time.Median*1e3, k.GFLOPS, k.GBps, k.Kind,
			fmt.Sprintf("%d×%d", k.Grid, k.Block), k.Kernel, k.Label)
	}
}
