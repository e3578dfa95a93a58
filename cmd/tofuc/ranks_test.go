package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// mpirun is the command that starts ranks, Open MPI's (make test
// installs it); a machine without it skips these tests.
func mpirun(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("no mpirun (Debian's openmpi-bin; make test installs it)")
	}
	return path
}

// mpiCommand is mpirun with args, allowed to run as root (tests run as
// root in containers) and to start more ranks than cores.
func mpiCommand(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, mpirun(t), append([]string{"--oversubscribe"}, args...)...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	return cmd
}

// rankModels are plans of 4 devices run as ranks: the MLP's and the
// RNN's training steps, Wide ResNet's inference.
var rankModels = []struct {
	name string
	args []string
}{
	{"mlp-train", []string{"../../examples/mlp.tdl", "--train", "--set", "batch=32", "--set", "hidden=32"}},
	{"rnn-train", []string{"../../examples/rnn.tdl", "--train", "--set", "steps=3", "--set", "hidden=16", "--set", "batch=4", "--set", "classes=4"}},
	{"wresnet", []string{"../../examples/wresnet.tdl", "--set", "depth=50", "--set", "width=1", "--set", "batch=4", "--set", "image=32", "--set", "classes=10"}},
}

// compileDevices compiles a model for n devices into a new directory.
func compileDevices(t *testing.T, n int, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plan")
	if status, _, stderr := tofuc(append(append([]string{"compile"}, args...), "--devices", strconv.Itoa(n), "-o", dir)...); status != exitOK {
		t.Fatalf("compile: %s", stderr)
	}
	return dir
}

// TestRanksUnderMPIRun runs 4-device plans as 4 processes under mpirun:
// every output equals the one-process run's within the tolerance for
// reordered sums (they are in fact equal bit for bit: each rank runs its
// device's kernels in the same order).
func TestRanksUnderMPIRun(t *testing.T) {
	mpirun(t)
	bin := buildTofuc(t)
	for _, m := range rankModels {
		t.Run(m.name, func(t *testing.T) {
			dir := compileDevices(t, 4, m.args...)
			one, ranked := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "ranks")
			if status, _, stderr := tofuc("run", dir, "--random-inputs", "--seed", "3", "--out", one); status != exitOK {
				t.Fatalf("one process: %s", stderr)
			}
			out, err := mpiCommand(context.Background(), t, "-np", "4", bin, "run", dir, "--random-inputs", "--seed", "3", "--out", ranked).CombinedOutput()
			if err != nil {
				t.Fatalf("mpirun: %v\n%s", err, out)
			}
			for r := range 4 {
				if !strings.Contains(string(out), fmt.Sprintf("rank %d of 4 on ", r)) {
					t.Errorf("rank %d said nothing:\n%s", r, out)
				}
			}
			sameOutputs(t, one, ranked)
		})
	}
}

