package main

// The fault-injection suite (issue 28): faults injected one at a time
// into a compiled plan, its kernels, its parameters and inputs, the
// compile cache, concurrent runs and killed compiles. Each fault ends in
// one clear line and exit status 1 with no output written, or is
// repaired (a damaged cache entry compiled again); each case fails when
// the check that catches its fault is removed (it asserts that check's
// message).

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// faultModel is the model every fault is injected into: the MLP, small.
var faultModel = []string{filepath.Join("..", "..", "examples", "mlp.tdl"), "--set", "batch=8", "--set", "hidden=16"}

// compiledPlan compiles the fault model into a folder of its own.
func compiledPlan(t *testing.T, extra ...string) string {
	t.Helper()
	return compiledModel(t, append(slices.Clone(faultModel), extra...)...)
}

// compiledModel compiles a model (its file, then flags) into a folder of
// its own.
func compiledModel(t *testing.T, model ...string) string {
	t.Helper()
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "plan")
	args := append([]string{"compile", "-o", dir}, model...)
	if status, _, stderr := tofuc(args...); status != exitOK {
		t.Fatalf("compile: exit %d: %s", status, stderr)
	}
	return dir
}

// copyDir copies the folder from into a new folder.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(filepath.Join(to, rel), data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// editPlan rewrites DIR/plan.json through edit, as a person or a faulty
// tool would: without sealing it again.
func editPlan(t *testing.T, dir string, edit func(p map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "plan.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	edit(p)
	if b, err = json.MarshalIndent(p, "", " "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sealAgain seals DIR/plan.json again after an edit, as a tool that
// rewrites plans through runtime/plan would: the plan's own checks, not
// its seal, must then catch the edit.
func sealAgain(t *testing.T, dir string) {
	t.Helper()
	resealPlan(t, dir, func(*plan.Plan) {})
}

// cutObject cuts the target's object of the plan in dir to n bytes and
// records its new length and SHA-256 in the plan, which it seals again
// when reseal is set.
func cutObject(n int, target string, reseal bool) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		so := soFile(t, dir, target)
		b, _ := os.ReadFile(so)
		if n >= len(b) {
			t.Fatalf("%s has %d bytes, no more than %d", so, len(b), n)
		}
		os.WriteFile(so, b[:n], 0o755)
		editPlan(t, dir, func(p map[string]any) {
			f := p["modules"].(map[string]any)[target].(map[string]any)["files"].([]any)[0].(map[string]any)
			sum := sha256.Sum256(b[:n])
			f["bytes"], f["sha256"] = float64(n), hex.EncodeToString(sum[:])
		})
		if reseal {
			sealAgain(t, dir)
		}
	}
}

func kernels(p map[string]any) []map[string]any   { return jsonObjects(p["kernels"]) }
func buffers(p map[string]any) []map[string]any   { return jsonObjects(p["buffers"]) }
func stepsOf(p map[string]any, list string) []any { return p[list].([]any)[0].([]any) }

func jsonObjects(v any) []map[string]any {
	var out []map[string]any
	for _, x := range v.([]any) {
		out = append(out, x.(map[string]any))
	}
	return out
}

// firstKernel returns the first kernel for which ok holds.
func firstKernel(t *testing.T, p map[string]any, ok func(k map[string]any) bool) map[string]any {
	t.Helper()
	for _, k := range kernels(p) {
		if ok(k) {
			return k
		}
	}
	t.Fatal("no such kernel in the plan")
	return nil
}

// soFile is the path of the plan's shared object of a target.
func soFile(t *testing.T, dir, target string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, target+"-*.so"))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s objects in %s: %v", target, dir, m)
	}
	return m[0]
}

// refused runs args twice, with --out a folder that does not exist and
// with --out a previous run's folder: each run must end (within a
// minute: no hang) in exit status 1 and one line holding want, and leave
// its folder as it was (absent, or holding what it held).
func refused(t *testing.T, want string, args ...string) {
	t.Helper()
	previous := filepath.Join(t.TempDir(), "previous")
	os.MkdirAll(previous, 0o755)
	os.WriteFile(filepath.Join(previous, "logits.npy"), []byte("a previous run's output"), 0o644)
	for _, out := range []string{filepath.Join(t.TempDir(), "out"), previous} {
		before := folder(t, out)
		run := append(slices.Clip(args), "--out", out)
		type result struct {
			status         int
			stdout, stderr string
		}
		done := make(chan result, 1)
		go func() {
			status, stdout, stderr := tofuc(run...)
			done <- result{status, stdout, stderr}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("tofuc %s: still running after a minute", strings.Join(run, " "))
		}
		if r.status != exitUser || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("tofuc %s: exit %d, stderr %q; want exit 1 and one line with %q", strings.Join(run, " "), r.status, r.stderr, want)
		}
		if after := folder(t, out); (before == nil) != (after == nil) || !maps.EqualFunc(before, after, bytes.Equal) {
			t.Errorf("tofuc %s changed %s (stdout %q)", strings.Join(run, " "), out, r.stdout)
		}
	}
}

// folder is what the folder dir holds, by path; nil when there is none.
func folder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return files(t, dir)
}

