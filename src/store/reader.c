/*
 * reader.c - reading committed versions: decode only the chunks a range
 * touches, through the reference chain (a chunk's reference bytes are
 * read, recursively, through this same path and the shared cache).
 *
 * Opened objects are kept in a small LRU (reader_obj.c).  A side
 * (another file's version that some chunks are coded given) is read
 * through this same path as a reference is.
 *
 * A chunk is decoded by one thread at a time: others that need it wait
 * for that decode (ulp_cache_take).  Before decoding a chunk, the
 * reference chunks it will read are brought into the cache, recursively,
 * so a chain is decoded from its oldest missing level up: every level
 * finds its reference cached, a thread holds one or two buffers instead
 * of one per level of the chain, and chunk i of every version in between
 * stays cached for readers of those versions.
 */
#include "store/reader.h"
#include "store/cache.h"
#include "store/reader_obj.h"
#include "store/versions.h"

#include <xxhash.h>

#include <sys/uio.h>

/* More links than any chain may have: a cycle in a damaged catalog. */
#define MAX_CHAIN 4096
/* Reference chunks kept pinned while the chunk that reads them decodes:
 * a chunk's logical range covers one or two chunks of its reference. */
#define WARM_PINS 4

static ssize_t read_chain(ulp_store *st, uint64_t vid, uint8_t *buf, size_t len,
                          uint64_t off, unsigned depth, ulp_ctask *task,
                          ulp_readahead *ra);

/* A version's chunks: its object's, or for a plain version (plain.h)
 * consecutive ranges of the default chunk size, read as they are. */
#define PLAIN_CHUNK ((uint64_t)ULP_CHUNK_SIZE_DEFAULT)

static uint64_t e_size(const ulp_oentry *e)
{
	return e->plain ? e->plain_size : ulp_object_size(e->obj);
}

static size_t e_count(const ulp_oentry *e)
{
	return e->plain ? (size_t)((e->plain_size + PLAIN_CHUNK - 1) /
	                           PLAIN_CHUNK)
	                : ulp_object_chunk_count(e->obj);
}

static size_t e_chunk_at(const ulp_oentry *e, uint64_t off)
{
	return e->plain ? (size_t)(off / PLAIN_CHUNK)
	                : ulp_object_chunk_at(e->obj, off);
}

static void e_range(const ulp_oentry *e, size_t i, uint64_t *coff,
                    uint32_t *clen)
{
	if (!e->plain) {
		ulp_object_chunk_range(e->obj, i, coff, clen);
		return;
	}
	uint64_t o = (uint64_t)i * PLAIN_CHUNK, size = e->plain_size;
	*coff = o < size ? o : size;
	*clen = o < size ? (uint32_t)(size - o < PLAIN_CHUNK ? size - o
	                                                     : PLAIN_CHUNK)
	                 : 0;
}

int ulp_ref_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	ulp_ref_ctx *c = opaque;
	ulp_ctask own = { 0 };
	ssize_t n = read_chain(c->st, c->vid, buf, len, off, c->depth,
	                       c->task ? c->task : &own, NULL);

	if (n == (ssize_t)len)
		return ULP_OK;
	return n == -ENOMEM ? ULP_ERR_NOMEM : ULP_ERR_IO;
}

/* The XXH3-64 of [off, off + len) of a plain version, read from its
 * file (no decode, nothing cached): 1, or 0 when it cannot be read. */
static int plain_range_hash(const ulp_oentry *e, uint64_t off, uint32_t len,
                            uint64_t *xxh3)
{
	if (off > e->plain_size || len > e->plain_size - off)
		return 0;
	uint8_t *b = malloc(len ? len : 1);
	int ok = b && ulp_pread_all(e->fd, b, len, (off_t)off) >= 0;
	if (ok)
		*xxh3 = XXH3_64bits(b, len);
	free(b);
	return ok;
}

