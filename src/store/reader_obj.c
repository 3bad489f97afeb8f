/*
 * reader_obj.c - the reader's opened objects: a small LRU, each with its fd
 * and the version it is coded against, checked when opened: the object's
 * logical size and hash against the version row, its reference size and
 * hash against the reference's row, and likewise its side against the
 * side's row.  Also the pool of decoding contexts.
 */
#include "store/reader.h"
#include "store/reader_obj.h"
#include "store/versions.h"

#include <sys/stat.h>

#define OBJ_CACHE_MAX 64

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

static void entry_free(ulp_oentry *e)
{
	ulp_object_close(e->obj);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

static void entry_unlink(ulp_reader *r, ulp_oentry *e)
{
	ulp_oentry **pp = &r->tab[e->vid % OBJ_BUCKETS];

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
		ulp_oentry *e = r->lru.lnext;
		entry_unlink(r, e);
		entry_free(e);
	}
	for (size_t i = 0; i < r->npool; i++)
		ulp_dctx_free(r->pool[i]);
	free(r->pool);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

ulp_dctx *ulp_robj_dctx_get(ulp_reader *r)
{
	ulp_dctx *d = NULL;

	pthread_mutex_lock(&r->mu);
	if (r->npool)
		d = r->pool[--r->npool];
	pthread_mutex_unlock(&r->mu);
	if (!d && (d = ulp_dctx_new()))
		/* Every decode is checked by its decoded bytes' hash;
		 * verification checks the stored bytes on its own
		 * (ulp_read_check_stored). */
		ulp_dctx_set_payload_check(d, 0);
	return d;
}

void ulp_robj_dctx_put(ulp_reader *r, ulp_dctx *d)
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
	ulp_oentry *e = opaque;

	if (e->fd < 0)
		return e->remote->read_at(e->remote->ctx, e->remote_name, off,
		                          buf, len) < 0
		               ? ULP_ERR_IO
		               : ULP_OK;
	return ulp_pread_all(e->fd, buf, len, off) < 0 ? ULP_ERR_IO : ULP_OK;
}

/* Open the object of vid and check it against the catalog. */
static int entry_open(ulp_store *st, uint64_t vid, ulp_oentry **out)
{
	ulp_version_info v, rv = { 0 }, sv = { 0 };
	struct stat sb;
	ulp_oentry *e;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_version_get_locked(st, vid, &v);
	if (rc == 0 && v.state == ULP_VERSION_DELETED)
		rc = -ENOENT;
	if (rc == 0 && v.ref)
		rc = ulp_version_get_locked(st, v.ref, &rv);
	if (rc == 0 && v.side)
		rc = ulp_version_get_locked(st, v.side, &sv);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	e->vid = vid;
	e->ref = v.ref;
	e->side = v.side;
	e->side_size = sv.size;
	memcpy(e->side_hash, sv.hash, 16);
	e->depth = v.depth;
	e->fd = openat(st->obj_fd, v.object, O_RDONLY | O_CLOEXEC);
	uint64_t osize = 0;
	if (v.plain) {
		/* the bytes themselves: read in chunks of the default size */
		rc = e->fd < 0 || fstat(e->fd, &sb) < 0 ? -errno : 0;
		if (rc == 0 && (uint64_t)sb.st_size != v.size)
			rc = -EIO;
		if (rc < 0)
			goto fail;
		e->plain = 1;
		e->plain_size = v.size;
		*out = e;
		return 0;
	}
	if (e->fd < 0 && errno == ENOENT && st->opts.remote) {
		/* not in the local cache: ranged reads of the remote copy */
		e->remote = st->opts.remote;
		snprintf(e->remote_name, sizeof e->remote_name, "%s", v.object);
		rc = e->remote->size(e->remote->ctx, v.object, &osize);
		if (rc < 0)
			goto fail;
	} else if (e->fd < 0 || fstat(e->fd, &sb) < 0) {
		rc = -errno;
		goto fail;
	} else {
		osize = (uint64_t)sb.st_size;
	}
	rc = ulp_errno_of(ulp_object_open(obj_read_at, e, osize, &e->obj));
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
	if (v.side && (!ulp_object_has_side(e->obj) ||
	               ulp_object_side_size(e->obj) != sv.size ||
	               memcmp(ulp_object_side_hash(e->obj), sv.hash, 16) != 0))
		goto fail;
	/* An object may name a side none of its chunks reads: the row then
	 * names none. */
	for (size_t i = 0; !v.side && i < ulp_object_chunk_count(e->obj); i++)
		if (ulp_object_chunk_needs_side(e->obj, i))
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

int ulp_robj_get(ulp_store *st, uint64_t vid, ulp_oentry **out)
{
	ulp_reader *r = st->reader;
	ulp_oentry *e, *mine = NULL;
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
	ulp_oentry *victims = mine;
	for (ulp_oentry *x = r->lru.lprev;
	     x != &r->lru && r->count > OBJ_CACHE_MAX;) {
		ulp_oentry *prev = x->lprev;
		if (x->refs == 0) {
			entry_unlink(r, x);
			x->hnext = victims;
			victims = x;
		}
		x = prev;
	}
	pthread_mutex_unlock(&r->mu);
	while (victims) {
		ulp_oentry *next = victims->hnext;
		entry_free(victims);
		victims = next;
	}
	*out = e;
	return 0;
}

void ulp_robj_put(ulp_reader *r, ulp_oentry *e)
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
	ulp_oentry *e;

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
