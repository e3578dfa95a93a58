package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/frontend/onnx/conform"
	"tofuc/lang/precision"
	"tofuc/pipeline"
)

func runONNXTest(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("onnx-test", stderr)
	asJSON := fs.Bool("json", false, "print the results as JSON")
	backendName := fs.String("backend", "interp", "how to run the models: interp (the reference interpreter), cpu (compiled host kernels) or simt (compiled GPU kernels, emulated)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up on a test after this long (it fails)")
	jobs := fs.Int("jobs", runtime.GOMAXPROCS(0), "tests run at once")
	var prec precision.Mode
	registerPrecision(fs, &prec, "with --backend cpu or simt: ")
	var backends []string
	registerBackends(fs, &backends, "with --backend cpu: ")
	explain := fs.Bool("explain", false, "when float outputs fail, evaluate in float64 and say how far each side is from it")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	libs, lerr := pipeline.ResolveBackends(backends, prec.InF32()) // none loaded in the exact mode
	b, err := pipeline.NewBackend(*backendName, nil, pipeline.Options{Precision: prec, Backends: libs}, 0)
	switch {
	case lerr != nil:
		return usageError(stderr, "onnx-test", "--backends: %v", lerr)
	case err == nil && *backendName == "interp" && fs.Changed("precision"):
		return usageError(stderr, "onnx-test", "--precision goes with a compiled --backend")
	case err != nil:
		return usageError(stderr, "onnx-test", "%v", err)
	case fs.NArg() == 0:
		return usageError(stderr, "onnx-test", "expected at least one PATH")
	case *jobs < 1:
		return usageError(stderr, "onnx-test", "--jobs must be at least 1")
	}
	paths := expandTestPaths(fs.Args())
	results := runTests(paths, conform.Config{Timeout: *timeout, Explain: *explain, Backend: b, Precision: prec}, *jobs, func(o conform.Outcome) {
		if !*asJSON {
			fmt.Fprintln(stdout, o.Line())
		}
	})
	counts := map[conform.Status]int{}
	for _, o := range results {
		counts[o.Status]++
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"results": results, "passed": counts[conform.Pass], "failed": counts[conform.Fail], "unsupported": counts[conform.Unsupported]})
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed, %d unsupported\n", counts[conform.Pass], counts[conform.Fail], counts[conform.Unsupported])
	}
	if counts[conform.Pass] != len(results) {
		return exitUser
	}
	return exitOK
}

// expandTestPaths replaces a directory that is not a test (no model.onnx)
// by the tests inside it, at any depth: test directories and .onnx files,
// in path order, so that a suite's root (onnx/ holding node/, light/, ...)
// runs every test in it.
func expandTestPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		tests := testsUnder(p)
		if len(tests) == 0 {
			tests = []string{p} // reported as not a test
		}
		out = append(out, tests...)
	}
	return out
}

func testsUnder(p string) []string {
	fi, err := os.Stat(p)
	if _, modelErr := os.Stat(filepath.Join(p, "model.onnx")); err != nil || !fi.IsDir() || modelErr == nil {
		return []string{p}
	}
	entries, _ := os.ReadDir(p) // sorted by name
	var out []string
	for _, e := range entries {
		switch path := filepath.Join(p, e.Name()); {
		case e.IsDir():
			out = append(out, testsUnder(path)...)
		case filepath.Ext(e.Name()) == ".onnx":
			out = append(out, path)
		}
	}
	return out
}

// runTests runs the tests on jobs workers (each with its own stdlib
// program) and reports each outcome, in order, as soon as it and those
// before it are done.
func runTests(paths []string, cfg conform.Config, jobs int, report func(conform.Outcome)) []conform.Outcome {
	results := make([]conform.Outcome, len(paths))
	done := make([]chan struct{}, len(paths))
	for i := range done {
		done[i] = make(chan struct{})
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(jobs, len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prog, err := check.NewProgram(parser.Parse)
			cfg := cfg
			cfg.Program = prog
			for i := range next {
				if err != nil {
					results[i] = conform.Outcome{Name: paths[i], Path: paths[i], Status: conform.Fail, Detail: err.Error()}
				} else {
					results[i] = conform.Run(paths[i], cfg)
					if results[i].TimedOut {
						// the timed-out test may still use the program
						if cfg.Program, err = check.NewProgram(parser.Parse); err != nil {
							err = fmt.Errorf("after a timeout: %w", err)
						}
					}
				}
				close(done[i])
			}
		}()
	}
	go func() {
		for i := range paths {
			next <- i
		}
		close(next)
	}()
	for i := range paths {
		<-done[i]
		report(results[i])
	}
	wg.Wait()
	return results
}
