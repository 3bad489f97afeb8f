/*
 * versions.c - version rows, paths of inodes, and the rules that end
 * versions: history of a path is kept while the path exists; a version
 * nothing may read any more is released: deleted at once when no other
 * version references it (as its reference or as its side), else turned
 * into a ghost that gc.c rebases away.
 */
#include "store/versions.h"

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

int ulp_ns_path_alloc(ulp_store *st, uint64_t ino, char **out)
{
	ULP_MU_HELD(st);
	char *path = NULL;
	size_t len = 0;
	unsigned depth = 0;
	int rc = 0;

	*out = NULL;
	while (ino != ULP_ROOT_INO) {
		uint64_t parent;
		char *name = NULL;

		if (++depth > 4096) {
			rc = -ELOOP; /* a cycle: the catalog is damaged */
			break;
		}
		rc = ulp_cat_entry_of(st->cat, ino, &parent, &name);
		if (rc < 0)
			break;
		size_t nl = strlen(name);
		char *p = malloc(nl + (len ? len + 1 : 0) + 1);
		if (!p) {
			free(name);
			rc = -ENOMEM;
			break;
		}
		memcpy(p, name, nl);
		if (len) {
			p[nl] = '/';
			memcpy(p + nl + 1, path, len);
			len += nl + 1;
		} else {
			len = nl;
		}
		p[len] = '\0';
		free(name);
		free(path);
		path = p;
		ino = parent;
	}
	if (rc < 0) {
		free(path);
		return rc;
	}
	if (!path && !(path = strdup("")))
		return -ENOMEM;
	*out = path;
	return 0;
}

int ulp_ns_resolve(ulp_store *st, const char *path, uint64_t *ino)
{
	char name[256];

	ULP_MU_HELD(st);
	*ino = ULP_ROOT_INO;
	while (*path) {
		const char *slash = strchr(path, '/');
		size_t n = slash ? (size_t)(slash - path) : strlen(path);

		if (n == 0 || n >= sizeof name)
			return -ENOENT;
		memcpy(name, path, n);
		name[n] = '\0';
		int rc = ulp_cat_lookup(st->cat, *ino, name, ino);
		if (rc < 0)
			return rc;
		path += n + (slash ? 1 : 0);
	}
	return 0;
}

int ulp_ns_path_exists(ulp_store *st, const char *path)
{
	ULP_MU_HELD(st);
	uint64_t ino;
	int rc = ulp_ns_resolve(st, path, &ino);

	return rc == -ENOENT ? 0 : rc < 0 ? rc : 1;
}

static const char Q_SETTLE[] = "SELECT id, object FROM versions AS g WHERE "
			       "state = 1"
			       " AND NOT EXISTS(SELECT 1 FROM versions AS d"
			       "  WHERE (d.ref = g.id OR d.side = g.id)"
			       "  AND d.state <> 2)"
			       " LIMIT 64";
static const char Q_STATE[] = "UPDATE versions SET state = ? WHERE id = ?";
/* A deleted version's figures would only be garbage: stats skips it. */
static const char Q_DROP_BASELINES[] = "DELETE FROM baselines WHERE version "
				       "= ?";
static const char Q_ANY_GHOST[] = "SELECT 1 FROM versions WHERE state = 1 "
				  "LIMIT 1";

int ulp_versions_settle(ulp_store *st, ulp_obj_list *dead)
{
	ULP_MU_HELD(st);
	for (;;) {
		ulp_obj_list batch = { 0 };
		sqlite3_stmt *s = ulp_cat_q(st->cat, Q_SETTLE, "");
		int rc;

		while ((rc = ulp_cat_step(st->cat, s)) == 1) {
			const char *o = (const char *)sqlite3_column_text(s, 1);
			rc = ulp_obj_list_add(
				&batch, (uint64_t)sqlite3_column_int64(s, 0),
				o ? o : "");
			if (rc < 0) {
				ulp_cat_done(s);
				break;
			}
		}
		for (size_t i = 0; rc == 0 && i < batch.n; i++) {
			rc = ulp_cat_exec(st->cat, Q_STATE, "du",
			                  ULP_VERSION_DELETED, batch.v[i].vid);
			if (rc == 0)
				rc = ulp_cat_exec(st->cat, Q_DROP_BASELINES,
				                  "u", batch.v[i].vid);
			if (rc == 0)
				rc = ulp_obj_list_add(dead, batch.v[i].vid,
				                      batch.v[i].name);
		}
		size_t n = batch.n;
		ulp_obj_list_free(&batch);
		if (rc < 0)
			return rc;
		if (n == 0)
			break;
	}
	int64_t one;
	int rc = ulp_cat_int(st->cat, &one, Q_ANY_GHOST, "");
	if (rc == 1)
		ulp_gc_note_work(st);
	return rc < 0 ? rc : 0;
}