// TestPlanFaults: plans whose launches disagree with their kernels,
// damaged kernels and inconsistent plans are refused when loaded, naming
// the kernel and the field, or the file, or the buffers, with nothing
// run or written.
func TestPlanFaults(t *testing.T) {
	base := compiledPlan(t)
	contraction := func(k map[string]any) bool { return k["form"] == "tiled" && k["host_only"] != true }
	blocks := func(k map[string]any) bool { return k["block"].(float64) >= 32 }
	swapNames := func(t *testing.T, dir string) {
		editPlan(t, dir, func(p map[string]any) {
			ks := kernels(p)
			ks[0]["name"], ks[1]["name"] = ks[1]["name"], ks[0]["name"]
		})
	}
	type fault struct {
		// want is a part of the error's line, where DIR is the plan's
		// folder and HOST.so and SIMT.so its objects.
		name, backend, want string
		damage              func(t *testing.T, dir string)
	}
	faults := []fault{
		{"names swapped", "cpu", "the plan does not match its kernels", func(t *testing.T, dir string) {
			swapNames(t, dir)
			sealAgain(t, dir)
		}},
		{"names swapped, the plan not sealed again", "cpu", "DIR/plan.json was changed after tofuc compile wrote it", swapNames},
		{"argument shape with its buffer", "cpu", ": args [", func(t *testing.T, dir string) {
			editArg(t, dir, contraction, func(arg, buf map[string]any) {
				shape := arg["shape"].([]any)
				shape[0], shape[len(shape)-1] = shape[len(shape)-1], shape[0]
				buf["shape"] = shape
			})
			sealAgain(t, dir)
		}},
		{"argument dtype with its buffer", "simt", ": args [", func(t *testing.T, dir string) {
			editArg(t, dir, contraction, func(arg, buf map[string]any) { arg["dtype"], buf["dtype"] = "i32", "i32" })
			sealAgain(t, dir)
		}},
		{"host range halved", "cpu", "host_range", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) {
				k := firstKernel(t, p, func(k map[string]any) bool { return k["host_range"].(float64) > 1 })
				k["host_range"] = float64(int(k["host_range"].(float64)) / 2)
			})
			sealAgain(t, dir)
		}},
		{"block halved", "simt", ": block ", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) { k := firstKernel(t, p, blocks); k["block"] = k["block"].(float64) / 2 })
			sealAgain(t, dir)
		}},
		{"grid of 2^40", "simt", "beyond the 65535", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) { firstKernel(t, p, blocks)["grid"] = float64(int64(1) << 40) })
		}},
		{"host range of 2^40", "cpu", "more items than the", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) { kernels(p)[0]["host_range"] = float64(int64(1) << 40) })
		}},
		{"live buffers overlapping", "cpu", "share bytes", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) {
				bs := buffers(p)
				bs[len(bs)-1]["offset"] = bs[0]["offset"] // the input, live throughout
			})
		}},
		{"steps reversed", "cpu", "was changed after tofuc compile wrote it", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) {
				s := stepsOf(p, "steps")
				for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
					s[i], s[j] = s[j], s[i]
				}
			})
		}},
		{"a step dropped", "cpu", "was changed after tofuc compile wrote it", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) { p["steps"].([]any)[0] = stepsOf(p, "steps")[1:] })
		}},
		{"init steps dropped", "cpu", "was changed after tofuc compile wrote it", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) { p["init"].([]any)[0] = []any{} })
		}},
		{"a step waiting for a later step", "cpu", "or for a later step of its own device", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) {
				stepsOf(p, "steps")[0].(map[string]any)["after"] = []any{map[string]any{"device": 0.0, "step": 1.0}}
			})
		}},
		{"a file outside the folder", "cpu", "is not inside the plan's folder", func(t *testing.T, dir string) {
			editPlan(t, dir, func(p map[string]any) {
				host := p["modules"].(map[string]any)["host"].(map[string]any)
				host["files"].([]any)[0].(map[string]any)["path"] = "../elsewhere.so"
			})
		}},
		{"host object truncated", "cpu", "is not the file the plan was compiled with", func(t *testing.T, dir string) {
			so := soFile(t, dir, "host")
			b, _ := os.ReadFile(so)
			os.WriteFile(so, b[:len(b)/2], 0o755)
		}},
		{"emulator object overwritten", "simt", "is not the file the plan was compiled with", func(t *testing.T, dir string) {
			so := soFile(t, dir, "simt")
			b, _ := os.ReadFile(so)
			copy(b[len(b)/3:], bytes.Repeat([]byte{0xcc}, 32))
			os.WriteFile(so, b, 0o755)
		}},
		{"another compile's object", "cpu", "is not the file the plan was compiled with", func(t *testing.T, dir string) {
			other := compiledPlan(t, "--set", "hidden=24")
			b, _ := os.ReadFile(soFile(t, other, "host"))
			os.WriteFile(soFile(t, dir, "host"), b, 0o755)
		}},
		{"host object a sparse file of 4 TiB", "cpu", "HOST.so is not the file the plan was compiled with (4398046511104 bytes,", func(t *testing.T, dir string) {
			sparse(t, soFile(t, dir, "host"), 4<<40)
		}},
		{"plan a sparse file of 4 TiB", "cpu", "DIR/plan.json is 4.00 TiB, more than the 256.00 MiB it may have", func(t *testing.T, dir string) {
			sparse(t, filepath.Join(dir, "plan.json"), 4<<40)
		}},
		{"plan a named pipe", "cpu", "DIR/plan.json is a named pipe, not a regular file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "plan.json"))
			if err := syscall.Mkfifo(filepath.Join(dir, "plan.json"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	// Objects cut to sizes at which loading them died of SIGBUS, their
	// length and SHA-256 recorded: the seal refuses the plan, and sealed
	// again, the object's own check.
	for _, n := range []int{1000, 4096, 16000} {
		faults = append(faults,
			fault{fmt.Sprintf("host object cut to %d bytes, recorded", n), "cpu", "DIR/plan.json was changed after tofuc compile wrote it", cutObject(n, "host", false)},
			fault{fmt.Sprintf("emulator object cut to %d bytes, recorded", n), "simt", "DIR/plan.json was changed after tofuc compile wrote it", cutObject(n, "simt", false)},
			fault{fmt.Sprintf("host object cut to %d bytes, recorded and sealed", n), "cpu", "HOST.so is not a whole shared object", cutObject(n, "host", true)},
			fault{fmt.Sprintf("emulator object cut to %d bytes, recorded and sealed", n), "simt", "SIMT.so is not a whole shared object", cutObject(n, "simt", true)})
	}
	for _, tc := range faults {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			want := strings.NewReplacer("DIR", dir, "HOST.so", soFile(t, dir, "host"), "SIMT.so", soFile(t, dir, "simt")).Replace(tc.want)
			tc.damage(t, dir)
			refused(t, want, "run", dir, "--backend", tc.backend, "--random-inputs", "--seed", "1")
		})
	}
}

