// A fake NCCL (libnccl.so.2) for tests on machines without a GPU: the
// functions runtime/cuda binds, with NCCL 2's signatures and
// enumerations, on the fake driver's memory and streams, which must be
// loaded first (runtime/cuda loads the driver into the global
// namespace). The ranks of a communicator are threads of one process,
// each with its own context (a fake GPU): ncclCommInitRank waits for
// the other ranks of its unique id, at most $FAKENCCL_INIT_TIMEOUT_MS
// (default 10 s).
//
// Operations run in stream order: an operation (or a group's operations
// on one stream) is posted when the NCCL work enqueued before it on its
// stream is done, and is done when every part it needs is posted, the
// last rank to post moving the data of all. Until then the fake
// driver counts the stream's work pending: cuStreamQuery says not ready
// and the stream's next work waits for it, so kernels keep their order
// with the communication.
//
// It checks what the real library would reject or get wrong silently: a
// communicator used in another context, a stream of another context, a
// buffer outside the current context's memory or shorter than the
// operation, two ranks on one GPU, unmatched group calls, and ranks
// whose parts disagree (the operation, count, datatype, reduction or
// root of a collective; the size or datatype of a send and its
// receive), which fail the operation on every rank with the
// asynchronous error ncclInvalidUsage instead of hanging. A rank gone
// (destroyed or aborted) fails the operations that need it with
// ncclRemoteError. Reductions of floating types are computed in double
// and rounded once; f16, bf16 and fp8 are refused (invalid argument).
// $FAKENCCL_HANG_RANK=k makes rank k post nothing, as a rank that
// stopped would (the tests of timeouts).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int ncclResult_t;
enum { SUCCESS = 0, SYSTEM_ERROR = 2, INTERNAL_ERROR = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, REMOTE_ERROR = 6 };
enum { SUM = 0, PROD = 1, MAX = 2, MIN = 3, AVG = 4 };
enum { SEND, RECV, ALLREDUCE, REDUCESCATTER, ALLGATHER, BROADCAST };
enum { MAXRANKS = 64 };

typedef struct { char internal[128]; } ncclUniqueId;

static void *(*current)(void);
static int (*inside)(uint64_t p, uint64_t n);
static void *(*stream_context)(void *s);
static void (*stream_begin)(void *s);
static void (*stream_end)(void *s);

static int bind(void) {
	if (current != NULL)
		return 1;
	inside = (int (*)(uint64_t, uint64_t))dlsym(RTLD_DEFAULT, "fakecuda_inside");
	stream_context = (void *(*)(void *))dlsym(RTLD_DEFAULT, "fakecuda_stream_context");
	stream_begin = (void (*)(void *))dlsym(RTLD_DEFAULT, "fakecuda_stream_begin");
	stream_end = (void (*)(void *))dlsym(RTLD_DEFAULT, "fakecuda_stream_end");
	if (inside == NULL || stream_context == NULL || stream_begin == NULL || stream_end == NULL)
		return 0;
	current = (void *(*)(void))dlsym(RTLD_DEFAULT, "fakecuda_current");
	return current != NULL;
}

// A clique is the ranks of one unique id; a comm is one rank of it.
struct comm;
struct clique { ncclUniqueId id; int n, joined, failed; struct comm *ranks[MAXRANKS]; struct clique *next; };
struct comm {
	struct clique *q;
	int rank;
	void *ctx;
	ncclResult_t async;
	uint64_t colls, sent[MAXRANKS], received[MAXRANKS]; // the operations enqueued so far
};

