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

	"tofuc/internal/mpitest"
	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// rankModels are plans run as ranks: the MLP's (exact and f32: MPI
// sums doubles, then floats) and the RNN's training steps and Wide
// ResNet's inference on 4 devices, and the RNN's on 8, whose
// all-reduces are of groups of 2, 4 and 8 ranks.
var rankModels = []struct {
	name    string
	devices int
	args    []string
}{
	{"mlp-train", 4, []string{"../../examples/mlp.tdl", "--train", "--set", "batch=32", "--set", "hidden=32"}},
	{"mlp-train-f32", 4, []string{"../../examples/mlp.tdl", "--train", "--precision", "f32", "--set", "batch=32", "--set", "hidden=32"}},
	{"rnn-train", 4, []string{"../../examples/rnn.tdl", "--train", "--set", "steps=3", "--set", "hidden=16", "--set", "batch=4", "--set", "classes=4"}},
	{"wresnet", 4, []string{"../../examples/wresnet.tdl", "--set", "depth=50", "--set", "width=1", "--set", "batch=4", "--set", "image=32", "--set", "classes=10"}},
	{"rnn-train-8", 8, []string{"../../examples/rnn.tdl", "--train", "--set", "layers=2", "--set", "hidden=64", "--set", "steps=3", "--set", "batch=16", "--set", "classes=4"}},
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

// TestRanksUnderMPIRun runs 4-device plans as 4 processes under mpirun
// (the MLP's also through tofuc run --nproc-per-node 4): every output
// equals the one-process run's within the tolerance for
// reordered sums (they are in fact equal bit for bit: each rank runs its
// device's kernels in the same order).
func TestRanksUnderMPIRun(t *testing.T) {
	mpitest.Path(t)
	bin := buildTofuc(t)
	for _, m := range rankModels {
		t.Run(m.name, func(t *testing.T) {
			dir := compileDevices(t, m.devices, m.args...)
			one, ranked := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "ranks")
			if status, _, stderr := tofuc("run", dir, "--random-inputs", "--seed", "3", "--out", one); status != exitOK {
				t.Fatalf("one process: %s", stderr)
			}
			out, err := mpitest.Command(context.Background(), t, "-np", strconv.Itoa(m.devices), bin, "run", dir, "--random-inputs", "--seed", "3", "--out", ranked).CombinedOutput()
			if err != nil {
				t.Fatalf("mpirun: %v\n%s", err, out)
			}
			for r := range m.devices {
				if !strings.Contains(string(out), fmt.Sprintf("rank %d of %d on ", r, m.devices)) {
					t.Errorf("rank %d said nothing:\n%s", r, out)
				}
			}
			sameOutputs(t, one, ranked)
			if m.name != "mlp-train" {
				return
			}
			started := filepath.Join(t.TempDir(), "started")
			if out, err := exec.Command(bin, "run", dir, "--nproc-per-node", "4", "--random-inputs", "--seed", "3", "--out", started).CombinedOutput(); err != nil {
				t.Fatalf("--nproc-per-node 4: %v\n%s", err, out)
			}
			sameOutputs(t, one, started)
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
	mpitest.Path(t)
	bin := buildTofuc(t)
	a := compileDevices(t, 4, "../../examples/mlp.tdl", "--train", "--set", "batch=8", "--set", "hidden=16")
	b := compileDevices(t, 4, "../../examples/mlp.tdl", "--train", "--set", "batch=8", "--set", "hidden=32")
	outDir := filepath.Join(t.TempDir(), "out")
	run := []string{"--random-inputs", "--out", outDir, "--timeout", "20s"}
	args := append(append([]string{"-np", "2", bin, "run", a}, run...), ":", "-np", "2", bin, "run", b)
	out, err := mpitest.Command(context.Background(), t, append(args, run...)...).CombinedOutput()
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
// loaded it: the other ranks exit within one timeout and the probe
// after it, naming it, without a crash (the garbage collector running
// all the time); so they do when it is then killed instead; no rank
// writes outputs.
func TestRankStops(t *testing.T) {
	mpitest.Path(t)
	bin := buildTofuc(t)
	dir := compileDevices(t, 4, rankModels[0].args...)
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "hangs", true: "killed"}[kill], func(t *testing.T) {
			outDir := filepath.Join(t.TempDir(), "out")
			timeout := 4 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := mpitest.Command(ctx, t, "-np", "4", bin, "run", dir, "--random-inputs", "--out", outDir, "--timeout", timeout.String())
			if !kill {
				// The garbage collector at every allocation: memory MPI
				// still writes after a rank gave up must stay alive.
				cmd.Env = append(cmd.Env, "GOGC=1")
			}
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
			// A wait that times out, the probe and the pause after it
			// (4 s), and the launcher's stop; one wait, not one a message.
			if took > 3*timeout+6*time.Second {
				t.Errorf("the ranks took %s to stop, with a timeout of %s", took, timeout)
			}
			if strings.Contains(log.String(), "fatal error") || strings.Contains(log.String(), "SIGSEGV") {
				t.Errorf("a rank crashed:\n%s", log)
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

// TestRanksOnTwoMachines runs a 2-device training plan as 2 ranks on two
// "machines": network namespaces joined by a veth pair, made and removed
// by the test (as root). mpirun runs in the first and starts the second
// rank's daemon in the other through an agent that stands in for ssh;
// the ranks talk over TCP on the pair (Open MPI's tcp transport only),
// and the outputs equal one process's.
func TestRanksOnTwoMachines(t *testing.T) {
	mpitest.Path(t)
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2)")
	}
	bin := buildTofuc(t)
	machines := twoMachines(t)
	dir := compileDevices(t, 2, rankModels[0].args...)
	one, ranked := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "ranks")
	if status, _, stderr := tofuc("run", dir, "--random-inputs", "--seed", "5", "--out", one); status != exitOK {
		t.Fatalf("one process: %s", stderr)
	}
	before := machines.traffic(t)
	args := []string{"netns", "exec", machines.ns[0], mpitest.Path(t), "--host", strings.Join(machines.addr[:], ","), "-np", "2",
		"--mca", "plm_rsh_agent", machines.agent, "--mca", "btl", "tcp,self",
		"--mca", "btl_tcp_if_include", subnet, "--mca", "oob_tcp_if_include", subnet,
		bin, "run", dir, "--random-inputs", "--seed", "5", "--out", ranked, "--timeout", "30s"}
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), mpitest.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	sameOutputs(t, one, ranked)
	p, err := plan.Read(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if moved, least := machines.traffic(t)-before, crossDevice(p); moved < least || least == 0 {
		t.Errorf("%d bytes crossed the veth pair; the plan copies %d between its devices", moved, least)
	} else {
		t.Logf("%d bytes crossed the veth pair; the plan copies %d between its devices", moved, least)
	}
}

// crossDevice is the bytes a plan's steps copy from one device to
// another, at least.
func crossDevice(p *plan.Plan) int64 {
	var n int64
	for d, steps := range p.Steps {
		for _, s := range steps {
			switch {
			case s.Op == plan.Copy && p.Buffers[s.From].Device != d:
				box := int64(lang.ParseDType(p.Buffers[s.From].DType).Size())
				for _, r := range s.Src {
					box *= r.Hi - r.Lo
				}
				n += box
			case s.Op == plan.Reduce:
				for _, id := range s.Parts {
					if p.Buffers[id].Device != d {
						n += p.Buffers[s.To].Bytes
					}
				}
			case s.Op == plan.AllReduce: // one collective call: each member sends (g-1)/g of its part at least
				g := int64(len(s.Group))
				n += p.Buffers[s.To].Bytes * (g - 1) / g
			}
		}
	}
	return n
}

// subnet holds the two machines' addresses.
const subnet = "10.99.0.0/24"

// machines are two network namespaces joined by a veth pair, and the
// agent through which mpirun starts a daemon in the namespace of an
// address.
type machines struct {
	ns, veth, addr [2]string
	agent          string
}

func twoMachines(t *testing.T) *machines {
	t.Helper()
	id := os.Getpid() % 100000
	m := &machines{addr: [2]string{"10.99.0.1", "10.99.0.2"}}
	for i, side := range []string{"a", "b"} {
		m.ns[i] = fmt.Sprintf("tofuc-test-%d-%s", id, side)
		m.veth[i] = fmt.Sprintf("tf%d%s", id, side) // at most 15 bytes
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for i := range 2 {
		ip("netns", "add", m.ns[i])
		ns := m.ns[i]
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() }) // its end of the pair goes with it
	}
	ip("link", "add", m.veth[0], "type", "veth", "peer", "name", m.veth[1])
	for i := range 2 {
		ip("link", "set", m.veth[i], "netns", m.ns[i])
		ip("-n", m.ns[i], "addr", "add", m.addr[i]+"/24", "dev", m.veth[i])
		ip("-n", m.ns[i], "link", "set", m.veth[i], "up")
		ip("-n", m.ns[i], "link", "set", "lo", "up")
	}
	m.agent = filepath.Join(t.TempDir(), "agent")
	script := fmt.Sprintf("#!/bin/sh\n# mpirun's ssh: HOST COMMAND..., run in HOST's namespace\ncase \"$1\" in\n%s) ns=%s ;;\n%s) ns=%s ;;\n*) echo \"no machine $1\" >&2; exit 1 ;;\nesac\nshift\nexec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n",
		m.addr[0], m.ns[0], m.addr[1], m.ns[1])
	if err := os.WriteFile(m.agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// traffic is the bytes the first machine's end of the pair has sent and
// received.
func (m *machines) traffic(t *testing.T) int64 {
	t.Helper()
	var total int64
	for _, dir := range []string{"tx_bytes", "rx_bytes"} {
		out, err := exec.Command("ip", "netns", "exec", m.ns[0], "cat", "/sys/class/net/"+m.veth[0]+"/statistics/"+dir).Output()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}
