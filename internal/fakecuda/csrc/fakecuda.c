// A fake CUDA driver (libcuda.so.1) for tests on machines without a GPU:
// the driver-API functions runtime/cuda binds, on host memory. Kernels
// run under tofuc's SIMT emulator: a module's PTX is only read for its
// entries (their parameter counts, whether they synchronise), and the
// entry points come from the shared object $FAKECUDA_SIMT (a plan's
// simt-*.so). Streams run their work at once, in order.
//
// It checks what a real driver would reject or get wrong silently: calls
// without a current context, streams and functions used in another
// context, kernel arguments and copies outside the memory of the
// contexts they name, timing with events created without it.
// $FAKECUDA_DEVICES sets the number of GPUs (default 2), $FAKECUDA_MAX_PITCH
// the largest pitch of a 3-D copy, $FAKECUDA_LAUNCH_DELAY_US a time each
// launch takes longer (the tests of placement by measurement).
// Threads may call it at once (the fake NCCL's ranks are threads of one
// process): the allocations and the streams' pending work are locked.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

enum {
	OK = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	INVALID_CONTEXT = 201,
	INVALID_PTX = 218,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	NOT_READY = 600,
	LAUNCH_TIMEOUT = 702,
	PEER_ALREADY_ENABLED = 704,
};

#define NCTX 8
struct ctx { int dev; int peers[NCTX]; };
static struct ctx ctxs[NCTX];
static __thread struct ctx *current;

static int ndevices(void) {
	const char *s = getenv("FAKECUDA_DEVICES");
	int n = s ? atoi(s) : 2;
	return n < 0 ? 0 : n > NCTX ? NCTX : n;
}

#define NEED_CONTEXT() do { if (current == NULL) return INVALID_CONTEXT; } while (0)

// Allocations, each in a context, under mem_mu.
struct alloc { uint64_t base, size; struct ctx *ctx; };
static struct alloc *allocs;
static int nallocs;
static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;

static struct alloc *find(uint64_t p) {
	for (int i = 0; i < nallocs; i++)
		if (p >= allocs[i].base && p < allocs[i].base + allocs[i].size)
			return &allocs[i];
	return NULL;
}

// inside reports whether [p, p+n) lies in one allocation of context c.
static int inside(uint64_t p, uint64_t n, struct ctx *c) {
	pthread_mutex_lock(&mem_mu);
	struct alloc *a = find(p);
	int in = a != NULL && a->ctx == c && p + n <= a->base + a->size;
	pthread_mutex_unlock(&mem_mu);
	return in;
}

// For the fake cuBLAS (fakecublas.c), which finds them in the global
// namespace: the current context, whether [p, p+n) lies in its memory,
// and a stream's context.
void *fakecuda_current(void) { return current; }
int fakecuda_inside(uint64_t p, uint64_t n) { return current != NULL && inside(p, n, current); }
struct stream;
void *fakecuda_stream_context(struct stream *s);

CUresult cuInit(unsigned flags) { return flags == 0 ? OK : INVALID_VALUE; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }

static const char *names[][2] = {
	{"CUDA_SUCCESS", "no error"},
	{"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{"CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{"CUDA_ERROR_NOT_READY", "device not ready"},
	{"CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
};
static int name_index(CUresult r) {
	switch (r) {
	case OK: return 0;
	case INVALID_VALUE: return 1;
	case OUT_OF_MEMORY: return 2;
	case INVALID_CONTEXT: return 3;
	case INVALID_PTX: return 4;
	case INVALID_HANDLE: return 5;
	case NOT_FOUND: return 6;
	case NOT_READY: return 7;
	case LAUNCH_TIMEOUT: return 8;
	}
	return -1;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
	int i = name_index(r);
	*s = i < 0 ? NULL : names[i][0];
	return i < 0 ? INVALID_VALUE : OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
	int i = name_index(r);
	*s = i < 0 ? NULL : names[i][1];
	return i < 0 ? INVALID_VALUE : OK;
}

CUresult cuDeviceGetCount(int *n) { *n = ndevices(); return OK; }
CUresult cuDeviceGet(int *d, int ordinal) {
	if (ordinal < 0 || ordinal >= ndevices())
		return INVALID_VALUE;
	*d = ordinal;
	return OK;
}
CUresult cuDeviceGetName(char *name, int n, int d) {
	snprintf(name, (size_t)n, "Fake GPU %d", d);
	return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
	(void)d;
	const char *pitch = getenv("FAKECUDA_MAX_PITCH");
	switch (attr) {
	case 1: *v = 1024; return OK;                                  // max threads per block
	case 11: *v = pitch ? atoi(pitch) : 2147483647; return OK;     // max pitch
	case 16: *v = 4; return OK;                                    // multiprocessors
	case 75: *v = 9; return OK;                                    // compute capability
	case 76: *v = 0; return OK;
	case 97: *v = getenv("FAKECUDA_SHARED_OPTIN") ? atoi(getenv("FAKECUDA_SHARED_OPTIN")) : 232448; return OK; // shared memory a block may opt in to
	}
	return INVALID_VALUE;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int d) { (void)d; *bytes = (size_t)1 << 30; return OK; }
CUresult cuDeviceCanAccessPeer(int *can, int d, int peer) { *can = d != peer; return OK; }
CUresult cuDevicePrimaryCtxRetain(struct ctx **c, int d) {
	if (d < 0 || d >= ndevices())
		return INVALID_VALUE;
	ctxs[d].dev = d;
	*c = &ctxs[d];
	return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int d) { return d >= 0 && d < ndevices() ? OK : INVALID_VALUE; }
CUresult cuCtxSetCurrent(struct ctx *c) { current = c; return OK; }
CUresult cuCtxEnablePeerAccess(struct ctx *peer, unsigned flags) {
	NEED_CONTEXT();
	if (flags != 0 || peer == current)
		return INVALID_VALUE;
	if (current->peers[peer->dev])
		return PEER_ALREADY_ENABLED;
	current->peers[peer->dev] = 1;
	return OK;
}

// Modules and functions.
typedef int (*simt_run)(void *, void **, int64_t, int64_t, int64_t, int64_t, int64_t);
// dynamic is the dynamic shared memory the kernel may be launched with;
// uses says it has some (tofuc names it NAME_dyn), so that a launch
// without is refused.
struct func { struct ctx *ctx; void *entry; simt_run run; int params, sync, dynamic, uses; };
struct module { struct ctx *ctx; void *simt; const char *ptx; };

// entry finds `.entry NAME(` in ptx: its parameter count and whether its
// body synchronises.
static int entry(const char *ptx, const char *name, int *params, int *sync) {
	char pat[512];
	snprintf(pat, sizeof pat, ".entry %s(", name);
	const char *p = strstr(ptx, pat);
	if (p == NULL)
		return 0;
	const char *close = strchr(p, ')');
	*params = 0;
	for (const char *q = strstr(p, ".param"); q != NULL && q < close; q = strstr(q + 1, ".param"))
		(*params)++;
	const char *next = strstr(close, ".entry ");
	size_t n = next ? (size_t)(next - close) : strlen(close);
	char *body = strndup(close, n);
	*sync = strstr(body, "bar.sync") || strstr(body, "barrier.sync") || strstr(body, "shfl.sync");
	free(body);
	return 1;
}

static void put_log(unsigned n, const int *opts, void **vals, const char *text) {
	char *buf = NULL;
	size_t size = 0;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5)
			buf = vals[i];
		if (opts[i] == 6)
			size = (size_t)(uintptr_t)vals[i];
	}
	if (buf != NULL && size > 0)
		snprintf(buf, size, "%s", text);
}