/* Pinned by a snapshot, or still named by a file's row: the base of a
 * copy made by reference (ulp_file_copy_version), until that commits. */
static const char Q_PINNED[] = "SELECT 1 FROM snapshot_items WHERE version = ?1"
			       " UNION ALL SELECT 1 FROM inodes"
			       " WHERE version = ?1 LIMIT 1";

int ulp_versions_release(ulp_store *st, uint64_t vid, ulp_obj_list *dead)
{
	ULP_MU_HELD(st);
	int64_t one;
	int rc = ulp_cat_int(st->cat, &one, Q_PINNED, "u", vid);

	if (rc != 0)
		return rc < 0 ? rc : 0;
	static const char Q[] = "UPDATE versions SET state = 1 WHERE id = ? "
				"AND state = 0";
	rc = ulp_cat_exec(st->cat, Q, "u", vid);
	if (rc == 0)
		rc = ulp_versions_settle(st, dead);
	return rc;
}

static const char Q_IS_CURRENT[] = "SELECT 1 FROM inodes WHERE version = ?";

int ulp_version_is_current_locked(ulp_store *st, uint64_t vid)
{
	ULP_MU_HELD(st);
	int64_t one;
	return ulp_cat_int(st->cat, &one, Q_IS_CURRENT, "u", vid);
}

static const char Q_PATH[] = "SELECT path FROM versions WHERE id = ?1"
			     " AND (NOT ?2 OR state = 0)";

int ulp_version_path_locked(ulp_store *st, uint64_t vid, int live, char **path)
{
	ULP_MU_HELD(st);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_PATH, "ud", vid, live);
	int rc = ulp_cat_step(st->cat, s);

	*path = NULL;
	if (rc <= 0)
		return rc;
	const char *t = (const char *)sqlite3_column_text(s, 0);
	*path = strdup(t ? t : "");
	ulp_cat_done(s);
	return *path ? 1 : -ENOMEM;
}

int ulp_versions_retire(ulp_store *st, uint64_t vid, ulp_obj_list *dead)
{
	ULP_MU_HELD(st);
	char *path;
	int rc = ulp_version_path_locked(st, vid, 1, &path);

	if (rc <= 0)
		return rc;
	rc = ulp_ns_path_exists(st, path);
	free(path);
	if (rc == 0)
		rc = ulp_versions_release(st, vid, dead);
	return rc < 0 ? rc : 0;
}

static const char Q_HISTORY[] = "SELECT id FROM versions WHERE state = 0"
				" AND (path = ?1 OR (?2 AND path >= ?3 AND "
				"path < ?4))"
				" AND id NOT IN (SELECT version FROM inodes"
				"  WHERE version IS NOT NULL)"
				" AND id NOT IN (SELECT version FROM "
				"snapshot_items)";

int ulp_path_range(const char *path, char **lo, char **hi)
{
	size_t n = strlen(path);

	*lo = malloc(n + 2);
	*hi = malloc(n + 2);
	if (!*lo || !*hi) {
		free(*lo);
		free(*hi);
		*lo = *hi = NULL;
		return -ENOMEM;
	}
	memcpy(*lo, path, n);
	memcpy(*hi, path, n);
	if (n) {
		(*lo)[n] = '/';
		(*hi)[n] = '0';
		(*lo)[n + 1] = (*hi)[n + 1] = '\0';
	} else {
		/* the root: every path; 0xff starts no UTF-8 sequence, so it
		 * sorts (bytewise) above every path */
		(*lo)[0] = '\0';
		(*hi)[0] = '\xff';
		(*hi)[1] = '\0';
	}
	return 0;
}

int ulp_versions_release_path(ulp_store *st, const char *path, int subtree,
                              ulp_obj_list *dead)
{
	ULP_MU_HELD(st);
	size_t cnt = 0, cap = 0;
	char *lo, *hi;
	uint64_t *ids = NULL;
	int rc = ulp_path_range(path, &lo, &hi);

	if (rc < 0)
		goto out;
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_HISTORY, "sdss", path,
	                            subtree ? 1 : 0, lo, hi);
	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			uint64_t *v = realloc(ids, cap * sizeof *v);
			if (!v) {
				ulp_cat_done(s);
				rc = -ENOMEM;
				break;
			}
			ids = v;
		}
		ids[cnt++] = (uint64_t)sqlite3_column_int64(s, 0);
	}
	if (rc < 0 || cnt == 0)
		goto out;
	static const char Q_GHOST[] = "UPDATE versions SET state = 1 WHERE id "
				      "= ?";
	for (size_t i = 0; i < cnt && rc == 0; i++)
		rc = ulp_cat_exec(st->cat, Q_GHOST, "u", ids[i]);
	if (rc == 0)
		rc = ulp_versions_settle(st, dead);
