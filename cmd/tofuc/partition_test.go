package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"tofuc/analysis/cost"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

func TestPartitionCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "report")
	var out, errb bytes.Buffer
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4", "--report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"report.txt", "report.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "data_parallel") {
		t.Errorf("summary lacks the baselines:\n%s", out.String())
	}
	// The report's own plan, checked, costs the optimum.
	out.Reset()
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4", "--strategy", filepath.Join(dir, "report.json")}, &out, &errb); code != exitOK {
		t.Fatalf("--strategy: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "your plan") {
		t.Errorf("no checked plan in:\n%s", out.String())
	}
}

func TestPartitionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--devices", "1"}, exitUsage, "2 to 1024"},
		{[]string{"--devices", "6", "--factors", "2,3"}, exitUsage, "at most the one before"},
		{[]string{"--devices", "4", "--factors", "3,2"}, exitUsage, "multiply to 6"},
		{[]string{"--devices", "4", "--memory", "1000", "--report", dir}, exitUser, "no plan fits"},
		{[]string{"--devices", "4", "--strategy", "missing.json"}, exitUser, "missing.json"},
		{[]string{"--devices", "4", "--memory", "16 GiB"}, exitOK, ""},
		{[]string{"--devices", "4", "--memory", "16 furlongs"}, exitUsage, "not a size"},
		{[]string{"--devices", "4", "--objective", "money"}, exitUsage, "time or bytes"},
		{[]string{"--devices", "4", "--objective", "bytes", "--seed", "3"}, exitUsage, "--seed goes with --objective time"},
		{[]string{"--devices", "4", "--topology", "no-such-machine"}, exitUsage, "h100-nvlink"},
		{[]string{"--devices", "4", "--topology", "../../docs/topologies/host-2core.json"}, exitUsage, "fewer than --devices 4"},
		{[]string{"--devices", "64"}, exitUsage, "no built-in topology has 64 devices (the largest, h100-4x8-ib, has 32): give --topology FILE"},
		{[]string{"--devices", "4", "--topology", "testdata/unlinked-topology.json"}, exitUsage, `--topology: the topology "unlinked" has no link that joins devices 0 and 3`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"partition", "../../examples/mlp.tdl"}, c.args...), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
		t.Errorf("over the memory limit the report is still written: %v", err)
	}
	// That report's plan is for 4 devices: it is no plan for 8.
	var out, errb bytes.Buffer
	code := run([]string{"partition", "../../examples/mlp.tdl", "--devices", "8", "--strategy", filepath.Join(dir, "report.json")}, &out, &errb)
	if code != exitUser || !strings.Contains(errb.String(), "the plan is for 4 devices") {
		t.Errorf("a 4-device plan with --devices 8: exit %d, %s", code, errb.String())
	}
}

func TestByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // -1: an error
	}{
		{"1000", 1000}, {"16GiB", 16 << 30}, {"16 gib", 16 << 30}, {"80GB", 80e9}, {"1.5TiB", 3 << 39}, {"512 B", 512},
		{"16 furlongs", -1}, {"GiB", -1}, {"-1GiB", -1}, {"9000000TiB", -1},
	} {
		var b byteSize
		err := b.Set(tc.in)
		if (err != nil) != (tc.want < 0) || (err == nil && int64(b) != tc.want) {
			t.Errorf("%q: %d, %v; want %d", tc.in, b, err, tc.want)
		}
	}
}