int ulp_ref_chunk_hash(void *opaque, uint64_t off, uint32_t len, uint64_t *xxh3)
{
	ulp_ref_ctx *c = opaque;
	ulp_oentry *e;
	int found = 0;

	if (ulp_robj_get(c->st, c->vid, &e) < 0)
		return 0; /* the bytes are read then, and fail there */
	if (e->plain) {
		found = plain_range_hash(e, off, len, xxh3);
	} else if (off < ulp_object_size(e->obj)) {
		uint64_t coff;
		uint32_t clen;
		size_t i = ulp_object_chunk_at(e->obj, off);
		ulp_object_chunk_range(e->obj, i, &coff, &clen);
		if (coff == off && clen == len) {
			*xxh3 = ulp_object_chunk_hash(e->obj, i);
			found = 1;
		}
	}
	ulp_robj_put(c->st->reader, e);
	return found;
}

int ulp_version_hash_kind(ulp_store *st, uint64_t vid)
{
	ulp_oentry *e;
	int rc = ulp_robj_get(st, vid, &e);

	if (rc < 0)
		return rc;
	rc = e->plain ? ULP_HASH_TREE : ulp_object_hash_kind(e->obj);
	ulp_robj_put(st->reader, e);
	return rc;
}

static int stopped(const ulp_ctask *task)
{
	return task->stop && atomic_load(task->stop);
}

static int chunk_get(ulp_store *st, ulp_oentry *e, size_t i, unsigned depth,
                     ulp_ctask *task, ulp_cbuf **out);

/* Bring the chunks of e's reference that cover [off, off+len) into the
 * cache and pin them (up to WARM_PINS; *npins counts them).  The codec
 * reads a chunk's reference run by run, at the chunk's own logical range
 * when the two versions share a tensor layout (other ranges are decoded
 * on demand while decoding).  Errors other than cancellation are left to
 * the decode, which may not need the chunk that failed. */
static int warm_ref(ulp_store *st, const ulp_oentry *e, uint64_t off,
                    uint32_t len, unsigned depth, ulp_ctask *task,
                    ulp_cbuf **pins, size_t *npins)
{
	ulp_oentry *r;
	int rc = ulp_robj_get(st, e->ref, &r);

	if (rc < 0)
		return 0;
	uint64_t size = e_size(r);
	uint64_t end = off + len < size ? off + len : size;
	while (off < end) {
		size_t j = e_chunk_at(r, off);
		uint64_t coff;
		uint32_t clen;
		ulp_cbuf *b;

		e_range(r, j, &coff, &clen);
		if (clen == 0)
			break;
		rc = chunk_get(st, r, j, depth + 1, task, &b);
		if (rc == -ECANCELED)
			break;
		rc = 0;
		if (b && *npins < WARM_PINS)
			pins[(*npins)++] = b;
		else if (b)
			ulp_cache_release(st->cache, b);
		off = coff + clen;
	}
	ulp_robj_put(st->reader, r);
	return rc;
}

/* XXH3-64 of len zero bytes, remembered for the last few lengths. */
static uint64_t zero_hash(ulp_reader *r, uint32_t len)
{
	static const uint8_t zero[64u << 10];
	uint64_t h;

	pthread_mutex_lock(&r->mu);
	for (unsigned k = 0; k < ZERO_MEMO; k++)
		if (r->zlen[k] == len) {
			h = r->zhash[k];
			pthread_mutex_unlock(&r->mu);
			return h;
		}
	pthread_mutex_unlock(&r->mu);
	XXH3_state_t *s = XXH3_createState();
	if (!s)
		return 0; /* no memory: decode as usual */
	XXH3_64bits_reset(s);
	for (uint32_t done = 0; done < len;) {
		uint32_t n = len - done < sizeof zero ? len - done
		                                      : sizeof zero;
		XXH3_64bits_update(s, zero, n);
		done += n;
	}
	h = XXH3_64bits_digest(s);
	XXH3_freeState(s);
	pthread_mutex_lock(&r->mu);
	r->zlen[r->znext] = len;
	r->zhash[r->znext] = h;
	r->znext = (r->znext + 1) % ZERO_MEMO;
	pthread_mutex_unlock(&r->mu);
	return h;
}

