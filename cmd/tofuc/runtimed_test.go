package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/codegen/toolchain"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
)

// TestRunTimed: tofuc run --runs times a compiled pipeline plan and,
// with --topology, prints the step simulated on the topology's roofline
// and with each launch timed alone, and the slowest launches with all
// three times; --topology without --runs, a negative --runs and
// --topology with the simt backend are refused, and a topology that does
// not describe the plan's devices on this host (not a host process's,
// too few devices) before anything runs or is written. Every contraction kernel of the plan records the packed
// products its FLOPs count (plan.Kernel.GEMMs, which the host's
// simulation prices).
func TestRunTimed(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "plan")
	status, _, stderr := tofuc("compile", "../../examples/mlp.tdl", "--train", "--set", "batch=16", "--set", "hidden=24",
		"--devices", "4", "--pipeline=always", "-o", dir, "--emit", "host")
	if status != exitOK {
		t.Fatalf("compile: exit %d: %s", status, stderr)
	}
	p, err := planio.Read(dir, func(*plan.Plan) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range p.Kernels {
		if k.Kind != "contraction" || strings.Contains(k.Label, "packed") {
			continue
		}
		var flops int64
		for _, g := range k.GEMMs {
			flops += 2 * g.Batch * g.Rows * g.Cols * g.Depth
		}
		if len(k.GEMMs) == 0 || flops > k.FLOPs {
			t.Errorf("kernel %s (%s): GEMMs %v (%d FLOPs) beside %d FLOPs", k.Name, k.Label, k.GEMMs, flops, k.FLOPs)
		}
	}
	dev := cost.TopologyDevice{Name: "host", PeakFLOPS: 100e9, MemoryBandwidth: 20e9, MemoryBytes: 1 << 30, LaunchSeconds: 1e-6,
		ContractionHalfFLOPs: 1e6, ContractionTile: []int64{8, 32}, ContractionNarrowCols: 4, ChainedLaunches: true}
	topo := hostTopology(dev, 4)
	b, err := json.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	topoFile := filepath.Join(t.TempDir(), "host4.json")
	if err := os.WriteFile(topoFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr := tofuc("run", dir, "--random-inputs", "--out", t.TempDir(), "--runs", "3", "--topology", topoFile)
	if status != exitOK {
		t.Fatalf("run --runs: exit %d: %s", status, stderr)
	}
	for _, want := range []string{
		`step: median ([0-9.]+) ms, min [0-9.]+ ms over 3 runs of the steps on 4 devices`,
		`simulated on this host, measured by tofuc bench --calibrate \(.*\), 4 devices sharing its threads: ([0-9.]+) ms`,
		`simulated with each launch as timed alone \(the devices one step at a time: median [0-9.]+ ms\): ([0-9.]+) ms`,
		`\n +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-3] +[0-9]+  k[0-9a-f]+ h\.linear`,
	} {
		m := regexp.MustCompile(want).FindStringSubmatch(stdout)
		if m == nil {
			t.Errorf("no %q in:\n%s", want, stdout)
			continue
		}
		if len(m) > 1 {
			if ms, err := strconv.ParseFloat(m[1], 64); err != nil || ms <= 0 {
				t.Errorf("%q: %s ms", want, m[1])
			}
		}
	}
	small := hostTopology(dev, 2)
	if b, err = json.Marshal(small); err != nil {
		t.Fatal(err)
	}
	smallFile := filepath.Join(t.TempDir(), "host2.json")
	if err := os.WriteFile(smallFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ topology, want string }{
		{"h100-nvlink", "does not describe the devices of one host process (no host_process)"},
		{smallFile, "has 2 devices, the plan 4 (tofuc bench --calibrate --devices 4 writes one of 4)"},
	} {
		out := t.TempDir()
		status, _, stderr := tofuc("run", dir, "--random-inputs", "--out", out, "--runs", "2", "--topology", c.topology)
		if entries, _ := os.ReadDir(out); status != exitUser || !strings.Contains(stderr, c.want) || len(entries) > 0 {
			t.Errorf("--topology %s: exit %d, %d files written: %s", c.topology, status, len(entries), stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--topology", topoFile}, "--topology goes with --runs"},
		{[]string{"--runs", "-1"}, "--runs must not be negative"},
		{[]string{"--runs", "2", "--topology", topoFile, "--backend", "simt"}, "--topology goes with the cpu backend"},
	} {
		status, _, stderr := tofuc(append([]string{"run", dir, "--random-inputs", "--out", t.TempDir()}, c.args...)...)
		if status != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, status, stderr)
		}
	}
}
