package nvptx

import (
	"fmt"
	"regexp"
	"strings"

	"tofuc/lang/precision"
	"tofuc/runtime/plan"
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
//     different blocks on different ones; dynamic shared memory (an
//     external [0 x i8]) becomes one of plan.MaxDynamicShared bytes, the
//     type changed on every line that names it;
//  3. every other address space qualifier (1, global) is dropped: host
//     memory is one space;
//  4. the ptx_kernel calling convention is dropped;
//  5. the special registers, the barrier, the shuffle, the tensor-core
//     factor conversions and the asynchronous copies become calls of
//     the emulator's functions (Renamed);
//  6. an mma or ldmatrix intrinsic becomes a call of a function the text
//     gains (mmaShim, ldmatrixShim), which passes its results through
//     memory to the emulator's function, as C returns no struct the way
//     LLVM returns one, and the intrinsic's declaration is dropped;
//  7. !nvvm.annotations is dropped.
func (Machine) Emulated(text string) (string, error) {
	s := targetLine.ReplaceAllString(text, "")
	s = sharedGlobal.ReplaceAllString(s, "$1 = internal thread_local global")
	s = dynamicSharedGlobals(s)
	s = addrSpace.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "ptx_kernel ", "")
	s = annotationsLine.ReplaceAllString(s, "")
	shim := func(name, shimName, def, declare string) {
		if strings.Contains(s, "@"+name+"(") {
			s = regexp.MustCompile(`(?m)^declare .*@`+regexp.QuoteMeta(name)+`\(.*\n`).ReplaceAllString(s, "")
			s = strings.ReplaceAll(s, "@"+name+"(", "@"+shimName+"(")
			s += def
			if !strings.Contains(s, declare) {
				s += declare
			}
		}
	}
	for _, p := range []precision.Mode{precision.TF32, precision.BF16, precision.F16} {
		shim(mmaIntrinsic[p], mmaShimName(p), mmaShim(p), mmaDeclare)
	}
	for _, n := range []int{1, 2, 4} {
		shim(ldmatrixIntrinsic(n), ldmatrixShimName(n), ldmatrixShim(n), ldmatrixDeclare)
	}
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

// dynamicSharedGlobals gives each dynamic shared-memory global of the
// text (an external [0 x i8] in address space 3) plan.MaxDynamicShared
// thread_local bytes, on its definition's line and every line that
// names it (typed pointers repeat the type at every use).
func dynamicSharedGlobals(s string) string {
	var names []string
	for _, m := range dynamicShared.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	if names == nil {
		return s
	}
	s = dynamicShared.ReplaceAllString(s, "$1 = internal thread_local global [0 x i8] zeroinitializer")
	sized := fmt.Sprintf("[%d x i8]", plan.MaxDynamicShared)
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		for _, name := range names {
			if strings.Contains(line, name+",") || strings.Contains(line, name+" ") || strings.HasSuffix(line, name) {
				lines[i] = strings.ReplaceAll(line, "[0 x i8]", sized)
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}

// mmaShimName is the function that stands for mode p's mma in the
// emulator's text, and mmaShim its definition: it calls
// tofuc_simt_mma (csrc/simt.c), which writes D to memory, with the
// mode's number there.
func mmaShimName(p precision.Mode) string { return "tofuc_simt_mma_" + p.String() }

func mmaShim(p precision.Mode) string {
	// An F16 register is a <2 x half>, passed to C as the i32 of its
	// bits; the shim is always inlined, so that the bitcasts cancel and
	// no half value crosses a call (the host has no half arithmetic).
	reg, toBits := "i32", ""
	if p == precision.F16 {
		reg = "<2 x half>"
		for _, r := range []string{"a0", "a1", "a2", "a3", "b0", "b1"} {
			toBits += fmt.Sprintf("\t%%%s.i = bitcast <2 x half> %%%s to i32\n", r, r)
		}
	}
	arg := func(r string) string {
		if p == precision.F16 {
			return "%" + r + ".i"
		}
		return "%" + r
	}
	return fmt.Sprintf(`
define internal { float, float, float, float } @%s(%[3]s %%a0, %[3]s %%a1, %[3]s %%a2, %[3]s %%a3, %[3]s %%b0, %[3]s %%b1, float %%c0, float %%c1, float %%c2, float %%c3) alwaysinline {
%[4]s	%%d = alloca [4 x float], align 16
	%%p0 = getelementptr [4 x float], [4 x float]* %%d, i64 0, i64 0
	%%p1 = getelementptr [4 x float], [4 x float]* %%d, i64 0, i64 1
	%%p2 = getelementptr [4 x float], [4 x float]* %%d, i64 0, i64 2
	%%p3 = getelementptr [4 x float], [4 x float]* %%d, i64 0, i64 3
	call void @tofuc_simt_mma(float* %%p0, i32 %[2]d, i32 %[5]s, i32 %[6]s, i32 %[7]s, i32 %[8]s, i32 %[9]s, i32 %[10]s, float %%c0, float %%c1, float %%c2, float %%c3)
	%%d0 = load float, float* %%p0
	%%d1 = load float, float* %%p1
	%%d2 = load float, float* %%p2
	%%d3 = load float, float* %%p3
	%%r0 = insertvalue { float, float, float, float } undef, float %%d0, 0
	%%r1 = insertvalue { float, float, float, float } %%r0, float %%d1, 1
	%%r2 = insertvalue { float, float, float, float } %%r1, float %%d2, 2
	%%r3 = insertvalue { float, float, float, float } %%r2, float %%d3, 3
	ret { float, float, float, float } %%r3
}
`, mmaShimName(p), mmaKind[p], reg, toBits, arg("a0"), arg("a1"), arg("a2"), arg("a3"), arg("b0"), arg("b1"))
}

// ldmatrixShimName is the function that stands for an ldmatrix of n
// matrices in the emulator's text, and ldmatrixShim its definition: it
// calls tofuc_simt_ldmatrix (csrc/simt.c), which writes the registers
// to memory.
func ldmatrixShimName(n int) string { return fmt.Sprintf("tofuc_simt_ldmatrix_x%d", n) }

func ldmatrixShim(n int) string {
	regs := strings.TrimSuffix(strings.Repeat("i32, ", n), ", ")
	var b strings.Builder
	fmt.Fprintf(&b, "\ndefine internal { %s } @%s(i8* %%row) alwaysinline {\n", regs, ldmatrixShimName(n))
	b.WriteString("\t%d = alloca [4 x i32], align 16\n")
	b.WriteString("\t%p0 = getelementptr [4 x i32], [4 x i32]* %d, i64 0, i64 0\n")
	fmt.Fprintf(&b, "\tcall void @tofuc_simt_ldmatrix(i32* %%p0, i32 %d, i8* %%row)\n", n)
	prev := "undef"
	for e := 0; e < n; e++ {
		fmt.Fprintf(&b, "\t%%q%d = getelementptr [4 x i32], [4 x i32]* %%d, i64 0, i64 %d\n", e, e)
		fmt.Fprintf(&b, "\t%%v%d = load i32, i32* %%q%d\n", e, e)
		fmt.Fprintf(&b, "\t%%r%d = insertvalue { %s } %s, i32 %%v%d, %d\n", e, regs, prev, e, e)
		prev = fmt.Sprintf("%%r%d", e)
	}
	fmt.Fprintf(&b, "\tret { %s } %s\n}\n", regs, prev)
	return b.String()
}

const ldmatrixDeclare = "\ndeclare void @tofuc_simt_ldmatrix(i32*, i32, i8*)\n"

// mmaKind numbers the modes for tofuc_simt_mma, which mmaDeclare
// declares once after the shims.
var mmaKind = map[precision.Mode]int{precision.TF32: 0, precision.BF16: 1, precision.F16: 2}

const mmaDeclare = "\ndeclare void @tofuc_simt_mma(float*, i32, i32, i32, i32, i32, i32, i32, float, float, float, float)\n"

// Renamed maps the intrinsics the lowering uses to the emulator's
// functions.
var Renamed = map[string]string{
	"llvm.nvvm.read.ptx.sreg.tid.x":    "tofuc_simt_tid_x",
	"llvm.nvvm.read.ptx.sreg.ntid.x":   "tofuc_simt_ntid_x",
	"llvm.nvvm.read.ptx.sreg.ctaid.x":  "tofuc_simt_ctaid_x",
	"llvm.nvvm.read.ptx.sreg.nctaid.x": "tofuc_simt_nctaid_x",
	"llvm.nvvm.barrier0":               "tofuc_simt_barrier",
	"llvm.nvvm.shfl.sync.bfly.i32":     "tofuc_simt_shfl_bfly_i32",
	tf32Intrinsic:                      "tofuc_simt_f2tf32_rna",
	bf16Intrinsic:                      "tofuc_simt_f2bf16_rn",
	copyAsyncIntrinsic:                 "tofuc_simt_cp_async_4",
	copyAsync16Intrinsic:               "tofuc_simt_cp_async_16",
	commitIntrinsic:                    "tofuc_simt_cp_async_commit",
	waitIntrinsic:                      "tofuc_simt_cp_async_wait",
}

var (
	targetLine      = regexp.MustCompile(`(?m)^target (datalayout|triple) = .*\n`)
	sharedGlobal    = regexp.MustCompile(`(?m)^(@\S+) = internal addrspace\(3\) global`)
	dynamicShared   = regexp.MustCompile(`(?m)^(@\S+) = external addrspace\(3\) global \[0 x i8\]`)
	addrSpace       = regexp.MustCompile(` addrspace\([13]\)`)
	annotationsLine = regexp.MustCompile(`(?m)^!nvvm\.annotations = .*\n`)
	intrinsic       = regexp.MustCompile(`@(llvm\.nvvm\.[a-z0-9._]+)\b`)
)