// TestPartitionSymbolicExtent: a model whose input has a symbolic extent
// is partitioned once --set binds it, as the error says.
func TestPartitionSymbolicExtent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sym.tdl")
	os.WriteFile(path, []byte("model m(x: f32[N, 8]) {\n    w = param f32[8, 4]\n    return matmul(x, w)\n}\n"), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"partition", path, "--devices", "2"}, &out, &errb); code != exitUser || !strings.Contains(errb.String(), "--set N=VALUE") {
		t.Fatalf("unbound: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"partition", path, "--devices", "2", "--set", "N=64"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "on 2 devices") {
		t.Errorf("--set N=64: exit %d, %s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := run([]string{"partition", path, "--devices", "2", "--set", "N=[1, 2]"}, &out, &errb); code != exitUser || !strings.Contains(errb.String(), "must be an integer") {
		t.Errorf("--set N=[1, 2]: exit %d, %s", code, errb.String())
	}
}

// TestPartitionTimeObjective: --objective time simulates on the topology
// and says what the MCMC refinement gained; report.json has the step
// times.
func TestPartitionTimeObjective(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4", "--objective", "time", "--topology", "pcie", "--seed", "2", "--report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"step time", "over PCIe", "objective: time", "refinement", "seed 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, out.String())
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"objective": "time"`, `"mcmc"`, `"before_seconds"`, `"step_seconds"`, `"memory_tradeoff"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("report.json lacks %s", want)
		}
	}
	// Time is the default; the comparison with the baselines names the
	// objective in force.
	for args, want := range map[string]string{"": "objective: time", "--objective bytes": "objective: bytes"} {
		out.Reset()
		if code := run(append([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4"}, strings.Fields(args)...), &out, &errb); code != exitOK {
			t.Fatalf("%s: exit %d: %s", args, code, errb.String())
		}
		in := map[string]string{"objective: time": "in simulated step time", "objective: bytes": "in bytes per step"}[want]
		if !strings.Contains(out.String(), want) || !regexp.MustCompile(`(at least as good as every baseline's|was better) `+in).MatchString(out.String()) {
			t.Errorf("%q: the summary lacks %q or %q:\n%s", args, want, in, out.String())
		}
	}
}

// TestPartitionNamesTheDevicesSimulated: a plan for 4 devices on the
// 8-GPU default topology says it was simulated on 4 of them; 16 and 32
// devices are simulated on two and four such machines by default, and
// 64 asks for a topology.
func TestPartitionNamesTheDevicesSimulated(t *testing.T) {
	for devices, want := range map[string]string{"4": "simulated on devices 0–3 of 8x H100", "8": "simulated on 8x H100",
		"12": "simulated on devices 0–11 of 2 machines of 8x H100 SXM over NVLink, over InfiniBand",
		"16": "simulated on 2 machines of 8x H100", "32": "simulated on 4 machines of 8x H100"} {
		var out, errb bytes.Buffer
		if code := run([]string{"partition", "../../examples/mlp.tdl", "--devices", devices}, &out, &errb); code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("--devices %s: the summary lacks %q:\n%s", devices, want, out.String())
		}
	}
}

// TestPartitionOfONNXCitesNodes: the operators of an imported ONNX
// model are cited by the ONNX node they convert, not by lines of the
// imported text.
func TestPartitionOfONNXCitesNodes(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	model := "../../frontend/onnx/conform/testdata/torch/unet-opset17/model.onnx"
	if code := run([]string{"partition", model, "--devices", "2", "--report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/enc1/enc1.0/Conv (Conv)", "/Resize (Resize)"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the operators table does not cite %q:\n%s", want, text)
		}
	}
}

// TestBenchTopology: bench --topology adds the simulated step.
func TestBenchTopology(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "../../examples/mlp.tdl", "--backend", "interp", "--runs", "1", "--topology", "../../docs/topologies/host-2core.json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "simulated on this host") {
		t.Errorf("no simulated step in:\n%s", out.String())
	}
	if code := run([]string{"bench", "../../examples/mlp.tdl", "--topology", "nowhere"}, &out, &errb); code != exitUsage {
		t.Errorf("an unknown topology: exit %d", code)
	}
}

// TestBenchPrintsMilliseconds: a run of 18.4 µs reads as such, not as
// "0.0000 s".
func TestBenchPrintsMilliseconds(t *testing.T) {
	var out bytes.Buffer
	printBench(&out, &benchResult{Model: "m", Backend: "cpu", Median: 18.4e-6, Min: 17.5e-6, Runs: 3})
	if want := "m on cpu: median 0.018 ms, min 0.017 ms over 3 runs"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("printed %q, want it to start %q", out.String(), want)
	}
}

// TestBenchCalibrate: bench --calibrate prints a topology of this host
// that --topology loads, with every quantity it measures set.
func TestBenchCalibrate(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "--calibrate", "--runs", "1", "--threads", "1"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	path := filepath.Join(t.TempDir(), "host.json")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	topo, err := cost.LoadTopology(path)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if d := topo.Devices[0]; len(topo.Devices) != 1 || d.IOBandwidth <= 0 || d.LaunchSeconds <= 0 || d.StepSeconds <= 0 || len(d.ContractionTile) != 2 {
		t.Errorf("a quantity was not measured:\n%s", out.String())
	}
	// Every reference contraction (all models but the two adds and the
	// copy) is reported with the fitted model's time for it, and every
	// math model in each mode with its cost a call.
	if n, want := strings.Count(errb.String(), "calibrate: "), len(cost.CalibrationSources())-3+len(cost.MathModes)*len(cost.CalibratedMath); n != want {
		t.Errorf("%d reference models reported, want %d:\n%s", n, want, errb.String())
	}
	for _, mode := range cost.MathModes {
		costs := topo.Devices[0].MathSeconds[mode.String()]
		for _, fn := range cost.CalibratedMath {
			if _, ok := costs[fn]; !ok {
				t.Errorf("no cost of %s in the %s mode:\n%s", fn, mode, out.String())
			}
		}
	}
	for _, args := range [][]string{
		{"bench", "--calibrate", "../../examples/mlp.tdl"},
		{"bench", "--calibrate", "--runs", "0"},
		{"bench", "--calibrate", "--peak"},
		{"bench", "--calibrate", "--backend", "simt"},
	} {
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want a usage error", args, code)
		}
	}
}

