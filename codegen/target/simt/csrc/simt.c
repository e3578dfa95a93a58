// tofuc's SIMT emulator runtime: runs GPU-flavour kernels, retargeted to
// the host (codegen/simt), on the CPU. Each call runs a range of blocks
// on the calling thread. A kernel without barriers or shuffles runs its
// threads one after the other; one with them runs each thread of a block
// as a fiber with a stack of its own, and a small scheduler switches
// between them: a thread waits at a barrier until every live thread of
// its block arrives, and at a warp shuffle until every live lane of its
// warp has published its value, so that barriers and shuffles behave as
// on a GPU.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*tofuc_entry)(void **args);

enum { RUNNABLE, AT_BARRIER, AT_SHUFFLE, DONE };

#define MAX_THREADS 1024
#define STACK_BYTES (64 * 1024)

// A copy that cp.async started and a wait has not yet completed.
struct copy {
	char *dst;
	const char *src;
	int bytes;
	int group;
};

#define MAX_COPIES 128 // pending asynchronous copies a thread may have

struct fiber {
	void *sp;
	int state;
	int parity;    // which of the two shuffle slot rows it writes next
	int committed; // the groups of asynchronous copies it committed
	int pending;   // its copies not yet done, in copies[0 .. pending)
	struct copy copies[MAX_COPIES];
};

static __thread int32_t cur_tid, cur_ctaid, cur_ntid, cur_nctaid;
static __thread int fibers_on;   // the block runs as fibers
static __thread int misuse;      // a barrier, shuffle, matrix instruction or copy its model does not cover
static __thread struct fiber *fibers;
static __thread char *stacks;
static __thread void *scheduler_sp;
static __thread tofuc_entry cur_entry;
static __thread void **cur_args;
static __thread int32_t shuffle_slot[2][MAX_THREADS];

int32_t tofuc_simt_tid_x(void) { return cur_tid; }
int32_t tofuc_simt_ntid_x(void) { return cur_ntid; }
int32_t tofuc_simt_ctaid_x(void) { return cur_ctaid; }
int32_t tofuc_simt_nctaid_x(void) { return cur_nctaid; }

// tofuc_simt_switch saves the callee-saved registers and the stack
// pointer of the running context in *save and resumes the context whose
// stack pointer is to.
void tofuc_simt_switch(void **save, void *to);

#if defined(__x86_64__)
__asm__(
	".text\n"
	".globl tofuc_simt_switch\n"
	".hidden tofuc_simt_switch\n"
	".type tofuc_simt_switch,@function\n"
	"tofuc_simt_switch:\n"
	"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
	"\tret\n"
	".size tofuc_simt_switch, .-tofuc_simt_switch\n");
#elif defined(__aarch64__)
__asm__(
	".text\n"
	".globl tofuc_simt_switch\n"
	".hidden tofuc_simt_switch\n"
	".type tofuc_simt_switch,%function\n"
	"tofuc_simt_switch:\n"
	"\tsub sp, sp, #176\n"
	"\tstp x19, x20, [sp, #0]\n\tstp x21, x22, [sp, #16]\n\tstp x23, x24, [sp, #32]\n"
	"\tstp x25, x26, [sp, #48]\n\tstp x27, x28, [sp, #64]\n\tstp x29, x30, [sp, #80]\n"
	"\tstp d8, d9, [sp, #96]\n\tstp d10, d11, [sp, #112]\n\tstp d12, d13, [sp, #128]\n\tstp d14, d15, [sp, #144]\n"
	"\tmov x9, sp\n\tstr x9, [x0]\n\tmov sp, x1\n"
	"\tldp x19, x20, [sp, #0]\n\tldp x21, x22, [sp, #16]\n\tldp x23, x24, [sp, #32]\n"
	"\tldp x25, x26, [sp, #48]\n\tldp x27, x28, [sp, #64]\n\tldp x29, x30, [sp, #80]\n"
	"\tldp d8, d9, [sp, #96]\n\tldp d10, d11, [sp, #112]\n\tldp d12, d13, [sp, #128]\n\tldp d14, d15, [sp, #144]\n"
	"\tadd sp, sp, #176\n\tret\n");
#else
#error "tofuc's SIMT emulator supports x86-64 and arm64 hosts"
#endif

static void yield(int state) {
	fibers[cur_tid].state = state;
	tofuc_simt_switch(&fibers[cur_tid].sp, scheduler_sp);
}

// fiber_main is where a new fiber starts: it runs the kernel for the
// thread the scheduler switched to, then ends.
static void fiber_main(void) {
	cur_entry(cur_args);
	yield(DONE);
	abort(); // a finished fiber is never resumed
}

