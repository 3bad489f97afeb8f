/*
 * cache.h - the cache of decoded chunks (cache.c), shared by every reader; a
 * leaf: its mutex is taken last.
 */
#ifndef ULP_STORE_CACHE_H
#define ULP_STORE_CACHE_H

#include "store/store_core.h"

typedef struct ulp_cflight ulp_cflight;
/* One thread's chain of decodes (a read, its reference reads, one
 * read-ahead job): what it waits for, to refuse a wait that would never
 * end; and, for read-ahead, when to give up. */
typedef struct ulp_ctask {
	ulp_cflight *waiting; /* under the cache mutex */
	_Atomic int *stop;    /* give up (-ECANCELED) once set; NULL: never */
} ulp_ctask;

ulp_cache *ulp_cache_new(uint64_t cap_bytes);
void ulp_cache_free(ulp_cache *c);
typedef struct ulp_cbuf ulp_cbuf;
/* Whether the chunk (vid, off, len) is cached or being decoded. */
int ulp_cache_busy(ulp_cache *c, uint64_t vid, uint64_t off, uint32_t len);
/* The chunk (vid, off, len): 0 with *out set (cached, referenced; when
 * another task was decoding it, after waiting for that decode), 0 with
 * *claim set (nobody is decoding it: the caller must, then call
 * ulp_cache_complete), or the error of the decode waited for (-ELOOP when
 * waiting would deadlock: a reference cycle). */
int ulp_cache_take(ulp_cache *c, ulp_ctask *self, uint64_t vid, uint64_t off,
                   uint32_t len, ulp_cbuf **out, ulp_cflight **claim);
/* End a claim: publish b (filled; NULL on failure, err then the error)
 * to the cache and to the waiters.  Returns the cached buffer (referenced)
 * or NULL. */
ulp_cbuf *ulp_cache_complete(ulp_cache *c, ulp_cflight *f, ulp_cbuf *b,
                             int err);
/* A new, unpublished buffer of len bytes (NULL when out of memory),
 * counted against the budget until published or discarded. */
ulp_cbuf *ulp_cache_alloc(ulp_cache *c, uint64_t vid, uint64_t off,
                          uint32_t len);
void *ulp_cbuf_data(ulp_cbuf *b);
/* The logical range of the version that b holds. */
void ulp_cbuf_range(const ulp_cbuf *b, uint64_t *off, uint32_t *len);
void ulp_cache_release(ulp_cache *c, ulp_cbuf *b);
/* Free an unpublished buffer (NULL: nothing). */
void ulp_cbuf_discard(ulp_cache *c, ulp_cbuf *b);
void ulp_cache_drop_version(ulp_cache *c, uint64_t vid);
typedef struct ulp_cache_stats {
	uint64_t bytes, hits, misses;
	uint64_t decodes; /* chunks decoded */
	uint64_t waits;   /* misses served by a decode already under way */
} ulp_cache_stats;
void ulp_cache_counters(ulp_cache *c, ulp_cache_stats *out);

#endif /* ULP_STORE_CACHE_H */