/* Whether chunk i of e decodes to zeros (a sparse file's hole): its bytes
 * hash to zeros', to the strength every decode is checked with; only
 * chunks stored in a few bytes are looked at. */
static int zero_chunk(ulp_store *st, const ulp_oentry *e, size_t i,
                      uint32_t len)
{
	if (e->plain || len == 0 ||
	    ulp_object_chunk_stored(e->obj, i) > 64 + len / 4096)
		return 0;
	uint64_t h = ulp_object_chunk_hash(e->obj, i);
	return h && h == zero_hash(st->reader, len);
}

/* A chunk's reference as its decode sees it: read through the cache
 * (rc first, so that ulp_ref_read takes it as its ulp_ref_ctx), or, for a
 * range inside one of the reference chunks pinned for the decode, mapped
 * in place, which spares the float decoder a copy of it. */
typedef struct ref_view {
	ulp_ref_ctx rc;
	ulp_cbuf *const *pins;
	size_t npins;
} ref_view;

static const void *ref_view_map(void *opaque, uint64_t off, size_t len)
{
	const ref_view *v = opaque;

	for (size_t k = 0; k < v->npins; k++) {
		uint64_t poff;
		uint32_t plen;
		ulp_cbuf_range(v->pins[k], &poff, &plen);
		if (off >= poff && len <= plen && off - poff <= plen - len)
			return (uint8_t *)ulp_cbuf_data(v->pins[k]) +
			       (off - poff);
	}
	return NULL;
}

/* Decode chunk i of e (claimed: no other thread decodes it meanwhile). */
static int chunk_decode(ulp_store *st, ulp_oentry *e, size_t i, unsigned depth,
                        ulp_ctask *task, ulp_cbuf **out)
{
	ulp_cbuf *pins[WARM_PINS], *b = NULL;
	size_t npins = 0;
	uint64_t coff;
	uint32_t clen;
	int rc = 0;

	e_range(e, i, &coff, &clen);
	if (e->plain) {
		b = ulp_cache_alloc(st->cache, e->vid, coff, clen);
		if (b && ulp_pread_all(e->fd, ulp_cbuf_data(b), clen,
		                       (off_t)coff) < 0) {
			ulp_cbuf_discard(st->cache, b);
			b = NULL;
			rc = -EIO;
		}
		*out = b;
		return b ? 0 : rc ? rc : -ENOMEM;
	}
	if (zero_chunk(st, e, i, clen)) {
		/* A hole: zeros, without decoding it or its references. */
		b = ulp_cache_alloc(st->cache, e->vid, coff, clen);
		if (b)
			memset(ulp_cbuf_data(b), 0, clen);
		*out = b;
		return b ? 0 : -ENOMEM;
	}
	if (e->ref && ulp_object_chunk_needs_ref(e->obj, i))
		rc = warm_ref(st, e, coff, clen, depth, task, pins, &npins);
	if (rc == 0 && stopped(task))
		rc = -ECANCELED;
	if (rc == 0) {
		ref_view rv = { { st, e->ref, depth + 1, task }, pins, npins };
		/* A side's chunks are read as a reference's are, through the
		 * cache (it is another file's version: no cycle). */
		ulp_ref_ctx sctx = { st, e->side, depth + 1, task };
		ulp_refs refs = {
			.ref_read = e->ref ? ulp_ref_read : NULL,
			.ref_map = e->ref ? ref_view_map : NULL,
			.ref_opaque = &rv,
			.side_read = e->side ? ulp_ref_read : NULL,
			.side_opaque = &sctx,
			.side_hash = e->side ? e->side_hash : NULL,
			.side_size = e->side_size,
		};
		ulp_dctx *d = ulp_robj_dctx_get(st->reader);

		b = ulp_cache_alloc(st->cache, e->vid, coff, clen);
		if (!b || !d)
			rc = -ENOMEM;
		else
			rc = ulp_errno_of(ulp_chunk_decode_refs(
				d, e->obj, i, &refs, ulp_cbuf_data(b)));
		if (d)
			ulp_robj_dctx_put(st->reader, d);
		/* A reference read given up on: the waiters retry. */
		if (rc < 0 && stopped(task))
			rc = -ECANCELED;
		if (rc < 0) {
			ulp_cbuf_discard(st->cache, b);
			b = NULL;
		}
	}
	while (npins)
		ulp_cache_release(st->cache, pins[--npins]);
	*out = b;
	return rc;
}

