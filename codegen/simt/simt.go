// Package simt retargets a GPU-flavour module (codegen/emit) to the host,
// so that the SIMT emulator (runtime/simt) runs the very IR that becomes
// PTX. Retarget changes the module text in exactly these ways, and no
// other (docs/codegen.md repeats the list):
//
//  1. the NVPTX target triple and data layout are dropped (llc uses the
//     host's);
//  2. shared-memory globals (address space 3) become thread_local
//     globals: the emulator runs a block's threads on one OS thread, and
//     different blocks on different ones;
//  3. every other address space qualifier (1, global) is dropped: host
//     memory is one space;
//  4. the ptx_kernel calling convention is dropped;
//  5. the special registers, the barrier and the shuffle intrinsics
//     become calls of the emulator's functions (tofuc_simt_tid_x, ...);
//  6. !nvvm.annotations is dropped, and each kernel NAME gains an entry
//     `void NAME.simt(i8** args)` that loads its arguments from an array
//     and calls it.
package simt

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// Source is the emulator's runtime (csrc/simt.c), linked with the retargeted
// modules into the plan's SIMT shared object, which runtime/simt loads.
//
//go:embed csrc/simt.c
var Source string

// Kernel is the signature of a kernel of the module: its name and the
// element type of each pointer argument, in order (as LLVM IR types).
type Kernel struct {
	Name  string
	Elems []string
}

// Renamed maps the NVPTX intrinsics the GPU flavour uses to the
// emulator's functions.
var Renamed = map[string]string{
	"llvm.nvvm.read.ptx.sreg.tid.x":    "tofuc_simt_tid_x",
	"llvm.nvvm.read.ptx.sreg.ntid.x":   "tofuc_simt_ntid_x",
	"llvm.nvvm.read.ptx.sreg.ctaid.x":  "tofuc_simt_ctaid_x",
	"llvm.nvvm.read.ptx.sreg.nctaid.x": "tofuc_simt_nctaid_x",
	"llvm.nvvm.barrier0":               "tofuc_simt_barrier",
	"llvm.nvvm.shfl.sync.bfly.i32":     "tofuc_simt_shfl_bfly_i32",
}

var (
	targetLine   = regexp.MustCompile(`(?m)^target (datalayout|triple) = .*\n`)
	sharedGlobal = regexp.MustCompile(`(?m)^(@\S+) = internal addrspace\(3\) global`)
	addrSpace    = regexp.MustCompile(` addrspace\([13]\)`)
	annotations  = regexp.MustCompile(`(?m)^!nvvm\.annotations = .*\n`)
	intrinsic    = regexp.MustCompile(`@(llvm\.nvvm\.[a-z0-9._]+)\b`)
)

// Retarget rewrites GPU-flavour module text for the host and adds an
// entry per kernel.
func Retarget(gpu string, kernels []Kernel) (string, error) {
	s := targetLine.ReplaceAllString(gpu, "")
	s = sharedGlobal.ReplaceAllString(s, "$1 = internal thread_local global")
	s = addrSpace.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "ptx_kernel ", "")
	s = annotations.ReplaceAllString(s, "")
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
	var b strings.Builder
	b.WriteString(s)
	for _, k := range kernels {
		entry(&b, k)
	}
	return b.String(), nil
}

// entry writes `void NAME.simt(i8** args)`: it loads argument i from
// args[i] (the status words last) and calls the kernel.
func entry(b *strings.Builder, k Kernel) {
	fmt.Fprintf(b, "\ndefine void @\"%s.simt\"(i8** %%args) {\n", k.Name)
	var params []string
	for i, elem := range append(append([]string{}, k.Elems...), "i64") {
		fmt.Fprintf(b, "  %%s%d = getelementptr i8*, i8** %%args, i64 %d\n", i, i)
		fmt.Fprintf(b, "  %%r%d = load i8*, i8** %%s%d\n", i, i)
		fmt.Fprintf(b, "  %%p%d = bitcast i8* %%r%d to %s*\n", i, i, elem)
		params = append(params, fmt.Sprintf("%s* %%p%d", elem, i))
	}
	fmt.Fprintf(b, "  call void @%s(%s)\n  ret void\n}\n", k.Name, strings.Join(params, ", "))
}
