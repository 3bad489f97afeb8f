/*
 * xattr.c - extended attributes, kept in the catalog (table xattrs), and
 * the inheritance of default POSIX ACLs by new inodes.
 *
 * The kernel checks who may touch which namespace (trusted.* needs
 * CAP_SYS_ADMIN, user.* only on files and directories) and, mounted with
 * default_permissions and POSIX ACLs, enforces the ACLs and keeps the
 * mode bits in step with system.posix_acl_access itself.  The store keeps
 * the bytes, checks names, sizes and flags, and changes ctime in the same
 * transaction.
 */
#include "store/store_core.h"
#include "store/inode.h"

#include "store/ns_internal.h"

static const char *const prefixes[] = { "user.", "trusted.", "security.",
	                                NULL };

static int check_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0)
		return -EINVAL;
	if (n > ULP_XATTR_NAME_MAX)
		return -ERANGE;
	if (strcmp(name, ULP_ACL_ACCESS) == 0 ||
	    strcmp(name, ULP_ACL_DEFAULT) == 0)
		return 0;
	for (size_t i = 0; prefixes[i]; i++) {
		size_t p = strlen(prefixes[i]);
		if (strncmp(name, prefixes[i], p) == 0)
			return n > p ? 0 : -EINVAL;
	}
	return -EOPNOTSUPP;
}

/* ctime = now for ino, in the catalog and over an open file's times. */
static int touch_ctime(ulp_store *st, uint64_t ino)
{
	static const char Q[] = "UPDATE inodes SET ctime = ? WHERE ino = ?";
	int64_t now = ulp_now_ns();
	ulp_inode *in = ulp_inode_find(st, ino);
	int rc = ulp_cat_exec(st->cat, Q, "iu", now, ino);

	if (rc == 0 && in && in->times_dirty)
		in->ctime = now;
	return rc;
}

/* End a change of ino's attributes begun with ulp_cat_begin: ctime, then
 * commit, or roll back after an error rc. */
static int finish(ulp_store *st, uint64_t ino, int rc)
{
	if (rc == 0)
		rc = touch_ctime(st, ino);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	if (rc < 0)
		ulp_cat_rollback(st->cat);
	return rc;
}

static const char Q_DEL[] = "DELETE FROM xattrs WHERE ino = ? AND name = "
			    "?";
static const char Q_GET[] = "SELECT value FROM xattrs WHERE ino = ? AND "
			    "name = ?";

int ulp_xattr_set(ulp_store *st, uint64_t ino, const char *name,
                  const void *value, size_t size, unsigned flags)
{
	static const char Q_PUT[] = "INSERT OR REPLACE INTO xattrs(ino, name, "
				    "value) VALUES(?, ?, ?)";
	static const char Q_TOTAL[] = "SELECT coalesce(sum(length(name) + 1 +"
				      " length(value)), 0) FROM xattrs WHERE"
				      " ino = ? AND name <> ?";
	ulp_cat_inode row;
	int64_t have = 0, total = 0;
	int rc = check_name(name);

	if (rc < 0)
		return rc;
	if (size > ULP_XATTR_SIZE_MAX)
		return -E2BIG;
	if ((flags & ULP_XATTR_CREATE) && (flags & ULP_XATTR_REPLACE))
		return -EINVAL;
	if (!value)
		value = ""; /* an empty value, not NULL */
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0 && strcmp(name, ULP_ACL_DEFAULT) == 0 &&
	    row.kind != ULP_KIND_DIR)
		rc = size ? -EACCES : 0; /* as Linux: only directories */
	if (rc == 0)
		rc = ulp_cat_begin(st->cat);
	if (rc < 0)
		goto out;
	rc = ulp_cat_int(st->cat, &have, Q_GET, "us", ino, name);
	if (rc >= 0 && rc == 1 && (flags & ULP_XATTR_CREATE))
		rc = -EEXIST;
	else if (rc == 0 && (flags & ULP_XATTR_REPLACE))
		rc = -ENODATA;
	if (rc >= 0)
		rc = ulp_cat_int(st->cat, &total, Q_TOTAL, "us", ino, name);
	/* What one listxattr(2) and a local filesystem's inode can hold. */
	if (rc >= 0 &&
	    (uint64_t)total + strlen(name) + 1 + size > ULP_XATTR_INODE_MAX)
		rc = -ENOSPC;
	int store_it = 1;
	if (rc >= 0 && strcmp(name, ULP_ACL_ACCESS) == 0)
		rc = ulp_acl_access_set(st, &row, value, size, &store_it);
	if (rc >= 0 && store_it)
		rc = ulp_cat_exec(st->cat, Q_PUT, "usb", ino, name, value,
		                  size);
	else if (rc >= 0)
		rc = ulp_cat_exec(st->cat, Q_DEL, "us", ino, name);
	rc = finish(st, ino, rc);
