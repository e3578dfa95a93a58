package nvptx

import (
	"fmt"
	"regexp"
	"strings"
)

// Emulated rewrites a module of this target for the host, so that the
// SIMT emulator (codegen/target/simt) runs the very IR that becomes PTX.
// It changes the text in exactly these ways, and no other
// (docs/codegen.md repeats the list):
//
//  1. the target triple and data layout are dropped (llc uses the
//     host's);
//  2. shared-memory globals (address space 3) become thread_local
//     globals: the emulator runs a block's threads on one OS thread, and
//     different blocks on different ones;
//  3. every other address space qualifier (1, global) is dropped: host
//     memory is one space;
//  4. the ptx_kernel calling convention is dropped;
//  5. the special registers, the barrier and the shuffle intrinsics
//     become calls of the emulator's functions (Renamed);
//  6. !nvvm.annotations is dropped.
func (Machine) Emulated(text string) (string, error) {
	s := targetLine.ReplaceAllString(text, "")
	s = sharedGlobal.ReplaceAllString(s, "$1 = internal thread_local global")
	s = addrSpace.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "ptx_kernel ", "")
	s = annotationsLine.ReplaceAllString(s, "")
	var unknown []string
	s = intrinsic.ReplaceAllStringFunc(s, func(m string) string {
		if r, ok := Renamed[m[1:]]; ok {
			return "@" + r
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("the SIMT emulator has no equivalent of %s", strings.Join(unknown, ", "))
	}
	return s, nil
}

// Renamed maps the intrinsics the lowering uses to the emulator's
// functions.
var Renamed = map[string]string{
	"llvm.nvvm.read.ptx.sreg.tid.x":    "tofuc_simt_tid_x",
	"llvm.nvvm.read.ptx.sreg.ntid.x":   "tofuc_simt_ntid_x",
	"llvm.nvvm.read.ptx.sreg.ctaid.x":  "tofuc_simt_ctaid_x",
	"llvm.nvvm.read.ptx.sreg.nctaid.x": "tofuc_simt_nctaid_x",
	"llvm.nvvm.barrier0":               "tofuc_simt_barrier",
	"llvm.nvvm.shfl.sync.bfly.i32":     "tofuc_simt_shfl_bfly_i32",
}

var (
	targetLine      = regexp.MustCompile(`(?m)^target (datalayout|triple) = .*\n`)
	sharedGlobal    = regexp.MustCompile(`(?m)^(@\S+) = internal addrspace\(3\) global`)
	addrSpace       = regexp.MustCompile(` addrspace\([13]\)`)
	annotationsLine = regexp.MustCompile(`(?m)^!nvvm\.annotations = .*\n`)
	intrinsic       = regexp.MustCompile(`@(llvm\.nvvm\.[a-z0-9._]+)\b`)
)
