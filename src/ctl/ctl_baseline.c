/*
 * ctl_baseline.c - the zstd -19 figures of `ulpfs stats --zstd19`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "ctl_ops.h"

#define PIECE (4u << 20)

/* ------------------------------------------------------------ zstd -19
 *
 * What `zstd -19 FILE` would write for each version: one frame, level 19,
 * content size and checksum in the header (the size pledged, as the CLI
 * does for a regular file).  The CLI compresses with worker threads
 * (libzstd's multithreaded mode, -T1 by default), whose frames differ
 * from single-threaded ones on inputs over one job (tens of MiB) but do
 * not depend on the number of workers: so one worker per context gives
 * the CLI's bytes exactly.  Each version is decoded through the store's
 * reader a piece at a time (files can be many GiB) and the compressed
 * bytes are counted, not kept.  Figures are kept in the catalog
 * (ulp_version_baseline_put) as each version finishes, so an interrupted
 * run loses only the versions under way. */

#define Z19_NAME "zstd-19"

/* The compression runs on the store's pool (ulp_store_pool), in its low
 * lane: in the daemon that is the mount's one pool of encoders= threads,
 * and a commit must never wait for a baseline.  A running pool job is
 * never preempted, so the work is cut into short steps (z19_advance): a
 * stream (one compression context) advances its version a little per job
 * and queues its next step, and the pool runs a commit's jobs before
 * that step.  Streams bound the contexts (about 170 MiB each). */

typedef struct z19_pool z19_pool;

typedef struct z19_stream {
	z19_pool *p;
	ZSTD_CCtx *z;
	uint8_t *in, *out;
	size_t outcap;
	size_t i;            /* index into v under way, or NONE */
	uint64_t off, total; /* of version i: read, compressed */
	size_t n, pos;       /* the piece in `in`: its length, taken */
	int last;            /* that piece is version i's last */
} z19_stream;

#define NONE ((size_t)-1)

struct z19_pool {
	ulp_store *st;
	const ulp_version_info *v;
	size_t *todo; /* indexes into v: what is not cached, largest first */
	size_t ntodo;
	uint64_t *bytes; /* by index into v */
	int *err;        /* by index into v: 0 or -errno */
	_Atomic size_t next;
	_Atomic uint64_t done; /* logical bytes compressed so far */
	_Atomic int stop;
	_Atomic int fail; /* 0, or -errno when a step could not be queued */
	ulp_pool_group *g;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned running; /* streams not finished (mu) */
};

static int zerr(size_t r)
{
	return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM
	                                                            : -EIO;
}

static ZSTD_CCtx *z19_cctx(void)
{
	ZSTD_CCtx *z = ZSTD_createCCtx();

	if (!z)
		return NULL;
	if (ZSTD_isError(
		    ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 19)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(
		    ZSTD_CCtx_setParameter(z, ZSTD_c_contentSizeFlag, 1))) {
		ZSTD_freeCCtx(z);
		return NULL;
	}
	/* Fails on a libzstd built without threads: its frames then are
	 * the single-threaded ones (see above).  This is the one thread
	 * outside the pool: libzstd's multithreaded mode compresses on a
	 * worker of its own, and only that mode gives the CLI's bytes. */
	(void)ZSTD_CCtx_setParameter(z, ZSTD_c_nbWorkers, 1);
	return z;
}

/* Start version v on s's context: 0 or -errno. */
static int z19_begin(z19_stream *s, const ulp_version_info *v)
{
	size_t r = ZSTD_CCtx_reset(s->z, ZSTD_reset_session_only);

	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setPledgedSrcSize(s->z, v->size);
	s->off = s->total = 0;
	s->n = s->pos = 0;
	s->last = 0;
	return ZSTD_isError(r) ? zerr(r) : 0;
}

/* Advance the compression of v, counting the output: 1 when v is done,
 * 0 when more is left, or -errno.  libzstd's multithreaded mode blocks a
 * call that cannot take input until its worker has compressed the next
 * part of a job (a job is tens of MiB, a part well under one), so this
 * returns after the first call that took no input: a step holds its pool
 * thread for one such wait at most, never for a whole job. */