// resealPlan rewrites DIR/plan.json through edit and seals it again as
// plan.Plan.Write does: what a person who edits a plan and reseals it
// writes, which only Validate and the compiled files' records stand
// against.
func resealPlan(t *testing.T, dir string, edit func(p *plan.Plan)) {
	t.Helper()
	path := filepath.Join(dir, "plan.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p plan.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	edit(&p)
	if err := p.Write(path); err != nil {
		t.Fatal(err)
	}
}

// TestResealedPlanFaults: plans edited and sealed again, so that their
// seal passes, that would crash, hang or compute wrong results are
// refused when loaded, naming the step, kernel or buffer and the field:
// the fault model, its training graph over 4 devices (copies between
// devices, reductions) and a model with an opaque step.
func TestResealedPlanFaults(t *testing.T) {
	bases := map[string]string{
		"mlp":         compiledPlan(t),
		"partitioned": compiledPlan(t, "--train", "--devices", "4", "--objective", "bytes"), // by bytes its outputs are split
		"inverse":     compiledModel(t, filepath.Join("testdata", "inverse.tdl")),
	}
	for _, tc := range []struct {
		name, base, want string
		edit             func(t *testing.T, p *plan.Plan)
	}{
		{"an offset near 2^63", "mlp", "do not lie in the arena", func(t *testing.T, p *plan.Plan) {
			p.Buffers[len(p.Buffers)-1].Offset = 1<<63 - 100
		}},
		{"a view_of letting a buffer share an input's bytes", "mlp", "which holds a tile of an input or a parameter", func(t *testing.T, p *plan.Plan) {
			b := largest(p, func(b plan.Buffer) bool { return b.Role == plan.RoleWorkspace && b.Bytes < p.Buffers[0].Bytes })
			p.Buffers[b].Offset, p.Buffers[b].ViewOf = p.Buffers[0].Offset, 0
		}},
		{"a view_of larger than its buffer", "mlp", "are not part of buffer", func(t *testing.T, p *plan.Plan) {
			// A workspace made a view of a smaller buffer that it
			// overruns inside the arena: the largest workspace that has
			// one (which buffers those are depends on the host's vector
			// width and on how its GEMMs pack their weights).
			b, base := -1, -1
			for _, w := range p.Buffers {
				if w.Role != plan.RoleWorkspace || b >= 0 && w.Bytes <= p.Buffers[b].Bytes {
					continue
				}
				x := largest(p, func(x plan.Buffer) bool {
					return x.ID != w.ID && x.ViewOf < 0 && x.Device == w.Device && x.Bytes < w.Bytes && x.Offset+w.Bytes <= p.ArenaBytes[w.Device]
				})
				if x >= 0 {
					b, base = w.ID, x
				}
			}
			if base < 0 {
				t.Fatal("no workspace that a smaller buffer's view would overrun inside the arena")
			}
			p.Buffers[b].Offset, p.Buffers[b].ViewOf = p.Buffers[base].Offset, p.Buffers[base].ID
		}},
		{"requires removed", "mlp", "requires [] in the plan, but", func(t *testing.T, p *plan.Plan) {
			m := p.Modules["host"]
			if len(m.Requires) == 0 {
				t.Skip("this CPU has no extension to remove")
			}
			m.Requires = nil
			p.Modules["host"] = m
		}},
		{"an unknown extension required", "mlp", "requires avx1024, which this tofuc knows no CPU extension as", func(t *testing.T, p *plan.Plan) {
			m := p.Modules["host"]
			m.Requires = append(m.Requires, "avx1024")
			p.Modules["host"] = m
		}},
		{"a copy's at near 2^63", "partitioned", "lies outside buffer", func(t *testing.T, p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Op == plan.Copy && len(s.At) > 1 })
			s.At[1] = 1<<63 - 4
		}},
		{"no after between devices", "partitioned", "and no `after` orders the two", func(t *testing.T, p *plan.Plan) {
			for _, list := range p.Steps {
				for i := range list {
					list[i].After = nil
				}
			}
		}},
		{"an output's tile box given twice", "partitioned", "some are in no tile", func(t *testing.T, p *plan.Plan) {
			for _, b := range p.Outputs {
				if len(b.Tiles) > 1 && !slices.Equal(b.Tiles[0].Box, b.Tiles[1].Box) {
					b.Tiles[1].Box = b.Tiles[0].Box
					return
				}
			}
			t.Fatal("no output of several tiles")
		}},
		{"a reduction's part twice", "partitioned", "a part counted twice", func(t *testing.T, p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Combines() && len(s.Parts) > 1 })
			s.Parts[1] = s.Parts[0]
		}},
		{"a reduction's reducer changed", "partitioned", `reducer "max", but its kernel`, func(t *testing.T, p *plan.Plan) {
			firstStep(t, p, func(s *plan.Step) bool { return s.Combines() && s.Reducer == "sum" }).Reducer = "max"
		}},
		{"a reduction's reducer changed with its kernel's", "partitioned", ": reducer max in the plan, but", func(t *testing.T, p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Combines() && s.Reducer == "sum" })
			for _, list := range p.Steps {
				for i := range list {
					if list[i].Combines() && list[i].Kernel == s.Kernel {
						list[i].Reducer = "max"
					}
				}
			}
			p.Kernels[s.Kernel].Reducer = "max"
		}},
		{"a kernel's written arguments changed", "partitioned", ": writes [0 4] in the plan, but", func(t *testing.T, p *plan.Plan) {
			k := &p.Kernels[firstStep(t, p, func(s *plan.Step) bool { return s.Combines() && len(s.Parts) == 4 }).Kernel]
			k.Writes = []int{0, 4} // a reduction's: its steps read their parts
		}},
		{"an opaque batch beyond its result", "inverse", "call.batch [30] and result_shape [4 4]", func(t *testing.T, p *plan.Plan) {
			opaqueStep(t, p).Call.Batch = []int64{30}
		}},
		{"an opaque batch of 2^63-1", "inverse", "call.batch: bad shape [9223372036854775807]", func(t *testing.T, p *plan.Plan) {
			opaqueStep(t, p).Call.Batch = []int64{1<<63 - 1}
		}},
		{"an opaque batch of -1", "inverse", "call.batch: bad shape [-1]", func(t *testing.T, p *plan.Plan) {
			opaqueStep(t, p).Call.Batch = []int64{-1}
		}},
		{"an opaque result into the input", "inverse", "writes buffer 0 (x), which holds a tile of an input", func(t *testing.T, p *plan.Plan) {
			opaqueStep(t, p).To = p.Inputs[0].Tiles[0].Buffer
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, bases[tc.base])
			resealPlan(t, dir, func(p *plan.Plan) { tc.edit(t, p) })
			refused(t, tc.want, "run", dir, "--random-inputs", "--seed", "1")
		})
	}
}