// TestPartitionReportCost: --report writes the report of the one search
// (no memory trade-off table, whose five more searches cost ten times
// the rest on Wide ResNet-152-10); --memory-tradeoff adds the table, and
// without --report is a usage error.
func TestPartitionReportCost(t *testing.T) {
	tradeOff := func(args ...string) int {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		if code := run(append([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4", "--report", dir}, args...), &out, &errb); code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var rep struct {
			Rows []json.RawMessage `json:"memory_tradeoff"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		return len(rep.Rows)
	}
	if n := tradeOff(); n != 0 {
		t.Errorf("--report alone: %d trade-off rows, want none", n)
	}
	if n := tradeOff("--memory-tradeoff"); n < 3 {
		t.Errorf("--memory-tradeoff: %d trade-off rows, want several", n)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--devices", "4", "--memory-tradeoff"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--memory-tradeoff goes with --report") {
		t.Errorf("--memory-tradeoff without --report: exit %d, %s", code, errb.String())
	}
}

// TestCompileObjective: tofuc compile --devices chooses its plan by the
// simulated step unless --objective bytes says otherwise, as tofuc
// partition does, and its report says which; a wrong objective, or one
// without --devices, is refused.
func TestCompileObjective(t *testing.T) {
	for _, objective := range []string{"", "bytes"} {
		dir := filepath.Join(t.TempDir(), "plan")
		args := []string{"compile", "../../examples/mlp.tdl", "--train", "--devices", "4", "-o", dir, "--emit", "plan,report"}
		want := `"objective": "time"`
		if objective != "" {
			args, want = append(args, "--objective", objective), `"objective": "`+objective+`"`
		}
		if status, _, stderr := tofuc(args...); status != exitOK {
			t.Fatalf("%v: exit %d: %s", args, status, stderr)
		}
		data, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), want) {
			t.Errorf("%v: report.json lacks %s", args, want)
		}
	}
	for args, want := range map[string]string{
		"--devices 4 --objective money": "--objective must be time or bytes",
		"--objective bytes":             "--objective goes with --devices N > 1",
	} {
		status, _, stderr := tofuc(append([]string{"compile", "../../examples/mlp.tdl", "-o", t.TempDir()}, strings.Fields(args)...)...)
		if status != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want %d and %q", args, status, stderr, exitUsage, want)
		}
	}
	// A compiled plan over --memory is said: Uno's partition plan over
	// 8 devices is modelled at 26.35 MiB a device and compiled at 26.99.
	if _, err := toolchain.Find(); err == nil {
		status, stdout, stderr := tofuc("compile", "../../examples/uno.tdl", "--train", "--loss", "mse", "--devices", "8", "--memory", "26.5MiB", "-o", t.TempDir(), "--emit", "plan")
		if status != exitOK || !strings.Contains(stderr, "tofuc: warning: the compiled plan's largest arena, ") || !strings.Contains(stderr, "is over --memory 26.50 MiB") {
			t.Errorf("--memory 26.5MiB: exit %d: %s%s", status, stdout, stderr)
		}
		if status, _, stderr := tofuc("compile", "../../examples/uno.tdl", "--train", "--loss", "mse", "--devices", "8", "--memory", "40MiB", "-o", t.TempDir(), "--emit", "plan"); status != exitOK || strings.Contains(stderr, "warning") {
			t.Errorf("--memory 40MiB: exit %d: %s", status, stderr)
		}
	}
	// More devices than any built-in topology: said before searching.
	start := time.Now()
	status, _, stderr := tofuc("compile", "../../examples/mlp.tdl", "--devices", "64", "-o", t.TempDir())
	if status == exitOK || !strings.Contains(stderr, "no built-in topology has more") || time.Since(start) > 10*time.Second {
		t.Errorf("--devices 64: exit %d after %s: %s", status, time.Since(start), stderr)
	}
}

// TestPartitionPipeline: --pipeline adds GraphPipe's and the sequential
// pipeline's plans to the summary and report.json, each stage's devices
// and layers named; without --train it is refused; where there is no
// pipeline plan the summary says why.
func TestPartitionPipeline(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"partition", "../../examples/uno.tdl", "--train", "--loss", "mse", "--devices", "8", "--topology", "pcie", "--pipeline", "--report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, re := range []string{`pipeline plans \(\d+ layers, batch 32`, `graphpipe\s+series-parallel`, `sequential\s+linearised`,
		`graphpipe / sequential throughput: \d\.\d\d\n`, `graphpipe / the operator-partitioned plan \(\S+ .s a step\) throughput: \d+\.\d\d: (the operator-partitioned plan stays chosen|graphpipe's plan is chosen \(tofuc compile --pipeline runs it\))`, `0: \S+ \.\. \S+ \(\d+ layers\) on devices [0-9,]+: `, `feeds the loss`} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("the summary lacks %s:\n%s", re, out.String())
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pipelines"`, `"method": "graphpipe"`, `"micro_batches"`, `"in_flight"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("report.json lacks %s", want)
		}
	}
	// GraphPipe's plan is chosen exactly when it is faster than the
	// partition plan, and the summary's first lines say so.
	var rep struct {
		StepSeconds float64 `json:"step_seconds"`
		Pipelines   struct {
			Chosen bool `json:"chosen"`
			Plans  []struct {
				StepSeconds float64 `json:"step_seconds"`
			} `json:"plans"`
		} `json:"pipelines"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	faster := rep.Pipelines.Plans[0].StepSeconds < rep.StepSeconds
	if rep.Pipelines.Chosen != faster || !faster || !strings.Contains(out.String(), "  chosen         graphpipe's pipeline plan, not this one: ") {
		t.Errorf("GraphPipe %g s, the partition plan %g s: chosen %v (over PCIe Uno's towers run side by side faster):\n%s", rep.Pipelines.Plans[0].StepSeconds, rep.StepSeconds, rep.Pipelines.Chosen, out.String())
	}
	// Under the bytes objective the pipeline plan, priced in time only,
	// is not chosen, and the summary says why.
	out.Reset()
	if code := run([]string{"partition", "../../examples/uno.tdl", "--train", "--loss", "mse", "--devices", "8", "--topology", "pcie", "--pipeline", "--objective", "bytes"}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "the operator-partitioned plan stays chosen (the objective is bytes, and pipeline plans are priced in time only)") || strings.Contains(out.String(), "  chosen  ") {
		t.Errorf("--objective bytes: exit %d:\n%s", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"partition", "../../examples/uno.tdl", "--devices", "8", "--pipeline"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--pipeline goes with --train") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	// A model without pipeline plans keeps its partition plan, and the
	// summary says why there are none.
	out.Reset()
	if code := run([]string{"partition", "../../examples/rnn.tdl", "--train", "--devices", "4", "--pipeline"}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "pipeline plans: none: data parallelism splits the input x [20 16 256] along dimension 0, not along its batch of 16") {
		t.Errorf("rnn: exit %d: %s\n%s", code, out.String(), errb.String())
	}
}

// TestCompilePipeline: compile --pipeline compiles GraphPipe's plan of
// the small multi-modal example over 4 devices where it simulates faster
// than the partition plan (the report says it is chosen), and the plan
// run on the cpu and simt runtimes gives the interpreter's training step
// (tofuc eval) on the same inputs and parameters: the loss and every
// updated parameter. Without --train or --devices the flag is refused.
func TestCompilePipeline(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	model := []string{"../../examples/multimodal.tdl", "--train", "--set", "layers=1", "--set", "hidden=16", "--set", "heads=2", "--set", "batch=8",
		"--set", "vocab=50", "--set", "text_len=6", "--set", "patches=4", "--set", "patch_dim=12", "--set", "frames=5", "--set", "mel=7", "--set", "classes=2"}
	dir := filepath.Join(t.TempDir(), "plan")
	status, _, stderr := tofuc(append([]string{"compile", "-o", dir, "--devices", "4", "--pipeline", "--emit", "host,simt,report"}, model...)...)
	if status != exitOK {
		t.Fatalf("compile: exit %d: %s", status, stderr)
	}
	summary, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), "graphpipe's plan is chosen (tofuc compile --pipeline runs it)") {
		t.Fatalf("the pipeline plan is not chosen:\n%s", summary)
	}
	for _, backend := range []string{"cpu", "simt"} {
		got := filepath.Join(t.TempDir(), backend)
		if status, _, stderr := tofuc("run", dir, "--backend", backend, "--random-inputs", "--seed", "5", "--out", got); status != exitOK {
			t.Fatalf("run --backend %s: exit %d: %s", backend, status, stderr)
		}
		var in []string
		for _, name := range []string{"tokens", "image", "audio", "labels"} {
			in = append(in, "--in", name+"="+filepath.Join(got, "inputs", name+".npy"))
		}
		want := filepath.Join(t.TempDir(), "interp")
		args := append(append([]string{"eval"}, model...), append(in, "--params", filepath.Join(dir, "params.npz"), "--out", want)...)
		if status, _, stderr := tofuc(args...); status != exitOK {
			t.Fatalf("eval: exit %d: %s", status, stderr)
		}
		compareNPY(t, backend+": loss", filepath.Join(got, "loss.npy"), filepath.Join(want, "loss.npy"))
		gotParams, err := npy.ReadNPZ(filepath.Join(got, "params.npz"))
		if err != nil {
			t.Fatal(err)
		}
		wantParams, err := npy.ReadNPZ(filepath.Join(want, "params.npz"))
		if err != nil {
			t.Fatal(err)
		}
		if len(gotParams) != len(wantParams) {
			t.Errorf("%s: %d parameters for the next step, the interpreter %d", backend, len(gotParams), len(wantParams))
		}
		for name, w := range wantParams {
			if err := tensor.Compare(gotParams[name], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
				t.Errorf("%s: parameter %s: %v", backend, name, err)
			}
		}
	}
	for _, args := range [][]string{{"--devices", "4"}, {"--train"}} {
		status, _, stderr := tofuc(append([]string{"compile", "../../examples/mlp.tdl", "-o", t.TempDir(), "--pipeline"}, args...)...)
		if status != exitUsage || !strings.Contains(stderr, "--pipeline goes with --train and --devices N > 1") {
			t.Errorf("%v: exit %d: %s", args, status, stderr)
		}
	}
}

// TestCompilePipelineAlways: --pipeline=always compiles GraphPipe's plan
// where it would not be chosen (under the bytes objective, which prices
// no pipeline), and the report says so; a model without pipeline plans
// is refused with the reason; another value of --pipeline is a usage
// error.
func TestCompilePipelineAlways(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "plan")
	status, _, stderr := tofuc("compile", "../../examples/mlp.tdl", "--train", "--set", "batch=16", "--set", "hidden=24", "--devices", "4",
		"--objective", "bytes", "--pipeline=always", "-o", dir, "--emit", "host,report")
	if status != exitOK {
		t.Fatalf("compile: exit %d: %s", status, stderr)
	}
	summary, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), "graphpipe's plan is chosen, as --pipeline=always asks") {
		t.Errorf("the slower pipeline plan is not chosen as asked:\n%s", summary)
	}
	var rep struct {
		Pipelines struct{ Chosen, Asked bool }
	}
	if b, err := os.ReadFile(filepath.Join(dir, "report.json")); err != nil || json.Unmarshal(b, &rep) != nil || !rep.Pipelines.Chosen || !rep.Pipelines.Asked {
		t.Errorf("report.json: pipelines %+v (%v)", rep.Pipelines, err)
	}
	if html, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(html), "The first plan is chosen, as <code>tofuc compile --pipeline=always</code> asks.") {
		t.Errorf("report.html does not say the pipeline plan was asked for (%v)", err)
	}
	if status, _, stderr := tofuc("run", dir, "--random-inputs", "--out", t.TempDir()); status != exitOK {
		t.Errorf("run: exit %d: %s", status, stderr)
	}
	status, _, stderr = tofuc("compile", "../../examples/rnn.tdl", "--train", "--devices", "4", "--pipeline=always", "-o", t.TempDir(), "--emit", "host")
	if status != exitUser || !strings.Contains(stderr, "--pipeline=always: the model has no pipeline plan: data parallelism splits the input") {
		t.Errorf("rnn: exit %d: %s", status, stderr)
	}
	for _, value := range []string{"sometimes", ""} {
		status, _, stderr = tofuc("compile", "../../examples/mlp.tdl", "--train", "--devices", "4", "--pipeline="+value, "-o", t.TempDir())
		if status != exitUsage || !strings.Contains(stderr, "expected --pipeline (compiled where faster) or --pipeline=always") {
			t.Errorf("--pipeline=%s: exit %d: %s", value, status, stderr)
		}
	}
}

func compareNPY(t *testing.T, what, got, want string) {
	t.Helper()
	g, err := npy.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := npy.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Compare(g, w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}
