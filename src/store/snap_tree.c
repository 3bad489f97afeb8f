/*
 * snap_tree.c - what a snapshot keeps besides its pins: every entry below
 * the pinned paths with the attributes of its inode (special files,
 * symlinks, empty directories, owners, modes, times), hard links as one
 * inode with several names, and the extended attributes and ACLs
 * (tables snapshot_nodes and snapshot_xattrs, schema 6).  snapshot.c
 * calls the pinning inside its transaction; the mount's snapshot tree
 * and "ulpfs restore" read them here (the xattrs through xattr.c).
 *
 * Snapshots taken before schema 6 have pins only: their entries are
 * reported as not recorded (a file of its pinned version, or a directory
 * implied by the paths below it), as they were shown before.
 */
#include "store/snap_tree.h"
#include "store/ns_internal.h"
#include "store/versions.h"

/* Every inode below (ino, path): a regular file only with a committed
 * version (its pin), sized and timed as that version when what is staged
 * is newer. */
static const char Q_NODES[] =
	"WITH RECURSIVE t(ino, path) AS ("
	" SELECT ?2, ?3"
	" UNION ALL"
	" SELECT d.ino, CASE WHEN t.path = '' THEN d.name"
	"  ELSE t.path || '/' || d.name END"
	" FROM dirents AS d JOIN t ON d.parent = t.ino)"
	" INSERT OR IGNORE INTO snapshot_nodes(snapshot, path, ino, kind,"
	" mode, uid, gid, rdev, nlink, size, atime, mtime, ctime, target,"
	" version)"
	" SELECT ?1, t.path, i.ino, i.kind, i.mode, i.uid, i.gid, i.rdev,"
	" i.nlink, CASE WHEN i.kind = 1 THEN v.size ELSE i.size END,"
	" i.atime, CASE WHEN i.kind = 1 AND i.staged THEN v.mtime"
	"  ELSE i.mtime END, i.ctime, i.target, i.version"
	" FROM t JOIN inodes AS i ON i.ino = t.ino"
	" LEFT JOIN versions AS v ON v.id = i.version"
	" WHERE i.kind <> 1 OR i.version IS NOT NULL";

int ulp_snap_tree_pin(ulp_store *st, int64_t snap, uint64_t ino,
                      const char *path)
{
	return ulp_cat_exec(st->cat, Q_NODES, "ius", snap, ino, path);
}

/* A file's links are the names it has in the snapshot (a subtree may
 * hold fewer than the live tree); a directory's count holds, as every
 * subdirectory below a pinned path is pinned. */
static const char Q_NLINK[] = "UPDATE snapshot_nodes SET nlink = ("
			      " SELECT count(*) FROM snapshot_nodes AS o"
			      " WHERE o.snapshot = ?1"
			      " AND o.ino = snapshot_nodes.ino)"
			      " WHERE snapshot = ?1 AND kind <> 2";
static const char Q_XATTRS[] = "INSERT OR IGNORE INTO snapshot_xattrs"
			       "(snapshot, ino, name, value)"
			       " SELECT ?1, x.ino, x.name, x.value"
			       " FROM xattrs AS x WHERE x.ino IN ("
			       "  SELECT ino FROM snapshot_nodes"
			       "  WHERE snapshot = ?1)";

int ulp_snap_tree_finish(ulp_store *st, int64_t snap)
{
	int rc = ulp_cat_exec(st->cat, Q_NLINK, "i", snap);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_XATTRS, "i", snap);
	return rc;
}

/* --------------------------------------------------------------- reading */

#define NODE_COLS                                                       \
	"n.ino, n.kind, n.mode, n.uid, n.gid, n.rdev, n.nlink, n.size," \
	" n.atime, n.mtime, n.ctime, n.version, n.path"

static void ts_of(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
}