// largest is the largest buffer of p for which ok holds.
func largest(p *plan.Plan, ok func(b plan.Buffer) bool) int {
	best := -1
	for i, b := range p.Buffers {
		if ok(b) && (best < 0 || b.Bytes > p.Buffers[best].Bytes) {
			best = i
		}
	}
	return best
}

// firstStep is the first step of p's Steps, device by device, for which
// ok holds.
func firstStep(t *testing.T, p *plan.Plan, ok func(s *plan.Step) bool) *plan.Step {
	t.Helper()
	for _, list := range p.Steps {
		for i := range list {
			if ok(&list[i]) {
				return &list[i]
			}
		}
	}
	t.Fatal("no such step in the plan")
	return nil
}

func opaqueStep(t *testing.T, p *plan.Plan) *plan.Step {
	return firstStep(t, p, func(s *plan.Step) bool { return s.Op == plan.Opaque })
}

// sparse makes the file at path a sparse file of size bytes (reading it
// would take them all; storing it takes nothing).
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Skip(err)
	}
}

// kernelOf is the kernel a launch step names (0 is left out of the JSON).
func kernelOf(s map[string]any) int {
	k, _ := s["kernel"].(float64)
	return int(k)
}

// editArg edits, consistently, the written argument of the first kernel
// for which ok holds, the buffer its launch passes there, and every
// kernel argument another launch passes that buffer to: a plan that
// validates, whose kernels were compiled for other arguments.
func editArg(t *testing.T, dir string, ok func(k map[string]any) bool, edit func(arg, buf map[string]any)) {
	t.Helper()
	editPlan(t, dir, func(p map[string]any) {
		ks, steps := kernels(p), append(stepsOf(p, "init"), stepsOf(p, "steps")...)
		for i, k := range ks {
			if !ok(k) {
				continue
			}
			for _, st := range steps {
				s := st.(map[string]any)
				if s["op"] != "launch" || kernelOf(s) != i {
					continue
				}
				ids := s["args"].([]any)
				buf := buffers(p)[int(ids[len(ids)-1].(float64))]
				args := k["args"].([]any)
				edit(args[len(args)-1].(map[string]any), buf)
				for _, other := range steps { // the buffer's other users
					o := other.(map[string]any)
					if o["op"] != "launch" {
						continue
					}
					for j, id := range o["args"].([]any) {
						if buffers(p)[int(id.(float64))]["id"] == buf["id"] {
							oargs := ks[kernelOf(o)]["args"].([]any)
							oargs[j].(map[string]any)["dtype"], oargs[j].(map[string]any)["shape"] = buf["dtype"], buf["shape"]
						}
					}
				}
				return
			}
		}
		t.Fatal("no launch of such a kernel")
	})
}

