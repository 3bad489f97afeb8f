/*
 * cat_rows.c - catalog rows shared by several modules: inodes and
 * directory entries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/catalog.h"

static const char Q_INODE_GET[] = "SELECT kind, mode, uid, gid, nlink, size, "
				  "atime, mtime, ctime,"
				  " version, staged, rdev FROM inodes WHERE "
				  "ino = ?";

int ulp_cat_inode_get(ulp_catalog *c, uint64_t ino, ulp_cat_inode *out)
{
	sqlite3_stmt *s = ulp_cat_q(c, Q_INODE_GET, "u", ino);
	int rc = ulp_cat_step(c, s);

	if (rc <= 0)
		return rc ? rc : -ENOENT;
	out->ino = ino;
	out->kind = sqlite3_column_int(s, 0);
	out->mode = (uint32_t)sqlite3_column_int64(s, 1);
	out->uid = (uint32_t)sqlite3_column_int64(s, 2);
	out->gid = (uint32_t)sqlite3_column_int64(s, 3);
	out->nlink = (uint32_t)sqlite3_column_int64(s, 4);
	out->size = (uint64_t)sqlite3_column_int64(s, 5);
	out->atime = sqlite3_column_int64(s, 6);
	out->mtime = sqlite3_column_int64(s, 7);
	out->ctime = sqlite3_column_int64(s, 8);
	out->version = (uint64_t)sqlite3_column_int64(s, 9);
	out->staged = sqlite3_column_int(s, 10);
	out->rdev = (uint64_t)sqlite3_column_int64(s, 11);
	ulp_cat_done(s);
	return 0;
}

static const char Q_INODE_INS[] = "INSERT INTO inodes(kind, mode, uid, gid, "
				  "nlink, size, atime, mtime,"
				  " ctime, target, version, staged, rdev)"
				  " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, "
				  "?, ?)";

int ulp_cat_inode_insert(ulp_catalog *c, ulp_cat_inode *in, const char *target)
{
	int rc = ulp_cat_exec(c, Q_INODE_INS, "diiiiuiiisdu", in->kind,
	                      (int64_t)in->mode, (int64_t)in->uid,
	                      (int64_t)in->gid, (int64_t)in->nlink, in->size,
	                      in->atime, in->mtime, in->ctime, target,
	                      in->staged, in->rdev);
	if (rc == 0)
		in->ino = (uint64_t)ulp_cat_last_rowid(c);
	return rc;
}

static const char Q_INODE_UPD[] = "UPDATE inodes SET mode = ?, uid = ?, gid = "
				  "?, nlink = ?, size = ?,"
				  " atime = ?, mtime = ?, ctime = ? WHERE ino "
				  "= ?";

int ulp_cat_inode_update(ulp_catalog *c, const ulp_cat_inode *in)
{
	return ulp_cat_exec(c, Q_INODE_UPD, "iiiiuiiiu", (int64_t)in->mode,
	                    (int64_t)in->uid, (int64_t)in->gid,
	                    (int64_t)in->nlink, in->size, in->atime, in->mtime,
	                    in->ctime, in->ino);
}

static const char Q_INODE_CONTENT[] = "UPDATE inodes SET version = ?, staged = "
				      "?, size = ?, mtime = ?,"
				      " ctime = ? WHERE ino = ?";

int ulp_cat_inode_content(ulp_catalog *c, uint64_t ino, uint64_t version,
                          int staged, uint64_t size, int64_t mtime,
                          int64_t ctime)
{
	/* version 0 is stored as NULL so the partial index stays small. */
	static const char Q_NULLV[] = "UPDATE inodes SET version = NULL, "
				      "staged = ?, size = ?,"
				      " mtime = ?, ctime = ? WHERE ino = ?";

	if (!version)
		return ulp_cat_exec(c, Q_NULLV, "duiiu", staged, size, mtime,
		                    ctime, ino);
	return ulp_cat_exec(c, Q_INODE_CONTENT, "uduiiu", version, staged, size,
	                    mtime, ctime, ino);
}

