/*
 * cache.c - a size-bounded LRU cache of decoded chunks, shared by every
 * reader (and by the encoders, which read references through it).
 *
 * A chunk is keyed by (version, logical offset, length): the decoded bytes
 * of a version never change, whichever object (before or after a rebase)
 * they are decoded from.  Buffers are reference-counted, so eviction never
 * frees one a reader is copying from.
 *
 * Chunks being decoded are in a second table (flights), so that a thread
 * that needs one waits for the decode under way instead of decoding it
 * again: a sequential reader that catches up with read-ahead, or several
 * readers of one file.  Buffers being filled count against the budget.
 */
#include "store/cache.h"

struct ulp_cbuf {
	uint64_t vid, off;
	uint32_t len;
	uint32_t cap; /* bytes allocated for data */
	unsigned refs;
	int linked;
	struct ulp_cbuf *hnext, *lprev, *lnext;
	uint8_t data[] __attribute__((aligned(16)));
};

/* A decode under way: its owner fills a buffer, then publishes it (or an
 * error) to every waiter.  Freed by the last of the owner and waiters. */
struct ulp_cflight {
	uint64_t vid, off;
	uint32_t len;
	ulp_ctask *owner; /* valid until done */
	unsigned waiters;
	int done, err;
	ulp_cbuf *buf; /* result: one reference per waiter */
	struct ulp_cflight *next;
};

#define FLIGHT_BUCKETS 64
/* Freed chunk buffers kept for the next chunks' decodes: a fresh buffer
 * of a chunk's size is fresh pages, which the decode then faults in and
 * the kernel zeroes (about a seventh of the mount daemon's CPU on a cold
 * read, perf).  A few: decodes under way at once, read-ahead included;
 * and together at most a quarter of the budget, whatever the chunk size
 * (chunks of up to 64 MiB). */
#define SPARES 4
/* Smaller buffers come from malloc's own free lists. */
#define SPARE_MIN (256u << 10)

struct ulp_cache {
	pthread_mutex_t mu;
	ulp_cbuf **tab;
	size_t nb; /* buckets, a power of two */
	uint64_t bytes, cap;
	uint64_t pending; /* bytes of buffers being filled */
	ulp_cbuf lru;     /* sentinel: lnext is the most recent */
	uint64_t hits, misses, decodes, waits;
	ulp_cflight *flights[FLIGHT_BUCKETS];
	pthread_cond_t flight_cv; /* a decode finished */
	ulp_cbuf *spare[SPARES];  /* unlinked, unreferenced */
	unsigned nspare;
	uint64_t spare_bytes; /* at most a quarter of cap */
};

static size_t bucket(const ulp_cache *c, uint64_t vid, uint64_t off)
{
	uint64_t h = (vid * 0x9e3779b97f4a7c15ull) ^
	             (off * 0xc2b2ae3d27d4eb4full);

	h ^= h >> 29;
	return (size_t)h & (c->nb - 1);
}

ulp_cache *ulp_cache_new(uint64_t cap_bytes)
{
	ulp_cache *c = calloc(1, sizeof *c);
	size_t nb = 1024;

	if (!c)
		return NULL;
	while (nb < (1u << 16) && (uint64_t)nb * (256u << 10) < cap_bytes)
		nb *= 2;
	c->tab = calloc(nb, sizeof *c->tab);
	if (!c->tab || pthread_mutex_init(&c->mu, NULL)) {
		free(c->tab);
		free(c);
		return NULL;
	}
	if (pthread_cond_init(&c->flight_cv, NULL)) {
		pthread_mutex_destroy(&c->mu);
		free(c->tab);
		free(c);
		return NULL;
	}
	c->nb = nb;
	c->cap = cap_bytes;
	c->lru.lnext = c->lru.lprev = &c->lru;
	return c;
}

/* Free b (unlinked, unreferenced), or keep it as a spare; mu held. */
static void buf_free(ulp_cache *c, ulp_cbuf *b)
{
	if (b->cap >= SPARE_MIN && c->nspare < SPARES &&
	    c->spare_bytes + b->cap <= c->cap / 4) {
		c->spare[c->nspare++] = b;
		c->spare_bytes += b->cap;
	} else {
		free(b);
	}
}

/* A spare of at least len bytes and not much more, or NULL; mu held. */
static ulp_cbuf *spare_take(ulp_cache *c, uint32_t len)
{
	for (unsigned k = 0; k < c->nspare; k++) {
		ulp_cbuf *b = c->spare[k];
		if (b->cap >= len && b->cap - len <= len / 4) {
			c->spare[k] = c->spare[--c->nspare];
			c->spare_bytes -= b->cap;
			return b;
		}
	}
	return NULL;
}

