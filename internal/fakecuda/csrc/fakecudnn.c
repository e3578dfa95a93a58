// A fake cuDNN (libcudnn.so.9) for tests on machines without a GPU: the
// legacy convolution functions runtime/cuda binds, on the fake driver's
// memory (host memory), which must be loaded first (runtime/cuda loads
// the driver into the global namespace). It checks what the real
// library would reject or get wrong silently: a handle used in another
// context than its own, a stream of another context, descriptors that
// disagree (an output extent, channels and groups), a workspace smaller
// than it asked for, a tensor outside the current context's memory.
// Sums are in double, rounded to float once. $FAKECUDNN_NO_ALGORITHM
// makes it offer no algorithm. It runs every call at once, in the
// caller's order: what streams and shared workspaces would get wrong on
// a GPU, it cannot show; nor does it round to TF32.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int cudnnStatus_t;
enum { SUCCESS = 0, NOT_INITIALIZED = 1, BAD_PARAM = 3, NOT_SUPPORTED = 9 };
enum { MAXD = 5, WORKSPACE = 256 };

struct handle { void *ctx, *stream; };
struct tensor { int n, dims[MAXD], strides[MAXD]; };
struct filter { int n, dims[MAXD]; };
struct conv { int n, pads[MAXD], strides[MAXD], dilations[MAXD], groups; };

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

size_t cudnnGetVersion(void) { return 90099; } // "9.0.99": no real cuDNN's
const char *cudnnGetErrorString(cudnnStatus_t s) {
	switch (s) {
	case SUCCESS: return "CUDNN_STATUS_SUCCESS";
	case NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
	case BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
	case NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
	}
	return "CUDNN_STATUS_UNKNOWN";
}

