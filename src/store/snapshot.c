/*
 * snapshot.c - named snapshots: sets of (path, version) pins.  The rules
 * that keep pinned versions alive are in versions.c (a version listed in
 * snapshot_items is never released); this file creates, lists, reads and
 * deletes the sets.
 */
#include "store/store_core.h"
#include "store/objects.h"
#include "store/versions.h"
#include "store/snap_tree.h"

static int name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n <= 255 && name[0] != '.' && !strchr(name, '/');
}

static const char Q_SNAP_ID[] = "SELECT id FROM snapshots WHERE name = ?";
static const char Q_SNAP_NEW[] = "INSERT INTO snapshots(name, created)"
				 " VALUES(?, ?)";
/* The current committed version of every file below an inode, at the
 * file's path now (a version row keeps the path it was committed at,
 * which a later rename does not change). */
static const char Q_PIN[] = "WITH RECURSIVE t(ino, path) AS ("
			    " SELECT ?2, ?3"
			    " UNION ALL"
			    " SELECT d.ino, CASE WHEN t.path = '' THEN d.name"
			    "  ELSE t.path || '/' || d.name END"
			    " FROM dirents AS d JOIN t ON d.parent = t.ino)"
			    " INSERT OR IGNORE INTO snapshot_items"
			    "(snapshot, path, version)"
			    " SELECT ?1, t.path, i.version FROM t"
			    " JOIN inodes AS i ON i.ino = t.ino"
			    " WHERE i.kind = 1 AND i.version IS NOT NULL";

int ulp_snapshot_create(ulp_store *st, const char *name,
                        const char *const *paths, size_t npaths,
                        uint64_t *nitems)
{
	static const char *const root[] = { "" };
	int64_t id;
	int rc;

	if (nitems)
		*nitems = 0;
	if (!name_ok(name))
		return -EINVAL;
	if (npaths == 0) {
		paths = root;
		npaths = 1;
	}
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_begin(st->cat);
	if (rc < 0)
		goto unlock;
	rc = ulp_cat_int(st->cat, &id, Q_SNAP_ID, "s", name);
	if (rc == 1)
		rc = -EEXIST;
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_SNAP_NEW, "si", name,
		                  ulp_now_ns());
	id = ulp_cat_last_rowid(st->cat);
	for (size_t i = 0; rc == 0 && i < npaths; i++) {
		uint64_t ino;
		rc = ulp_ns_resolve(st, paths[i], &ino);
		if (rc == 0)
			rc = ulp_cat_exec(st->cat, Q_PIN, "ius", id, ino,
			                  paths[i]);
		if (rc == 0 && nitems)
			*nitems += (uint64_t)ulp_cat_changes(st->cat);
		if (rc == 0)
			rc = ulp_snap_tree_pin(st, id, ino, paths[i]);
	}
	if (rc == 0)
		rc = ulp_snap_tree_finish(st, id);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	else
		ulp_cat_rollback(st->cat);
unlock:
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static const char Q_SNAP_VERS[] = "SELECT version FROM snapshot_items"
				  " WHERE snapshot = ?";
static const char Q_SNAP_DEL[] = "DELETE FROM snapshots WHERE id = ?";

int ulp_snapshot_delete(ulp_store *st, const char *name)
{
	ulp_obj_list dead = { 0 };
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	int64_t id;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_begin(st->cat);
	if (rc < 0)
		goto unlock;
	rc = ulp_cat_int(st->cat, &id, Q_SNAP_ID, "s", name);
	if (rc == 0)
		rc = -ENOENT;
	if (rc == 1) {
		sqlite3_stmt *s = ulp_cat_q(st->cat, Q_SNAP_VERS, "i", id);
		while ((rc = ulp_cat_step(st->cat, s)) == 1) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 64;
				uint64_t *a = realloc(ids, nc * sizeof *a);
				if (!a) {
					ulp_cat_done(s);
					rc = -ENOMEM;
					break;
				}
				ids = a;
				cap = nc;
			}
			ids[n++] = (uint64_t)sqlite3_column_int64(s, 0);
		}
	}
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_SNAP_DEL, "i", id);
	/* A version this snapshot kept that is no file's current one is
	 * history now, under the rule of any other (ulp_versions_retire):
	 * it goes if its path is gone. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = ulp_version_is_current_locked(st, ids[i]);
		if (rc == 0)
			rc = ulp_versions_retire(st, ids[i], &dead);
		else if (rc == 1)
			rc = 0;
	}
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	else
		ulp_cat_rollback(st->cat);
	if (rc < 0)
		dead.n = 0;
unlock:
	pthread_mutex_unlock(&st->mu);
	ulp_obj_reap(st, &dead);
	free(ids);
	return rc;
}

static const char Q_SNAP_INFO[] = "SELECT s.id, s.created, count(i.version),"
				  " coalesce(sum(v.size), 0),"
				  " coalesce(sum(v.stored), 0)"
				  " FROM snapshots AS s"
				  " LEFT JOIN snapshot_items AS i"
				  "  ON i.snapshot = s.id"
				  " LEFT JOIN versions AS v ON v.id = i.version"
				  " WHERE s.name = ? GROUP BY s.id";
static const char Q_SNAP_NAMES[] = "SELECT name FROM snapshots ORDER BY id";

int ulp_snapshot_get(ulp_store *st, const char *name, ulp_snapshot_info *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_SNAP_INFO, "s", name);
	int rc = ulp_cat_step(st->cat, s);
	if (rc == 1) {
		out->id = (uint64_t)sqlite3_column_int64(s, 0);
		out->created_ns = sqlite3_column_int64(s, 1);
		out->items = (uint64_t)sqlite3_column_int64(s, 2);
		out->logical_bytes = (uint64_t)sqlite3_column_int64(s, 3);
		out->stored_bytes = (uint64_t)sqlite3_column_int64(s, 4);
		ulp_cat_done(s);
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_snapshot_list(ulp_store *st, ulp_snapshot_fn fn, void *opaque)
{
	ulp_strv names = { 0 };
	int rc;

	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_SNAP_NAMES, "");
	while ((rc = ulp_cat_step(st->cat, s)) == 1)
		if ((rc = ulp_strv_add(
			     &names, (const char *)sqlite3_column_text(s, 0))) <
		    0) {
			ulp_cat_done(s);
			break;
		}
	pthread_mutex_unlock(&st->mu);
	for (size_t i = 0; rc == 0 && i < names.n; i++) {
		ulp_snapshot_info info;
		rc = ulp_snapshot_get(st, names.v[i], &info);
		if (rc == -ENOENT) {
			rc = 0; /* deleted meanwhile */
			continue;
		}
		if (rc == 0)
			rc = fn(opaque, names.v[i], &info);
	}
	ulp_strv_free(&names);
	return rc;
}

