/*
 * pool.c - the process's thread pool (contract in include/ulpfs/ulp.h).
 *
 * Two FIFOs of tasks under one mutex, the normal lane and the low one; a
 * worker takes a low task only when no normal task is queued, so a stream
 * of background work (the CLI's zstd -19 baselines) never holds back a
 * commit longer than the low task already running.  Each task belongs to a
 * group, whose pending count (queued plus running) its waiters watch.  A
 * waiter takes
 * queued tasks of its own group off the FIFO and runs them itself: a job
 * waiting for sub-jobs (an encode for its chunks) therefore never depends
 * on a free worker thread, which is what makes nested waits safe with a
 * pool of one.
 *
 * The pool also keeps the encoder contexts its jobs gave back (pipeline.c),
 * so that their scratch tables stay allocated from one file to the next.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "codec_internal.h"

typedef struct pool_task {
	struct pool_task *next, *prev;
	ulp_pool_group *g;
	ulp_pool_fn fn;
	void *arg;
} pool_task;

struct ulp_pool_group {
	ulp_pool *pool;
	size_t pending;    /* submitted, not yet returned (pool->mu) */
	pthread_cond_t cv; /* pending dropped */
};

/* Contexts kept at most per worker thread, beyond which given-back ones
 * are freed: callers that help add a few. */
#define POOL_CCTX_PER_THREAD 2

struct ulp_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a task queued, or stop */
	pool_task head;    /* normal FIFO: head.next is the oldest */
	pool_task low;     /* low FIFO: run only while head is empty */
	int stop;
	unsigned nthreads;
	pthread_t *th;
	ulp_cctx **cctx; /* given back, to reuse */
	size_t ncctx, capcctx;
};

static void task_unlink(pool_task *t)
{
	t->prev->next = t->next;
	t->next->prev = t->prev;
}

/* Run t (taken off the FIFO, p->mu held; dropped while it runs). */
static void run_task(ulp_pool *p, pool_task *t)
{
	ulp_pool_group *g = t->g;

	pthread_mutex_unlock(&p->mu);
	t->fn(t->arg);
	free(t);
	pthread_mutex_lock(&p->mu);
	if (--g->pending == 0)
		pthread_cond_broadcast(&g->cv);
}

static void *pool_main(void *arg)
{
	ulp_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		pool_task *t = p->head.next != &p->head ? p->head.next
		                                        : p->low.next;
		if (t != &p->low) {
			task_unlink(t);
			run_task(p, t);
		} else if (p->stop) {
			break;
		} else {
			pthread_cond_wait(&p->cv, &p->mu);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

ulp_pool *ulp_pool_new(unsigned threads)
{
	if (!threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n < 1 ? 1 : (unsigned)n;
	}
	if (threads > 256)
		threads = 256;
	ulp_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->th = calloc(threads, sizeof *p->th);
	if (!p->th) {
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->head.next = p->head.prev = &p->head;
	p->low.next = p->low.prev = &p->low;
	/* Signals are for the threads that wait for them (a mount's main
	 * thread), never for these: they start with all blocked. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (; p->nthreads < threads; p->nthreads++)
		if (pthread_create(&p->th[p->nthreads], NULL, pool_main, p))
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->nthreads == 0) {
		ulp_pool_free(p);
		return NULL;
	}
	return p;
}

unsigned ulp_pool_threads(const ulp_pool *p)
{
	return p->nthreads;
}

void ulp_pool_free(ulp_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->th[i], NULL);
	for (size_t i = 0; i < p->ncctx; i++)
		ulp_cctx_free(p->cctx[i]);
	free(p->cctx);
	free(p->th);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

ulp_pool_group *ulp_pool_group_new(ulp_pool *p)
{
	ulp_pool_group *g = calloc(1, sizeof *g);

	if (!g)
		return NULL;
	g->pool = p;
	pthread_cond_init(&g->cv, NULL);
	return g;
}

void ulp_pool_group_free(ulp_pool_group *g)
{
	if (!g)
		return;
	ulp_pool_group_wait(g);
	pthread_cond_destroy(&g->cv);
	free(g);
}

/* Queue fn(arg) in g at the tail of the low lane or the normal one. */
static int submit_to(ulp_pool_group *g, int low, ulp_pool_fn fn, void *arg)
{
	ulp_pool *p = g->pool;
	pool_task *t = malloc(sizeof *t);

	if (!t)
		return ULP_ERR_NOMEM;
	t->g = g;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_lock(&p->mu);
	pool_task *h = low ? &p->low : &p->head;
	t->prev = h->prev;
	t->next = h;
	h->prev->next = t;
	h->prev = t;
	g->pending++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return ULP_OK;
}

int ulp_pool_submit(ulp_pool_group *g, ulp_pool_fn fn, void *arg)
{
	return submit_to(g, 0, fn, arg);
}

int ulp_pool_submit_low(ulp_pool_group *g, ulp_pool_fn fn, void *arg)
{
	return submit_to(g, 1, fn, arg);
}

/* The oldest queued task of g in the lane whose head is h, unlinked, or
 * NULL (p->mu held). */
static pool_task *take_in(pool_task *h, ulp_pool_group *g)
{
	for (pool_task *t = h->next; t != h; t = t->next)
		if (t->g == g) {
			task_unlink(t);
			return t;
		}
	return NULL;
}

/* The oldest queued task of g, normal lane first, or NULL (p->mu held). */
static pool_task *take_of(ulp_pool *p, ulp_pool_group *g)
{
	pool_task *t = take_in(&p->head, g);

	return t ? t : take_in(&p->low, g);
}

int ulp_pool_group_help(ulp_pool_group *g)
{
	ulp_pool *p = g->pool;

	pthread_mutex_lock(&p->mu);
	pool_task *t = take_of(p, g);
	if (t)
		run_task(p, t);
	pthread_mutex_unlock(&p->mu);
	return t != NULL;
}

void ulp_pool_group_wait(ulp_pool_group *g)
{
	ulp_pool *p = g->pool;

	pthread_mutex_lock(&p->mu);
	while (g->pending) {
		pool_task *t = take_of(p, g);
		if (t)
			run_task(p, t);
		else
			pthread_cond_wait(&g->cv, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
}

size_t ulp_pool_group_pending(ulp_pool_group *g)
{
	pthread_mutex_lock(&g->pool->mu);
	size_t n = g->pending;
	pthread_mutex_unlock(&g->pool->mu);
	return n;
}

ulp_cctx *ulp_pool_cctx_take(ulp_pool *p)
{
	ulp_cctx *c = NULL;

	pthread_mutex_lock(&p->mu);
	if (p->ncctx)
		c = p->cctx[--p->ncctx];
	pthread_mutex_unlock(&p->mu);
	return c ? c : ulp_cctx_new();
}

void ulp_pool_cctx_give(ulp_pool *p, ulp_cctx *c)
{
	size_t keep = (size_t)p->nthreads * POOL_CCTX_PER_THREAD;

	if (!c)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->ncctx < keep && p->ncctx == p->capcctx) {
		size_t cap = p->capcctx ? 2 * p->capcctx : 8;
		ulp_cctx **v = realloc(p->cctx, cap * sizeof *v);
		if (v) {
			p->cctx = v;
			p->capcctx = cap;
		}
	}
	if (p->ncctx < keep && p->ncctx < p->capcctx) {
		p->cctx[p->ncctx++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	ulp_cctx_free(c);
}