// TestParameterAndInputFaults: parameters and inputs that do not fit the
// plan are refused before anything runs, naming what is wrong.
func TestParameterAndInputFaults(t *testing.T) {
	dir := compiledPlan(t)
	params, err := npy.ReadNPZ(filepath.Join(dir, "params.npz"))
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	npz := func(name string, edit func(m map[string]*tensor.Tensor)) string {
		m := map[string]*tensor.Tensor{}
		for k, v := range params {
			m[k] = v
		}
		edit(m)
		path := filepath.Join(scratch, name+".npz")
		if err := npy.WriteNPZ(path, m); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file := func(name string, data []byte) string {
		path := filepath.Join(scratch, name)
		os.WriteFile(path, data, 0o644)
		return path
	}
	npyOf := func(name string, x *tensor.Tensor) string {
		path := filepath.Join(scratch, name+".npy")
		if err := npy.WriteFile(path, x); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good, _ := os.ReadFile(filepath.Join(dir, "params.npz"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a parameter missing", []string{"--params", npz("missing", func(m map[string]*tensor.Tensor) { delete(m, "w1") }), "--random-inputs"}, "lack parameter w1"},
		{"a parameter too many", []string{"--params", npz("extra", func(m map[string]*tensor.Tensor) { m["w9"] = tensor.New(params["b1"].DType, params["b1"].Shape) }), "--random-inputs"}, "the plan has no parameter w9"},
		{"a parameter of another shape", []string{"--params", npz("shape", func(m map[string]*tensor.Tensor) { m["b1"] = tensor.New(params["b1"].DType, []int{3}) }), "--random-inputs"}, "parameter b1 is f32[3], the plan wants f32[16]"},
		{"a parameter of another dtype", []string{"--params", npz("dtype", func(m map[string]*tensor.Tensor) {
			m["b1"] = tensor.New(lang.I32, params["b1"].Shape)
		}), "--random-inputs"}, "parameter b1 is i32[16], the plan wants f32[16]"},
		{"parameters truncated", []string{"--params", file("cut.npz", good[:len(good)/2]), "--random-inputs"}, "npz"},
		{"an input of another shape", []string{"--in", "x=" + npyOf("x5", tensor.New(params["b1"].DType, []int{5, 784})), "--params", filepath.Join(dir, "params.npz")}, "input x is f32[5 784], the plan wants f32[8 784]"},
		{"an input missing", []string{}, "input x (f32[8 784]) is missing"},
		{"an input the plan lacks", []string{"--in", "y=" + npyOf("y", tensor.New(params["b1"].DType, []int{8, 784})), "--random-inputs"}, "the plan has no input y"},
		{"an input malformed", []string{"--in", "x=" + file("bad.npy", []byte("\x93NUMPY\x01\x00garbage")), "--random-inputs"}, "--in x"},
		{"an input of 10^12 elements over a sparse file of 4 TB", []string{"--in", "x=" + hugeInput(t, filepath.Join(scratch, "huge.npy")), "--random-inputs"}, "--in x: " + filepath.Join(scratch, "huge.npy") + ": input x is f32[1000000 1000000], the plan wants f32[8 784]"},
		{"an input longer than its header says", []string{"--in", "x=" + file("long.npy", append(raw(t, tensor.New(lang.F32, []int{8, 784})), make([]byte, 8*784*4)...)), "--random-inputs"}, filepath.Join(scratch, "long.npy") + ": npy: shape [8 784] of f32 is 25088 bytes of data, but 50176 follow the header"},
		{"a parameter longer than its header says", []string{"--params", zipped(t, filepath.Join(scratch, "long.npz"), good, "b1.npy", append(raw(t, params["b1"]), 1, 2, 3)), "--random-inputs"}, filepath.Join(scratch, "long.npz") + `: npz member "b1.npy": npy: shape [16] of f32 is 64 bytes of data, but 67 follow the header`},
		{"a parameter the plan lacks, declaring 2 GiB", []string{"--params", zipped(t, filepath.Join(scratch, "big.npz"), good, "big.npy", nil), "--random-inputs"}, filepath.Join(scratch, "big.npz") + `: npz member "big.npy": the plan has no parameter big`},
		{"a parameter declaring 2 GiB", []string{"--params", zipped(t, filepath.Join(scratch, "b1.npz"), good, "b1.npy", nil), "--random-inputs"}, filepath.Join(scratch, "b1.npz") + `: npz member "b1.npy": parameter b1 is f32[536870912], the plan wants f32[16]`},
		{"an input a folder", []string{"--in", "x=" + scratch, "--random-inputs"}, "--in x: " + scratch + " is a directory, not a regular file"},
		{"an input a named pipe", []string{"--in", "x=" + fifo(t, filepath.Join(scratch, "x.fifo")), "--random-inputs"}, filepath.Join(scratch, "x.fifo") + " is a named pipe, not a regular file"},
		{"parameters a named pipe", []string{"--params", fifo(t, filepath.Join(scratch, "p.fifo")), "--random-inputs"}, filepath.Join(scratch, "p.fifo") + " is a named pipe, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused(t, tc.want, append([]string{"run", dir}, tc.args...)...)
		})
	}
	t.Run("params.npz of another compile", func(t *testing.T) {
		other := copyDir(t, dir)
		os.Rename(npz("same shapes", func(m map[string]*tensor.Tensor) {
			b1 := tensor.New(params["b1"].DType, params["b1"].Shape)
			b1.SetFlat(0, params["b1"].Flat(0)+1)
			m["b1"] = b1
		}), filepath.Join(other, "params.npz"))
		refused(t, "params.npz is not the file the plan was compiled with", "run", other, "--random-inputs")
	})
}

// TestThreadsBounded: --threads beyond 1024 (10^8 started as many
// goroutines, and the run died of it) is a usage error of run, eval and
// bench, found with the flags, before anything is read, run or written.
func TestThreadsBounded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"run", t.TempDir(), "--random-inputs", "--out", out},
		append([]string{"eval", "--random-inputs", "--backend", "cpu", "--out", out}, faultModel...),
		append([]string{"bench", "--backend", "cpu"}, faultModel...),
	} {
		args = append(args, "--threads", "100000000")
		status, _, stderr := tofuc(args...)
		if status != exitUsage || !strings.Contains(stderr, "--threads 100000000 is more than 1024") {
			t.Errorf("tofuc %s: exit %d, %q; want a usage error bounding --threads", strings.Join(args, " "), status, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("tofuc %s wrote %s", strings.Join(args, " "), out)
		}
	}
}

// raw is x as a .npy file.
func raw(t *testing.T, x *tensor.Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := npy.Write(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npyHeader is the header of a .npy file of f32 of the given shape (a
// Python tuple).
func npyHeader(shape string) []byte {
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"
	dict += strings.Repeat(" ", 63-(10+len(dict))%64) + "\n"
	return append([]byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, byte(len(dict)), byte(len(dict) >> 8)}, dict...)
}

// hugeInput writes, at path, a .npy file whose header declares f32 of
// shape (1000000, 1000000), its 4 TB of data sparse: reading it would
// take all memory.
func hugeInput(t *testing.T, path string) string {
	t.Helper()
	hdr := npyHeader("(1000000, 1000000)")
	os.WriteFile(path, hdr, 0o644)
	sparse(t, path, int64(len(hdr))+4e12)
	return path
}

// zipped writes, at path, the .npz archive good with its member name
// (added or replaced) holding data, or, when data is nil, a deflated
// member declaring the header of 2^29 f32 (2 GiB) and their data, but
// holding only the header and 1 MiB of zeros.
func zipped(t *testing.T, path string, good []byte, name string, data []byte) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range zr.File {
		if f.Name != name {
			zw.Copy(f)
		}
	}
	if data != nil {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		w.Write(data)
	} else {
		hdr := npyHeader("(536870912,)")
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, flate.BestSpeed)
		fw.Write(hdr)
		fw.Write(make([]byte, 1<<20))
		fw.Close()
		w, _ := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate, CompressedSize64: uint64(comp.Len()), UncompressedSize64: uint64(len(hdr)) + 1<<31})
		w.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b.Bytes(), 0o644)
	return path
}