int ulp_cat_inode_delete(ulp_catalog *c, uint64_t ino)
{
	static const char Q[] = "DELETE FROM inodes WHERE ino = ?";

	return ulp_cat_exec(c, Q, "u", ino);
}

int ulp_cat_touch_dir(ulp_catalog *c, uint64_t ino, int64_t now,
                      int nlink_delta)
{
	static const char Q[] = "UPDATE inodes SET mtime = ?, ctime = ?,"
				" nlink = nlink + ? WHERE ino = ?";

	return ulp_cat_exec(c, Q, "iidu", now, now, nlink_delta, ino);
}

/* ------------------------------------------------------ entries */

int ulp_cat_lookup(ulp_catalog *c, uint64_t parent, const char *name,
                   uint64_t *ino)
{
	static const char Q[] = "SELECT ino FROM dirents WHERE parent = ? AND "
				"name = ?";
	int64_t v;
	int rc = ulp_cat_int(c, &v, Q, "us", parent, name);

	if (rc == 1)
		*ino = (uint64_t)v;
	return rc < 0 ? rc : rc ? 0 : -ENOENT;
}

int ulp_cat_link(ulp_catalog *c, uint64_t parent, const char *name,
                 uint64_t ino)
{
	static const char Q[] = "INSERT INTO dirents(parent, name, ino) "
				"VALUES(?, ?, ?)";

	return ulp_cat_exec(c, Q, "usu", parent, name, ino);
}

int ulp_cat_unlink(ulp_catalog *c, uint64_t parent, const char *name)
{
	static const char Q[] = "DELETE FROM dirents WHERE parent = ? AND name "
				"= ?";
	int rc = ulp_cat_exec(c, Q, "us", parent, name);

	if (rc == 0 && ulp_cat_changes(c) == 0)
		rc = -ENOENT;
	return rc;
}

int ulp_cat_entry_of(ulp_catalog *c, uint64_t ino, uint64_t *parent,
                     char **name)
{
	/* With hard links an inode has several entries: the oldest one
	 * names it (its path, where its versions are recorded). */
	static const char Q[] = "SELECT parent, name FROM dirents WHERE ino = "
				"? ORDER BY id LIMIT 1";
	sqlite3_stmt *s = ulp_cat_q(c, Q, "u", ino);
	int rc = ulp_cat_step(c, s);

	if (rc <= 0)
		return rc ? rc : -ENOENT;
	*parent = (uint64_t)sqlite3_column_int64(s, 0);
	if (name) {
		const char *t = (const char *)sqlite3_column_text(s, 1);
		*name = strdup(t ? t : "");
		if (!*name)
			rc = -ENOMEM;
	}
	ulp_cat_done(s);
	return rc < 0 ? rc : 0;
}

int ulp_cat_xattr(ulp_catalog *c, uint64_t ino, const char *name, uint8_t **val,
                  size_t *len)
{
	static const char Q[] = "SELECT value FROM xattrs WHERE ino = ? AND "
				"name = ?";
	sqlite3_stmt *s = ulp_cat_q(c, Q, "us", ino, name);
	int rc = ulp_cat_step(c, s);

	*val = NULL;
	*len = 0;
	if (rc != 1)
		return rc;
	*len = (size_t)sqlite3_column_bytes(s, 0);
	*val = malloc(*len ? *len : 1);
	if (*val)
		memcpy(*val, sqlite3_column_blob(s, 0), *len);
	ulp_cat_done(s);
	return *val ? 0 : -ENOMEM;
}

int ulp_cat_dir_empty(ulp_catalog *c, uint64_t ino)
{
	static const char Q[] = "SELECT 1 FROM dirents WHERE parent = ? LIMIT "
				"1";
	int64_t v;
	int rc = ulp_cat_int(c, &v, Q, "u", ino);

	return rc < 0 ? rc : !rc;
}
