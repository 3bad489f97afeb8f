/*
 * version_api.c - the public queries on versions, paths and the store's
 * figures.
 */
#include "store/versions.h"
#include "store/inode.h"
#include "store/reader.h"

static const char Q_VGET[] = "SELECT " ULP_VCOLS " FROM versions WHERE id = ?";

void ulp_version_from_row(sqlite3_stmt *s, ulp_version_info *v)
{
	const void *h;
	const char *o;

	memset(v, 0, sizeof *v);
	v->id = (uint64_t)sqlite3_column_int64(s, 0);
	v->ino = (uint64_t)sqlite3_column_int64(s, 1);
	v->seq = (uint64_t)sqlite3_column_int64(s, 2);
	v->size = (uint64_t)sqlite3_column_int64(s, 3);
	v->mtime_ns = sqlite3_column_int64(s, 4);
	v->created_ns = sqlite3_column_int64(s, 5);
	h = sqlite3_column_blob(s, 6);
	if (h && sqlite3_column_bytes(s, 6) == 16)
		memcpy(v->hash, h, 16);
	v->ref = (uint64_t)sqlite3_column_int64(s, 7); /* NULL reads 0 */
	v->depth = (uint32_t)sqlite3_column_int64(s, 8);
	v->keyframe = sqlite3_column_int(s, 9);
	v->stored = (uint64_t)sqlite3_column_int64(s, 10);
	v->state = sqlite3_column_int(s, 11);
	v->layout = (uint64_t)sqlite3_column_int64(s, 12);
	o = (const char *)sqlite3_column_text(s, 13);
	snprintf(v->object, sizeof v->object, "%s", o ? o : "");
	v->side = (uint64_t)sqlite3_column_int64(s, 15); /* NULL reads 0 */
	v->plain = sqlite3_column_int(s, 16);
}

int ulp_version_get_locked(ulp_store *st, uint64_t vid, ulp_version_info *out)
{
	ULP_MU_HELD(st);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_VGET, "u", vid);
	int rc = ulp_cat_step(st->cat, s);

	if (rc <= 0)
		return rc ? rc : -ENOENT;
	ulp_version_from_row(s, out);
	ulp_cat_done(s);
	return 0;
}

int ulp_version_get(ulp_store *st, uint64_t id, ulp_version_info *out)
{
	pthread_mutex_lock(&st->mu);
	int rc = ulp_version_get_locked(st, id, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

typedef struct vrow {
	ulp_version_info v;
	char *path;
} vrow;

/* Run s (prepared under st->mu, which the caller holds and this releases)
 * and hand each row to fn, after the lock is dropped: the callback may
 * call into the store. */
static int version_rows(ulp_store *st, sqlite3_stmt *s, ulp_version_fn fn,
                        void *opaque)
{
	vrow *rows = NULL;
	size_t n = 0, cap = 0;
	int rc;

	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			vrow *r = realloc(rows, nc * sizeof *r);
			if (!r) {
				rc = -ENOMEM;
				ulp_cat_done(s);
				break;
			}
			rows = r;
			cap = nc;
		}
		ulp_version_from_row(s, &rows[n].v);
		const char *p = (const char *)sqlite3_column_text(s, 14);
		rows[n].path = strdup(p ? p : "");
		if (!rows[n].path) {
			rc = -ENOMEM;
			ulp_cat_done(s);
			break;
		}
		n++;
	}
	pthread_mutex_unlock(&st->mu);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = fn(opaque, &rows[i].v, rows[i].path);
	for (size_t i = 0; i < n; i++)
		free(rows[i].path);
	free(rows);
	return rc;
}

int ulp_version_list(ulp_store *st, const char *path, ulp_version_fn fn,
                     void *opaque)
{
	static const char Q_ALL[] = "SELECT " ULP_VCOLS " FROM versions ORDER "
				    "BY id";
	static const char Q_PATH[] = "SELECT " ULP_VCOLS " FROM versions WHERE "
				     "path = ? ORDER BY "
				     "seq";

	char *canon = NULL;

	pthread_mutex_lock(&st->mu);
	if (path)
		path = ulp_ns_history_path(st, path, &canon);
	sqlite3_stmt *s = path ? ulp_cat_q(st->cat, Q_PATH, "s", path)
	                       : ulp_cat_q(st->cat, Q_ALL, "");
	int rc = version_rows(st, s, fn, opaque);
	free(canon);
	return rc;
}

int ulp_version_list_under(ulp_store *st, const char *dir, ulp_version_fn fn,
                           void *opaque)
{
	static const char Q_UNDER[] = "SELECT " ULP_VCOLS " FROM versions "
				      "WHERE path >= ? AND path < ? ORDER BY "
				      "path, seq";
	char *lo, *hi;
	int rc = ulp_path_range(dir, &lo, &hi);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_UNDER, "ss", lo, hi);
	rc = version_rows(st, s, fn, opaque);
	free(lo);
	free(hi);
	return rc;
}

ssize_t ulp_version_read(ulp_store *st, uint64_t id, void *buf, size_t size,
                         uint64_t off)
{
	return ulp_read_version(st, id, buf, size, off, NULL);
}

int ulp_version_check_stored(ulp_store *st, uint64_t id, size_t *bad_chunk)
{
	return ulp_read_check_stored(st, id, bad_chunk);
}

ssize_t ulp_version_read_ra(ulp_store *st, ulp_readahead *ra, uint64_t id,
                            void *buf, size_t size, uint64_t off)
{
	return ulp_read_version(st, id, buf, size, off, ra);
}

ssize_t ulp_version_read_iov(ulp_store *st, ulp_readahead *ra, uint64_t id,
                             size_t size, uint64_t off, void *scratch,
                             ulp_read_sink fn, void *opaque)
{
	ulp_read_view v;
	ssize_t n = ulp_read_version_view(st, id, size, off, ra, scratch, &v);

	return ulp_read_view_done(st, &v, n, fn, opaque);
}

int ulp_ns_version(ulp_store *st, uint64_t ino, uint64_t *version)
{
	ulp_cat_inode row;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0) {
		ulp_inode *in = ulp_inode_find(st, ino);
		*version = row.staged || (in && in->staged && !in->bk_kept)
		                   ? 0
		                   : row.version;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_ns_path(ulp_store *st, uint64_t ino, char *buf, size_t size)
{
	char *p = NULL;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_path_alloc(st, ino, &p);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	if (strlen(p) >= size)
		rc = -ERANGE;
	else
		memcpy(buf, p, strlen(p) + 1);
	free(p);
	return rc;
}
