/*
 * cache.c - a size-bounded LRU cache of decoded chunks, shared by every
 * reader (and by the encoders, which read references through it).
 *
 * A chunk is keyed by (version, logical offset, length): the decoded bytes
 * of a version never change, whichever object (before or after a rebase)
 * they are decoded from.  Buffers are reference-counted, so eviction never
 * frees one a reader is copying from.
 */
#include "store/store_internal.h"

struct ulp_cbuf {
	uint64_t vid, off;
	uint32_t len;
	unsigned refs;
	int linked;
	struct ulp_cbuf *hnext, *lprev, *lnext;
	uint8_t data[] __attribute__((aligned(16)));
};

struct ulp_cache {
	pthread_mutex_t mu;
	ulp_cbuf **tab;
	size_t nb; /* buckets, a power of two */
	uint64_t bytes, cap;
	ulp_cbuf lru; /* sentinel: lnext is the most recent */
	uint64_t hits, misses;
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
	c->nb = nb;
	c->cap = cap_bytes;
	c->lru.lnext = c->lru.lprev = &c->lru;
	return c;
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

ulp_cbuf *ulp_cache_get(ulp_cache *c, uint64_t vid, uint64_t off, uint32_t len)
{
	pthread_mutex_lock(&c->mu);
	ulp_cbuf *b = find(c, vid, off, len);
	if (b) {
		b->refs++;
		to_front(c, b);
		c->hits++;
	} else {
		c->misses++;
	}
	pthread_mutex_unlock(&c->mu);
	return b;
}

ulp_cbuf *ulp_cache_alloc(uint64_t vid, uint64_t off, uint32_t len)
{
	ulp_cbuf *b = malloc(sizeof *b + (len ? len : 1));

	if (!b)
		return NULL;
	memset(b, 0, sizeof *b);
	b->vid = vid;
	b->off = off;
	b->len = len;
	b->refs = 1;
	return b;
}

void *ulp_cbuf_data(ulp_cbuf *b)
{
	return b->data;
}

void ulp_cbuf_discard(ulp_cbuf *b)
{
	free(b);
}

static void evict(ulp_cache *c)
{
	ulp_cbuf *b = c->lru.lprev;

	while (c->bytes > c->cap && b != &c->lru) {
		ulp_cbuf *prev = b->lprev;
		if (b->refs == 0) {
			unlink_buf(c, b);
			free(b);
		}
		b = prev;
	}
}

ulp_cbuf *ulp_cache_insert(ulp_cache *c, ulp_cbuf *b)
{
	pthread_mutex_lock(&c->mu);
	ulp_cbuf *have = find(c, b->vid, b->off, b->len);
	if (have) {
		have->refs++;
		to_front(c, have);
		pthread_mutex_unlock(&c->mu);
		free(b);
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
	pthread_mutex_unlock(&c->mu);
	return b;
}

void ulp_cache_release(ulp_cache *c, ulp_cbuf *b)
{
	pthread_mutex_lock(&c->mu);
	int gone = --b->refs == 0 && !b->linked;
	if (!gone && b->refs == 0 && c->bytes > c->cap)
		evict(c);
	pthread_mutex_unlock(&c->mu);
	if (gone)
		free(b);
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
				free(b);
		}
		b = next;
	}
	pthread_mutex_unlock(&c->mu);
}

void ulp_cache_counters(ulp_cache *c, uint64_t *bytes, uint64_t *hits,
                        uint64_t *misses)
{
	pthread_mutex_lock(&c->mu);
	*bytes = c->bytes;
	*hits = c->hits;
	*misses = c->misses;
	pthread_mutex_unlock(&c->mu);
}