CUresult cuModuleLoadDataEx(struct module **m, const char *image, unsigned n, int *opts, void **vals) {
	NEED_CONTEXT();
	if (strstr(image, "FAKECUDA_SYNTAX_ERROR") != NULL) {
		put_log(n, opts, vals, "ptxas application ptx input, line 1; fatal   : Parsing error near 'FAKECUDA_SYNTAX_ERROR': syntax error");
		return INVALID_PTX;
	}
	const char *path = getenv("FAKECUDA_SIMT");
	void *simt = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (simt == NULL) {
		put_log(n, opts, vals, "fake driver: $FAKECUDA_SIMT does not name a SIMT shared object");
		return INVALID_PTX;
	}
	*m = malloc(sizeof **m);
	(*m)->ctx = current;
	(*m)->simt = simt;
	(*m)->ptx = strdup(image);
	return OK;
}
CUresult cuModuleUnload(struct module *m) {
	NEED_CONTEXT();
	if (m->ctx != current)
		return INVALID_CONTEXT;
	free((void *)m->ptx);
	free(m);
	return OK;
}
CUresult cuModuleGetFunction(struct func **f, struct module *m, const char *name) {
	NEED_CONTEXT();
	if (m->ctx != current)
		return INVALID_CONTEXT;
	char sym[512];
	snprintf(sym, sizeof sym, "%s.simt", name);
	struct func fn = {.ctx = current, .entry = dlsym(m->simt, sym), .run = (simt_run)dlsym(m->simt, "tofuc_simt_run"), .dynamic = 48 << 10};
	if (fn.entry == NULL || fn.run == NULL || !entry(m->ptx, name, &fn.params, &fn.sync))
		return NOT_FOUND;
	char dyn[512];
	snprintf(dyn, sizeof dyn, ".extern .shared .align 16 .b8 %s_dyn[]", name);
	fn.uses = strstr(m->ptx, dyn) != NULL;
	*f = malloc(sizeof **f);
	**f = fn;
	return OK;
}
CUresult cuFuncGetAttribute(int *v, int attr, struct func *f) {
	(void)f;
	if (attr != 0)
		return INVALID_VALUE;
	*v = 1024;
	return OK;
}
// cuFuncSetAttribute takes the dynamic shared memory a kernel may be
// launched with, up to what the device allows a block.
CUresult cuFuncSetAttribute(struct func *f, int attr, int v) {
	int optin;
	cuDeviceGetAttribute(&optin, 97, 0);
	if (attr != 8 || v < 0 || v > optin)
		return INVALID_VALUE;
	f->dynamic = v;
	return OK;
}

// Memory.
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CONTEXT();
	if (n == 0)
		return INVALID_VALUE;
	void *m = aligned_alloc(256, (n + 255) / 256 * 256);
	if (m == NULL)
		return OUT_OF_MEMORY;
	memset(m, 0xA5, n); // not zero: a kernel must not rely on it
	pthread_mutex_lock(&mem_mu);
	allocs = realloc(allocs, (size_t)(nallocs + 1) * sizeof *allocs);
	allocs[nallocs++] = (struct alloc){(uint64_t)(uintptr_t)m, n, current};
	pthread_mutex_unlock(&mem_mu);
	*p = (uint64_t)(uintptr_t)m;
	return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	NEED_CONTEXT();
	pthread_mutex_lock(&mem_mu);
	struct alloc *a = find(p);
	int ok = a != NULL && a->base == p && a->ctx == current;
	if (ok) {
		free((void *)(uintptr_t)p);
		*a = allocs[--nallocs];
	}
	pthread_mutex_unlock(&mem_mu);
	return ok ? OK : INVALID_VALUE;
}

// Streams: their context, and the work other fake libraries enqueued on
// them that is still pending (the fake NCCL's, which completes when
// every rank has posted its part). A stream runs its own work at once,
// after its pending work: it waits for that, at most
// $FAKECUDA_PENDING_TIMEOUT_MS (default 30 s) so that a test whose
// peers never come fails instead of hanging, as a GPU's watchdog would.
struct stream { struct ctx *ctx; int pending; };
static pthread_mutex_t stream_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stream_done = PTHREAD_COND_INITIALIZER;

CUresult cuStreamCreate(struct stream **s, unsigned flags) {
	NEED_CONTEXT();
	if (flags > 1)
		return INVALID_VALUE;
	*s = calloc(1, sizeof **s);
	(*s)->ctx = current;
	return OK;
}
void *fakecuda_stream_context(struct stream *s) { return s == NULL ? NULL : s->ctx; }

