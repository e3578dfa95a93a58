package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
)

// strategiesJSON runs `tofuc strategies --json` and decodes its one
// document.
func strategiesJSON(t *testing.T, args ...string) (int, strategiesDoc) {
	t.Helper()
	status, out, stderr := tofuc(append([]string{"strategies", "--json"}, args...)...)
	var doc strategiesDoc
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("strategies --json %v: %v\nstdout: %s\nstderr: %s", args, err, out, stderr)
	}
	if dec.More() {
		t.Fatalf("strategies --json %v prints more than one JSON document", args)
	}
	return status, doc
}

func stdlibFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../stdlib/*.tdl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no stdlib files: %v", err)
	}
	return files
}

func findOp(doc strategiesDoc, name string) *opStrategies {
	for i := range doc.Ops {
		if doc.Ops[i].Op == name {
			return &doc.Ops[i]
		}
	}
	return nil
}

func TestStrategiesJSONMatmul(t *testing.T) {
	status, doc := strategiesJSON(t, "../../stdlib/linalg.tdl")
	if status != exitOK {
		t.Fatalf("exit %d", status)
	}
	if doc.Version != 1 {
		t.Errorf("version %d, want 1", doc.Version)
	}
	mm := findOp(doc, "matmul")
	if mm == nil {
		t.Fatal("no matmul in the document")
	}
	if !strings.HasSuffix(mm.File, "stdlib/linalg.tdl") || mm.Line <= 0 || mm.Elementwise || mm.FLOPs != "2*K*M*N" {
		t.Errorf("matmul: file %s line %d elementwise %v flops %s", mm.File, mm.Line, mm.Elementwise, mm.FLOPs)
	}
	var got []string
	for _, s := range mm.Strategies {
		got = append(got, s.Kind+" "+s.Var)
	}
	if want := "split i, split j, reduce k"; strings.Join(got, ", ") != want {
		t.Fatalf("strategies %s, want %s", strings.Join(got, ", "), want)
	}
	i, k := mm.Strategies[0], mm.Strategies[2]
	if i.OutputDim == nil || *i.OutputDim != 0 || i.Output != "concat" || i.Reducer != "" {
		t.Errorf("split i: output_dim %v output %q reducer %q", i.OutputDim, i.Output, i.Reducer)
	}
	if k.OutputDim != nil || k.Reducer != "sum" || k.Output != "sum" || k.FLOPsPerWorker != "2*M*N*len(k)" {
		t.Errorf("reduce k: output_dim %v reducer %q output %q per worker %s", k.OutputDim, k.Reducer, k.Output, k.FLOPsPerWorker)
	}
	if len(k.Inputs) != 2 || k.Inputs[0].Name != "A" || k.Inputs[1].Name != "B" {
		t.Fatalf("reduce k inputs: %+v", k.Inputs)
	}
	a := k.Inputs[0].Region
	want := []dimEntry{{Lo: "0", Hi: "M - 1", Whole: true}, {Lo: "k.lo", Hi: "k.hi"}}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Errorf("A's region under reduce k: %+v, want %+v", a, want)
	}
}

// A Tofu-style conv1d: splitting the output width reads a halo of DW - 1,
// shown in the text table.
// TestStrategiesDecomposed: batch_norm_train, which splits only c, is
// listed with how tofuc partition runs it: batch_mean and batch_var as
// partial sums over the batch (each worker reading its part of x),
// batch_norm split along n, the running averages whole; the work per
// worker adds up to the operator's.
func TestStrategiesDecomposed(t *testing.T) {
	status, doc := strategiesJSON(t, "--op", "batch_norm_train", "../../stdlib/norm.tdl")
	if status != exitOK || len(doc.Ops) != 1 {
		t.Fatalf("exit %d, %d operators", status, len(doc.Ops))
	}
	d := doc.Ops[0].Decomposed
	if d == nil {
		t.Fatal("batch_norm_train has no decomposition in the document")
	}
	want := []string{
		"batch_mean(x) -> batch_mean: reduce n sum, x [n.lo, n.hi]",
		"batch_var(x, batch_mean) -> batch_var: reduce n sum, x [n.lo, n.hi]",
		"batch_norm(x, scale, bias, batch_mean, batch_var) -> y: split n , x [n.lo, n.hi]",
		"running_average(running_mean, batch_mean) -> new_running_mean: whole",
		"running_average(running_var, batch_var) -> new_running_var: whole",
	}
	var got []string
	for _, p := range d.Parts {
		line := fmt.Sprintf("%s(%s) -> %s: ", p.Op, strings.Join(p.Inputs, ", "), strings.Join(p.Outputs, ", "))
		if p.Strategy == nil {
			line += "whole"
		} else {
			x := p.Strategy.Inputs[0].Region[0]
			line += fmt.Sprintf("%s %s %s, %s [%s, %s]", p.Strategy.Kind, p.Strategy.Var, p.Strategy.Reducer, p.Strategy.Inputs[0].Name, x.Lo, x.Hi)
		}
		got = append(got, line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d.Var != "n" || d.FLOPsPerWorker != "8*C*S0*len(n) + 13*C" || doc.Ops[0].FLOPs != "8*C*N*S0 + 13*C" {
		t.Errorf("split %s, %s per worker of %s", d.Var, d.FLOPsPerWorker, doc.Ops[0].FLOPs)
	}
	_, out, _ := tofuc("strategies", "--op", "batch_norm_train", "../../stdlib/norm.tdl")
	for _, s := range []string{"run as its parts by tofuc partition", "batch_var = batch_var(x, batch_mean)  ", "reduce n (sum)  x [n.lo, n.hi], all, all; batch_mean all"} {
		if !strings.Contains(out, s) {
			t.Errorf("the text output lacks %q:\n%s", s, out)
		}
	}
	// Operators that are not decomposed have no such entry.
	if _, doc := strategiesJSON(t, "--op", "batch_norm", "../../stdlib/norm.tdl"); doc.Ops[0].Decomposed != nil {
		t.Error("batch_norm has a decomposition")
	}
}

func TestStrategiesTextHalo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conv.tdl")
	os.WriteFile(path, []byte(`op conv1d(data: [B, CI, W], filters: [CI, CO, DW]) -> [B, CO, W - DW + 1] =
    lambda b, co, x: sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])
`), 0o644)
	status, out, stderr := tofuc("strategies", path)
	if status != exitOK {
		t.Fatalf("exit %d: %s", status, stderr)
	}
	for _, want := range []string{
		"op conv1d (" + path + ":1) — 5 strategies, FLOPs ",
		"[x.lo, DW + x.hi - 1] (halo DW - 1)",
		"reduce ci (sum)",
		"concat along dim 2",
		"sum of partials",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The stdlib conv1d clamps its reads (it pads); the halo is still shown.
	_, out, _ = tofuc("strategies", "--op", "conv1d", "../../stdlib/conv.tdl")
	if !strings.Contains(out, "(halo K - 1)") {
		t.Errorf("stdlib conv1d shows no halo:\n%s", out)
	}
	_, doc := strategiesJSON(t, path)
	x := doc.Ops[0].Strategies[2]
	if x.Var != "x" || x.Inputs[0].Halo != "DW - 1" || x.Inputs[0].Region[2].Halo != "DW - 1" || x.Inputs[1].Halo != "" {
		t.Errorf("split x halos: %+v", x.Inputs)
	}
}

func TestStrategiesOpFilter(t *testing.T) {
	status, doc := strategiesJSON(t, "--op", "matmul", "../../stdlib/linalg.tdl", "../../stdlib/nn.tdl")
	if status != exitOK || len(doc.Ops) != 1 || doc.Ops[0].Op != "matmul" || len(doc.Unanalysed) != 0 {
		t.Errorf("--op matmul: exit %d, %d ops, %d unanalysed", status, len(doc.Ops), len(doc.Unanalysed))
	}
	status, out, stderr := tofuc("strategies", "--op", "nosuchop", "../../stdlib/linalg.tdl")
	if status != exitUser || !strings.Contains(stderr, "no operator nosuchop") || out != "" {
		t.Errorf("--op nosuchop: exit %d, stdout %q, stderr %q", status, out, stderr)
	}
	status, out, _ = tofuc("strategies", "--op", "softmax", "../../stdlib/nn.tdl")
	if status != exitOK || strings.Count("\n"+out, "\nop ") != 1 {
		t.Errorf("--op softmax: exit %d\n%s", status, out)
	}
}

// An operator that checks but whose index the analysis cannot bound (a
// product of two variables) is listed as unanalysed, and the run succeeds.
func TestStrategiesUnanalysed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.tdl")
	os.WriteFile(path, []byte(`op outer(x: [N]) -> [N, N] = lambda i, j: x[i * j] else 0.0
op double(x: [N]) -> [N] = lambda i: x[i] * 2.0
`), 0o644)
	if _, _, stderr := tofuc("check", path); stderr != "" {
		t.Fatalf("the file does not check: %s", stderr)
	}
	// An operator that does not check is unanalysed too, not a failure.
	broken := filepath.Join(dir, "broken.tdl")
	os.WriteFile(broken, []byte("op f(x: [N]) -> [N] = lambda i: y[i]\n"), 0o644)
	if status, doc := strategiesJSON(t, broken); status != exitOK || len(doc.Unanalysed) != 1 ||
		!strings.HasPrefix(doc.Unanalysed[0].Reason, "does not instantiate: ") {
		t.Errorf("an operator that does not check: exit %d, %+v", status, doc.Unanalysed)
	}
	status, doc := strategiesJSON(t, path)
	if status != exitOK {
		t.Errorf("exit %d, want 0", status)
	}
	if len(doc.Ops) != 1 || doc.Ops[0].Op != "double" || !doc.Ops[0].Elementwise {
		t.Errorf("ops: %+v", doc.Ops)
	}
	if len(doc.Unanalysed) != 1 || doc.Unanalysed[0].Op != "outer" || doc.Unanalysed[0].Line != 1 ||
		!strings.Contains(doc.Unanalysed[0].Reason, "product of two varying values") {
		t.Errorf("unanalysed: %+v", doc.Unanalysed)
	}
	status, out, _ := tofuc("strategies", path)
	if status != exitOK || !strings.Contains(out, "unanalysed:\n  outer ("+path+":1): ") {
		t.Errorf("text: exit %d\n%s", status, out)
	}
}

func TestStrategiesExitStatuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tdl")
	os.WriteFile(bad, []byte("op f(x: [N]) -> [N] = lambda i: x[i] +\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"strategies"}, exitUsage},
		{[]string{"strategies", "--bogus", "../../stdlib/nn.tdl"}, exitUsage},
		{[]string{"strategies", "--help"}, exitOK},
		{[]string{"help", "strategies"}, exitOK},
		{[]string{"strategies", bad}, exitUser},
		{[]string{"strategies", filepath.Join(dir, "missing.tdl")}, exitUser},
		{[]string{"strategies", "std/nn.tdl"}, exitOK}, // the embedded library
	} {
		if got, _, stderr := tofuc(tc.args...); got != tc.want {
			t.Errorf("tofuc %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), got, tc.want, stderr)
		}
	}
	// A file that does not parse still leaves exactly one JSON document.
	status, doc := strategiesJSON(t, bad, "../../stdlib/linalg.tdl")
	if status != exitUser || findOp(doc, "matmul") == nil {
		t.Errorf("bad file beside linalg: exit %d, matmul listed %v", status, findOp(doc, "matmul") != nil)
	}
}

func TestStrategiesStdlibOnce(t *testing.T) {
	files := stdlibFiles(t)
	// Repeated files are analysed once.
	status, doc := strategiesJSON(t, append(files, files[0])...)
	if status != exitOK {
		t.Fatalf("exit %d", status)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, op := range doc.Ops {
		count[op.Op]++
	}
	for _, u := range doc.Unanalysed {
		count[u.Op]++
	}
	for name := range prog.StdOps() {
		if count[name] != 1 {
			t.Errorf("%s listed %d times", name, count[name])
		}
	}
	if len(count) != len(prog.StdOps()) {
		t.Errorf("%d operators listed, the library has %d", len(count), len(prog.StdOps()))
	}
	// Sorted by file, then by position in the file.
	var keys []string
	for _, op := range doc.Ops {
		keys = append(keys, fmt.Sprintf("%s:%06d", op.File, op.Line))
	}
	if !sort.StringsAreSorted(keys) {
		t.Error("operators are not sorted by file and line")
	}
	// Only basic strategies: one per splittable output dimension (at most
	// the rank) and per reduction variable, each variable once.
	for _, op := range doc.Ops {
		seen := map[string]bool{}
		for _, s := range op.Strategies {
			key := s.Kind + " " + s.Var
			if seen[key] || (s.Kind != "split" && s.Kind != "reduce") {
				t.Errorf("%s: strategy %s repeated or unknown", op.Op, key)
			}
			seen[key] = true
		}
	}
}

// coverage is the standard library's coverage by the analysis, as
// docs/strategies.md states it.
type coverage struct {
	operators, analysed, elementwise, opaque, reduction int
	unanalysed                                          []string
}

func stdlibCoverage(t *testing.T) coverage {
	t.Helper()
	_, doc := strategiesJSON(t, stdlibFiles(t)...)
	var c coverage
	c.operators = len(doc.Ops) + len(doc.Unanalysed)
	c.analysed = len(doc.Ops)
	for _, op := range doc.Ops {
		if op.Elementwise {
			c.elementwise++
		}
		if op.Opaque {
			c.opaque++
		}
		for _, s := range op.Strategies {
			if s.Kind == "reduce" {
				c.reduction++
				break
			}
		}
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range doc.Unanalysed {
		c.unanalysed = append(c.unanalysed, u.Op)
		// An unanalysed operator may still be opaque.
		if inst, err := check.Standalone(prog.StdOps()[u.Op]); err == nil && inst.CallsOpaque() {
			c.opaque++
		}
	}
	sort.Strings(c.unanalysed)
	return c
}

// TestCoverageTable keeps the coverage table of docs/strategies.md equal
// to what the analysis finds in the standard library.
func TestCoverageTable(t *testing.T) {
	c := stdlibCoverage(t)
	unanalysed := fmt.Sprint(len(c.unanalysed))
	if len(c.unanalysed) > 0 {
		unanalysed += " (" + strings.Join(c.unanalysed, ", ") + ")"
	}
	want := map[string]string{
		"operators":                 fmt.Sprint(c.operators),
		"analysed":                  fmt.Sprint(c.analysed),
		"element-wise":              fmt.Sprint(c.elementwise),
		"opaque":                    fmt.Sprint(c.opaque),
		"with a reduction strategy": fmt.Sprint(c.reduction),
		"unanalysed":                unanalysed,
	}
	src, err := os.ReadFile("../../docs/strategies.md")
	if err != nil {
		t.Fatal(err)
	}
	// Rows of the coverage table: | label | tofuc | MXNet | TensorFlow |.
	row := regexp.MustCompile(`(?m)^\| ([a-z -]+) \| ([^|]*?) \|`)
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		if _, ok := want[m[1]]; ok {
			got[m[1]] = m[2]
		}
	}
	var wrong []string
	for _, label := range []string{"operators", "analysed", "element-wise", "opaque", "with a reduction strategy", "unanalysed"} {
		if got[label] != want[label] {
			wrong = append(wrong, fmt.Sprintf("| %s | %s |  (the document says %q)", label, want[label], got[label]))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("docs/strategies.md's coverage table is out of date; the analysis gives:\n%s", strings.Join(wrong, "\n"))
	}
}

// TestStrategiesOfAModelFile: a file with models and no operators (an
// ONNX model, say) lists the operators its models call.
func TestStrategiesOfAModelFile(t *testing.T) {
	status, out, stderr := tofuc("strategies", "../../examples/mlp.tdl")
	if status != exitOK || !strings.Contains(stderr, "defines no operators; these are the 2 operators its models call") ||
		!strings.Contains(out, "op linear (std/linalg.tdl:") || !strings.Contains(out, "op relu (std/") {
		t.Errorf("exit %d\n%s%s", status, out, stderr)
	}
}