// fifo makes a named pipe at path, which nothing writes.
func fifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// process runs the tofuc binary with env added.
func process(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// cacheEntries lists the files of a cache folder whose names start with
// prefix ("compile-" for compiles, "" for any).
func cacheEntries(t *testing.T, cache, prefix string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), prefix) && !strings.HasPrefix(d.Name(), "tmp-") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// TestCacheFaults: a damaged compile-cache entry (emptied, cut, bytes
// overwritten, or whole but not its manifest's) or a damaged llc entry is
// discarded with one line and compiled again, into a folder that held
// another compile, which then runs as a fresh compile does; a folder
// that cannot be written is reported as such and leaves the entry good;
// an entry holds only what the compile wrote; no temporary file is left.
func TestCacheFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles several times with a cache of its own")
	}
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	bin := buildTofuc(t)
	cache := filepath.Join(t.TempDir(), "cache")
	env := []string{"TOFUC_CACHE=" + cache}
	work := t.TempDir()
	compile := func(dir string, extra ...string) (string, string) {
		t.Helper()
		status, stdout, stderr := process(t, bin, env, append(append([]string{"compile", "-o", dir}, faultModel...), extra...)...)
		if status != exitOK {
			t.Fatalf("compile into %s: exit %d: %s", dir, status, stderr)
		}
		return stdout, stderr
	}
	runOut := func(dir string) map[string][]byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		if status, _, stderr := process(t, bin, env, "run", dir, "--random-inputs", "--seed", "4", "--out", out); status != exitOK {
			t.Fatalf("run %s: exit %d: %s", dir, status, stderr)
		}
		return files(t, out)
	}
	fresh := filepath.Join(work, "fresh")
	compile(fresh, "--seed", "1")
	want := runOut(fresh)
	wantParams, _ := os.ReadFile(filepath.Join(fresh, "params.npz"))
	entries := cacheEntries(t, cache, "compile-")
	if len(entries) != 1 {
		t.Fatalf("compile entries %v", entries)
	}
	entry := entries[0]
	pristine, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	header := pristine[:bytes.IndexByte(pristine[len(cacheMagic):], '\n')+len(cacheMagic)+1]
	body := pristine[len(header):]
	for _, tc := range []struct {
		name   string
		damage func() []byte
		want   string
	}{
		{"emptied", func() []byte { return nil }, "no header"},
		{"cut", func() []byte { return pristine[:len(pristine)/2] }, "SHA-256 is not the header's"},
		{"cut between two files", func() []byte { return pristine[:len(pristine)-len(body)+1024] }, "SHA-256 is not the header's"},
		{"overwritten", func() []byte {
			b := bytes.Clone(pristine)
			copy(b[len(b)/2:], bytes.Repeat([]byte{0xcc}, 32))
			return b
		}, "SHA-256 is not the header's"},
		{"not its manifest's", func() []byte {
			b := bytes.Clone(body)
			copy(b[len(b)/2:], bytes.Repeat([]byte{0xcc}, 32))
			return sealed(b, entry) // a whole entry, checksum and all, of other contents
		}, "manifest"},
		{"another key's", func() []byte {
			other := cacheEntries(t, cache, "compile-")
			for _, o := range other {
				if o != entry {
					b, _ := os.ReadFile(o)
					return b
				}
			}
			t.Fatal("no other entry")
			return nil
		}, "the entry of another key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			compile(dir, "--seed", "2") // another compile, its entry another
			if err := os.WriteFile(entry, tc.damage(), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr := compile(dir, "--seed", "1")
			if strings.Contains(stdout, "reused") || !strings.Contains(stderr, "damaged") || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("compile after the entry was %s: stdout %q, stderr %q; want one line saying it is damaged (%s)", tc.name, stdout, stderr, tc.want)
			}
			if p, _ := os.ReadFile(filepath.Join(dir, "params.npz")); !bytes.Equal(p, wantParams) {
				t.Errorf("the folder holds the other compile's parameters")
			}
			if got := runOut(dir); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the recompiled plan's outputs are not a fresh compile's")
			}
			os.WriteFile(entry, pristine, 0o644)
		})
	}
	t.Run("llc entry damaged", func(t *testing.T) {
		os.Remove(entry) // the compile runs llc, whose entries it reads
		objs := cacheEntries(t, cache, "")
		for _, o := range objs {
			if o == entry || strings.Contains(filepath.Base(o), "compile-") {
				continue
			}
			b, _ := os.ReadFile(o)
			copy(b[len(b)/2:], bytes.Repeat([]byte{0xcc}, min(32, len(b)/2)))
			os.WriteFile(o, b, 0o644)
		}
		dir := filepath.Join(t.TempDir(), "out")
		_, stderr := compile(dir, "--seed", "1")
		if lines := strings.Count(stderr, "damaged"); lines == 0 || lines > 2 {
			t.Errorf("%d lines report the %d damaged entries, want one and a count: %q", lines, len(objs)-1, stderr)
		}
		if got := runOut(dir); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("a compile from damaged llc entries runs differently")
		}
	})
	t.Run("cache under a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		os.WriteFile(file, nil, 0o644)
		for _, at := range []string{file, filepath.Join(file, "cache")} {
			status, _, stderr := process(t, bin, []string{"TOFUC_CACHE=" + at}, append([]string{"compile", "-o", filepath.Join(t.TempDir(), "out")}, faultModel...)...)
			if status != exitOK || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "cannot be used") || strings.Contains(stderr, "compiling again") {
				t.Errorf("TOFUC_CACHE=%s: exit %d, %q; want the compile, said to be without the cache in one line", at, status, stderr)
			}
		}
	})
	t.Run("folder not writable", func(t *testing.T) {
		notDir := filepath.Join(t.TempDir(), "file")
		os.WriteFile(notDir, nil, 0o644)
		status, _, stderr := process(t, bin, env, append([]string{"compile", "-o", filepath.Join(notDir, "out")}, faultModel...)...)
		if status != exitUser || strings.Contains(stderr, "cache") || !strings.Contains(stderr, "not a directory") {
			t.Errorf("compile into a folder under a file: exit %d, %q; want an error about the folder", status, stderr)
		}
		stdout, _ := compile(filepath.Join(t.TempDir(), "out"), "--seed", "1")
		if !strings.Contains(stdout, "reused") {
			t.Errorf("the entry was not reused after the failed compile: %q", stdout)
		}
	})
	t.Run("only what the compile wrote", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		os.MkdirAll(filepath.Join(dir, "kernels"), 0o755)
		os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
		os.WriteFile(filepath.Join(dir, "kernels", "m7.ptx"), []byte("a stale module"), 0o644)
		os.WriteFile(filepath.Join(dir, "kernels", "mine.cu"), []byte("mine"), 0o644)
		compile(dir, "--seed", "3")
		for _, name := range []string{"notes.txt", filepath.Join("kernels", "mine.cu")} {
			if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != "mine" {
				t.Errorf("the compile changed %s, a file of its folder that it did not write", name)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "kernels", "m7.ptx")); err == nil {
			t.Errorf("a stale kernel module of the folder survived the compile")
		}
		other := filepath.Join(t.TempDir(), "out")
		stdout, _ := compile(other, "--seed", "3")
		if _, err := os.Stat(filepath.Join(other, "notes.txt")); err == nil || !strings.Contains(stdout, "reused") {
			t.Errorf("the cache entry brought back a file the compile did not write (or was not reused: %q)", stdout)
		}
	})
	var tmp []string
	filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "tmp-") {
			tmp = append(tmp, path)
		}
		return nil
	})
	if len(tmp) > 0 {
		t.Errorf("temporary files left in the cache: %v", tmp)
	}
}

