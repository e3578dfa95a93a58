#include "textflag.h"

// initRank calls ncclCommInitRank in the C ABI, as purego's SyscallN
// calls it (on the system stack), DI pointing at an initRankArgs (fn at
// 0, comm 8, size 16, rank 20, id 24): the id's 16 words go on the
// stack, where the ABI puts a struct that large, and comm, size and rank
// in the first three integer registers. SP stays 16-byte aligned at the
// call.
TEXT initRank<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	SUBQ  $128, SP
	MOVQ  DI, R11
	LEAQ  24(R11), SI
	MOVQ  SP, DI
	MOVQ  $16, CX
	REP; MOVSQ
	MOVQ  8(R11), DI
	MOVL  16(R11), SI
	MOVL  20(R11), DX
	MOVQ  0(R11), AX
	CALL  AX
	MOVQ  BP, SP
	POPQ  BP
	RET

GLOBL ·initRankABI0(SB), NOPTR|RODATA, $8
DATA ·initRankABI0(SB)/8, $initRank<>(SB)
