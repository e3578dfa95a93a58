// Command bench times tofuc's compiled host backend beside ONNX Runtime's
// CPU provider on the light-random CNNs, side by side in one run, and
// prints the table of docs/benchmarks.md. `make bench` runs it:
//
//	go run ./bench [-runs 5] [-rounds 3] [-threads 2] [-models resnet50,vgg19,inception_v1] [-interp]
//
// Each round runs `tofuc bench --json` and ONNX Runtime (bench/ort, npm's
// onnxruntime-node, installed here on first use) one after the other on
// each model; a tool's time is the median of its rounds' medians, so that
// both see the same load. With -interp the interpreter is timed once.
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
)

type result struct {
	Median float64 `json:"median_seconds"`
	Min    float64 `json:"min_seconds"`
}

func main() {
	runs := flag.Int("runs", 5, "timed runs per round, after a warm-up")
	rounds := flag.Int("rounds", 3, "rounds of both tools")
	threads := flag.Int("threads", 2, "threads of both tools")
	models := flag.String("models", "resnet50,vgg19,inception_v1", "light-random models")
	withInterp := flag.Bool("interp", false, "also time the interpreter (once; VGG-19 takes a minute)")
	tofuc := flag.String("tofuc", "bin/tofuc", "the tofuc binary")
	flag.Parse()
	shared := os.Getenv("TOFUC_SHARED")
	if shared == "" {
		shared = "../shared"
	}
	if err := installORT(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Printf("| model | tofuc cpu (s) | ONNX Runtime (s) | tofuc / ORT |%s\n", map[bool]string{true: " interpreter (s) |", false: ""}[*withInterp])
	fmt.Printf("|---|---|---|---|%s\n", map[bool]string{true: "---|", false: ""}[*withInterp])
	for _, m := range strings.Split(*models, ",") {
		path := filepath.Join(shared, "onnx", "light-random", "light_"+m+"_random.onnx")
		var ours, theirs []float64
		for range *rounds {
			t, err := run(*tofuc, "bench", path, "--backend", "cpu", "--runs", fmt.Sprint(*runs), "--threads", fmt.Sprint(*threads), "--json")
			check(err)
			ours = append(ours, t.Median)
			o, err := run("node", "bench/ort/bench.js", path, fmt.Sprint(*runs), fmt.Sprint(*threads))
			check(err)
			theirs = append(theirs, o.Median)
		}
		a, b := median(ours), median(theirs)
		line := fmt.Sprintf("| %s | %.4f | %.4f | %.2f |", m, a, b, a/b)
		if *withInterp {
			t, err := run(*tofuc, "bench", path, "--backend", "interp", "--runs", "1", "--threads", fmt.Sprint(*threads), "--json")
			check(err)
			line += fmt.Sprintf(" %.2f |", t.Median)
		}
		fmt.Println(line)
	}
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
		return fmt.Errorf("npm install onnxruntime-node: %v", err)
	}
	return nil
}

func run(name string, args ...string) (result, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	var r result
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(strings.Join(lines, "\n")), &r); err != nil {
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			return result{}, fmt.Errorf("%s: no JSON result: %v", name, err)
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