static int z19_advance(z19_stream *s, const ulp_version_info *v)
{
	z19_pool *p = s->p;

	if (s->pos == s->n && !s->last) {
		size_t n = v->size - s->off < PIECE ? (size_t)(v->size - s->off)
		                                    : PIECE;
		if (n) {
			ssize_t got = ulp_version_read(p->st, v->id, s->in, n,
			                               s->off);
			if (got != (ssize_t)n)
				return got < 0 ? (int)got : -EIO;
		}
		s->n = n;
		s->pos = 0;
		s->off += n;
		s->last = s->off == v->size;
		atomic_fetch_add(&p->done, (uint64_t)n);
	}
	ZSTD_EndDirective end = s->last ? ZSTD_e_end : ZSTD_e_continue;
	for (;;) {
		ZSTD_inBuffer ib = { s->in, s->n, s->pos };
		ZSTD_outBuffer ob = { s->out, s->outcap, 0 };
		size_t r = ZSTD_compressStream2(s->z, &ob, &ib, end);
		if (ZSTD_isError(r))
			return zerr(r);
		s->total += ob.pos;
		int took = ib.pos > s->pos;
		s->pos = ib.pos;
		if (end == ZSTD_e_end ? r == 0 : ib.pos == ib.size)
			return end == ZSTD_e_end;
		if (!took)
			return 0;
	}
}