static void unlink_buf(ulp_cache *c, ulp_cbuf *b)
{
	ulp_cbuf **pp = &c->tab[bucket(c, b->vid, b->off)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == b) {
			*pp = b->hnext;
			break;
		}
	}
	b->lprev->lnext = b->lnext;
	b->lnext->lprev = b->lprev;
	b->linked = 0;
	c->bytes -= b->len;
}

void ulp_cache_free(ulp_cache *c)
{
	if (!c)
		return;
	while (c->lru.lnext != &c->lru) {
		ulp_cbuf *b = c->lru.lnext;
		unlink_buf(c, b);
		free(b); /* readers are gone at close */
	}
	while (c->nspare)
		free(c->spare[--c->nspare]);
	pthread_cond_destroy(&c->flight_cv);
	pthread_mutex_destroy(&c->mu);
	free(c->tab);
	free(c);
}

static void to_front(ulp_cache *c, ulp_cbuf *b)
{
	b->lprev->lnext = b->lnext;
	b->lnext->lprev = b->lprev;
	b->lnext = c->lru.lnext;
	b->lprev = &c->lru;
	c->lru.lnext->lprev = b;
	c->lru.lnext = b;
}

static ulp_cbuf *find(ulp_cache *c, uint64_t vid, uint64_t off, uint32_t len)
{
	for (ulp_cbuf *b = c->tab[bucket(c, vid, off)]; b; b = b->hnext)
		if (b->vid == vid && b->off == off && b->len == len)
			return b;
	return NULL;
}

static ulp_cflight **flight_slot(ulp_cache *c, uint64_t vid, uint64_t off)
{
	return &c->flights[bucket(c, vid, off) % FLIGHT_BUCKETS];
}

static ulp_cflight *flight_find(ulp_cache *c, uint64_t vid, uint64_t off,
                                uint32_t len)
{
	for (ulp_cflight *f = *flight_slot(c, vid, off); f; f = f->next)
		if (f->vid == vid && f->off == off && f->len == len)
			return f;
	return NULL;
}

int ulp_cache_busy(ulp_cache *c, uint64_t vid, uint64_t off, uint32_t len)
{
	pthread_mutex_lock(&c->mu);
	int busy = find(c, vid, off, len) || flight_find(c, vid, off, len);
	pthread_mutex_unlock(&c->mu);
	return busy;
}

static void evict(ulp_cache *c);

ulp_cbuf *ulp_cache_alloc(ulp_cache *c, uint64_t vid, uint64_t off,
                          uint32_t len)
{
	/* Make room first, so that what that frees may be taken back. */
	pthread_mutex_lock(&c->mu);
	c->pending += len;
	evict(c);
	ulp_cbuf *b = len >= SPARE_MIN ? spare_take(c, len) : NULL;
	pthread_mutex_unlock(&c->mu);
	uint32_t cap = b ? b->cap : len;
	if (!b)
		b = malloc(sizeof *b + (len ? len : 1));
	if (!b) {
		pthread_mutex_lock(&c->mu);
		c->pending -= len;
		pthread_mutex_unlock(&c->mu);
		return NULL;
	}
	memset(b, 0, sizeof *b);
	b->vid = vid;
	b->off = off;
	b->len = len;
	b->cap = cap;
	b->refs = 1;
	return b;
}

void *ulp_cbuf_data(ulp_cbuf *b)
{
	return b->data;
}

void ulp_cbuf_range(const ulp_cbuf *b, uint64_t *off, uint32_t *len)
{
	*off = b->off;
	*len = b->len;
}

void ulp_cbuf_discard(ulp_cache *c, ulp_cbuf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&c->mu);
	c->pending -= b->len;
	buf_free(c, b);
	pthread_mutex_unlock(&c->mu);
}

static void evict(ulp_cache *c)
{
	ulp_cbuf *b = c->lru.lprev;

	while (c->bytes + c->pending > c->cap && b != &c->lru) {
		ulp_cbuf *prev = b->lprev;
		if (b->refs == 0) {
			unlink_buf(c, b);
			buf_free(c, b);
		}
		b = prev;
	}
}

