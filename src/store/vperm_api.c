/*
 * vperm_api.c - the read-only views of the control directory: what
 * .ulpfs/versions/ shows of a version and of a live directory (vperm.h
 * says why).
 */
#include "store/vperm.h"
#include "store/versions.h"

/* A version's recorded attributes, or for a row older than the record
 * those of the file now holding its inode or its path (everyone reaches:
 * the live mirror directories above decide), or the root's owner with
 * 0400 where there is none.  mu held; acl malloc()ed or NULL. */
typedef struct vview {
	uid_t uid;
	gid_t gid;
	uint32_t perm;
	ulp_vperm_reach reach;
	uint8_t *acl;
	size_t len;
} vview;

static int fallback(ulp_store *st, uint64_t ino, const char *path, vview *w)
{
	ulp_cat_inode row;
	int rc = ulp_cat_inode_get(st->cat, ino, &row);

	if (rc == 0 && (row.kind != ULP_KIND_FILE || row.nlink == 0))
		rc = -ENOENT;
	if (rc == -ENOENT && ulp_ns_resolve(st, path, &ino) == 0) {
		rc = ulp_cat_inode_get(st->cat, ino, &row);
		if (rc == 0 && row.kind != ULP_KIND_FILE)
			rc = -ENOENT;
	}
	w->reach.classes = ULP_REACH_ALL;
	if (rc == -ENOENT) {
		rc = ulp_cat_inode_get(st->cat, ULP_ROOT_INO, &row);
		if (rc == 0) {
			w->uid = row.uid;
			w->gid = row.gid;
			w->perm = 0400;
		}
		return rc;
	}
	if (rc < 0)
		return rc;
	w->uid = row.uid;
	w->gid = row.gid;
	w->perm = row.mode & 07777;
	return ulp_cat_xattr(st->cat, row.ino, ULP_ACL_ACCESS, &w->acl,
	                     &w->len);
}

static const void *blob(sqlite3_stmt *s, int col, size_t *len)
{
	*len = (size_t)sqlite3_column_bytes(s, col);
	return sqlite3_column_blob(s, col);
}

static int vview_row(ulp_store *st, uint64_t vid, vview *w)
{
	ULP_MU_HELD(st);
	static const char Q[] = "SELECT uid, gid, perm, reach, reach_users, "
				"acl, ino, path FROM versions WHERE id = ?";
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q, "u", vid);
	int rc = ulp_cat_step(st->cat, s);
	size_t n;
	const void *b;

	memset(w, 0, sizeof *w);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	if (sqlite3_column_type(s, 2) == SQLITE_NULL) {
		uint64_t ino = (uint64_t)sqlite3_column_int64(s, 6);
		char *path = strdup((const char *)sqlite3_column_text(s, 7));
		ulp_cat_done(s);
		rc = path ? fallback(st, ino, path, w) : -ENOMEM;
		free(path);
		return rc;
	}
	w->uid = (uid_t)sqlite3_column_int64(s, 0);
	w->gid = (gid_t)sqlite3_column_int64(s, 1);
	w->perm = (uint32_t)sqlite3_column_int64(s, 2);
	w->reach.classes = (unsigned)sqlite3_column_int64(s, 3) & ULP_REACH_ALL;
	b = blob(s, 4, &n);
	ulp_vperm_users_unpack(b, n, &w->reach);
	b = blob(s, 5, &w->len);
	if (b && w->len && !(w->acl = malloc(w->len)))
		rc = -ENOMEM;
	else if (b && w->len)
		memcpy(w->acl, b, w->len);
	ulp_cat_done(s);
	return rc < 0 ? rc : 0;
}

/* The view of version vid: owner, group, mode and ACL (malloc()ed). */
static int vview_get(ulp_store *st, uint64_t vid, ulp_version_perm *p,
                     uint8_t **acl, size_t *len)
{
	vview w;
	uint32_t mode;
	pthread_mutex_lock(&st->mu);
	int rc = vview_row(st, vid, &w);
	pthread_mutex_unlock(&st->mu);
	if (rc == 0)
		rc = ulp_vperm_view(w.perm, w.uid, w.acl, w.len, &w.reach,
		                    &mode, acl, len);
	if (rc == -EINVAL) /* not an ACL: the owner's alone */
		rc = ulp_vperm_view(w.perm & 0700, w.uid, NULL, 0, &w.reach,
		                    &mode, acl, len);
	free(w.acl);
	if (rc == 0 && p) {
		p->uid = w.uid;
		p->gid = w.gid;
		p->mode = mode;
	}
	return rc;
}

int ulp_version_perm_get(ulp_store *st, uint64_t vid, ulp_version_perm *out)
{
	uint8_t *acl;
	size_t len;
	int rc = vview_get(st, vid, out, &acl, &len);
	if (rc == 0)
		free(acl);
	return rc;
}

/* An ACL view into buf, as ulp_xattr_get answers; frees acl. */
static ssize_t acl_out(uint8_t *acl, size_t len, void *buf, size_t size)
{
	ssize_t rc = (ssize_t)len;
	if (!acl)
		rc = -ENODATA;
	else if (size && size < len)
		rc = -ERANGE;
	else if (size)
		memcpy(buf, acl, len);
	free(acl);
	return rc;
}

ssize_t ulp_version_acl_get(ulp_store *st, uint64_t vid, void *buf, size_t size)
{
	uint8_t *acl;
	size_t len;
	int rc = vview_get(st, vid, NULL, &acl, &len);
	return rc < 0 ? rc : acl_out(acl, len, buf, size);
}

ssize_t ulp_xattr_acl_readonly(ulp_store *st, uint64_t ino, void *buf,
                               size_t size)
{
	const ulp_vperm_reach all = { .classes = ULP_REACH_ALL };
	uint8_t *acl, *view = NULL;
	size_t len, vlen = 0;
	uint32_t mode;
	pthread_mutex_lock(&st->mu);
	int rc = ulp_cat_xattr(st->cat, ino, ULP_ACL_ACCESS, &acl, &len);
	pthread_mutex_unlock(&st->mu);
	if (rc == 0 && acl)
		rc = ulp_vperm_view(0, 0, acl, len, &all, &mode, &view, &vlen);
	free(acl);
	if (rc == -EINVAL)
		return -ENODATA; /* not an ACL: none, rather than a wrong one */
	return rc < 0 ? rc : acl_out(view, vlen, buf, size);
}