static void z19_stream_end(z19_stream *s)
{
	z19_pool *p = s->p;

	ZSTD_freeCCtx(s->z);
	free(s->in);
	free(s->out);
	free(s);
	pthread_mutex_lock(&p->mu);
	p->running--;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* One step of a stream (a low-lane pool job): claim a version if none is
 * under way, compress one piece of it, queue the next step. */
static void z19_step(void *arg)
{
	z19_stream *s = arg;
	z19_pool *p = s->p;

	if (atomic_load(&p->stop)) {
		if (s->i != NONE)
			p->err[s->i] = -ECANCELED;
		z19_stream_end(s);
		return;
	}
	if (s->i == NONE) {
		size_t k = atomic_fetch_add(&p->next, 1);
		if (k >= p->ntodo) {
			z19_stream_end(s);
			return;
		}
		s->i = p->todo[k];
		int rc = s->z ? z19_begin(s, &p->v[s->i]) : -ENOMEM;
		if (rc < 0) {
			p->err[s->i] = rc;
			s->i = NONE;
		}
	}
	if (s->i != NONE) {
		size_t i = s->i;
		int rc = z19_advance(s, &p->v[i]);
		if (rc != 0)
			s->i = NONE;
		if (rc < 0) {
			p->err[i] = rc; /* -ENOENT: deleted meanwhile */
		} else if (rc == 1) {
			p->bytes[i] = s->total;
			(void)ulp_version_baseline_put(p->st, p->v[i].id,
			                               Z19_NAME, p->bytes[i]);
		}
	}
	int q = ulp_pool_submit_low(p->g, z19_step, s);
	if (q < 0) {
		/* The versions not claimed yet would go uncounted. */
		atomic_store(&p->fail, -ENOMEM);
		atomic_store(&p->stop, 1);
		if (s->i != NONE)
			p->err[s->i] = -ENOMEM;
		z19_stream_end(s);
	}
}

/* Queue nstreams streams of p on the store's pool: how many started. */
static unsigned z19_start(z19_pool *p, unsigned nstreams)
{
	unsigned started = 0;
	size_t outcap = ZSTD_CStreamOutSize();

	for (; started < nstreams; started++) {
		z19_stream *s = calloc(1, sizeof(*s));
		if (!s)
			break;
		*s = (z19_stream){ .p = p, .i = NONE, .outcap = outcap };
		s->in = malloc(PIECE);
		s->out = malloc(outcap);
		/* Without a context the stream fails its versions -ENOMEM,
		 * as a named error rather than a missing figure. */
		s->z = s->in && s->out ? z19_cctx() : NULL;
		pthread_mutex_lock(&p->mu);
		p->running++;
		pthread_mutex_unlock(&p->mu);
		if (ulp_pool_submit_low(p->g, z19_step, s) < 0) {
			z19_stream_end(s);
			break;
		}
	}
	return started;
}

static int by_size_desc(const void *a, const void *b, void *arg)
{
	const ulp_version_info *v = arg;
	const ulp_version_info *x = &v[*(const size_t *)a],
			       *y = &v[*(const size_t *)b];
	if (x->size != y->size)
		return x->size < y->size ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Run the streams until every version of p->todo is done, reporting
 * progress once it takes a while and stopping when the requester goes
 * away. */
static int z19_pool_run(cli_env *env, z19_pool *p, unsigned nstreams,
                        uint64_t total)
{
	int shown = 0;
	double t0 = mono_s();

	if (!(p->g = ulp_pool_group_new(ulp_store_pool(p->st))))
		return -ENOMEM;
	unsigned started = z19_start(p, nstreams);
	pthread_mutex_lock(&p->mu);
	while (p->running) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
		pthread_mutex_unlock(&p->mu);
		/* The sink is not for the jobs: only this thread uses it. */
		if (env->sink->cancelled &&
		    env->sink->cancelled(env->sink->opaque))
			atomic_store(&p->stop, 1);
		if (mono_s() - t0 >= 2.0) {
			env->sink->progress(env->sink->opaque, "zstd -19",
			                    atomic_load(&p->done), total);
			shown = 1;
		}
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	/* The last steps have ended their streams; wait for them to return. */
	ulp_pool_group_free(p->g);
	p->g = NULL;
	if (shown)
		env->sink->progress(env->sink->opaque, "zstd -19", total,
		                    total);
	if (!started)
		return -ENOMEM;
	if (atomic_load(&p->fail))
		return atomic_load(&p->fail);
	return atomic_load(&p->stop) ? -ECANCELED : 0;
}

/* zstd -19 sizes of the versions in vec (cached ones from the catalog):
 * z[i] the size, gone[i] set for a version deleted meanwhile (not to be
 * counted); *cached counts the figures found in the catalog.  0, or -errno
 * after naming each version that failed. */
int cli_z19_sizes(cli_env *env, const cli_vvec *vec, unsigned nthreads,
                  uint64_t *z, char *gone, uint64_t *cached)
{
	z19_pool p = { .st = env->st, .v = vec->v };
	uint64_t total = 0;
	int rc = 0;

	*cached = 0;
	p.todo = malloc((vec->n ? vec->n : 1) * sizeof(*p.todo));
	p.err = calloc(vec->n ? vec->n : 1, sizeof(*p.err));
	p.bytes = z;
	if (!p.todo || !p.err) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < vec->n; i++) {
		if (ulp_version_baseline_get(env->st, vec->v[i].id, Z19_NAME,
		                             &z[i]) == 0) {
			(*cached)++;
			continue;
		}
		p.todo[p.ntodo++] = i;
		total += vec->v[i].size;
	}
	/* Largest first: the streams finish close together. */
	qsort_r(p.todo, p.ntodo, sizeof(*p.todo), by_size_desc, vec->v);
	if (nthreads > p.ntodo)
		nthreads = (unsigned)p.ntodo;
	if (nthreads) {
		pthread_mutex_init(&p.mu, NULL);
		pthread_cond_init(&p.cv, NULL);
		rc = z19_pool_run(env, &p, nthreads, total);
		pthread_cond_destroy(&p.cv);
		pthread_mutex_destroy(&p.mu);
	}
	for (size_t k = 0; rc == 0 && k < p.ntodo; k++) {
		size_t i = p.todo[k];
		ulp_version_info now;
		if (!p.err[i])
			continue;
		/* gc may delete a ghost (or prune a version) while it is
		 * read: then it is simply no longer part of the store. */
		int g = ulp_version_get(env->st, vec->v[i].id, &now);
		if (g == -ENOENT ||
		    (g == 0 && now.state == ULP_VERSION_DELETED)) {
			gone[i] = 1;
			continue;
		}
		cli_errf(env, "%s@%" PRIu64 ": zstd -19: %s", vec->path[i],
		         vec->v[i].seq, strerror(-p.err[i]));
		rc = -EIO;
	}
out:
	free(p.todo);
	free(p.err);
	return rc;
}