// For the fake NCCL: a stream's work begun, and finished.
void fakecuda_stream_begin(struct stream *s) {
	pthread_mutex_lock(&stream_mu);
	s->pending++;
	pthread_mutex_unlock(&stream_mu);
}
void fakecuda_stream_end(struct stream *s) {
	pthread_mutex_lock(&stream_mu);
	s->pending--;
	pthread_cond_broadcast(&stream_done);
	pthread_mutex_unlock(&stream_mu);
}

// drain waits for s's pending work.
static CUresult drain(struct stream *s) {
	const char *ms = getenv("FAKECUDA_PENDING_TIMEOUT_MS");
	long wait = ms ? atol(ms) : 30000;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	long long ns = until.tv_nsec + wait % 1000 * 1000000LL;
	until.tv_sec += wait / 1000 + ns / 1000000000;
	until.tv_nsec = ns % 1000000000;
	int r = 0;
	pthread_mutex_lock(&stream_mu);
	while (s->pending > 0 && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&stream_done, &stream_mu, &until);
	int left = s->pending;
	pthread_mutex_unlock(&stream_mu);
	return left > 0 ? LAUNCH_TIMEOUT : OK;
}
#define NEED_STREAM(s) do { \
	NEED_CONTEXT(); \
	if ((s) == NULL || (s)->ctx != current) return INVALID_HANDLE; \
	CUresult drained = drain(s); \
	if (drained != OK) return drained; \
} while (0)
CUresult cuStreamDestroy_v2(struct stream *s) { NEED_STREAM(s); free(s); return OK; }
/* NULL is the context's legacy default stream, where the synchronous
   copies run (done at once here). */
CUresult cuStreamSynchronize(struct stream *s) {
	if (s == NULL) {
		NEED_CONTEXT();
		return OK;
	}
	NEED_STREAM(s);
	return OK;
}
CUresult cuStreamQuery(struct stream *s) {
	NEED_CONTEXT();
	if (s == NULL || s->ctx != current)
		return INVALID_HANDLE;
	pthread_mutex_lock(&stream_mu);
	int pending = s->pending;
	pthread_mutex_unlock(&stream_mu);
	return pending > 0 ? NOT_READY : OK;
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, struct stream *s) {
	NEED_STREAM(s);
	if (!inside(p, n, current))
		return INVALID_VALUE;
	memset((void *)(uintptr_t)p, v, n);
	return OK;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, struct stream *s) {
	NEED_STREAM(s);
	if (!inside(dst, n, current) || !inside(src, n, current))
		return INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return OK;
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, struct ctx *dc, CUdeviceptr src, struct ctx *sc, size_t n, struct stream *s) {
	NEED_STREAM(s);
	if (!inside(dst, n, dc) || !inside(src, n, sc))
		return INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	NEED_CONTEXT();
	if (!inside(dst, n, current))
		return INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	NEED_CONTEXT();
	if (!inside(src, n, current))
		return INVALID_VALUE;
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return OK;
}

// CUDA_MEMCPY3D_PEER (CUDA_MEMCPY3D: reserved words for the contexts).
struct copy3d {
	size_t srcX, srcY, srcZ, srcLOD;
	int srcType;
	const void *srcHost;
	CUdeviceptr srcDevice;
	void *srcArray;
	struct ctx *srcContext;
	size_t srcPitch, srcHeight;
	size_t dstX, dstY, dstZ, dstLOD;
	int dstType;
	void *dstHost;
	CUdeviceptr dstDevice;
	void *dstArray;
	struct ctx *dstContext;
	size_t dstPitch, dstHeight;
	size_t width, height, depth;
};

