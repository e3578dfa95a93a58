// Command samebuild checks that two tofuc binaries build the same
// artefacts: it compiles the examples and the light-random ONNX models
// with each, compares the kernels (LLVM IR, PTX), the host and emulator
// shared objects and the parameters byte for byte and the plans up to
// their documented format changes (docs/plan.md, "Versions"), then runs
// every plan of both with `tofuc run` on the host runtime and under the
// SIMT emulator and compares the outputs byte for byte.
//
//	go run ./scripts/samebuild -old OLD/tofuc -new bin/tofuc [-work DIR] [-only a,b] [-shared DIR]
//
// The old binary's compiles and runs are kept under WORK/old and reused
// when their folder is complete, so that a baseline is built once. It
// prints one line per case and exits 1 when any differs.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

// testCase is a model compiled with some flags.
type testCase struct {
	name  string
	model string // a path relative to the repository, or shared:REL
	flags []string
}

var cases = []testCase{
	{"mlp", "examples/mlp.tdl", nil},
	{"mlp-train-4dev", "examples/mlp.tdl", []string{"--train", "--set", "batch=32", "--devices", "4"}},
	{"rnn", "examples/rnn.tdl", nil},
	{"rnn-train-4dev", "examples/rnn.tdl", []string{"--train", "--devices", "4"}},
	{"sru", "examples/sru.tdl", nil},
	{"transformer", "examples/transformer.tdl", nil},
	{"wresnet50-2", "examples/wresnet.tdl", []string{"--set", "width=2", "--set", "batch=1"}},
	{"wresnet-2dev", "examples/wresnet.tdl", []string{"--set", "width=1", "--set", "batch=2", "--set", "image=64", "--devices", "2"}},
	{"squeezenet", "shared:onnx/light-random/light_squeezenet_random.onnx", nil},
	{"inception_v1", "shared:onnx/light-random/light_inception_v1_random.onnx", nil},
	{"inception_v2", "shared:onnx/light-random/light_inception_v2_random.onnx", nil},
	{"resnet50", "shared:onnx/light-random/light_resnet50_random.onnx", nil},
	{"vgg19", "shared:onnx/light-random/light_vgg19_random.onnx", nil},
	{"alexnet", "shared:onnx/light-random/light_bvlc_alexnet_random.onnx", nil},
}

func main() {
	oldBin := flag.String("old", "", "the tofuc binary of the commit before the change")
	newBin := flag.String("new", "bin/tofuc", "the tofuc binary to check")
	work := flag.String("work", filepath.Join(os.TempDir(), "tofuc-samebuild"), "where both builds go")
	only := flag.String("only", "", "comma-separated case names (default: all)")
	shared := flag.String("shared", "", "the shared data folder (default: $TOFUC_SHARED, else ../shared)")
	noRun := flag.Bool("no-run", false, "compare the compiled files only")
	flag.Parse()
	if *oldBin == "" {
		fmt.Fprintln(os.Stderr, "samebuild: -old is required")
		os.Exit(2)
	}
	if *shared == "" {
		if *shared = os.Getenv("TOFUC_SHARED"); *shared == "" {
			*shared = "../shared"
		}
	}
	bins := map[string]string{}
	for side, b := range map[string]string{"old": *oldBin, "new": *newBin} {
		abs, err := filepath.Abs(b)
		if err != nil {
			fatal(err)
		}
		bins[side] = abs
	}
	failed := 0
	for _, c := range cases {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), c.name) {
			continue
		}
		model := c.model
		if rel, ok := strings.CutPrefix(model, "shared:"); ok {
			model = filepath.Join(*shared, rel)
		}
		start := time.Now()
		problems, err := check(c, model, bins, *work, !*noRun)
		switch {
		case err != nil:
			fmt.Printf("%-16s ERROR %v\n", c.name, err)
			failed++
		case len(problems) > 0:
			fmt.Printf("%-16s DIFFERS (%.0fs)\n", c.name, time.Since(start).Seconds())
			for _, p := range problems {
				fmt.Printf("    %s\n", p)
			}
			failed++
		default:
			fmt.Printf("%-16s same (%.0fs)\n", c.name, time.Since(start).Seconds())
		}
	}
	if failed > 0 {
		fmt.Printf("%d cases differ or failed\n", failed)
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "samebuild:", err)
	os.Exit(2)
}