// fiber_stack prepares a fresh stack so that switching to it enters
// fiber_main as if called.
static void *fiber_stack(char *base) {
	uintptr_t top = ((uintptr_t)(base + STACK_BYTES)) & ~(uintptr_t)15;
#if defined(__x86_64__)
	void **sp = (void **)top;
	*--sp = 0;                  // fiber_main's return address: never used
	*--sp = (void *)fiber_main; // popped by ret
	for (int i = 0; i < 6; i++) // rbp, rbx, r12-r15
		*--sp = 0;
	return sp;
#else
	void **sp = (void **)(top - 176);
	memset(sp, 0, 176);
	sp[11] = (void *)fiber_main; // x30, the link register
	return sp;
#endif
}

void tofuc_simt_barrier(void) {
	if (!fibers_on) {
		misuse = 1;
		return;
	}
	yield(AT_BARRIER);
}

// tofuc_simt_shfl_bfly_i32 is shfl.sync.bfly.b32 with a full mask: the
// value of the lane whose index is this lane's xor lane_mask, or this
// lane's own value when that lane is beyond clamp or the block.
int32_t tofuc_simt_shfl_bfly_i32(int32_t mask, int32_t value, int32_t lane_mask, int32_t clamp) {
	(void)mask;
	if (!fibers_on) {
		misuse = 1;
		return value;
	}
	int t = cur_tid;
	int row = fibers[t].parity;
	shuffle_slot[row][t] = value;
	yield(AT_SHUFFLE);
	int lane = t & 31;
	int src = lane ^ (lane_mask & 31);
	int32_t out = value;
	if (src <= (clamp & 31) && t - lane + src < cur_ntid)
		out = shuffle_slot[row][t - lane + src];
	fibers[t].parity = 1 - row;
	return out;
}

// tofuc_simt_f2tf32_rna is cvt.rna.tf32.f32: x rounded to 10 bits of
// fraction, to nearest, ties away from zero, as the bits of an f32 whose
// low 13 bits are 0. An infinity or NaN is truncated, as Ampere's code
// for the instruction is reported to do (PTX leaves it unsaid): a NaN
// whose payload lies in the low 13 bits only becomes an infinity.
int32_t tofuc_simt_f2tf32_rna(float x) {
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	if ((u & 0x7fffffffu) < 0x7f800000u) // finite
		u += 0x1000u;
	return (int32_t)(u & 0xffffe000u);
}

// tofuc_simt_f2bf16_rn is cvt.rn.bf16.f32: x rounded to bf16 (to
// nearest even; a NaN stays a quiet NaN), the 16 bits of it.
int16_t tofuc_simt_f2bf16_rn(float x) {
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	uint32_t h = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	return (int16_t)(h & 0xffffu);
}

// whole_warp says the running thread's warp has 32 threads, as the
// warp-wide matrix instructions need.
static int whole_warp(void) {
	int t = cur_tid;
	return fibers_on && (t - (t & 31)) + 32 <= cur_ntid;
}

static __thread const char *ldmatrix_slot[2][MAX_THREADS];

// tofuc_simt_ldmatrix is ldmatrix.sync.aligned.m8n8.xn.shared.b16 for
// this lane (codegen/emit.TensorCores.LoadMatrix): every lane of the warp
// publishes its row address, then each reads, of each matrix m < n, the
// 32 bits at word lane%4 of the row that lane 8m + lane/4 gave.
void tofuc_simt_ldmatrix(int32_t *d, int32_t n, const char *row) {
	int t = cur_tid;
	if (!whole_warp() || (n != 1 && n != 2 && n != 4)) {
		misuse = 1;
		memset(d, 0, sizeof *d * (n == 1 || n == 2 ? n : 4));
		return;
	}
	if ((t & 31) < 8 * n && ((uintptr_t)row & 15)) // a row is 16 aligned bytes
		misuse = 3;
	int slot = fibers[t].parity;
	ldmatrix_slot[slot][t] = row;
	yield(AT_SHUFFLE);
	int lane = t & 31, warp = t - lane;
	for (int m = 0; m < n; m++)
		memcpy(&d[m], ldmatrix_slot[slot][warp + 8 * m + lane / 4] + 4 * (lane % 4), sizeof *d);
	fibers[t].parity = 1 - slot;
}

static __thread int32_t mma_slot[2][MAX_THREADS][6];

// half_value is the value of the f16 whose bits are h.
static double half_value(uint32_t h) {
	int exp = (h >> 10) & 0x1f;
	uint64_t scale_bits = (uint64_t)(exp - 25 + 1023) << 52; // 2^(exp-25), exp ≥ 1
	double scale;
	memcpy(&scale, &scale_bits, sizeof scale);
	double mag = exp == 0 ? (h & 0x3ff) * 0x1p-24 : (1024 + (h & 0x3ff)) * scale;
	if (exp == 0x1f)
		mag = (h & 0x3ff) ? NAN : INFINITY;
	return (h & 0x8000) ? -mag : mag;
}