out:
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* The value a query of one blob column found, as getxattr(2) returns it:
 * its length (copied into buf unless size is 0), -ERANGE, -ENODATA. */
static ssize_t value_of(ulp_store *st, sqlite3_stmt *s, void *buf, size_t size)
{
	int r = ulp_cat_step(st->cat, s);
	ssize_t rc;

	if (r != 1)
		return r < 0 ? r : -ENODATA;
	size_t n = (size_t)sqlite3_column_bytes(s, 0);
	if (size && n > size) {
		rc = -ERANGE;
	} else {
		if (size && n)
			memcpy(buf, sqlite3_column_blob(s, 0), n);
		rc = (ssize_t)n;
	}
	ulp_cat_done(s);
	return rc;
}

/* The names a query of one text column found, as listxattr(2) returns
 * them: NUL-terminated, the total length, or -ERANGE. */
static ssize_t names_of(ulp_store *st, sqlite3_stmt *s, char *buf, size_t size)
{
	size_t len = 0;
	int rc;

	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		const char *n = (const char *)sqlite3_column_text(s, 0);
		size_t k = strlen(n ? n : "") + 1;
		if (size && len + k > size) {
			ulp_cat_done(s);
			return -ERANGE;
		}
		if (size)
			memcpy(buf + len, n ? n : "", k);
		len += k;
	}
	return rc < 0 ? rc : (ssize_t)len;
}

ssize_t ulp_xattr_get(ulp_store *st, uint64_t ino, const char *name, void *buf,
                      size_t size)
{
	ulp_cat_inode row;
	ssize_t rc = check_name(name);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0)
		rc = value_of(st, ulp_cat_q(st->cat, Q_GET, "us", ino, name),
		              buf, size);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

ssize_t ulp_xattr_list(ulp_store *st, uint64_t ino, char *buf, size_t size)
{
	static const char Q[] = "SELECT name FROM xattrs WHERE ino = ? ORDER "
				"BY name";
	ulp_cat_inode row;
	ssize_t rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0)
		rc = names_of(st, ulp_cat_q(st->cat, Q, "u", ino), buf, size);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* A snapshot's copy of an inode's attributes (snap_tree.c pins them):
 * -ENOENT when the snapshot has no such inode. */
static const char Q_SNAP_HAS[] = "SELECT 1 FROM snapshot_nodes AS n"
				 " JOIN snapshots AS s ON s.id = n.snapshot"
				 " WHERE s.name = ? AND n.ino = ? LIMIT 1";

ssize_t ulp_snapshot_xattr_get(ulp_store *st, const char *snap, uint64_t ino,
                               const char *name, void *buf, size_t size)
{
	static const char Q[] = "SELECT x.value FROM snapshot_xattrs AS x"
				" JOIN snapshots AS s ON s.id = x.snapshot"
				" WHERE s.name = ? AND x.ino = ? AND x.name = "
				"?";
	int64_t one;
	ssize_t rc = check_name(name);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &one, Q_SNAP_HAS, "su", snap, ino);
	if (rc == 1)
		rc = value_of(st, ulp_cat_q(st->cat, Q, "sus", snap, ino, name),
		              buf, size);
	else if (rc == 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

ssize_t ulp_snapshot_xattr_list(ulp_store *st, const char *snap, uint64_t ino,
                                char *buf, size_t size)
{
	static const char Q[] = "SELECT x.name FROM snapshot_xattrs AS x"
				" JOIN snapshots AS s ON s.id = x.snapshot"
				" WHERE s.name = ? AND x.ino = ? ORDER BY "
				"x.name";
	int64_t one;
	ssize_t rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &one, Q_SNAP_HAS, "su", snap, ino);
	if (rc == 1)
		rc = names_of(st, ulp_cat_q(st->cat, Q, "su", snap, ino), buf,
		              size);
	else if (rc == 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_xattr_remove(ulp_store *st, uint64_t ino, const char *name)
{
	ulp_cat_inode row;
	int rc = check_name(name);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0)
		rc = ulp_cat_begin(st->cat);
	if (rc < 0)
		goto out;
	rc = ulp_cat_exec(st->cat, Q_DEL, "us", ino, name);
	if (rc == 0 && ulp_cat_changes(st->cat) == 0)
		rc = -ENODATA;
	rc = finish(st, ino, rc);
out:
	pthread_mutex_unlock(&st->mu);
	return rc;
}
