// A fake cuBLAS (libcublas.so.12) for tests on machines without a GPU:
// the functions runtime/cuda binds, on the fake driver's memory (host
// memory), which must be loaded first (runtime/cuda loads the driver
// into the global namespace). It checks what the real library would
// reject or get wrong silently: a handle used in a context other than
// the one it was made in, a stream of another context, a matrix
// outside the current context's memory, a leading dimension below a
// matrix's rows. Sums are in double, rounded to float once.
// $FAKECUBLAS_DELAY_US makes each product take that much longer (the
// tests of placement by measurement). It runs every call at once, in
// the caller's order, and never rounds to TF32: what streams or the
// math mode would get wrong on a GPU, it cannot show.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef int cublasStatus_t;
enum { SUCCESS = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13 };

struct handle { void *ctx, *stream; int math; };

static void *(*current)(void);
static int (*inside)(uint64_t p, uint64_t n);
static void *(*stream_context)(void *s);

static int bind(void) {
	if (current != NULL)
		return 1;
	current = (void *(*)(void))dlsym(RTLD_DEFAULT, "fakecuda_current");
	inside = (int (*)(uint64_t, uint64_t))dlsym(RTLD_DEFAULT, "fakecuda_inside");
	stream_context = (void *(*)(void *))dlsym(RTLD_DEFAULT, "fakecuda_stream_context");
	return current != NULL && inside != NULL && stream_context != NULL;
}

cublasStatus_t cublasCreate_v2(struct handle **h) {
	if (!bind() || current() == NULL)
		return NOT_INITIALIZED;
	*h = calloc(1, sizeof **h);
	(*h)->ctx = current();
	return SUCCESS;
}
cublasStatus_t cublasDestroy_v2(struct handle *h) {
	if (h == NULL)
		return NOT_INITIALIZED;
	free(h);
	return SUCCESS;
}
cublasStatus_t cublasGetVersion_v2(struct handle *h, int *v) {
	if (h == NULL)
		return NOT_INITIALIZED;
	*v = 120000 + 99; // "12.0.99": a version no real cuBLAS has
	return SUCCESS;
}
cublasStatus_t cublasSetMathMode(struct handle *h, int mode) {
	if (h == NULL)
		return NOT_INITIALIZED;
	if (mode != 0 && mode != 3)
		return INVALID_VALUE;
	h->math = mode;
	return SUCCESS;
}
cublasStatus_t cublasSetStream_v2(struct handle *h, void *stream) {
	if (h == NULL)
		return NOT_INITIALIZED;
	if (stream != NULL && stream_context(stream) != h->ctx)
		return INVALID_VALUE;
	h->stream = stream;
	return SUCCESS;
}

// fits reports whether a column-major rows×cols matrix at p with leading
// dimension ld lies in the current context's memory.
static int fits(uint64_t p, int rows, int cols, int ld) {
	if (ld < (rows > 1 ? rows : 1))
		return 0;
	uint64_t last = (uint64_t)(rows - 1) + (uint64_t)(cols - 1) * (uint64_t)ld;
	return inside(p, 4 * (last + 1));
}

// C = op(A)·op(B), column-major, m×n from m×k by k×n (alpha 1, beta 0
// only: what tofuc asks).
cublasStatus_t cublasSgemm_v2(struct handle *h, int ta, int tb, int m, int n, int k, const float *alpha,
	uint64_t a, int lda, uint64_t b, int ldb, const float *beta, uint64_t c, int ldc) {
	if (h == NULL || current() != h->ctx || h->stream == NULL)
		return NOT_INITIALIZED;
	if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1) || *alpha != 1 || *beta != 0)
		return INVALID_VALUE;
	if (m == 0 || n == 0)
		return SUCCESS;
	if (!fits(a, ta ? k : m, ta ? m : k, lda) || !fits(b, tb ? n : k, tb ? k : n, ldb) || !fits(c, m, n, ldc))
		return INVALID_VALUE;
	const char *delay = getenv("FAKECUBLAS_DELAY_US");
	if (delay != NULL) {
		long us = atol(delay);
		nanosleep(&(struct timespec){us / 1000000, us % 1000000 * 1000}, NULL);
	}
	const float *A = (const float *)(uintptr_t)a, *B = (const float *)(uintptr_t)b;
	float *C = (float *)(uintptr_t)c;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double sum = 0;
			for (int l = 0; l < k; l++) {
				float x = ta ? A[l + (int64_t)i * lda] : A[i + (int64_t)l * lda];
				float y = tb ? B[j + (int64_t)l * ldb] : B[l + (int64_t)j * ldb];
				sum += (double)x * y;
			}
			C[i + (int64_t)j * ldc] = (float)sum;
		}
	return SUCCESS;
}