static void node_from_row(sqlite3_stmt *s, ulp_snapshot_node *n)
{
	memset(n, 0, sizeof(*n));
	n->recorded = 1;
	n->a.ino = (uint64_t)sqlite3_column_int64(s, 0);
	n->a.mode = (mode_t)sqlite3_column_int64(s, 2);
	n->a.uid = (uid_t)sqlite3_column_int64(s, 3);
	n->a.gid = (gid_t)sqlite3_column_int64(s, 4);
	n->a.rdev = (uint64_t)sqlite3_column_int64(s, 5);
	n->a.nlink = (uint32_t)sqlite3_column_int64(s, 6);
	n->a.size = (uint64_t)sqlite3_column_int64(s, 7);
	ts_of(sqlite3_column_int64(s, 8), &n->a.atime);
	ts_of(sqlite3_column_int64(s, 9), &n->a.mtime);
	ts_of(sqlite3_column_int64(s, 10), &n->a.ctime);
	n->version = (uint64_t)sqlite3_column_int64(s, 11);
}

static const char Q_SNAP[] = "SELECT id FROM snapshots WHERE name = ?";
static const char Q_NODE[] = "SELECT " NODE_COLS " FROM snapshot_nodes AS n"
			     " WHERE n.snapshot = ? AND n.path = ?";
static const char Q_PIN[] = "SELECT version FROM snapshot_items"
			    " WHERE snapshot = ? AND path = ?";
static const char Q_UNDER[] = "SELECT 1 WHERE EXISTS ("
			      " SELECT 1 FROM snapshot_items WHERE"
			      "  snapshot = ?1 AND path >= ?2 AND path < ?3)"
			      " OR EXISTS (SELECT 1 FROM snapshot_nodes WHERE"
			      "  snapshot = ?1 AND path >= ?2 AND path < ?3)";

/* The live directory at path, if there is one (*ino 0 if not): 1 or
 * -errno.  mu held. */
static int live_dir(ulp_store *st, const char *path, uint64_t *ino)
{
	ulp_cat_inode row;
	int rc = ulp_ns_resolve(st, path, ino);
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, *ino, &row);
	if (rc == 0 && row.kind == ULP_KIND_DIR)
		return 1;
	*ino = 0;
	return rc == 0 || rc == -ENOENT ? 1 : rc;
}

/* The entry path of snapshot id: 0 or -ENOENT.  mu held. */
static int node_locked(ulp_store *st, int64_t id, const char *path,
                       ulp_snapshot_node *out)
{
	char *lo = NULL, *hi = NULL;
	int64_t v;
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_NODE, "is", id, path);
	int rc = ulp_cat_step(st->cat, s);

	if (rc == 1) {
		node_from_row(s, out);
		ulp_cat_done(s);
		return 0;
	}
	if (rc == 0)
		rc = ulp_cat_int(st->cat, &v, Q_PIN, "is", id, path);
	if (rc == 1) {
		out->a.mode = S_IFREG; /* a pin of an older snapshot */
		out->version = (uint64_t)v;
		return 0;
	}
	if (rc == 0 && !path[0])
		rc = 1; /* the root of an older snapshot */
	else if (rc == 0 && (rc = ulp_path_range(path, &lo, &hi)) == 0)
		rc = ulp_cat_int(st->cat, &v, Q_UNDER, "iss", id, lo, hi);
	free(lo);
	free(hi);
	if (rc == 1) {
		out->a.mode = S_IFDIR; /* implied by the paths below it */
		rc = live_dir(st, path, &out->live);
	}
	return rc == 1 ? 0 : rc == 0 ? -ENOENT : rc;
}