// cacheMagic starts a cache entry (codegen/toolchain's format).
const cacheMagic = "tofuc-cache 3\n"

// sealed is data as the cache entry at path: the header holding its
// SHA-256 and its key (the file's name).
func sealed(data []byte, path string) []byte {
	sum := sha256.Sum256(data)
	return append([]byte(cacheMagic+hex.EncodeToString(sum[:])+" "+filepath.Base(path)+"\n"), data...)
}

// TestConcurrentRuns: two runs of one plan into the same folder, again
// and again: every file there is wholly one run's (outputs are written
// to a temporary file and renamed into place).
func TestConcurrentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary many times")
	}
	dir := compiledPlan(t, "--set", "batch=2048")
	bin := buildTofuc(t)
	runs := 10
	if os.Getenv("TOFUC_LONG") != "" {
		runs = 50
	}
	seeds := []string{"1", "2"}
	want := make([]map[string][]byte, 2)
	for i, seed := range seeds {
		out := filepath.Join(t.TempDir(), "out")
		if status, _, stderr := process(t, bin, nil, "run", dir, "--random-inputs", "--seed", seed, "--out", out); status != exitOK {
			t.Fatalf("run: %s", stderr)
		}
		want[i] = files(t, out)
	}
	for r := range runs {
		out := filepath.Join(t.TempDir(), "out")
		var wg sync.WaitGroup
		for _, seed := range seeds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if status, _, stderr := process(t, bin, nil, "run", dir, "--random-inputs", "--seed", seed, "--out", out); status != exitOK {
					t.Errorf("run %d: %s", r, stderr)
				}
			}()
		}
		wg.Wait()
		got := files(t, out)
		if !sameFiles(got, want[0]) && !sameFiles(got, want[1]) {
			for name, data := range got {
				if !bytes.Equal(data, want[0][name]) && !bytes.Equal(data, want[1][name]) {
					t.Fatalf("round %d: %s is neither run's", r, name)
				}
			}
			t.Fatalf("round %d: the folder mixes the two runs' files", r)
		}
	}
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			return false
		}
	}
	return true
}

// TestRunOutputsWhole: a run whose outputs cannot all be written writes
// none, and a run replaces the files the last run wrote into its folder
// (its drawn inputs among them), leaving other files alone.
func TestRunOutputsWhole(t *testing.T) {
	dir := compiledPlan(t)
	out := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(filepath.Join(out, "logits.npy"), 0o755)
	status, _, stderr := tofuc("run", dir, "--random-inputs", "--out", out)
	if status != exitUser || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, filepath.Join(out, "logits.npy")) {
		t.Errorf("run into a folder in the way: exit %d, %q", status, stderr)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("a failed run left %d entries in its folder, want only the folder in the way", len(entries))
	}
	os.Remove(filepath.Join(out, "logits.npy"))
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644)
	if status, _, stderr := tofuc("run", dir, "--random-inputs", "--out", out); status != exitOK {
		t.Fatal(stderr)
	}
	drawn := filepath.Join(out, "inputs", "x.npy")
	kept := filepath.Join(t.TempDir(), "x.npy")
	if data, err := os.ReadFile(drawn); err != nil || os.WriteFile(kept, data, 0o644) != nil {
		t.Fatal("cannot copy the drawn input: ", err)
	}
	if status, _, stderr := tofuc("run", dir, "--in", "x="+kept, "--out", out); status != exitOK {
		t.Fatal(stderr)
	}
	if _, err := os.Stat(drawn); err == nil {
		t.Errorf("the last run's drawn input survived a run that drew none")
	}
	if b, _ := os.ReadFile(filepath.Join(out, "notes.txt")); string(b) != "mine" {
		t.Errorf("a run changed a file it did not write")
	}
}