// mma_value is element e of an mma operand register in the format of
// kind (0 TF32, 1 BF16, 2 F16): TF32 its upper 19 bits, as a tensor core
// is assumed to read them (the low 13 bits of an operand not rounded to
// TF32 first are ignored); BF16 and F16 the half e (0 low, 1 high) of
// the register.
static double mma_value(int kind, int32_t r, int e) {
	uint32_t h = ((uint32_t)r >> (16 * e)) & 0xffffu;
	if (kind == 2)
		return half_value(h);
	uint32_t u = kind == 0 ? (uint32_t)r & 0xffffe000u : h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

// tofuc_simt_mma is mma.sync.aligned for this lane: m16n8k8 with TF32
// factors (kind 0) or m16n8k16 with BF16 (kind 1) or F16 (kind 2) ones,
// f32 C and D
// (codegen/emit.TensorCores.MMA gives the fragments' places): every lane
// of the warp publishes its A and B registers, then each computes its
// four results, writing them to d. The model of the tensor core's
// arithmetic: the products exact, their sum and C added in double and
// rounded once to f32 (docs/precision.md).
void tofuc_simt_mma(float *d, int32_t kind, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t b0, int32_t b1,
                    float c0, float c1, float c2, float c3) {
	float c[4] = {c0, c1, c2, c3};
	int t = cur_tid;
	if (!whole_warp() || kind < 0 || kind > 2) {
		misuse = 1;
		memcpy(d, c, sizeof c);
		return;
	}
	int row = fibers[t].parity;
	int32_t *mine = mma_slot[row][t];
	mine[0] = a0, mine[1] = a1, mine[2] = a2, mine[3] = a3, mine[4] = b0, mine[5] = b1;
	yield(AT_SHUFFLE);
	// A register holds per values; a product is 2 half deep, depth k at
	// register part k / half, lane column (k % half) / per, element
	// (k % half) % per.
	int per = kind == 0 ? 1 : 2, half = 4 * per;
	int lane = t & 31, warp = t - lane, g = lane >> 2, q = lane & 3;
	for (int r = 0; r < 4; r++) {
		int i = g + 8 * (r >> 1), j = 2 * q + (r & 1);
		double sum = 0;
		for (int k = 0; k < 2 * half; k++) {
			int part = k / half, col = (k % half) / per, e = (k % half) % per;
			// A[i][k] is register (i >= 8) + 2·part of lane 4 (i % 8) + col,
			// B[k][j] register 4 + part of lane 4 j + col.
			double a = mma_value(kind, mma_slot[row][warp + 4 * (i % 8) + col][(i >= 8) + 2 * part], e);
			double b = mma_value(kind, mma_slot[row][warp + 4 * j + col][4 + part], e);
			sum += a * b;
		}
		d[r] = (float)(sum + c[r]);
	}
	fibers[t].parity = 1 - row;
}

// cp_async records a copy of bytes from src to dst in the thread's open
// group; it is done when a wait completes the group
// (tofuc_simt_cp_async_wait). Until then dst holds NaNs (all bits set):
// a GPU may land the copy at any moment in between, so a kernel that
// reads dst before its wait, or lets a copy overwrite a stage that
// other threads still read (a missing barrier), reads garbage here too.
static void cp_async(char *dst, const char *src, int bytes) {
	if (!fibers_on) {
		misuse = 1;
		return;
	}
	struct fiber *f = &fibers[cur_tid];
	if (f->pending == MAX_COPIES) {
		misuse = 2;
		return;
	}
	memset(dst, 0xff, bytes);
	f->copies[f->pending++] = (struct copy){dst, src, bytes, f->committed};
}

// tofuc_simt_cp_async_4 is cp.async.ca.shared.global of 4 bytes,
// tofuc_simt_cp_async_16 cp.async.cg.shared.global of 16, whose
// addresses must be 16-byte aligned (misaligned ones are a misuse, as
// they fault on a GPU).
void tofuc_simt_cp_async_4(char *dst, const char *src) { cp_async(dst, src, 4); }

void tofuc_simt_cp_async_16(char *dst, const char *src) {
	if (((uintptr_t)dst | (uintptr_t)src) & 15) {
		misuse = 3;
		return;
	}
	cp_async(dst, src, 16);
}

// tofuc_simt_cp_async_commit is cp.async.commit_group: it closes the
// thread's open group.
void tofuc_simt_cp_async_commit(void) {
	if (!fibers_on) {
		misuse = 1;
		return;
	}
	fibers[cur_tid].committed++;
}

// tofuc_simt_cp_async_wait is cp.async.wait_group n: it does the copies
// of every committed group but the n latest, in the order they started.
void tofuc_simt_cp_async_wait(int32_t n) {
	if (!fibers_on) {
		misuse = 1;
		return;
	}
	struct fiber *f = &fibers[cur_tid];
	int kept = 0;
	for (int c = 0; c < f->pending; c++) {
		struct copy cp = f->copies[c];
		if (cp.group < f->committed - n)
			memcpy(cp.dst, cp.src, cp.bytes);
		else
			f->copies[kept++] = cp;
	}
	f->pending = kept;
}

// release lets waiting threads go on: a warp's lanes once all its live
// lanes wait at a shuffle, the block's threads once all its live threads
// wait at a barrier. It returns the number of threads released.
static int release(int n) {
	int released = 0;
	for (int w = 0; w < n; w += 32) {
		int waiting = 0, live = 0;
		for (int t = w; t < n && t < w + 32; t++) {
			live += fibers[t].state != DONE;
			waiting += fibers[t].state == AT_SHUFFLE;
		}
		if (waiting > 0 && waiting == live) {
			for (int t = w; t < n && t < w + 32; t++)
				if (fibers[t].state == AT_SHUFFLE) {
					fibers[t].state = RUNNABLE;
					released++;
				}
		}
	}
	int waiting = 0, live = 0;
	for (int t = 0; t < n; t++) {
		live += fibers[t].state != DONE;
		waiting += fibers[t].state == AT_BARRIER;
	}
	if (waiting > 0 && waiting == live) {
		for (int t = 0; t < n; t++)
			if (fibers[t].state == AT_BARRIER) {
				fibers[t].state = RUNNABLE;
				released++;
			}
	}
	return released;
}

// run_fibers runs one block as fibers; it returns -1 when its threads
// wait for each other forever (a barrier some threads do not reach).
static int run_fibers(int n) {
	for (int t = 0; t < n; t++) {
		fibers[t].sp = fiber_stack(stacks + (size_t)t * STACK_BYTES);
		fibers[t].state = RUNNABLE;
		fibers[t].parity = 0;
		fibers[t].committed = 0;
		fibers[t].pending = 0; // copies a thread never waited for are lost
	}
	fibers_on = 1;
	for (;;) {
		int ran = 0;
		for (int t = 0; t < n; t++) {
			if (fibers[t].state != RUNNABLE)
				continue;
			cur_tid = t;
			tofuc_simt_switch(&scheduler_sp, fibers[t].sp);
			ran++;
		}
		int done = 0;
		for (int t = 0; t < n; t++)
			done += fibers[t].state == DONE;
		if (done == n)
			break;
		if (release(n) == 0 && ran == 0) {
			fibers_on = 0;
			return -1;
		}
	}
	fibers_on = 0;
	return 0;
}

// tofuc_simt_run runs blocks [first, last) of a grid of nctaid blocks of
// ntid threads. sync says the kernel meets at barriers or shuffles.
// It returns 0; -1 when a block's threads deadlock at a barrier; -2 when
// a kernel run without sync used a barrier or a shuffle; -3 when the
// block is too large or memory runs out; -4 when a warp of fewer than 32
// threads met at an mma or ldmatrix; -5 when a thread had more than
// MAX_COPIES asynchronous copies pending; -6 when a 16-byte
// asynchronous copy or an ldmatrix row was misaligned.
int tofuc_simt_run(tofuc_entry entry, void **args, int64_t nctaid, int64_t ntid, int64_t first, int64_t last, int64_t sync) {
	if (ntid < 1 || ntid > MAX_THREADS)
		return -3;
	cur_entry = entry;
	cur_args = args;
	cur_ntid = (int32_t)ntid;
	cur_nctaid = (int32_t)nctaid;
	misuse = 0;
	if (sync && fibers == NULL) {
		fibers = calloc(MAX_THREADS, sizeof *fibers);
		stacks = malloc((size_t)MAX_THREADS * STACK_BYTES);
		if (fibers == NULL || stacks == NULL) {
			free(fibers);
			free(stacks);
			fibers = NULL;
			stacks = NULL;
			return -3;
		}
	}
	for (int64_t b = first; b < last; b++) {
		cur_ctaid = (int32_t)b;
		if (sync) {
			if (run_fibers((int)ntid) != 0)
				return -1;
			if (misuse)
				return misuse == 3 ? -6 : misuse == 2 ? -5 : -4;
			continue;
		}
		for (int32_t t = 0; t < ntid; t++) {
			cur_tid = t;
			entry(args);
		}
		if (misuse)
			return -2;
	}
	return 0;
}
