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

#include "cli.h"
#include "ctl.h"

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

typedef struct z19_pool {
	ulp_store *st;
	const ulp_version_info *v;
	size_t *todo; /* indexes into v: what is not cached, largest first */
	size_t ntodo;
	uint64_t *bytes; /* by index into v */
	int *err;        /* by index into v: 0 or -errno */
	_Atomic size_t next;
	_Atomic uint64_t done; /* logical bytes compressed so far */
	_Atomic int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned running; /* workers not finished (mu) */
} z19_pool;

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
	 * the single-threaded ones (see above). */
	(void)ZSTD_CCtx_setParameter(z, ZSTD_c_nbWorkers, 1);
	return z;
}

/* Compress one version, counting the output: 0 or -errno. */
static int z19_one(z19_pool *p, ZSTD_CCtx *z, uint8_t *in, uint8_t *out,
                   size_t outcap, const ulp_version_info *v, uint64_t *bytes)
{
	uint64_t total = 0, off = 0;
	size_t r = ZSTD_CCtx_reset(z, ZSTD_reset_session_only);

	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setPledgedSrcSize(z, v->size);
	if (ZSTD_isError(r))
		return zerr(r);
	for (;;) {
		size_t n = v->size - off < PIECE ? (size_t)(v->size - off)
		                                 : PIECE;
		if (atomic_load(&p->stop))
			return -ECANCELED;
		if (n) {
			ssize_t got =
				ulp_version_read(p->st, v->id, in, n, off);
			if (got != (ssize_t)n)
				return got < 0 ? (int)got : -EIO;
		}
		ZSTD_EndDirective end = off + n == v->size ? ZSTD_e_end
		                                           : ZSTD_e_continue;
		ZSTD_inBuffer ib = { in, n, 0 };
		for (;;) {
			ZSTD_outBuffer ob = { out, outcap, 0 };
			r = ZSTD_compressStream2(z, &ob, &ib, end);
			if (ZSTD_isError(r))
				return zerr(r);
			total += ob.pos;
			if (end == ZSTD_e_end ? r == 0 : ib.pos == ib.size)
				break;
		}
		off += n;
		atomic_fetch_add(&p->done, (uint64_t)n);
		if (end == ZSTD_e_end)
			break;
	}
	*bytes = total;
	return 0;
}

static void *z19_worker(void *arg)
{
	z19_pool *p = arg;
	size_t outcap = ZSTD_CStreamOutSize();
	uint8_t *in = malloc(PIECE), *out = malloc(outcap);
	ZSTD_CCtx *z = in && out ? z19_cctx() : NULL;

	for (size_t k; (k = atomic_fetch_add(&p->next, 1)) < p->ntodo;) {
		size_t i = p->todo[k];
		if (!z) {
			p->err[i] = -ENOMEM;
			continue;
		}
		p->err[i] =
			z19_one(p, z, in, out, outcap, &p->v[i], &p->bytes[i]);
		/* -ENOENT: deleted meanwhile (the caller finds out). */
		if (p->err[i] == 0)
			(void)ulp_version_baseline_put(p->st, p->v[i].id,
			                               Z19_NAME, p->bytes[i]);
	}
	ZSTD_freeCCtx(z);
	free(in);
	free(out);
	pthread_mutex_lock(&p->mu);
	p->running--;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
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

/* Run the pool until every version of p->todo is done, reporting progress
 * once it takes a while and stopping when the requester goes away. */
static int z19_pool_run(cli_env *env, z19_pool *p, unsigned nthreads,
                        uint64_t total)
{
	pthread_t *t = calloc(nthreads, sizeof(*t));
	unsigned started = 0;
	int shown = 0, rc = 0;
	double t0 = cli_now();

	if (!t)
		return -ENOMEM;
	pthread_mutex_lock(&p->mu);
	for (; started < nthreads; started++) {
		p->running++;
		if ((rc = pthread_create(&t[started], NULL, z19_worker, p))) {
			p->running--;
			break;
		}
	}
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
		/* The sink is not for the workers: only this thread uses it. */
		if (env->sink->cancelled &&
		    env->sink->cancelled(env->sink->opaque))
			atomic_store(&p->stop, 1);
		if (cli_now() - t0 >= 2.0) {
			env->sink->progress(env->sink->opaque, "zstd -19",
			                    atomic_load(&p->done), total);
			shown = 1;
		}
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	if (shown)
		env->sink->progress(env->sink->opaque, "zstd -19", total,
		                    total);
	if (!started)
		return -rc;
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
	/* Largest first: the pool's threads finish close together. */
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