// TestKilledCompiles: a compile killed at any point leaves its output
// folder holding the previous compile, whole (it runs), and the next
// compile there removes what the killed one left.
func TestKilledCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles several times")
	}
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	bin := buildTofuc(t)
	env := []string{"TOFUC_CACHE=off"}
	dir := filepath.Join(t.TempDir(), "out")
	args := append([]string{"compile", "-o", dir}, faultModel...)
	logits := func(dir string) []byte {
		out := filepath.Join(t.TempDir(), "run")
		if status, _, stderr := process(t, bin, nil, "run", dir, "--random-inputs", "--out", out); status != exitOK {
			t.Fatalf("the folder does not run: %s", stderr)
		}
		b, _ := os.ReadFile(filepath.Join(out, "logits.npy"))
		return b
	}
	other := filepath.Join(t.TempDir(), "seed2")
	if status, _, stderr := process(t, bin, env, append([]string{"compile", "-o", other}, append(faultModel, "--seed", "2")...)...); status != exitOK {
		t.Fatal(stderr)
	}
	seed2 := logits(other)
	if status, _, stderr := process(t, bin, env, append(args, "--seed", "1")...); status != exitOK {
		t.Fatal(stderr)
	}
	seed1 := logits(dir)
	for _, after := range []time.Duration{50 * time.Millisecond, 400 * time.Millisecond, 1200 * time.Millisecond} {
		cmd := exec.Command(bin, append(args, "--seed", "2")...)
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if got := logits(dir); !bytes.Equal(got, seed1) && !bytes.Equal(got, seed2) {
			t.Errorf("after a compile killed at %v the folder computes neither compile's logits", after)
		}
	}
	if status, _, stderr := process(t, bin, env, append(args, "--seed", "3")...); status != exitOK {
		t.Fatal(stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tofuc-stage-*")); len(left) > 0 {
		t.Errorf("the killed compiles' staging folders are left: %v", left)
	}
}

// TestFailedCommit: a compile that cannot move its files into its
// folder (a folder has the name of one) fails naming it and leaves the
// previous compile whole.
func TestFailedCommit(t *testing.T) {
	dir := compiledPlan(t, "--seed", "1")
	out := filepath.Join(t.TempDir(), "out")
	if status, _, stderr := tofuc("run", dir, "--random-inputs", "--out", out); status != exitOK {
		t.Fatal(stderr)
	}
	before := files(t, out)
	os.Remove(filepath.Join(dir, "report.txt"))
	os.MkdirAll(filepath.Join(dir, "report.txt", "mine"), 0o755)
	plan, _ := os.ReadFile(filepath.Join(dir, "plan.json"))
	status, _, stderr := tofuc(append(append([]string{"compile", "-o", dir}, faultModel...), "--seed", "2")...)
	if status != exitUser || !strings.Contains(stderr, "report.txt: a folder has its name") {
		t.Errorf("compile over a folder: exit %d, %q", status, stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "plan.json")); !bytes.Equal(now, plan) {
		t.Errorf("the failed compile changed plan.json")
	}
	again := filepath.Join(t.TempDir(), "out")
	if status, _, stderr := tofuc("run", dir, "--random-inputs", "--out", again); status != exitOK {
		t.Fatalf("the previous compile no longer runs: %s", stderr)
	}
	if !sameFiles(files(t, again), before) {
		t.Errorf("the previous compile computes other outputs after the failed compile")
	}
}

// TestPlanOnAnotherCPU: a plan compiled for a CPU with an extension
// (AVX-512, AVX2, FMA) run where it is missing (GODEBUG turns it off
// for Go's detection) is refused, naming the extension, instead of
// dying of an illegal instruction.
func TestPlanOnAnotherCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := compiledPlan(t)
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	feature := ""
	for _, f := range []string{"avx512f", "avx2", "fma"} {
		if bytes.Contains(b, []byte(`"`+f+`"`)) {
			feature = f
			break
		}
	}
	if feature == "" {
		t.Skip("this CPU has none of the extensions GODEBUG can turn off")
	}
	bin := buildTofuc(t)
	out := filepath.Join(t.TempDir(), "out")
	status, _, stderr := process(t, bin, []string{"GODEBUG=cpu." + feature + "=off"}, "run", dir, "--random-inputs", "--out", out)
	if status != exitUser || !strings.Contains(stderr, "compiled for a CPU with "+feature) {
		t.Errorf("run without %s: exit %d, %q", feature, status, stderr)
	}
}

// TestSizes: a model beyond what a plan's buffer holds is refused at
// compile, naming the tensor; one that compiles but needs more memory
// than this machine has states its memory per device when compiled and
// is refused by run, with the sizes, before anything is allocated.
func TestSizes(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	mlp := filepath.Join("..", "..", "examples", "mlp.tdl")
	huge := filepath.Join(t.TempDir(), "huge")
	status, _, stderr := tofuc("compile", "-o", huge, mlp, "--set", "batch=3000000000000")
	if status != exitUser || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "x of f32[3000000000000, 784] is too large") {
		t.Errorf("compile of 3e12 rows: exit %d, %q", status, stderr)
	}
	if _, err := os.Stat(huge); err == nil {
		t.Errorf("the refused compile made its folder")
	}
	big := filepath.Join(t.TempDir(), "big")
	var stdout string
	status, stdout, stderr = tofuc("compile", "-o", big, mlp, "--set", "batch=400000000")
	if status != exitOK || !strings.Contains(stdout, "TiB per device") {
		t.Fatalf("compile of 400,000,000 rows: exit %d, %q, %q", status, stdout, stderr)
	}
	refused(t, "running this plan needs about 4.99 TiB of this machine's memory", "run", big, "--random-inputs")
}