/* One chunk of e, decoded (through the cache), referenced. */
static int chunk_get(ulp_store *st, ulp_oentry *e, size_t i, unsigned depth,
                     ulp_ctask *task, ulp_cbuf **out)
{
	ulp_cflight *claim;
	uint64_t coff;
	uint32_t clen;
	ulp_cbuf *b;
	int rc;

	*out = NULL;
	if (depth > MAX_CHAIN)
		return -ELOOP;
	e_range(e, i, &coff, &clen);
	rc = ulp_cache_take(st->cache, task, e->vid, coff, clen, &b, &claim);
	if (rc < 0)
		return rc;
	if (claim) {
		rc = chunk_decode(st, e, i, depth, task, &b);
		b = ulp_cache_complete(st->cache, claim, b, rc);
		if (!b)
			return rc < 0 ? rc : -EIO;
	}
	*out = b;
	return 0;
}

/* Open version vid for a read of [off, off + *len) and clip *len to its
 * size; before decoding, the read-ahead threads start on the chunks
 * after these while this thread decodes them. */
static int range_open(ulp_store *st, uint64_t vid, size_t *len, uint64_t off,
                      ulp_readahead *ra, ulp_oentry **out)
{
	int rc = ulp_robj_get(st, vid, out);

	if (rc < 0)
		return rc;
	const ulp_object *obj = (*out)->obj;
	uint64_t size = e_size(*out);
	if (off >= size)
		*len = 0;
	else if (*len > size - off)
		*len = (size_t)(size - off);
	if (ra && *len && obj)
		ulp_ra_note(ra, vid, obj, (*out)->depth,
		            ulp_object_chunk_at(obj, off),
		            ulp_object_chunk_at(obj, off + *len - 1));
	return 0;
}

static void pins_release(ulp_store *st, ulp_cbuf **pins, int k)
{
	while (k > 0)
		ulp_cache_release(st->cache, pins[--k]);
}

/* Decode (through the cache) and pin the chunks of e that cover
 * [off, off + len), at most max of them: iov[k] is the part of pins[k]
 * in the range.  Returns the count, *got the bytes they cover, or
 * -errno (nothing pinned). */
static int pin_range(ulp_store *st, ulp_oentry *e, uint64_t off, size_t len,
                     unsigned depth, ulp_ctask *task, ulp_cbuf **pins,
                     struct iovec *iov, int max, size_t *got)
{
	size_t done = 0;
	int k = 0;

	while (done < len && k < max) {
		uint64_t pos = off + done, coff;
		uint32_t clen;
		size_t i = e_chunk_at(e, pos);

		e_range(e, i, &coff, &clen);
		int rc = chunk_get(st, e, i, depth, task, &pins[k]);
		if (rc < 0) {
			pins_release(st, pins, k);
			return rc;
		}
		size_t in = (size_t)(pos - coff);
		size_t n = clen - in < len - done ? clen - in : len - done;
		iov[k].iov_base = (uint8_t *)ulp_cbuf_data(pins[k]) + in;
		iov[k].iov_len = n;
		k++;
		done += n;
	}
	*got = done;
	return k;
}