out:
	free(ids);
	free(lo);
	free(hi);
	return rc;
}

/* Live files renamed: their versions (the current one and the history
 * kept for their paths) follow them to the new path, numbered in order
 * after any history the new path already has.  So `log` and
 * .ulpfs/versions find a file saved into tmp-checkpoint-N/ and then
 * renamed to checkpoint-N/ under the name it lives at, and `mv a b` keeps
 * a's earlier versions as b's.  Paths with no live file (history kept
 * only by a snapshot) stay where they are. */
static const char Q_MOVED[] = "SELECT id, path FROM versions WHERE state = 0"
			      " AND path IN (SELECT path FROM versions WHERE"
			      "  (path = ?1 OR (?2 AND path >= ?3 AND path < "
			      "?4))"
			      "  AND id IN (SELECT version FROM inodes"
			      "   WHERE version IS NOT NULL))"
			      " ORDER BY path, seq";
static const char Q_REPATH[] = "UPDATE versions SET path = ?1, seq ="
			       " (SELECT COALESCE(MAX(seq), 0) + 1 FROM "
			       "versions"
			       "  WHERE path = ?1) WHERE id = ?2";

int ulp_versions_repath(ulp_store *st, const char *old_path,
                        const char *new_path, int subtree)
{
	ULP_MU_HELD(st);
	size_t n = strlen(old_path), cnt = 0, cap = 0;
	char *lo, *hi;
	struct moved {
		uint64_t id;
		char *path;
	} *v = NULL;
	int rc = ulp_path_range(old_path, &lo, &hi);

	if (rc < 0)
		goto out;
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_MOVED, "sdss", old_path,
	                            subtree ? 1 : 0, lo, hi);
	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		const char *p = (const char *)sqlite3_column_text(s, 1);
		struct moved m = { (uint64_t)sqlite3_column_int64(s, 0), NULL };
		/* new path = new_path + what followed old_path */
		if (p && asprintf(&m.path, "%s%s", new_path, p + n) < 0)
			m.path = NULL;
		if (m.path && cnt == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			struct moved *nv = realloc(v, ncap * sizeof(*nv));
			if (nv) {
				v = nv;
				cap = ncap;
			}
		}
		if (!m.path || cnt == cap) {
			free(m.path);
			ulp_cat_done(s);
			rc = -ENOMEM;
			break;
		}
		v[cnt++] = m;
	}
	for (size_t i = 0; i < cnt && rc == 0; i++)
		rc = ulp_cat_exec(st->cat, Q_REPATH, "su", v[i].path, v[i].id);
out:
	for (size_t i = 0; i < cnt; i++)
		free(v[i].path);
	free(v);
	free(lo);
	free(hi);
	return rc;
}

int ulp_versions_tally(ulp_store *st, ulp_store_stats *out)
{
	ULP_MU_HELD(st);
	static const char Q[] = "SELECT state, count(*), coalesce(sum(stored), "
				"0),"
				" coalesce(sum(size), 0) FROM versions GROUP "
				"BY state";
	int rc;

	sqlite3_stmt *s = ulp_cat_q(st->cat, Q, "");
	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		int state = sqlite3_column_int(s, 0);
		if (state < 0 || state > 2)
			continue;
		out->versions[state] = (uint64_t)sqlite3_column_int64(s, 1);
		if (state != ULP_VERSION_DELETED)
			out->stored_bytes +=
				(uint64_t)sqlite3_column_int64(s, 2);
		if (state == ULP_VERSION_LIVE)
			out->logical_bytes =
				(uint64_t)sqlite3_column_int64(s, 3);
	}
	static const char QP[] = "SELECT count(*), coalesce(sum(stored), 0)"
				 " FROM versions"
				 " WHERE plain = 1 AND state <> 2";
	s = rc < 0 ? NULL : ulp_cat_q(st->cat, QP, "");
	if (rc >= 0 && (rc = ulp_cat_step(st->cat, s)) == 1) {
		out->plain_versions = (uint64_t)sqlite3_column_int64(s, 0);
		out->plain_bytes = (uint64_t)sqlite3_column_int64(s, 1);
		ulp_cat_done(s);
		rc = 0;
	}
	return rc;
}