// sameOutputs compares the .npy files two runs wrote.
func sameOutputs(t *testing.T, want, got string) {
	t.Helper()
	names := func(dir string) []string {
		files, err := filepath.Glob(filepath.Join(dir, "*.npy"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no outputs (%v)", dir, err)
		}
		for i, f := range files {
			files[i] = filepath.Base(f)
		}
		return files
	}
	if w, g := names(want), names(got); !slices.Equal(w, g) {
		t.Fatalf("outputs %v, want %v", g, w)
	}
	for _, name := range names(want) {
		w, err := npy.ReadFile(filepath.Join(want, name))
		if err != nil {
			t.Fatal(err)
		}
		g, err := npy.ReadFile(filepath.Join(got, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.Compare(g, w, tensor.Reordered(w.DType, 1<<12)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRanksRefuseOtherPlans starts two ranks with one plan and two with
// another: every rank refuses at start, naming the ranks that differ,
// and none writes outputs.
func TestRanksRefuseOtherPlans(t *testing.T) {
	mpirun(t)
	bin := buildTofuc(t)
	a := compileDevices(t, 4, "../../examples/mlp.tdl", "--train", "--set", "batch=8", "--set", "hidden=16")
	b := compileDevices(t, 4, "../../examples/mlp.tdl", "--train", "--set", "batch=8", "--set", "hidden=32")
	outDir := filepath.Join(t.TempDir(), "out")
	run := []string{"--random-inputs", "--out", outDir, "--timeout", "20s"}
	args := append(append([]string{"-np", "2", bin, "run", a}, run...), ":", "-np", "2", bin, "run", b)
	out, err := mpiCommand(context.Background(), t, append(args, run...)...).CombinedOutput()
	if err == nil {
		t.Fatalf("ranks of two plans ran:\n%s", out)
	}
	for r := range 4 {
		if !regexp.MustCompile(fmt.Sprintf(`rank %d of 4: the ranks differ: rank 0 has the plan sealed [0-9a-f]+, ranks 2, 3 [0-9a-f]+`, r)).Match(out) {
			t.Errorf("rank %d does not name ranks 2 and 3:\n%s", r, out)
		}
	}
	if _, err := os.Stat(outDir); err == nil {
		t.Errorf("outputs written")
	}
}

// TestRankStops stops rank 1 of a running plan (SIGSTOP) once it has
// loaded it: the other ranks exit within the timeout, naming it, and
// so they do when it is then killed instead; no rank writes outputs.
func TestRankStops(t *testing.T) {
	mpirun(t)
	bin := buildTofuc(t)
	dir := compileDevices(t, 4, rankModels[2].args...)
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "hangs", true: "killed"}[kill], func(t *testing.T) {
			outDir := filepath.Join(t.TempDir(), "out")
			timeout := 4 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := mpiCommand(ctx, t, "-np", "4", bin, "run", dir, "--random-inputs", "--out", outDir, "--timeout", timeout.String())
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			log, done, pid := stopRankOne(t, bin, bufio.NewScanner(stderr))
			defer syscall.Kill(pid, syscall.SIGKILL)
			stopped := time.Now()
			if kill {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			<-done // mpirun's stderr closed: it ends
			err = cmd.Wait()
			took := time.Since(stopped)
			if err == nil {
				t.Fatalf("the ranks succeeded without rank 1:\n%s", log)
			}
			if took > timeout+20*time.Second {
				t.Errorf("the ranks took %s to stop, with a timeout of %s", took, timeout)
			}
			for _, r := range []int{0, 2, 3} {
				if !regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d\b.*\branks? (\d+, )*1\b[^\n]*stopped answering`, r)).MatchString(log.String()) {
					t.Errorf("rank %d does not name rank 1:\n%s", r, log)
				}
			}
			if _, err := os.Stat(outDir); err == nil {
				t.Errorf("outputs written")
			}
			t.Logf("stopped %s after rank 1 %s:\n%s", took.Round(time.Millisecond), map[bool]string{false: "stopped", true: "died"}[kill], log)
		})
	}
}

// stopRankOne reads mpirun's stderr until rank 1 says it has loaded the
// plan, then stops rank 1's process (SIGSTOP) and returns its pid; the
// rest of stderr goes on into the log, closed when it ends.
func stopRankOne(t *testing.T, bin string, lines *bufio.Scanner) (log *strings.Builder, done chan struct{}, pid int) {
	t.Helper()
	log, done = &strings.Builder{}, make(chan struct{})
	for lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "rank 1 of 4 on ") {
			break
		}
	}
	pid = rankPid(t, bin, 1)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
		}
	}()
	return log, done, pid
}

// rankPid finds the process of bin that mpirun started as rank r.
func rankPid(t *testing.T, bin string, r int) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		exe, _ := os.Readlink(filepath.Join(p, "exe"))
		env, _ := os.ReadFile(filepath.Join(p, "environ"))
		if exe == bin && slices.Contains(strings.Split(string(env), "\x00"), fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", r)) {
			pid, _ := strconv.Atoi(filepath.Base(p))
			return pid
		}
	}
	t.Fatalf("no process of rank %d", r)
	return 0
}