static ssize_t read_chain(ulp_store *st, uint64_t vid, uint8_t *buf, size_t len,
                          uint64_t off, unsigned depth, ulp_ctask *task,
                          ulp_readahead *ra)
{
	ulp_oentry *e;
	size_t done = 0;
	int rc;

	if (depth > MAX_CHAIN)
		return -ELOOP;
	rc = range_open(st, vid, &len, off, ra, &e);
	if (rc < 0)
		return rc;
	while (done < len) {
		/* One chunk pinned at a time: reference reads run inside
		 * decodes, which pin chunks of their own. */
		ulp_cbuf *b;
		struct iovec v;
		size_t got;
		rc = pin_range(st, e, off + done, len - done, depth, task, &b,
		               &v, 1, &got);
		if (rc < 0)
			break;
		memcpy(buf + done, v.iov_base, v.iov_len);
		pins_release(st, &b, 1);
		done += got;
	}
	ulp_robj_put(st->reader, e);
	if (rc < 0) {
		/* Maybe a stale entry (its version was rebased and its old
		 * reference removed): let the next attempt reopen it. */
		ulp_reader_forget(st, vid);
		return rc;
	}
	return (ssize_t)len;
}

ssize_t ulp_read_version(ulp_store *st, uint64_t vid, void *buf, size_t len,
                         uint64_t off, ulp_readahead *ra)
{
	ssize_t n = 0;

	for (int tries = 0; tries < 3; tries++) {
		ulp_ctask task = { 0 };
		n = read_chain(st, vid, buf, len, off, 0, &task, ra);
		if (n >= 0 || n == -ENOMEM)
			break;
	}
	return n;
}

/* A plain version's bytes against its content hash: 0, -EBADMSG (the
 * first chunk of the default size is named) or -errno. */
static int check_plain(ulp_store *st, const ulp_oentry *e, size_t *bad_chunk)
{
	ulp_version_info v;
	uint8_t h[16];
	pthread_mutex_lock(&st->mu);
	int rc = ulp_version_get_locked(st, e->vid, &v);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	ulp_hasher *hs = ulp_hasher_new(ULP_HASH_TREE);
	uint8_t *buf = malloc(PLAIN_CHUNK);
	for (uint64_t off = 0; rc == 0 && hs && buf && off < e->plain_size;
	     off += PLAIN_CHUNK) {
		size_t n = (size_t)(e->plain_size - off < PLAIN_CHUNK
		                            ? e->plain_size - off
		                            : PLAIN_CHUNK);
		rc = ulp_pread_all(e->fd, buf, n, (off_t)off) < 0 ? -EIO : 0;
		if (rc == 0)
			ulp_hasher_update(hs, buf, n);
	}
	if (rc == 0 && (!hs || !buf))
		rc = -ENOMEM;
	if (rc == 0)
		rc = ulp_errno_of(ulp_hasher_final(hs, h));
	if (rc == 0 && memcmp(h, v.hash, 16) != 0) {
		rc = -EBADMSG;
		*bad_chunk = 0;
	}
	ulp_hasher_free(hs);
	free(buf);
	return rc;
}

/* One try of ulp_read_check_stored. */
static int check_stored(ulp_store *st, uint64_t vid, size_t *bad_chunk)
{
	ulp_oentry *e;

	/* The object the version has now: one opened before its version
	 * was rebased would leave the file that replaced it unchecked. */
	ulp_reader_forget(st, vid);
	int rc = ulp_robj_get(st, vid, &e);
	if (rc < 0)
		return rc;
	if (e->plain) {
		rc = check_plain(st, e, bad_chunk);
		ulp_robj_put(st->reader, e);
		return rc;
	}
	ulp_dctx *d = ulp_robj_dctx_get(st->reader);
	size_t n = ulp_object_chunk_count(e->obj), i = 0;
	if (!d)
		rc = -ENOMEM;
	for (; rc == 0 && i < n; i++) {
		int c = ulp_chunk_check_payload(d, e->obj, i);
		rc = c == ULP_ERR_CORRUPT ? -EBADMSG : ulp_errno_of(c);
	}
	if (rc == -EBADMSG)
		*bad_chunk = i - 1;
	if (d)
		ulp_robj_dctx_put(st->reader, d);
	ulp_robj_put(st->reader, e);
	return rc;
}