/* Publish b (allocated by ulp_cache_alloc), mu held. */
static ulp_cbuf *insert_locked(ulp_cache *c, ulp_cbuf *b)
{
	c->pending -= b->len;
	ulp_cbuf *have = find(c, b->vid, b->off, b->len);
	if (have) {
		have->refs++;
		to_front(c, have);
		buf_free(c, b);
		return have;
	}
	if (b->len <= c->cap) {
		size_t k = bucket(c, b->vid, b->off);
		b->hnext = c->tab[k];
		c->tab[k] = b;
		b->lnext = c->lru.lnext;
		b->lprev = &c->lru;
		c->lru.lnext->lprev = b;
		c->lru.lnext = b;
		b->linked = 1;
		c->bytes += b->len;
		evict(c);
	}
	return b;
}

void ulp_cache_release(ulp_cache *c, ulp_cbuf *b)
{
	pthread_mutex_lock(&c->mu);
	if (--b->refs == 0 && !b->linked)
		buf_free(c, b);
	else if (b->refs == 0 && c->bytes + c->pending > c->cap)
		evict(c);
	pthread_mutex_unlock(&c->mu);
}

void ulp_cache_drop_version(ulp_cache *c, uint64_t vid)
{
	pthread_mutex_lock(&c->mu);
	ulp_cbuf *b = c->lru.lnext;
	while (b != &c->lru) {
		ulp_cbuf *next = b->lnext;
		if (b->vid == vid) {
			unlink_buf(c, b);
			if (b->refs == 0)
				buf_free(c, b);
		}
		b = next;
	}
	pthread_mutex_unlock(&c->mu);
}

void ulp_cache_counters(ulp_cache *c, ulp_cache_stats *out)
{
	pthread_mutex_lock(&c->mu);
	out->bytes = c->bytes;
	out->hits = c->hits;
	out->misses = c->misses;
	out->decodes = c->decodes;
	out->waits = c->waits;
	pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------ flights */

/* Whether self waiting for f would never end: f's owner waits, through a
 * chain of decodes under way, for one self owns.  Reference chains run
 * from newer to older versions, so only a cycle in a damaged catalog
 * gets here. */
static int would_deadlock(const ulp_cflight *f, const ulp_ctask *self)
{
	for (unsigned n = 0; f && !f->done && n < 65536; n++) {
		if (f->owner == self)
			return 1;
		f = f->owner->waiting;
	}
	return 0;
}

int ulp_cache_take(ulp_cache *c, ulp_ctask *self, uint64_t vid, uint64_t off,
                   uint32_t len, ulp_cbuf **out, ulp_cflight **claim)
{
	int rc = 0, missed = 0;

	*out = NULL;
	*claim = NULL;
	pthread_mutex_lock(&c->mu);
	for (;; missed = 1) {
		ulp_cbuf *b = find(c, vid, off, len);
		if (b) {
			b->refs++;
			to_front(c, b);
			c->hits++;
			*out = b;
			break;
		}
		c->misses += !missed;
		ulp_cflight *f = flight_find(c, vid, off, len);
		if (!f) {
			f = calloc(1, sizeof *f);
			if (!f) {
				rc = -ENOMEM;
				break;
			}
			f->vid = vid;
			f->off = off;
			f->len = len;
			f->owner = self;
			ulp_cflight **slot = flight_slot(c, vid, off);
			f->next = *slot;
			*slot = f;
			c->decodes++;
			*claim = f;
			break;
		}
		if (would_deadlock(f, self)) {
			rc = -ELOOP;
			break;
		}
		c->waits++;
		f->waiters++;
		self->waiting = f;
		while (!f->done)
			pthread_cond_wait(&c->flight_cv, &c->mu);
		self->waiting = NULL;
		rc = f->err;
		*out = f->buf;
		if (--f->waiters == 0)
			free(f);
		/* A read-ahead decode that was stopped: decode it here. */
		if (rc != -ECANCELED)
			break;
		rc = 0;
		*out = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

ulp_cbuf *ulp_cache_complete(ulp_cache *c, ulp_cflight *f, ulp_cbuf *b, int err)
{
	pthread_mutex_lock(&c->mu);
	if (b)
		b = insert_locked(c, b);
	for (ulp_cflight **pp = flight_slot(c, f->vid, f->off); *pp;
	     pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	f->done = 1;
	f->owner = NULL;
	f->err = b ? 0 : err < 0 ? err : -EIO;
	f->buf = b;
	if (b)
		b->refs += f->waiters;
	if (f->waiters)
		pthread_cond_broadcast(&c->flight_cv);
	else
		free(f);
	pthread_mutex_unlock(&c->mu);
	return b;
}
