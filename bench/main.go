// Command bench times tofuc's compiled host backend beside ONNX Runtime's
// CPU provider on the light-random CNNs, side by side in one run, and
// prints the table of docs/benchmarks.md. `make bench` runs it:
//
//	go run ./bench [-runs 5] [-rounds 3] [-threads 2] [-models resnet50,vgg19,inception_v1] [-precision exact,f32] [-backends 'none;all'] [-interp]
//	go run ./bench -matmul 1024 [-runs 5] [-rounds 3] [-threads 2]
//
// Each round runs `tofuc bench --json` and ONNX Runtime (bench/ort, npm's
// onnxruntime-node, installed here on first use) one after the other on
// each model; a tool's time is the median of its rounds' medians, so that
// both see the same load; with several -precision modes, tofuc runs in
// each, in turn, within every round, and with several -backends sets (the
// ablation of docs/placement.md) in each of them. A model is a light-random
// model's name or an .onnx file. With -interp the interpreter is timed
// once.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
)

type result struct {
	Median  float64 `json:"median_seconds"`
	Min     float64 `json:"min_seconds"`
	Kernels []struct {
		Seconds float64 `json:"seconds"`
	} `json:"kernels"`
}

func main() {
	runs := flag.Int("runs", 5, "timed runs per round, after a warm-up")
	rounds := flag.Int("rounds", 3, "rounds of both tools")
	threads := flag.Int("threads", 2, "threads of both tools")
	models := flag.String("models", "resnet50,vgg19,inception_v1", "light-random models")
	withInterp := flag.Bool("interp", false, "also time the interpreter (once; VGG-19 takes a minute)")
	matmul := flag.Int("matmul", 0, "time an f32 matmul N×N×N instead, beside ORT's MatMul and the host's peak")
	tofuc := flag.String("tofuc", "bin/tofuc", "the tofuc binary")
	modes := flag.String("precision", "exact", "tofuc's --precision modes, comma-separated (docs/precision.md)")
	backendSets := flag.String("backends", "all", "tofuc's --backends lists, semicolon-separated (docs/placement.md)")
	flag.Parse()
	shared := os.Getenv("TOFUC_SHARED")
	if shared == "" {
		shared = "../shared"
	}
	if err := installORT(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *matmul > 0 {
		benchMatmul(*tofuc, *matmul, *runs, *rounds, *threads)
		return
	}
	configs := configsOf(strings.Split(*modes, ","), strings.Split(*backendSets, ";"))
	header, rule := "| model |", "|---|"
	for _, c := range configs {
		header += fmt.Sprintf(" tofuc cpu, %s (s) |", c.label)
		rule += "---|"
	}
	header += " ONNX Runtime (s) |"
	rule += "---|"
	for _, c := range configs {
		header += fmt.Sprintf(" %s / ORT |", c.label)
		rule += "---|"
	}
	if *withInterp {
		header += " interpreter (s) |"
		rule += "---|"
	}
	fmt.Println(header)
	fmt.Println(rule)
	for _, m := range strings.Split(*models, ",") {
		path := m
		if !strings.HasSuffix(m, ".onnx") {
			path = filepath.Join(shared, "onnx", "light-random", "light_"+m+"_random.onnx")
		}
		ours := make([][]float64, len(configs))
		var theirs []float64
		for range *rounds {
			for i, c := range configs {
				t, err := run(*tofuc, "bench", path, "--backend", "cpu", "--precision", c.precision, "--backends", c.backends, "--runs", fmt.Sprint(*runs), "--threads", fmt.Sprint(*threads), "--json")
				check(err)
				ours[i] = append(ours[i], t.Median)
			}
			o, err := run("node", "bench/ort/bench.js", path, fmt.Sprint(*runs), fmt.Sprint(*threads))
			check(err)
			theirs = append(theirs, o.Median)
		}
		b := median(theirs)
		line := fmt.Sprintf("| %s |", strings.TrimSuffix(filepath.Base(m), ".onnx"))
		for i := range configs {
			line += fmt.Sprintf(" %.4f |", median(ours[i]))
		}
		line += fmt.Sprintf(" %.4f |", b)
		for i := range configs {
			line += fmt.Sprintf(" %.2f |", median(ours[i])/b)
		}
		if *withInterp {
			t, err := run(*tofuc, "bench", path, "--backend", "interp", "--runs", "1", "--threads", fmt.Sprint(*threads), "--json")
			check(err)
			line += fmt.Sprintf(" %.2f |", t.Median)
		}
		fmt.Println(line)
	}
}

// config is one way tofuc compiles the models: a precision mode and a
// --backends list.
type config struct {
	precision, backends, label string
}

// configsOf is every precision mode with every backend list, labelled
// by what varies.
func configsOf(precisions, backendSets []string) []config {
	var out []config
	for _, p := range precisions {
		for _, b := range backendSets {
			label := p
			if len(backendSets) > 1 {
				label += ", " + b
			}
			out = append(out, config{p, b, label})
		}
	}
	return out
}

// benchMatmul times C = A·B on two n×n f32 inputs (an ONNX MatMul node,
// so that both tools run the same model) in rounds, and prints tofuc's
// whole run and its kernel, ORT's run, and the kernel's share of the
// host's peak (tofuc bench --peak on the same threads). The peak is
// measured in every round, beside the kernel, and the share is the
// median of the rounds' shares: on a shared machine a busy round slows
// both, where a peak measured once would hold a slow round to a quiet
// moment's peak.
func benchMatmul(tofuc string, n, runs, rounds, threads int) {
	dir, err := os.MkdirTemp("", "tofuc-matmul-")
	check(err)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, fmt.Sprintf("matmul%d.onnx", n))
	g := onnxbuild.Graph("matmul", []*onnxpb.NodeProto{onnxbuild.Node("MatMul", []string{"A", "B"}, []string{"C"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("A", onnxpb.TensorProto_FLOAT, n, n), onnxbuild.TensorInfo("B", onnxpb.TensorProto_FLOAT, n, n)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("C", onnxpb.TensorProto_FLOAT, n, n)})
	data, err := proto.Marshal(onnxbuild.Model(g, 17))
	check(err)
	check(os.WriteFile(path, data, 0o644))
	flops := 2 * float64(n) * float64(n) * float64(n)
	var whole, kernel, theirs, peaks, shares []float64
	for range rounds {
		t, err := run(tofuc, "bench", path, "--backend", "cpu", "--runs", fmt.Sprint(runs), "--threads", fmt.Sprint(threads), "--json")
		check(err)
		if len(t.Kernels) != 1 {
			check(fmt.Errorf("the matmul compiled to %d kernels, not one", len(t.Kernels)))
		}
		whole, kernel = append(whole, t.Median), append(kernel, t.Kernels[0].Seconds)
		o, err := run("node", "bench/ort/bench.js", path, fmt.Sprint(runs), fmt.Sprint(threads))
		check(err)
		theirs = append(theirs, o.Median)
		var peak struct {
			FLOPS float64 `json:"peak_flops"`
		}
		out, err := exec.Command(tofuc, "bench", "--peak", "--threads", fmt.Sprint(threads), "--json").Output()
		check(err)
		check(json.Unmarshal(out, &peak))
		peaks, shares = append(peaks, peak.FLOPS), append(shares, flops/t.Kernels[0].Seconds/peak.FLOPS)
	}
	k := median(kernel)
	fmt.Println("| f32 matmul | tofuc kernel (s) | tofuc run (s) | ONNX Runtime (s) | kernel / ORT | kernel GFLOP/s | measured peak GFLOP/s | share of peak (rounds) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %d³, %d threads | %.4f | %.4f | %.4f | %.2f | %.1f | %.1f | %.0f%% (%s) |\n", n, threads, k, median(whole), median(theirs),
		k/median(theirs), flops/k/1e9, median(peaks)/1e9, 100*median(shares), percents(shares))
}

// percents lists shares as whole percentages.
func percents(shares []float64) string {
	var out []string
	for _, s := range shares {
		out = append(out, fmt.Sprintf("%.0f%%", 100*s))
	}
	return strings.Join(out, ", ")
}

// installORT installs onnxruntime-node (its CPU build ships in the
// package) into bench/ort unless it is there.
func installORT() error {
	if _, err := os.Stat("bench/ort/node_modules/onnxruntime-node"); err == nil {
		return nil
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent")
	cmd.Dir = "bench/ort"
	cmd.Env = append(os.Environ(), "ONNXRUNTIME_NODE_INSTALL=skip")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install onnxruntime-node: %w", err)
	}
	return nil
}

func run(name string, args ...string) (result, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	var r result
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(strings.Join(lines, "\n")), &r); err != nil {
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			return result{}, fmt.Errorf("%s: no JSON result: %w", name, err)
		}
	}
	return r, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
