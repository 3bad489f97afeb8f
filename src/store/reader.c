/*
 * reader.c - reading committed versions: decode only the chunks a range
 * touches, through the reference chain (a chunk's reference bytes are
 * read, recursively, through this same path and the shared cache).
 *
 * Opened objects are kept in a small LRU, each with its fd and the
 * version it is coded against, checked when opened: the object's logical
 * size and hash against the version row, its reference size and hash
 * against the reference's row.
 */
#include "store/store_internal.h"

#include <sys/stat.h>

#define OBJ_CACHE_MAX 64
#define OBJ_BUCKETS 256
/* More links than any chain may have: a cycle in a damaged catalog. */
#define MAX_CHAIN 4096

typedef struct oentry {
	uint64_t vid;
	int fd;
	ulp_object *obj;
	uint64_t ref; /* reference version, 0: none */
	unsigned refs;
	int linked;
	struct oentry *hnext, *lprev, *lnext;
} oentry;

struct ulp_reader {
	pthread_mutex_t mu;
	oentry *tab[OBJ_BUCKETS];
	size_t count;
	oentry lru; /* sentinel; lnext is the most recent */
	ulp_dctx **pool;
	size_t npool, cap;
};

int ulp_reader_new(ulp_store *st, ulp_reader **out)
{
	ulp_reader *r = calloc(1, sizeof *r);

	(void)st;
	if (!r)
		return -ENOMEM;
	if (pthread_mutex_init(&r->mu, NULL)) {
		free(r);
		return -ENOMEM;
	}
	r->lru.lnext = r->lru.lprev = &r->lru;
	*out = r;
	return 0;
}

static void entry_free(oentry *e)
{
	ulp_object_close(e->obj);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

static void entry_unlink(ulp_reader *r, oentry *e)
{
	oentry **pp = &r->tab[e->vid % OBJ_BUCKETS];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	}
	e->lprev->lnext = e->lnext;
	e->lnext->lprev = e->lprev;
	e->linked = 0;
	r->count--;
}