// An op is one rank's part of an operation; a unit is the ops one
// stream runs together (one call, or a group's calls on the stream); a
// queue is a stream's units not done yet, the first posted.
struct unit;
struct op {
	int kind, type, redop, peer; // peer: the peer of a send or receive, the root of a broadcast
	struct comm *c;
	void *stream;
	const char *send;
	char *recv;
	size_t count;
	uint64_t seq; // among the comm's collectives, or its sends to (receives from) peer
	int posted, done;
	struct unit *u;
	struct op *next, *next_posted;
};
struct queue;
struct unit { void *stream; struct queue *q; struct op *ops; int left; struct unit *next; };
struct queue { void *stream; struct unit *head, *tail; struct queue *next; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t joined = PTHREAD_COND_INITIALIZER;
static struct clique *cliques;
static struct op *posted;
static struct queue *queues;
static __thread int group_depth;
static __thread struct op *grouped;

static const char *messages[] = {
	"no error",
	"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
	"unhandled system error (run with NCCL_DEBUG=INFO for details)",
	"internal error - please report this issue to the NCCL developers",
	"invalid argument (run with NCCL_DEBUG=WARN for details)",
	"invalid usage (run with NCCL_DEBUG=WARN for details)",
	"remote process exited or there was a network error",
};
const char *ncclGetErrorString(ncclResult_t r) {
	return r >= 0 && r < (int)(sizeof messages / sizeof *messages) ? messages[r] : "unknown result code";
}
ncclResult_t ncclGetVersion(int *v) {
	*v = 22899; // "2.28.99": a version no real NCCL has
	return SUCCESS;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	static unsigned long ids;
	pthread_mutex_lock(&mu);
	memset(id, 0, sizeof *id);
	snprintf(id->internal, sizeof id->internal, "fakenccl %d %lu", (int)getpid(), ids++);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

static struct timespec deadline(const char *env, long ms) {
	if (getenv(env) != NULL)
		ms = atol(getenv(env));
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	long long ns = t.tv_nsec + ms % 1000 * 1000000LL;
	t.tv_sec += ms / 1000 + ns / 1000000000;
	t.tv_nsec = ns % 1000000000;
	return t;
}

static struct clique *clique_of(ncclUniqueId id, int n) {
	for (struct clique *q = cliques; q != NULL; q = q->next)
		if (memcmp(&q->id, &id, sizeof id) == 0)
			return q;
	struct clique *q = calloc(1, sizeof *q);
	q->id = id;
	q->n = n;
	q->next = cliques;
	cliques = q;
	return q;
}

static void fail_needing(struct clique *q);

// leave takes c's rank out of its clique, failing the posted operations
// that need it, and frees c (and the clique with its last rank).
static void leave(struct comm *c) {
	struct clique *q = c->q;
	q->ranks[c->rank] = NULL;
	free(c);
	fail_needing(q);
	for (int r = 0; r < q->n; r++)
		if (q->ranks[r] != NULL)
			return;
	for (struct clique **p = &cliques; *p != NULL; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	free(q);
}

// ncclCommInitRank takes its id by value, as NCCL's does: a 128-byte
// struct, which the C ABI of amd64 passes on the stack.
ncclResult_t ncclCommInitRank(struct comm **out, int n, ncclUniqueId id, int rank) {
	if (!bind() || current() == NULL)
		return INVALID_USAGE;
	if (n < 1 || n > MAXRANKS || rank < 0 || rank >= n)
		return INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	struct clique *q = clique_of(id, n);
	if (q->n != n || q->ranks[rank] != NULL || q->joined == n) {
		pthread_mutex_unlock(&mu);
		return INVALID_USAGE;
	}
	struct comm *c = calloc(1, sizeof *c);
	*c = (struct comm){.q = q, .rank = rank, .ctx = current()};
	q->ranks[rank] = c;
	if (++q->joined == n)
		for (int a = 0; a < n; a++)
			for (int b = a + 1; b < n; b++)
				q->failed |= q->ranks[a]->ctx == q->ranks[b]->ctx; // NCCL: "Duplicate GPU detected"
	pthread_cond_broadcast(&joined);
	struct timespec until = deadline("FAKENCCL_INIT_TIMEOUT_MS", 10000);
	int r = 0;
	while (q->joined < n && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&joined, &mu, &until);
	ncclResult_t res = q->joined < n ? REMOTE_ERROR : q->failed ? INVALID_USAGE : SUCCESS;
	if (res != SUCCESS) {
		q->joined -= q->joined < n; // a late rank must not complete a clique this one left
		leave(c);
	} else
		*out = c;
	pthread_mutex_unlock(&mu);
	return res;
}

ncclResult_t ncclCommGetAsyncError(struct comm *c, ncclResult_t *r) {
	if (c == NULL)
		return INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	*r = c->async;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

static int collective(const struct op *o) { return o->kind != SEND && o->kind != RECV; }

// needs reports whether o cannot complete without rank.
static int needs(const struct op *o, int rank) {
	return rank != o->c->rank && (collective(o) || o->peer == rank);
}

static void unlink_posted(struct op *o) {
	for (struct op **p = &posted; *p != NULL; p = &(*p)->next_posted)
		if (*p == o) {
			*p = o->next_posted;
			break;
		}
	o->posted = 0;
}

static void post(struct unit *u);

// end_unit ends u, whose ops are done, and posts its stream's next unit.
static void end_unit(struct unit *u) {
	stream_end(u->stream);
	struct queue *q = u->q;
	q->head = u->next;
	if (q->head == NULL)
		q->tail = NULL;
	for (struct op *p = u->ops, *next; p != NULL; p = next) {
		next = p->next;
		free(p);
	}
	free(u);
	if (q->head != NULL)
		post(q->head);
}

// done ends o, unposted, with result res (an error is its comm's
// asynchronous error); the last op of a unit ends the unit.
static void done(struct op *o, ncclResult_t res) {
	o->done = 1;
	if (res != SUCCESS && o->c->async == SUCCESS)
		o->c->async = res;
	if (--o->u->left == 0)
		end_unit(o->u);
}

// fail_needing fails every posted op of q that needs a rank gone.
static void fail_needing(struct clique *q) {
	for (;;) {
		struct op *found = NULL;
		for (struct op *o = posted; o != NULL && found == NULL; o = o->next_posted)
			for (int r = 0; r < q->n && found == NULL; r++)
				if (o->c->q == q && q->ranks[r] == NULL && needs(o, r))
					found = o;
		if (found == NULL)
			return;
		unlink_posted(found);
		done(found, REMOTE_ERROR);
	}
}

static size_t size_of(int type) {
	static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8};
	return sizes[type];
}

// Elements: floating ones as double, integers as 64 bits (sign- or
// zero-extended).
static int floating(int type) { return type == 7 || type == 8; }
static double getf(int type, const char *p) { return type == 7 ? *(const float *)p : *(const double *)p; }
static void putf(int type, char *p, double v) {
	if (type == 7)
		*(float *)p = (float)v;
	else
		*(double *)p = v;
}
static uint64_t geti(int type, const char *p) {
	switch (type) {
	case 0: return (uint64_t)(int64_t)*(const int8_t *)p;
	case 1: return *(const uint8_t *)p;
	case 2: return (uint64_t)(int64_t)*(const int32_t *)p;
	case 3: return *(const uint32_t *)p;
	}
	return *(const uint64_t *)p;
}
static void puti(int type, char *p, uint64_t v) {
	memcpy(p, &v, size_of(type)); // little-endian: the low bytes
}

// reduce reduces element i of the n buffers srcs into out.
static void reduce(int type, int redop, int n, const char **srcs, size_t i, char *out) {
	size_t es = size_of(type);
	if (floating(type)) {
		double a = getf(type, srcs[0] + i * es);
		for (int r = 1; r < n; r++) {
			double b = getf(type, srcs[r] + i * es);
			a = redop == PROD ? a * b : redop == MAX ? (a > b ? a : b) : redop == MIN ? (a < b ? a : b) : a + b;
		}
		putf(type, out, redop == AVG ? a / n : a);
		return;
	}
	int sign = type == 0 || type == 2 || type == 4;
	uint64_t a = geti(type, srcs[0] + i * es);
	for (int r = 1; r < n; r++) {
		uint64_t b = geti(type, srcs[r] + i * es);
		int less = sign ? (int64_t)a < (int64_t)b : a < b;
		a = redop == PROD ? a * b : redop == MAX ? (less ? b : a) : redop == MIN ? (less ? a : b) : a + b;
	}
	if (redop == AVG)
		a = sign ? (uint64_t)((int64_t)a / n) : a / (uint64_t)n;
	puti(type, out, a);
}

// run moves the data of a collective whose n parts (by rank) agree;
// results go through a copy, so that buffers in place are read whole
// before they are written.
static void run(struct op **p, int n) {
	struct op *o = p[0];
	size_t es = size_of(o->type), bytes = o->count * es;
	const char *srcs[MAXRANKS];
	char *tmp = malloc(bytes * (size_t)n + 1);
	switch (o->kind) {
	case ALLREDUCE:
	case REDUCESCATTER: {
		int parts = o->kind == ALLREDUCE ? 1 : n;
		for (int d = 0; d < parts; d++) {
			for (int r = 0; r < n; r++)
				srcs[r] = p[r]->send + (size_t)d * bytes;
			for (size_t i = 0; i < o->count; i++)
				reduce(o->type, o->redop, n, srcs, i, tmp + (size_t)d * bytes + i * es);
		}
		for (int d = 0; d < n; d++)
			memcpy(p[d]->recv, tmp + (o->kind == ALLREDUCE ? 0 : (size_t)d * bytes), bytes);
		break;
	}
	case ALLGATHER:
		for (int r = 0; r < n; r++)
			memcpy(tmp + (size_t)r * bytes, p[r]->send, bytes);
		for (int d = 0; d < n; d++)
			memcpy(p[d]->recv, tmp, bytes * (size_t)n);
		break;
	case BROADCAST:
		memcpy(tmp, p[o->peer]->send, bytes);
		for (int d = 0; d < n; d++)
			memcpy(p[d]->recv, tmp, bytes);
		break;
	}
	free(tmp);
}

static int agree(const struct op *a, const struct op *b) {
	return a->kind == b->kind && a->count == b->count && a->type == b->type &&
	       ((a->kind != ALLREDUCE && a->kind != REDUCESCATTER) || a->redop == b->redop) &&
	       (a->kind != BROADCAST || a->peer == b->peer);
}

// match completes what posting o makes complete: its receive or send,
// or its collective once every rank has posted its part.
static void match(struct op *o) {
	struct clique *q = o->c->q;
	if (!collective(o)) {
		int want = o->kind == SEND ? RECV : SEND;
		for (struct op *m = posted; m != NULL; m = m->next_posted)
			if (m->kind == want && m->c->q == q && m->c->rank == o->peer && m->peer == o->c->rank && m->seq == o->seq) {
				struct op *s = o->kind == SEND ? o : m, *r = o->kind == SEND ? m : o;
				int ok = s->count == r->count && s->type == r->type;
				if (ok && s->count > 0)
					memcpy(r->recv, s->send, s->count * size_of(s->type));
				unlink_posted(o);
				unlink_posted(m);
				done(m, ok ? SUCCESS : INVALID_USAGE);
				done(o, ok ? SUCCESS : INVALID_USAGE);
				return;
			}
		return;
	}
	struct op *parts[MAXRANKS] = {0};
	int n = 0, ok = 1;
	for (struct op *m = posted; m != NULL; m = m->next_posted)
		if (collective(m) && m->c->q == q && m->seq == o->seq) {
			parts[m->c->rank] = m;
			n++;
			ok &= agree(m, o);
		}
	if (n < q->n)
		return;
	if (ok)
		run(parts, n);
	for (int r = 0; r < n; r++)
		unlink_posted(parts[r]);
	for (int r = 0; r < n; r++)
		done(parts[r], ok ? SUCCESS : INVALID_USAGE);
}

// post posts the ops of u, the first unit of its stream; the unit's
// extra count, taken last, keeps it alive while its ops are posted.
static void post(struct unit *u) {
	for (struct op *o = u->ops; o != NULL; o = o->next) {
		if (o->done)
			continue;
		int gone = 0;
		for (int r = 0; r < o->c->q->n; r++)
			gone |= o->c->q->ranks[r] == NULL && needs(o, r);
		if (gone) {
			done(o, REMOTE_ERROR);
			continue;
		}
		o->posted = 1;
		o->next_posted = posted;
		posted = o;
		match(o);
	}
	if (--u->left == 0)
		end_unit(u);
}

static struct queue *queue_of(void *stream) {
	for (struct queue *q = queues; q != NULL; q = q->next)
		if (q->stream == stream)
			return q;
	struct queue *q = calloc(1, sizeof *q);
	q->stream = stream;
	q->next = queues;
	queues = q;
	return q;
}

// submit makes a unit of ops (their streams' NCCL work: the ones on
// stream, taken out of *ops) and queues it on stream after its work.
static void submit(struct op **ops, void *stream) {
	struct unit *u = calloc(1, sizeof *u);
	u->stream = stream;
	u->q = queue_of(stream);
	u->left = 1;
	struct op **tail = &u->ops;
	for (struct op **p = ops; *p != NULL;) {
		struct op *o = *p;
		if (o->stream != stream) {
			p = &o->next;
			continue;
		}
		*p = o->next;
		o->next = NULL;
		o->u = u;
		*tail = o;
		tail = &o->next;
		u->left++;
	}
	stream_begin(stream);
	if (u->q->tail != NULL) {
		u->q->tail->next = u;
		u->q->tail = u;
		return;
	}
	u->q->head = u->q->tail = u;
	post(u);
}

// call checks one rank's part of an operation and enqueues it, or keeps
// it for the group's end.
static ncclResult_t call(struct op o) {
	struct comm *c = o.c;
	if (!bind() || c == NULL)
		return INVALID_ARGUMENT;
	if (current() != c->ctx)
		return INVALID_USAGE;
	int n = c->q->n, ranked = o.kind == SEND || o.kind == RECV || o.kind == BROADCAST;
	if (stream_context(o.stream) != c->ctx || o.type < 0 || o.type > 8 || o.type == 6 || o.redop < 0 || o.redop > AVG ||
	    (ranked && (o.peer < 0 || o.peer >= n)))
		return INVALID_ARGUMENT;
	size_t in = o.count * size_of(o.type), out = in;
	switch (o.kind) {
	case SEND: out = 0; break;
	case RECV: in = 0; break;
	case REDUCESCATTER: in *= (size_t)n; break;
	case ALLGATHER: out *= (size_t)n; break;
	case BROADCAST: in = c->rank == o.peer ? in : 0; break;
	}
	if ((in > 0 && !inside((uint64_t)(uintptr_t)o.send, in)) || (out > 0 && !inside((uint64_t)(uintptr_t)o.recv, out)))
		return INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	o.seq = collective(&o) ? c->colls++ : o.kind == SEND ? c->sent[o.peer]++ : c->received[o.peer]++;
	const char *hang = getenv("FAKENCCL_HANG_RANK");
	if (hang == NULL || atoi(hang) != c->rank) {
		struct op *p = malloc(sizeof *p);
		*p = o;
		if (group_depth > 0) {
			struct op **tail = &grouped;
			while (*tail != NULL)
				tail = &(*tail)->next;
			*tail = p;
		} else
			submit(&p, o.stream);
	}
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

ncclResult_t ncclSend(const void *send, size_t count, int type, int peer, struct comm *c, void *stream) {
	return call((struct op){.kind = SEND, .send = send, .count = count, .type = type, .peer = peer, .c = c, .stream = stream});
}
ncclResult_t ncclRecv(void *recv, size_t count, int type, int peer, struct comm *c, void *stream) {
	return call((struct op){.kind = RECV, .recv = recv, .count = count, .type = type, .peer = peer, .c = c, .stream = stream});
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int type, int redop, struct comm *c, void *stream) {
	return call((struct op){.kind = ALLREDUCE, .send = send, .recv = recv, .count = count, .type = type, .redop = redop, .c = c, .stream = stream});
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, int type, int redop, struct comm *c, void *stream) {
	return call((struct op){.kind = REDUCESCATTER, .send = send, .recv = recv, .count = count, .type = type, .redop = redop, .c = c, .stream = stream});
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, int type, struct comm *c, void *stream) {
	return call((struct op){.kind = ALLGATHER, .send = send, .recv = recv, .count = count, .type = type, .c = c, .stream = stream});
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int type, int root, struct comm *c, void *stream) {
	return call((struct op){.kind = BROADCAST, .send = send, .recv = recv, .count = count, .type = type, .peer = root, .c = c, .stream = stream});
}

ncclResult_t ncclGroupStart(void) {
	group_depth++;
	return SUCCESS;
}
ncclResult_t ncclGroupEnd(void) {
	if (group_depth == 0)
		return INVALID_USAGE;
	if (--group_depth > 0)
		return SUCCESS;
	pthread_mutex_lock(&mu);
	while (grouped != NULL)
		submit(&grouped, grouped->stream);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

// pending is an op of c not done, or NULL.
static struct op *pending(struct comm *c) {
	for (struct queue *q = queues; q != NULL; q = q->next)
		for (struct unit *u = q->head; u != NULL; u = u->next)
			for (struct op *o = u->ops; o != NULL; o = o->next)
				if (o->c == c && !o->done)
					return o;
	return NULL;
}

// ncclCommDestroy refuses a communicator with operations in flight (the
// real one would wait for them, for ever if a peer never comes): wait
// for them first, or abort it.
ncclResult_t ncclCommDestroy(struct comm *c) {
	if (c == NULL)
		return INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	int busy = pending(c) != NULL;
	if (!busy)
		leave(c);
	pthread_mutex_unlock(&mu);
	return busy ? INVALID_USAGE : SUCCESS;
}

// ncclCommAbort ends c's operations at once, and the other ranks' that
// need it fail (ncclRemoteError).
ncclResult_t ncclCommAbort(struct comm *c) {
	if (c == NULL)
		return INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	for (struct op *o; (o = pending(c)) != NULL;) {
		if (o->posted)
			unlink_posted(o);
		done(o, SUCCESS);
	}
	leave(c);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