int ulp_snapshot_node_get(ulp_store *st, const char *snap, const char *path,
                          ulp_snapshot_node *out)
{
	int64_t id;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &id, Q_SNAP, "s", snap);
	if (rc == 1)
		rc = node_locked(st, id, path, out);
	else if (rc == 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* The names directly below path: the first component of what follows
 * "path/" in the pins and the recorded entries, once each, sorted. */
static const char Q_CHILDREN[] =
	"WITH p(rest) AS ("
	" SELECT substr(path, ?4) FROM snapshot_items"
	"  WHERE snapshot = ?1 AND path >= ?2 AND path < ?3"
	" UNION ALL SELECT substr(path, ?4) FROM snapshot_nodes"
	"  WHERE snapshot = ?1 AND path >= ?2 AND path < ?3),"
	" c(name) AS (SELECT CASE WHEN instr(rest, '/') > 0"
	"  THEN substr(rest, 1, instr(rest, '/') - 1) ELSE rest END FROM p)"
	" SELECT DISTINCT name FROM c WHERE name <> '' ORDER BY name";

int ulp_snapshot_children(ulp_store *st, const char *snap, const char *path,
                          ulp_snapshot_name_fn fn, void *opaque)
{
	ulp_strv names = { 0 };
	char *lo = NULL, *hi = NULL;
	int64_t id;
	int rc = ulp_path_range(path, &lo, &hi);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &id, Q_SNAP, "s", snap);
	if (rc == 1) {
		/* substr() counts from 1; "a/b" is followed by "a/b/". */
		int64_t from = path[0] ? (int64_t)strlen(path) + 2 : 1;
		sqlite3_stmt *s = ulp_cat_q(st->cat, Q_CHILDREN, "issi", id, lo,
		                            hi, from);
		while ((rc = ulp_cat_step(st->cat, s)) == 1)
			if ((rc = ulp_strv_add(
				     &names, (const char *)sqlite3_column_text(
						     s, 0))) < 0) {
				ulp_cat_done(s);
				break;
			}
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	/* Called unlocked: fn may call into the store. */
	pthread_mutex_unlock(&st->mu);
	for (size_t i = 0; rc == 0 && i < names.n; i++)
		rc = fn(opaque, names.v[i]);
	ulp_strv_free(&names);
	free(lo);
	free(hi);
	return rc < 0 ? rc : 0;
}

int ulp_snapshot_readlink(ulp_store *st, const char *snap, const char *path,
                          char *buf, size_t size)
{
	static const char Q[] = "SELECT n.kind, n.target FROM snapshot_nodes"
				" AS n JOIN snapshots AS s ON s.id = n.snapshot"
				" WHERE s.name = ? AND n.path = ?";
	int rc;

	if (size == 0)
		return -ERANGE;
	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_target_of(st, ulp_cat_q(st->cat, Q, "ss", snap, path), buf,
	                      size);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Recorded entries with their paths, collected before calling back. */
typedef struct node_row {
	ulp_snapshot_node n;
	char *path, *target;
} node_row;

static const char Q_ALL[] = "SELECT " NODE_COLS ", n.target"
			    " FROM snapshot_nodes AS n"
			    " WHERE n.snapshot = ? ORDER BY n.path";

int ulp_snapshot_nodes(ulp_store *st, const char *snap, ulp_snapshot_node_fn fn,
                       void *opaque)
{
	node_row *rows = NULL;
	size_t n = 0, cap = 0;
	int64_t id;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &id, Q_SNAP, "s", snap);
	if (rc == 0)
		rc = -ENOENT;
	sqlite3_stmt *s = rc == 1 ? ulp_cat_q(st->cat, Q_ALL, "i", id) : NULL;
	while (rc == 1 && (rc = ulp_cat_step(st->cat, s)) == 1) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			node_row *r = realloc(rows, nc * sizeof(*r));
			if (!r) {
				ulp_cat_done(s);
				rc = -ENOMEM;
				break;
			}
			rows = r;
			cap = nc;
		}
		const char *p = (const char *)sqlite3_column_text(s, 12);
		const char *t = (const char *)sqlite3_column_text(s, 13);
		node_from_row(s, &rows[n].n);
		rows[n].path = strdup(p ? p : "");
		rows[n].target = t ? strdup(t) : NULL;
		n++;
		if (!rows[n - 1].path || (t && !rows[n - 1].target)) {
			ulp_cat_done(s);
			rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&st->mu);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rows[i].n.target = rows[i].target;
		rc = fn(opaque, rows[i].path, &rows[i].n);
	}
	for (size_t i = 0; i < n; i++) {
		free(rows[i].path);
		free(rows[i].target);
	}
	free(rows);
	return rc;
}
