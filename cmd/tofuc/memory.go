package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"tofuc/analysis/report"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// interpElementBytes is what the reference interpreter stores per element
// of any dtype (float64 or int64, runtime/tensor).
const interpElementBytes = 8

// interpPeak estimates the memory the reference interpreter holds at its
// peak when it runs g: inputs, parameters and outputs live throughout,
// every other value from its node to its last use, as the interpreter
// frees them, and each node's outputs and `let` locals while it runs.
// The sum saturates at maxInt64 rather than wrap.
func interpPeak(g *ir.Graph) int64 {
	last := map[*ir.Value]int{}
	for j, n := range g.Nodes {
		for _, v := range n.Inputs {
			last[v] = j
		}
	}
	resident := map[*ir.Value]bool{}
	var live int64
	for _, v := range append(append(append([]*ir.Value(nil), g.Inputs...), paramValues(g)...), g.Outputs...) {
		if !resident[v] {
			resident[v] = true
			live = addSat(live, interpBytes(v.Shape))
		}
	}
	peak := live
	for j, n := range g.Nodes {
		var locals int64
		if n.Inst != nil {
			locals = instanceBytes(n.Inst, true)
		}
		for _, v := range n.Outputs {
			if !resident[v] {
				live = addSat(live, interpBytes(v.Shape))
			}
		}
		peak = max(peak, addSat(live, locals))
		for _, v := range n.Inputs {
			if last[v] == j && !resident[v] && v.Const == nil {
				live -= interpBytes(v.Shape)
			}
		}
	}
	return peak
}

func paramValues(g *ir.Graph) []*ir.Value {
	out := make([]*ir.Value, len(g.Params))
	for i, p := range g.Params {
		out[i] = p.Value
	}
	return out
}

// instanceBytes is what the interpreter allocates to run an instance: its
// locals, and its outputs unless localsOnly.
func instanceBytes(inst *ir.Instance, localsOnly bool) int64 {
	defs := inst.Locals
	if !localsOnly {
		defs = append(append([]*ir.Def(nil), defs...), inst.Outputs...)
	}
	var n int64
	for _, d := range defs {
		n = addSat(n, interpBytes(d.Tensor.Shape))
	}
	return n
}

// interpBytes is the interpreter's size of a tensor: 0 for a symbolic
// shape (bound from data read from files, which bounds it already),
// maxInt64 when the count overflows.
func interpBytes(shape []lang.Dim) int64 {
	if _, concrete := lang.ConstShape(shape); !concrete {
		return 0
	}
	n, ok := lang.ShapeElements(shape)
	if ok {
		n, ok = lang.MulInt64(n, interpElementBytes)
	}
	if !ok {
		return maxInt64 // the checker rejects these already
	}
	return n
}

const maxInt64 = 1<<63 - 1

func addSat(a, b int64) int64 {
	if s, ok := lang.AddInt64(a, b); ok {
		return s
	}
	return maxInt64
}

// checkMemory refuses work that needs more memory than the machine has
// available, before anything is allocated: the Go runtime cannot recover
// from running out of memory.
func checkMemory(what string, need int64) error {
	avail, ok := availableMemory()
	if !ok || need <= avail {
		return nil
	}
	return fmt.Errorf("%s needs about %s (counting 8 bytes an element, as the reference interpreter stores them), more than the %s this machine has available; use smaller sizes (--set)",
		what, report.Bytes(need), report.Bytes(avail))
}

// availableMemory is the memory the kernel says it can give (MemAvailable
// in /proc/meminfo), or what is left under the cgroup's limit when that is
// less; ok is false where neither can be read.
func availableMemory() (int64, bool) {
	avail, ok := memInfoAvailable("/proc/meminfo")
	limit, limited := readInt("/sys/fs/cgroup/memory.max") // "max" when unlimited
	used, _ := readInt("/sys/fs/cgroup/memory.current")
	if limited && (!ok || limit-used < avail) {
		return max(0, limit-used), true
	}
	return avail, ok
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

func memInfoAvailable(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemAvailable:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}
