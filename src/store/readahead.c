/*
 * readahead.c - sequential read-ahead: while a handle reads a version in
 * order, the chunks after the one it reads are decoded on the store's
 * thread pool (ulp_pool, shared with the encoders and the codec), so that
 * decoding runs beside the reader (and the kernel copying its data)
 * instead of after it, and the chains of several chunks decode at once.  A chunk is decoded once whoever asks first (see
 * ulp_cache_take): a reader that catches up waits for the decode under
 * way, and a job whose chunk is cached or being decoded does nothing.
 *
 * The queue of chunks to decode is this module's: a few runner jobs on
 * the pool take chunks off it until it is empty, so read-ahead never holds
 * more than RA_THREADS_MAX of the pool's threads, and queued chunks can be
 * dropped.  Freeing a handle's state drops its queued chunks; stopping
 * (store close) drops every chunk and gives up the decodes under way
 * between two levels of their chains, so unmounting never waits for more
 * than one chunk decode per runner.
 */
#include "store/reader.h"

/* Runners at most: beyond a few, decoding ahead competes with the
 * readers and the encoders for the same cores. */
#define RA_THREADS_MAX 4
/* Chunks ahead of a reader at most, and queued at most (all handles). */
#define RA_WINDOW_MAX 4
#define RA_QUEUE_MAX 64

typedef struct ra_job {
	uint64_t vid;
	size_t chunk;
	const ulp_readahead *owner; /* identity only, never dereferenced */
	struct ra_job *next;
} ra_job;

struct ulp_ra_pool {
	ulp_store *st;
	pthread_mutex_t mu;
	ra_job *head, **tail;
	unsigned njobs;
	unsigned want, running; /* runners at most, submitted */
	ulp_pool_group *g;      /* the runners, on st->pool */
	_Atomic int stop;
};

struct ulp_readahead {
	ulp_store *st;
	pthread_mutex_t mu;
	uint64_t vid; /* version of the last read */
	int64_t last; /* its last chunk; -1: none yet */
	int64_t next; /* first chunk not queued yet */
};

int ulp_ra_pool_new(ulp_store *st, unsigned threads, ulp_ra_pool **out)
{
	ulp_ra_pool *p = calloc(1, sizeof *p);

	*out = NULL;
	if (!p)
		return -ENOMEM;
	if (!threads || threads > ulp_pool_threads(st->pool))
		threads = ulp_pool_threads(st->pool);
	if (threads > RA_THREADS_MAX)
		threads = RA_THREADS_MAX;
	if (pthread_mutex_init(&p->mu, NULL)) {
		free(p);
		return -ENOMEM;
	}
	if (!(p->g = ulp_pool_group_new(st->pool))) {
		pthread_mutex_destroy(&p->mu);
		free(p);
		return -ENOMEM;
	}
	p->st = st;
	p->want = threads;
	p->tail = &p->head;
	*out = p;
	return 0;
}

void ulp_ra_pool_stop(ulp_ra_pool *p)
{
	ra_job *drop;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, 1);
	drop = p->head;
	p->head = NULL;
	p->tail = &p->head;
	p->njobs = 0;
	pthread_mutex_unlock(&p->mu);
	while (drop) {
		ra_job *j = drop;
		drop = j->next;
		free(j);
	}
}

