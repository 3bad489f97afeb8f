/*
 * reader.h - reading versions: decoding chunks through the cache (reader.c)
 * and sequential read-ahead (readahead.c).
 */
#ifndef ULP_STORE_READER_H
#define ULP_STORE_READER_H

#include "store/store_core.h"
#include "store/cache.h"

int ulp_reader_new(ulp_store *st, ulp_reader **out);
void ulp_reader_free(ulp_reader *r);
/* Read logical bytes [off, off+len) of version vid (clipped to its size):
 * returns the count or -errno.  ra (may be NULL) is the handle's
 * read-ahead state.  Never call with st->mu held. */
ssize_t ulp_read_version(ulp_store *st, uint64_t vid, void *buf, size_t len,
                         uint64_t off, ulp_readahead *ra);
/* ulp_version_check_stored (store.h). */
int ulp_read_check_stored(ulp_store *st, uint64_t vid, size_t *bad_chunk);
/* A read's bytes where they lie: n pieces, in order, in the chunks
 * pinned in the cache or in a caller's scratch buffer.  The pins keep
 * them valid, whatever becomes of the file they were read from, until
 * ulp_read_view_done: a reply sent from a view may be followed at once by
 * the file's release, so nothing of the file may be held across it. */
#define ULP_VIEW_PIECES 8
typedef struct ulp_read_view {
	struct iovec iov[ULP_VIEW_PIECES];
	ulp_cbuf *pins[ULP_VIEW_PIECES];
	int n, npins;
} ulp_read_view;
/* The same range as a view of the cached chunks; scratch (len bytes)
 * takes a copy where the range has more chunks than a view holds.
 * Returns the count (v filled) or -errno (v empty). */
ssize_t ulp_read_version_view(ulp_store *st, uint64_t vid, size_t len,
                              uint64_t off, ulp_readahead *ra, void *scratch,
                              ulp_read_view *v);
/* v as one piece of buf (n bytes, none when n <= 0): a copied read. */
void ulp_read_view_buf(ulp_read_view *v, void *buf, ssize_t n);
/* After a read of n bytes into v: hand v to fn and release its pins;
 * fn's error, or n.  A failed read (n < 0, v empty) is returned as it is,
 * without fn.  Never call with the file's locks held (see ulp_read_view). */
ssize_t ulp_read_view_done(ulp_store *st, ulp_read_view *v, ssize_t n,
                           ulp_read_sink fn, void *opaque);
/* Read-ahead work: decode chunk i of version vid into the cache, unless
 * it is there or being decoded; gives up once *stop is set. */
int ulp_reader_prefetch(ulp_store *st, uint64_t vid, size_t i,
                        _Atomic int *stop);
/* ulp_ref_read_fn over a version; opaque is a ulp_ref_ctx (task NULL: a
 * chain of its own). */
typedef struct ulp_ref_ctx {
	ulp_store *st;
	uint64_t vid;
	unsigned depth;
	ulp_ctask *task;
} ulp_ref_ctx;
int ulp_ref_read(void *opaque, uint64_t off, void *buf, size_t len);
/* ulp_encode_job.ref_chunk_hash over a ulp_ref_ctx: the decoded hash of
 * the version's chunk at exactly [off, off + len), from its index. */
int ulp_ref_chunk_hash(void *opaque, uint64_t off, uint32_t len,
                       uint64_t *xxh3);
/* The kind of version vid's content hash (ULP_HASH_FLAT or ULP_HASH_TREE,
 * as its object has it), or -errno. */
int ulp_version_hash_kind(ulp_store *st, uint64_t vid);
/* Forget the opened object of a version (rebased or deleted). */
void ulp_reader_forget(ulp_store *st, uint64_t vid);

/* Sequential read-ahead (readahead.c): a small pool of threads, started
 * on first use, that decode the chunks a sequential reader will want
 * next.  Stopping gives up decodes under way (prompt unmount). */
int ulp_ra_pool_new(ulp_store *st, unsigned threads, ulp_ra_pool **out);
/* Drop the queued work, give up the decodes under way and refuse new
 * work (store close: first, so that unmounting does not wait for them);
 * free joins the threads. */
void ulp_ra_pool_stop(ulp_ra_pool *p);
void ulp_ra_pool_free(ulp_ra_pool *p);
/* A read of chunks [first, last] of version vid, whose object is obj at
 * chain depth depth: when it continues a sequential run, queue the next
 * chunks (as many as the cache budget keeps until they are read). */
void ulp_ra_note(ulp_readahead *ra, uint64_t vid, const ulp_object *obj,
                 unsigned depth, size_t first, size_t last);

#endif /* ULP_STORE_READER_H */