int ulp_read_check_stored(ulp_store *st, uint64_t vid, size_t *bad_chunk)
{
	size_t bad = 0;
	int rc = 0;

	/* As reads retry: the version may be rebased meanwhile, its old
	 * object deleted. */
	for (int tries = 0; tries < 3; tries++) {
		rc = check_stored(st, vid, &bad);
		if (rc == 0 || rc == -ENOMEM)
			break;
	}
	if (bad_chunk)
		*bad_chunk = bad;
	return rc;
}

/* One try of ulp_read_version_view.  A FUSE request of up to 1 MiB spans
 * one or two chunks of the default size; more are copied into scratch. */
static ssize_t view_chain(ulp_store *st, uint64_t vid, size_t len, uint64_t off,
                          ulp_readahead *ra, void *scratch, ulp_read_view *v)
{
	ulp_ctask task = { 0 };
	size_t got = 0;
	ulp_oentry *e;
	int rc = range_open(st, vid, &len, off, ra, &e);

	if (rc < 0)
		return rc;
	int k = pin_range(st, e, off, len, 0, &task, v->pins, v->iov,
	                  ULP_VIEW_PIECES, &got);
	ulp_robj_put(st->reader, e);
	if (k < 0) {
		ulp_reader_forget(st, vid); /* as read_chain does */
		return k;
	}
	if (got == len) {
		v->n = v->npins = k;
		return (ssize_t)len;
	}
	pins_release(st, v->pins, k);
	ssize_t n = read_chain(st, vid, scratch, len, off, 0, &task, NULL);
	ulp_read_view_buf(v, scratch, n);
	return n;
}

ssize_t ulp_read_version_view(ulp_store *st, uint64_t vid, size_t len,
                              uint64_t off, ulp_readahead *ra, void *scratch,
                              ulp_read_view *v)
{
	ssize_t n = 0;

	v->n = v->npins = 0;
	for (int tries = 0; tries < 3; tries++) {
		n = view_chain(st, vid, len, off, ra, scratch, v);
		if (n >= 0 || n == -ENOMEM)
			break;
	}
	return n;
}

void ulp_read_view_buf(ulp_read_view *v, void *buf, ssize_t n)
{
	v->npins = 0;
	v->n = n > 0;
	v->iov[0].iov_base = buf;
	v->iov[0].iov_len = n > 0 ? (size_t)n : 0;
}

ssize_t ulp_read_view_done(ulp_store *st, ulp_read_view *v, ssize_t n,
                           ulp_read_sink fn, void *opaque)
{
	if (n < 0)
		return n;
	int rc = fn(opaque, v->iov, v->n);

	pins_release(st, v->pins, v->npins);
	v->n = v->npins = 0;
	return rc < 0 ? rc : n;
}

int ulp_reader_prefetch(ulp_store *st, uint64_t vid, size_t i,
                        _Atomic int *stop)
{
	ulp_ctask task = { NULL, stop };
	ulp_cbuf *b = NULL;
	uint64_t coff;
	uint32_t clen;
	ulp_oentry *e;
	int rc = ulp_robj_get(st, vid, &e);

	if (rc < 0)
		return rc;
	if (i < e_count(e)) {
		e_range(e, i, &coff, &clen);
		/* Cached, or a reader is decoding it: nothing to do ahead. */
		if (!ulp_cache_busy(st->cache, vid, coff, clen))
			rc = chunk_get(st, e, i, 0, &task, &b);
		if (b)
			ulp_cache_release(st->cache, b);
	}
	ulp_robj_put(st->reader, e);
	return rc;
}
