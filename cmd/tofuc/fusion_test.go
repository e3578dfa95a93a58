package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
)

// TestFusionHalvesLaunches: issue 14's fusion floor on the examples as
// `tofuc compile` plans them: the MLP, Wide ResNet and the Transformer
// launch at most half as many kernels as their graphs have operators
// (their results equal the interpreter's in codegen's
// TestExamplesOnOneDevice and TestChainedLaunches). Wide ResNet is
// compiled without the optimiser, whose search takes a minute there and
// fuses nothing more.
func TestFusionHalvesLaunches(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		example string
		flags   []string
		most    func(nodes int) int
	}{
		{"wresnet", []string{"--no-optimize"}, func(n int) int { return n / 2 }},
		{"transformer", nil, func(n int) int { return n / 2 }},
		{"mlp", nil, func(n int) int { return n / 2 }},
	} {
		path := filepath.Join("..", "..", "examples", tc.example+".tdl")
		m, err := prog.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		g, err := m.Model("", nil)
		if err != nil {
			t.Fatal(err)
		}
		status, stdout, stderr := tofuc(append([]string{"compile", path, "-o", t.TempDir(), "--emit", "plan"}, tc.flags...)...)
		if status != exitOK {
			t.Fatalf("%s: exit %d: %s", tc.example, status, stderr)
		}
		var name string
		var launches int
		if _, err := fmt.Sscanf(stdout, "%s %d launches", &name, &launches); err != nil {
			t.Fatalf("%s: no launch count in %q: %v", tc.example, stdout, err)
		}
		if most := tc.most(len(g.Nodes)); launches > most {
			t.Errorf("%s: %d launches for %d operators, want at most %d", tc.example, launches, len(g.Nodes), most)
		}
	}
}

// TestCompileGPULaunches: the MLP's chained launch is two launches on a
// GPU (docs/plan.md, host_only); `tofuc compile` says so when it emits
// a GPU flavour (its LLVM IR, PTX or the emulator's), and not for the
// host alone.
func TestCompileGPULaunches(t *testing.T) {
	for _, tc := range []struct {
		emit string
		want bool
	}{{"host", false}, {"plan", false}, {"llvm", true}, {"ptx", true}, {"simt", true}} {
		status, stdout, stderr := tofuc("compile", "../../examples/mlp.tdl", "-o", t.TempDir(), "--emit", tc.emit)
		if status != exitOK {
			t.Fatalf("--emit %s: exit %d: %s", tc.emit, status, stderr)
		}
		if got := strings.Contains(stdout, "(3 on a GPU)"); got != tc.want {
			t.Errorf("--emit %s: %q, want the GPU's launches shown: %v", tc.emit, stdout, tc.want)
		}
	}
}