static const char Q_ITEMS[] = "SELECT " ULP_VCOLS ", ipath FROM ("
			      " SELECT v.*, i.path AS ipath"
			      " FROM snapshot_items AS i"
			      " JOIN versions AS v ON v.id = i.version"
			      " WHERE i.snapshot = ?1"
			      " AND (?2 = '' OR i.path = ?2"
			      "  OR (i.path >= ?3 AND i.path < ?4)))"
			      " ORDER BY ipath";

typedef struct item_row {
	ulp_version_info v;
	char *path;
} item_row;

int ulp_snapshot_items(ulp_store *st, const char *name, const char *prefix,
                       ulp_snapshot_item_fn fn, void *opaque)
{
	item_row *rows = NULL;
	size_t n = 0, cap = 0;
	char *lo = NULL, *hi = NULL;
	int64_t id;
	int rc = ulp_path_range(prefix, &lo, &hi);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &id, Q_SNAP_ID, "s", name);
	if (rc == 0)
		rc = -ENOENT;
	if (rc == 1) {
		sqlite3_stmt *s =
			ulp_cat_q(st->cat, Q_ITEMS, "isss", id, prefix, lo, hi);
		while ((rc = ulp_cat_step(st->cat, s)) == 1) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				item_row *r = realloc(rows, nc * sizeof *r);
				if (!r) {
					ulp_cat_done(s);
					rc = -ENOMEM;
					break;
				}
				rows = r;
				cap = nc;
			}
			ulp_version_from_row(s, &rows[n].v);
			const char *p =
				(const char *)sqlite3_column_text(s, 17);
			rows[n].path = strdup(p ? p : "");
			if (!rows[n].path) {
				ulp_cat_done(s);
				rc = -ENOMEM;
				break;
			}
			n++;
		}
	}
	pthread_mutex_unlock(&st->mu);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = fn(opaque, rows[i].path, &rows[i].v);
	for (size_t i = 0; i < n; i++)
		free(rows[i].path);
	free(rows);
	free(lo);
	free(hi);
	return rc;
}

static const char Q_ITEM_AT[] = "SELECT version FROM snapshot_items"
				" WHERE snapshot = ? AND path = ?";
static const char Q_ITEM_UNDER[] = "SELECT 1 FROM snapshot_items"
				   " WHERE snapshot = ? AND path >= ?"
				   " AND path < ? LIMIT 1";

int ulp_snapshot_lookup(ulp_store *st, const char *name, const char *path,
                        uint64_t *vid)
{
	char *lo = NULL, *hi = NULL;
	int64_t id, v = 0;
	int rc = ulp_path_range(path, &lo, &hi);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &id, Q_SNAP_ID, "s", name);
	if (rc == 1 && path[0]) {
		rc = ulp_cat_int(st->cat, &v, Q_ITEM_AT, "is", id, path);
		if (rc == 1) {
			*vid = (uint64_t)v;
			rc = 1;
		} else if (rc == 0) {
			rc = ulp_cat_int(st->cat, &v, Q_ITEM_UNDER, "iss", id,
			                 lo, hi);
			rc = rc == 1 ? 2 : rc;
		}
	} else if (rc == 1) {
		rc = 2; /* the snapshot's root */
	}
	pthread_mutex_unlock(&st->mu);
	free(lo);
	free(hi);
	return rc == 0 ? -ENOENT : rc;
}