cudnnStatus_t cudnnCreate(struct handle **h) {
	if (!bind() || current() == NULL)
		return NOT_INITIALIZED;
	*h = calloc(1, sizeof **h);
	(*h)->ctx = current();
	return SUCCESS;
}
cudnnStatus_t cudnnDestroy(struct handle *h) {
	if (h == NULL)
		return BAD_PARAM;
	free(h);
	return SUCCESS;
}
cudnnStatus_t cudnnSetStream(struct handle *h, void *stream) {
	if (h == NULL || stream_context(stream) != h->ctx)
		return BAD_PARAM;
	h->stream = stream;
	return SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(struct tensor **d) { *d = calloc(1, sizeof **d); return SUCCESS; }
cudnnStatus_t cudnnDestroyTensorDescriptor(struct tensor *d) { free(d); return SUCCESS; }
cudnnStatus_t cudnnSetTensorNdDescriptor(struct tensor *d, int dtype, int n, const int *dims, const int *strides) {
	if (d == NULL || dtype != 0 || n < 4 || n > MAXD)
		return BAD_PARAM;
	d->n = n;
	for (int i = 0; i < n; i++) {
		if (dims[i] < 1 || strides[i] < 1)
			return BAD_PARAM;
		d->dims[i] = dims[i], d->strides[i] = strides[i];
	}
	return SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(struct filter **d) { *d = calloc(1, sizeof **d); return SUCCESS; }
cudnnStatus_t cudnnDestroyFilterDescriptor(struct filter *d) { free(d); return SUCCESS; }
cudnnStatus_t cudnnSetFilterNdDescriptor(struct filter *d, int dtype, int format, int n, const int *dims) {
	if (d == NULL || dtype != 0 || format != 0 || n < 4 || n > MAXD)
		return BAD_PARAM;
	d->n = n;
	for (int i = 0; i < n; i++) {
		if (dims[i] < 1)
			return BAD_PARAM;
		d->dims[i] = dims[i];
	}
	return SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(struct conv **d) {
	*d = calloc(1, sizeof **d);
	(*d)->groups = 1;
	return SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(struct conv *d) { free(d); return SUCCESS; }
cudnnStatus_t cudnnSetConvolutionNdDescriptor(struct conv *d, int n, const int *pads, const int *strides, const int *dilations, int mode, int dtype) {
	if (d == NULL || n < 2 || n > MAXD - 2 || mode != 1 || dtype != 0)
		return BAD_PARAM;
	d->n = n;
	for (int i = 0; i < n; i++) {
		if (pads[i] < 0 || strides[i] < 1 || dilations[i] < 1)
			return BAD_PARAM;
		d->pads[i] = pads[i], d->strides[i] = strides[i], d->dilations[i] = dilations[i];
	}
	return SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(struct conv *d, int groups) {
	if (d == NULL || groups < 1)
		return BAD_PARAM;
	d->groups = groups;
	return SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(struct conv *d, int math) {
	return d != NULL && math >= 0 && math <= 3 ? SUCCESS : BAD_PARAM;
}

// agree reports whether the descriptors describe one convolution.
static int agree(const struct tensor *x, const struct filter *w, const struct conv *c, const struct tensor *y) {
	int s = x->n - 2;
	if (s < 2 || w->n != x->n || y->n != x->n || c->n != s || x->dims[0] != y->dims[0] || w->dims[0] != y->dims[1])
		return 0;
	if (x->dims[1] % c->groups || y->dims[1] % c->groups || w->dims[1] * c->groups != x->dims[1])
		return 0;
	for (int i = 0; i < s; i++) {
		int span = x->dims[2 + i] + 2 * c->pads[i] - c->dilations[i] * (w->dims[2 + i] - 1) - 1;
		if (span < 0 || y->dims[2 + i] != span / c->strides[i] + 1)
			return 0;
	}
	return 1;
}

typedef struct { int algo, status; float time; size_t memory; int determinism, math, reserved[3]; } perf_t;

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(struct handle *h, const struct tensor *x, const struct filter *w,
	const struct conv *c, const struct tensor *y, int asked, int *returned, perf_t *perf) {
	if (h == NULL || current() != h->ctx)
		return NOT_INITIALIZED;
	if (asked < 1 || !agree(x, w, c, y))
		return BAD_PARAM;
	// The first not supported: the caller must read the statuses; none
	// supported with $FAKECUDNN_NO_ALGORITHM.
	perf_t all[2] = {{.algo = 7, .status = NOT_SUPPORTED}, {.algo = 1, .status = SUCCESS, .memory = WORKSPACE, .math = 3}};
	if (getenv("FAKECUDNN_NO_ALGORITHM") != NULL)
		all[1].status = NOT_SUPPORTED;
	*returned = asked < 2 ? asked : 2;
	for (int i = 0; i < *returned; i++)
		perf[i] = all[i];
	return SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(struct handle *h, const struct tensor *x, const struct filter *w,
	const struct conv *c, const struct tensor *y, int algo, size_t *bytes) {
	if (h == NULL || current() != h->ctx)
		return NOT_INITIALIZED;
	if (algo != 1 || !agree(x, w, c, y))
		return BAD_PARAM;
	*bytes = WORKSPACE;
	return SUCCESS;
}

// reach is one more than the largest element offset of t.
static uint64_t reach(const struct tensor *t) {
	uint64_t r = 1;
	for (int i = 0; i < t->n; i++)
		r += (uint64_t)(t->dims[i] - 1) * (uint64_t)t->strides[i];
	return r;
}

// at is the offset of element idx (n, c, *spatial) of t.
static int64_t at(const struct tensor *t, const int *idx) {
	int64_t off = 0;
	for (int i = 0; i < t->n; i++)
		off += (int64_t)idx[i] * t->strides[i];
	return off;
}

// next steps idx through extents dims[from..n), last fastest; 0 after
// the last.
static int next(int *idx, const int *dims, int from, int n) {
	for (int i = n - 1; i >= from; i--) {
		if (++idx[i] < dims[i])
			return 1;
		idx[i] = 0;
	}
	return 0;
}

cudnnStatus_t cudnnConvolutionForward(struct handle *h, const float *alpha, const struct tensor *xd, uint64_t x,
	const struct filter *wd, uint64_t w, const struct conv *c, int algo, uint64_t ws, size_t wsBytes,
	const float *beta, const struct tensor *yd, uint64_t y) {
	if (h == NULL || current() != h->ctx || h->stream == NULL)
		return NOT_INITIALIZED;
	if (*alpha != 1 || *beta != 0 || algo != 1 || wsBytes < WORKSPACE || !inside(ws, WORKSPACE) || !agree(xd, wd, c, yd))
		return BAD_PARAM;
	uint64_t wn = 1;
	for (int i = 0; i < wd->n; i++)
		wn *= (uint64_t)wd->dims[i];
	if (!inside(x, 4 * reach(xd)) || !inside(w, 4 * wn) || !inside(y, 4 * reach(yd)))
		return BAD_PARAM;
	const float *X = (const float *)(uintptr_t)x, *W = (const float *)(uintptr_t)w;
	float *Y = (float *)(uintptr_t)y;
	int n = xd->n, s = n - 2, perGroupIn = wd->dims[1], perGroupOut = yd->dims[1] / c->groups;
	int out[MAXD] = {0};
	do { // every output element (n, o, *p)
		int g = out[1] / perGroupOut;
		double sum = 0;
		int k[MAXD] = {0}; // (·, c, *kernel) over the filter's extents
		do {
			int in[MAXD] = {out[0], g * perGroupIn + k[1]}, ok = 1;
			for (int i = 0; i < s && ok; i++) {
				in[2 + i] = out[2 + i] * c->strides[i] + k[2 + i] * c->dilations[i] - c->pads[i];
				ok = in[2 + i] >= 0 && in[2 + i] < xd->dims[2 + i];
			}
			if (ok) {
				int64_t widx = out[1];
				for (int i = 1; i < n; i++)
					widx = widx * wd->dims[i] + k[i];
				sum += (double)X[at(xd, in)] * W[widx];
			}
		} while (next(k, wd->dims, 1, n));
		Y[at(yd, out)] = (float)sum;
	} while (next(out, yd->dims, 0, n));
	return SUCCESS;
}