// copy3d runs c; device memory must lie in the given contexts.
static CUresult run3d(const struct copy3d *c, struct ctx *sc, struct ctx *dc) {
	if (c->srcPitch < c->width || c->dstPitch < c->width || c->srcHeight < c->height || c->dstHeight < c->height)
		return INVALID_VALUE;
	const char *pitch = getenv("FAKECUDA_MAX_PITCH");
	if (pitch && (c->srcPitch > (size_t)atoll(pitch) || c->dstPitch > (size_t)atoll(pitch)))
		return INVALID_VALUE;
	uint64_t sbase = c->srcType == 1 ? (uint64_t)(uintptr_t)c->srcHost : c->srcDevice;
	uint64_t dbase = c->dstType == 1 ? (uint64_t)(uintptr_t)c->dstHost : c->dstDevice;
	for (size_t z = 0; z < c->depth; z++)
		for (size_t y = 0; y < c->height; y++) {
			uint64_t so = sbase + c->srcX + ((c->srcZ + z) * c->srcHeight + c->srcY + y) * c->srcPitch;
			uint64_t dof = dbase + c->dstX + ((c->dstZ + z) * c->dstHeight + c->dstY + y) * c->dstPitch;
			if ((c->srcType == 2 && !inside(so, c->width, sc)) || (c->dstType == 2 && !inside(dof, c->width, dc)))
				return INVALID_VALUE;
			memmove((void *)(uintptr_t)dof, (const void *)(uintptr_t)so, c->width);
		}
	return OK;
}
CUresult cuMemcpy3D_v2(const struct copy3d *c) {
	NEED_CONTEXT();
	if (c->srcContext != NULL || c->dstContext != NULL) // reserved words
		return INVALID_VALUE;
	return run3d(c, current, current);
}
CUresult cuMemcpy3DPeerAsync(const struct copy3d *c, struct stream *s) {
	NEED_STREAM(s);
	return run3d(c, c->srcContext, c->dstContext);
}

// Events.
struct event { int timing, recorded; double at; };
CUresult cuEventCreate(struct event **e, unsigned flags) {
	if (flags & ~2u)
		return INVALID_VALUE;
	*e = calloc(1, sizeof **e);
	(*e)->timing = !(flags & 2);
	return OK;
}
CUresult cuEventDestroy_v2(struct event *e) { free(e); return OK; }
CUresult cuEventRecord(struct event *e, struct stream *s) {
	NEED_STREAM(s);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	e->recorded = 1;
	e->at = (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
	return OK;
}
CUresult cuStreamWaitEvent(struct stream *s, struct event *e, unsigned flags) {
	NEED_STREAM(s);
	return e == NULL || flags != 0 ? INVALID_HANDLE : OK;
}
CUresult cuEventElapsedTime(float *ms, struct event *a, struct event *b) {
	if (!a->timing || !b->timing || !a->recorded || !b->recorded)
		return INVALID_HANDLE;
	*ms = (float)(b->at - a->at);
	return OK;
}

// Launches: the arguments are read through kernelParams, one pointer per
// parameter of the entry; every one must be memory of the context.

CUresult cuLaunchKernel(struct func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, struct stream *s, void **params, void **extra) {
	NEED_STREAM(s);
	if (f->ctx != current)
		return INVALID_HANDLE;
	// Dynamic shared memory beyond 48 KB needs the kernel's opt-in
	// (cuFuncSetAttribute), as on a GPU.
	if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || by != 1 || bz != 1 || bx > 1024 || shared > (unsigned)f->dynamic || (f->uses != (shared != 0)) ||
	    extra != NULL || params == NULL)
		return INVALID_VALUE;
	void *argv[64];
	if (f->params > 64)
		return INVALID_VALUE;
	for (int i = 0; i < f->params; i++) {
		argv[i] = *(void **)params[i];
		if (!inside((uint64_t)(uintptr_t)argv[i], 1, current))
			return INVALID_VALUE;
	}
	const char *delay = getenv("FAKECUDA_LAUNCH_DELAY_US");
	if (delay != NULL) {
		long us = atol(delay);
		nanosleep(&(struct timespec){us / 1000000, us % 1000000 * 1000}, NULL);
	}
	return f->run(f->entry, argv, gx, bx, 0, gx, f->sync) == 0 ? OK : INVALID_VALUE;
}