void ulp_reader_free(ulp_reader *r)
{
	if (!r)
		return;
	while (r->lru.lnext != &r->lru) {
		oentry *e = r->lru.lnext;
		entry_unlink(r, e);
		entry_free(e);
	}
	for (size_t i = 0; i < r->npool; i++)
		ulp_dctx_free(r->pool[i]);
	free(r->pool);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static ulp_dctx *dctx_get(ulp_reader *r)
{
	ulp_dctx *d = NULL;

	pthread_mutex_lock(&r->mu);
	if (r->npool)
		d = r->pool[--r->npool];
	pthread_mutex_unlock(&r->mu);
	return d ? d : ulp_dctx_new();
}

static void dctx_put(ulp_reader *r, ulp_dctx *d)
{
	pthread_mutex_lock(&r->mu);
	if (r->npool == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		ulp_dctx **p = realloc(r->pool, cap * sizeof *p);
		if (p) {
			r->pool = p;
			r->cap = cap;
		}
	}
	if (r->npool < r->cap) {
		r->pool[r->npool++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	ulp_dctx_free(d);
}

static int obj_read_at(void *opaque, uint64_t off, void *buf, size_t len)
{
	oentry *e = opaque;

	return ulp_pread_all(e->fd, buf, len, off) < 0 ? ULP_ERR_IO : ULP_OK;
}

/* Open the object of vid and check it against the catalog. */
static int entry_open(ulp_store *st, uint64_t vid, oentry **out)
{
	ulp_version_info v, rv = { 0 };
	struct stat sb;
	oentry *e;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_version_get_locked(st, vid, &v);
	if (rc == 0 && v.state == ULP_VERSION_DELETED)
		rc = -ENOENT;
	if (rc == 0 && v.ref)
		rc = ulp_version_get_locked(st, v.ref, &rv);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	e->vid = vid;
	e->ref = v.ref;
	e->fd = openat(st->obj_fd, v.object, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0 || fstat(e->fd, &sb) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = ulp_errno_of(
		ulp_object_open(obj_read_at, e, (uint64_t)sb.st_size, &e->obj));
	if (rc < 0)
		goto fail;
	rc = -EIO;
	if (ulp_object_size(e->obj) != v.size ||
	    memcmp(ulp_object_file_hash(e->obj), v.hash, 16) != 0 ||
	    !ulp_object_has_ref(e->obj) != !v.ref)
		goto fail;
	if (v.ref && (ulp_object_ref_size(e->obj) != rv.size ||
	              memcmp(ulp_object_ref_hash(e->obj), rv.hash, 16) != 0))
		goto fail;
	*out = e;
	return 0;
fail:
	if (e->obj)
		ulp_object_close(e->obj);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
	return rc;
}

static int entry_get(ulp_store *st, uint64_t vid, oentry **out)
{
	ulp_reader *r = st->reader;
	oentry *e, *mine = NULL;
	int rc;

	pthread_mutex_lock(&r->mu);
	for (e = r->tab[vid % OBJ_BUCKETS]; e; e = e->hnext)
		if (e->vid == vid)
			break;
	if (e) {
		e->refs++;
		e->lprev->lnext = e->lnext;
		e->lnext->lprev = e->lprev;
		goto front;
	}
	pthread_mutex_unlock(&r->mu);

	rc = entry_open(st, vid, &mine);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&r->mu);
	for (e = r->tab[vid % OBJ_BUCKETS]; e; e = e->hnext)
		if (e->vid == vid)
			break;
	if (e) { /* another thread was quicker: ours is freed below */
		e->refs++;
		e->lprev->lnext = e->lnext;
		e->lnext->lprev = e->lprev;
		mine->hnext = NULL;
		goto front;
	}
	e = mine;
	mine = NULL;
	e->refs = 1;
	e->linked = 1;
	e->hnext = r->tab[vid % OBJ_BUCKETS];
	r->tab[vid % OBJ_BUCKETS] = e;
	r->count++;
front:
	e->lnext = r->lru.lnext;
	e->lprev = &r->lru;
	r->lru.lnext->lprev = e;
	r->lru.lnext = e;
	/* Close idle objects beyond the bound, least recent first. */
	oentry *victims = mine;
	for (oentry *x = r->lru.lprev;
	     x != &r->lru && r->count > OBJ_CACHE_MAX;) {
		oentry *prev = x->lprev;
		if (x->refs == 0) {
			entry_unlink(r, x);
			x->hnext = victims;
			victims = x;
		}
		x = prev;
	}
	pthread_mutex_unlock(&r->mu);
	while (victims) {
		oentry *next = victims->hnext;
		entry_free(victims);
		victims = next;
	}
	*out = e;
	return 0;
}

static void entry_put(ulp_reader *r, oentry *e)
{
	pthread_mutex_lock(&r->mu);
	int gone = --e->refs == 0 && !e->linked;
	pthread_mutex_unlock(&r->mu);
	if (gone)
		entry_free(e);
}

void ulp_reader_forget(ulp_store *st, uint64_t vid)
{
	ulp_reader *r = st->reader;
	oentry *e;

	pthread_mutex_lock(&r->mu);
	for (e = r->tab[vid % OBJ_BUCKETS]; e; e = e->hnext)
		if (e->vid == vid)
			break;
	int gone = 0;
	if (e) {
		entry_unlink(r, e);
		gone = e->refs == 0;
	}
	pthread_mutex_unlock(&r->mu);
	if (gone)
		entry_free(e);
}

static ssize_t read_chain(ulp_store *st, uint64_t vid, uint8_t *buf, size_t len,
                          uint64_t off, unsigned depth);

int ulp_ref_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	ulp_ref_ctx *c = opaque;
	ssize_t n = read_chain(c->st, c->vid, buf, len, off, c->depth);

	if (n == (ssize_t)len)
		return ULP_OK;
	return n == -ENOMEM ? ULP_ERR_NOMEM : ULP_ERR_IO;
}

/* One chunk of e, decoded (through the cache). */
static int chunk_get(ulp_store *st, oentry *e, size_t i, unsigned depth,
                     ulp_cbuf **out)
{
	uint64_t coff;
	uint32_t clen;
	ulp_cbuf *b;

	ulp_object_chunk_range(e->obj, i, &coff, &clen);
	b = ulp_cache_get(st->cache, e->vid, coff, clen);
	if (!b) {
		ulp_ref_ctx rc_ctx = { st, e->ref, depth + 1 };
		ulp_dctx *d = dctx_get(st->reader);
		int rc;

		b = ulp_cache_alloc(e->vid, coff, clen);
		if (!b || !d) {
			ulp_cbuf_discard(b);
			ulp_dctx_free(d);
			return -ENOMEM;
		}
		rc = ulp_chunk_decode(d, e->obj, i,
		                      e->ref ? ulp_ref_read : NULL, &rc_ctx,
		                      ulp_cbuf_data(b));
		dctx_put(st->reader, d);
		if (rc != ULP_OK) {
			ulp_cbuf_discard(b);
			return ulp_errno_of(rc);
		}
		b = ulp_cache_insert(st->cache, b);
	}
	*out = b;
	return 0;
}

static ssize_t read_chain(ulp_store *st, uint64_t vid, uint8_t *buf, size_t len,
                          uint64_t off, unsigned depth)
{
	oentry *e;
	size_t done = 0;
	int rc;

	if (depth > MAX_CHAIN)
		return -ELOOP;
	rc = entry_get(st, vid, &e);
	if (rc < 0)
		return rc;
	uint64_t size = ulp_object_size(e->obj);
	if (off >= size)
		len = 0;
	else if (len > size - off)
		len = (size_t)(size - off);
	while (done < len) {
		uint64_t pos = off + done, coff;
		uint32_t clen;
		size_t i = ulp_object_chunk_at(e->obj, pos);
		ulp_cbuf *b = NULL;

		ulp_object_chunk_range(e->obj, i, &coff, &clen);
		rc = chunk_get(st, e, i, depth, &b);
		if (rc < 0)
			break;
		size_t in = (size_t)(pos - coff);
		size_t n = clen - in < len - done ? clen - in : len - done;
		memcpy(buf + done, (uint8_t *)ulp_cbuf_data(b) + in, n);
		ulp_cache_release(st->cache, b);
		done += n;
	}
	entry_put(st->reader, e);
	if (rc < 0) {
		/* Maybe a stale entry (its version was rebased and its old
		 * reference removed): let the next attempt reopen it. */
		ulp_reader_forget(st, vid);
		return rc;
	}
	return (ssize_t)len;
}

ssize_t ulp_read_version(ulp_store *st, uint64_t vid, void *buf, size_t len,
                         uint64_t off)
{
	ssize_t n = 0;

	for (int tries = 0; tries < 3; tries++) {
		n = read_chain(st, vid, buf, len, off, 0);
		if (n >= 0 || n == -ENOMEM)
			break;
	}
	return n;
}

int ulp_version_to_fd(ulp_store *st, uint64_t vid, uint64_t size, int fd,
                      _Atomic int *stop)
{
	const size_t piece = 4u << 20;
	uint8_t *buf;
	int rc = 0;

	if (size == 0)
		return 0;
	buf = malloc(piece);
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < size && rc == 0;) {
		size_t n = size - off < piece ? (size_t)(size - off) : piece;
		if (stop && atomic_load(stop)) {
			rc = -ECANCELED;
			break;
		}
		ssize_t got = ulp_read_version(st, vid, buf, n, off);
		if (got != (ssize_t)n) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		for (size_t done = 0; done < n && rc == 0;) {
			ssize_t w = pwrite(fd, buf + done, n - done,
			                   (off_t)(off + done));
			if (w < 0 && errno != EINTR)
				rc = -errno;
			else if (w > 0)
				done += (size_t)w;
		}
		off += n;
	}
	free(buf);
	return rc;
}