// check builds case c with both binaries and lists the differences.
func check(c testCase, model string, bins map[string]string, work string, run bool) ([]string, error) {
	dirs := map[string]string{}
	for _, side := range []string{"old", "new"} {
		dir := filepath.Join(work, side, c.name)
		dirs[side] = dir
		done := filepath.Join(dir, ".done")
		if _, err := os.Stat(done); err == nil && side == "old" {
			continue // the baseline, built before
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := build(bins[side], model, c.flags, dir, run); err != nil {
			return nil, fmt.Errorf("%s: %w", side, err)
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			return nil, err
		}
	}
	return compare(dirs["old"], dirs["new"], run)
}

// build compiles the model into DIR/plan and runs it into DIR/run-cpu and
// DIR/run-simt.
func build(bin, model string, flags []string, dir string, run bool) error {
	planDir := filepath.Join(dir, "plan")
	args := append([]string{"compile", model, "-o", planDir}, flags...)
	if err := tofuc(bin, args...); err != nil {
		return err
	}
	if !run {
		return nil
	}
	for _, backend := range []string{"cpu", "simt"} {
		out := filepath.Join(dir, "run-"+backend)
		if err := tofuc(bin, "run", planDir, "--backend", backend, "--random-inputs", "--seed", "1", "--out", out); err != nil {
			return err
		}
	}
	return nil
}

func tofuc(bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tofuc %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// compare lists how the new build differs from the old: a file only one
// side has, different bytes, or plans that differ beyond the format.
// Without run, the compiled files only: a baseline built with its runs
// serves a check without them.
func compare(oldDir, newDir string, run bool) ([]string, error) {
	oldFiles, err := files(oldDir, run)
	if err != nil {
		return nil, err
	}
	newFiles, err := files(newDir, run)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, rel := range union(oldFiles, newFiles) {
		if !slices.Contains(oldFiles, rel) || !slices.Contains(newFiles, rel) {
			problems = append(problems, "only in one build: "+rel)
			continue
		}
		a, err := os.ReadFile(filepath.Join(oldDir, rel))
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(newDir, rel))
		if err != nil {
			return nil, err
		}
		if filepath.Base(rel) == "plan.json" {
			if diff, err := samePlan(a, b); err != nil || diff != "" {
				problems = append(problems, fmt.Sprintf("%s: %s%v", rel, diff, errOrEmpty(err)))
			}
			continue
		}
		if !bytes.Equal(a, b) {
			problems = append(problems, fmt.Sprintf("%s: %d bytes against %d, not the same", rel, len(a), len(b)))
		}
	}
	return problems, nil
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}

// files lists the files compared under dir: every file but the report
// (it holds timings) and the markers, and without run those of the runs.
func files(dir string, run bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if base := filepath.Base(rel); base == ".done" || strings.HasPrefix(base, "report.") {
			return nil
		}
		if !run && strings.HasPrefix(rel, "run-") {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	return out, err
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// samePlan compares two plans in the form of version 1: every later
// version is mapped back by undoing its documented change.
func samePlan(a, b []byte) (string, error) {
	var pa, pb map[string]any
	if err := json.Unmarshal(a, &pa); err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &pb); err != nil {
		return "", err
	}
	for _, p := range []map[string]any{pa, pb} {
		if err := asVersion1(p); err != nil {
			return "", err
		}
	}
	for _, k := range union(keys(pa), keys(pb)) {
		if !reflect.DeepEqual(pa[k], pb[k]) {
			return fmt.Sprintf("field %q differs", k), nil
		}
	}
	return "", nil
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// asVersion1 rewrites a decoded plan of any version into version 1's
// form (docs/plan.md, "Versions").
func asVersion1(p map[string]any) error {
	v, ok := p["version"].(float64)
	if !ok {
		return fmt.Errorf("no version")
	}
	if v >= 5 {
		// Version 5 makes a group's reduce steps one all_reduce (each
		// member's step naming the group), with the same fields.
		for _, key := range []string{"init", "steps"} {
			lists, _ := p[key].([]any)
			for _, l := range lists {
				steps, _ := l.([]any)
				for _, s := range steps {
					if s, ok := s.(map[string]any); ok && s["op"] == "all_reduce" {
						s["op"] = "reduce"
						delete(s, "group")
					}
				}
			}
		}
	}
	if v >= 4 {
		// Version 4 records the arguments each kernel writes and a
		// reduction kernel's reducer.
		ks, _ := p["kernels"].([]any)
		for _, k := range ks {
			if k, ok := k.(map[string]any); ok {
				delete(k, "writes")
				delete(k, "reducer")
			}
		}
	}
	if v >= 3 {
		// Version 3 records each file's length and SHA-256 ({"path",
		// "bytes", "sha256"} for a path) and seals the plan.
		mods, _ := p["modules"].(map[string]any)
		for _, m := range mods {
			m, _ := m.(map[string]any)
			for _, key := range []string{"files", "ir"} {
				if list, ok := m[key].([]any); ok {
					for i, f := range list {
						if f, ok := f.(map[string]any); ok {
							list[i] = f["path"]
						}
					}
				}
			}
		}
		delete(p, "seal")
	}
	if v >= 2 {
		// Version 2 keys the modules by target: nvptx's files are the
		// PTX modules and its ir the LLVM IR; host's and simt's one
		// file each is the shared object.
		mods, _ := p["modules"].(map[string]any)
		v1 := map[string]any{}
		if nv, ok := mods["nvptx"].(map[string]any); ok {
			copyList(v1, "ptx", nv["files"])
			copyList(v1, "llvm", nv["ir"])
		}
		for _, t := range []string{"host", "simt"} {
			if m, ok := mods[t].(map[string]any); ok {
				if fs, ok := m["files"].([]any); ok && len(fs) == 1 {
					v1[t] = fs[0]
				}
			}
		}
		p["modules"] = v1
	}
	p["version"] = float64(1)
	return nil
}

func copyList(dst map[string]any, key string, list any) {
	if l, ok := list.([]any); ok && len(l) > 0 {
		dst[key] = l
	}
}