void ulp_ra_pool_free(ulp_ra_pool *p)
{
	if (!p)
		return;
	ulp_ra_pool_stop(p);
	ulp_pool_group_free(p->g); /* the runners see stop and return */
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* A runner job: decode queued chunks until there are none. */
static void runner(void *arg)
{
	ulp_ra_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	while (p->head && !atomic_load(&p->stop)) {
		ra_job *j = p->head;
		p->head = j->next;
		if (!p->head)
			p->tail = &p->head;
		p->njobs--;
		pthread_mutex_unlock(&p->mu);
		/* Errors are the reader's to report, when it gets there. */
		(void)ulp_reader_prefetch(p->st, j->vid, j->chunk, &p->stop);
		free(j);
		pthread_mutex_lock(&p->mu);
	}
	p->running--;
	pthread_mutex_unlock(&p->mu);
}

/* Queue one chunk (ra->mu held; the pool's is taken inside it). */
static void submit(ulp_ra_pool *p, const ulp_readahead *owner, uint64_t vid,
                   size_t chunk)
{
	ra_job *j = malloc(sizeof *j);

	if (!j)
		return;
	j->vid = vid;
	j->chunk = chunk;
	j->owner = owner;
	j->next = NULL;
	pthread_mutex_lock(&p->mu);
	if (atomic_load(&p->stop) || p->njobs >= RA_QUEUE_MAX) {
		pthread_mutex_unlock(&p->mu);
		free(j);
		return;
	}
	*p->tail = j;
	p->tail = &j->next;
	p->njobs++;
	/* A chunk no runner will take (none could be queued) waits for the
	 * next submission, or is dropped with its handle. */
	if (p->running < p->want && p->running < p->njobs &&
	    ulp_pool_submit(p->g, runner, p) == ULP_OK)
		p->running++;
	pthread_mutex_unlock(&p->mu);
	atomic_fetch_add(&p->st->stat_readahead, 1);
}

/* How many chunks to keep decoded ahead of a reader of a version at
 * chain depth depth.  Decoding one chunk ahead caches depth + 1 chunks
 * (every level of its chain, newest last); the chunks decoded ahead must
 * survive, in the LRU, the chains decoded after them until the reader
 * gets to them, with room left for a second reader. */
static size_t window(const ulp_ra_pool *p, unsigned depth, uint32_t clen)
{
	uint64_t cap = p->st->opts.cache_bytes;
	uint64_t per = 2ull * (depth + 1) * (clen ? clen : 1);
	size_t w = p->want < 2 ? 2 : p->want;

	if (w > RA_WINDOW_MAX)
		w = RA_WINDOW_MAX;
	if (cap / per < w)
		w = (size_t)(cap / per);
	return w;
}

void ulp_ra_note(ulp_readahead *ra, uint64_t vid, const ulp_object *obj,
                 unsigned depth, size_t first, size_t last)
{
	ulp_ra_pool *p;
	size_t n = ulp_object_chunk_count(obj);
	uint64_t coff;
	uint32_t clen;

	if (!ra || !(p = ra->st->ra) || last + 1 >= n)
		return;
	ulp_object_chunk_range(obj, last, &coff, &clen);
	size_t w = window(p, depth, clen);
	pthread_mutex_lock(&ra->mu);
	if (ra->vid != vid) {
		ra->vid = vid;
		ra->last = -1;
		ra->next = 0;
	}
	/* Sequential: starting at the chunk after the last one read, or
	 * within it.  One chunk back counts too: the kernel sends a file's
	 * read-ahead requests together, and they may arrive out of order. */
	int64_t f = (int64_t)first, l = (int64_t)last;
	if (f <= ra->last + 1 && f + 1 >= ra->last) {
		if (l > ra->last)
			ra->last = l;
		int64_t from = ra->next > l + 1 ? ra->next : l + 1;
		int64_t to = l + (int64_t)w < (int64_t)n - 1 ? l + (int64_t)w
		                                             : (int64_t)n - 1;
		for (int64_t j = from; j <= to; j++)
			submit(p, ra, vid, (size_t)j);
		if (to >= from)
			ra->next = to + 1;
	} else {
		ra->last = l;
		ra->next = l + 1;
	}
	pthread_mutex_unlock(&ra->mu);
}

ulp_readahead *ulp_readahead_new(ulp_store *st)
{
	ulp_readahead *ra = calloc(1, sizeof *ra);

	if (!ra)
		return NULL;
	if (pthread_mutex_init(&ra->mu, NULL)) {
		free(ra);
		return NULL;
	}
	ra->st = st;
	ra->last = -1;
	return ra;
}

void ulp_readahead_free(ulp_readahead *ra)
{
	ulp_ra_pool *p;

	if (!ra)
		return;
	p = ra->st->ra;
	if (p) {
		pthread_mutex_lock(&p->mu);
		for (ra_job **pp = &p->head; *pp;) {
			ra_job *j = *pp;
			if (j->owner == ra) {
				*pp = j->next;
				p->njobs--;
				free(j);
			} else {
				pp = &j->next;
			}
		}
		p->tail = &p->head;
		while (*p->tail)
			p->tail = &(*p->tail)->next;
		pthread_mutex_unlock(&p->mu);
	}
	pthread_mutex_destroy(&ra->mu);
	free(ra);
}
