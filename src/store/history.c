/*
 * history.c - queries and upkeep on the history of one path: finding a
 * version by number, what stats needs of a version (and the baseline
 * figures it keeps), and prune.  The encoder statistics' blob is tmap.c's.
 */
#include "store/tmap.h"
#include "store/objects.h"
#include "store/versions.h"

/* ------------------------------------------------------------ queries */

static const char Q_FIND[] = "SELECT " ULP_VCOLS " FROM versions"
			     " WHERE path = ? AND seq = ? AND state <> 2";
static const char Q_NEWEST[] = "SELECT " ULP_VCOLS " FROM versions"
			       " WHERE path = ? AND state <> 2"
			       " ORDER BY seq DESC LIMIT 1";

int ulp_version_find(ulp_store *st, const char *path, uint64_t seq,
                     ulp_version_info *out)
{
	char *canon = NULL;

	pthread_mutex_lock(&st->mu);
	path = ulp_ns_history_path(st, path, &canon);
	sqlite3_stmt *s = seq ? ulp_cat_q(st->cat, Q_FIND, "su", path, seq)
	                      : ulp_cat_q(st->cat, Q_NEWEST, "s", path);
	int rc = ulp_cat_step(st->cat, s);
	if (rc == 1) {
		ulp_version_from_row(s, out);
		ulp_cat_done(s);
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&st->mu);
	free(canon);
	return rc;
}

static const char Q_GET_PATH[] = "SELECT " ULP_VCOLS " FROM versions"
				 " WHERE id = ?";

int ulp_version_get_path(ulp_store *st, uint64_t id, ulp_version_info *out,
                         char **path)
{
	*path = NULL;
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_GET_PATH, "u", id);
	int rc = ulp_cat_step(st->cat, s);
	if (rc == 1) {
		ulp_version_from_row(s, out);
		const char *p = (const char *)sqlite3_column_text(s, 14);
		*path = strdup(p ? p : "");
		ulp_cat_done(s);
		rc = *path ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static const char Q_USAGE[] = "SELECT tmap, estats FROM versions WHERE id = ?";

int ulp_version_usage(ulp_store *st, uint64_t id, int *format, ulp_stats *stats)
{
	ulp_tensor_map map = { ULP_FMT_UNKNOWN, 0, NULL };
	int rc, have = 0;

	*format = ULP_FMT_UNKNOWN;
	memset(stats, 0, sizeof *stats);
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_USAGE, "u", id);
	rc = ulp_cat_step(st->cat, s);
	if (rc == 1) {
		const void *t = sqlite3_column_blob(s, 0);
		size_t tn = (size_t)sqlite3_column_bytes(s, 0);
		rc = t ? ulp_tmap_decode(t, tn, &map) : 0;
		if (rc == 0)
			*format = map.format;
		have = ulp_estats_decode(sqlite3_column_blob(s, 1),
		                         (size_t)sqlite3_column_bytes(s, 1),
		                         stats);
		ulp_cat_done(s);
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&st->mu);
	ulp_tensor_map_free(&map);
	return rc < 0 ? rc : have;
}

/* ------------------------------------------------------------ baselines */

static const char Q_BASE_GET[] = "SELECT b.bytes FROM baselines AS b"
				 " JOIN versions AS v ON v.id = b.version"
				 " WHERE b.version = ? AND b.name = ?"
				 " AND v.state <> 2";
/* Only for a version that still has bytes: settling a version deletes its
 * rows (versions.c), and under st->mu a put cannot land after that. */
static const char Q_BASE_PUT[] = "INSERT OR REPLACE INTO baselines(version,"
				 " name, bytes) SELECT ?1, ?2, ?3"
				 " WHERE EXISTS(SELECT 1 FROM versions"
				 "  WHERE id = ?1 AND state <> 2)";

int ulp_version_baseline_get(ulp_store *st, uint64_t id, const char *name,
                             uint64_t *bytes)
{
	int64_t v = 0;

	pthread_mutex_lock(&st->mu);
	int rc = ulp_cat_int(st->cat, &v, Q_BASE_GET, "us", id, name);
	pthread_mutex_unlock(&st->mu);
	if (rc == 1)
		*bytes = (uint64_t)v;
	return rc == 1 ? 0 : rc == 0 ? -ENOENT : rc;
}

int ulp_version_baseline_put(ulp_store *st, uint64_t id, const char *name,
                             uint64_t bytes)
{
	pthread_mutex_lock(&st->mu);
	int rc = ulp_cat_exec(st->cat, Q_BASE_PUT, "usu", id, name, bytes);
	if (rc == 0 && ulp_cat_changes(st->cat) == 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* ------------------------------------------------------------ prune */

static const char Q_PRUNE_LIST[] = "SELECT id, seq FROM versions"
				   " WHERE path = ? AND state = 0"
				   " ORDER BY seq DESC";
static const char Q_STATE_OF[] = "SELECT state FROM versions WHERE id = ?";

int ulp_version_prune(ulp_store *st, const char *path, unsigned keep_last,
                      unsigned keep_every, uint64_t *dropped)
{
	ulp_obj_list dead = { 0 };
	uint64_t *ids = NULL, *seqs = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*dropped = 0;
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_begin(st->cat);
	if (rc < 0)
		goto unlock;
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_PRUNE_LIST, "s", path);
	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			uint64_t *a = realloc(ids, nc * sizeof *a);
			if (a)
				ids = a;
			uint64_t *b = a ? realloc(seqs, nc * sizeof *b) : NULL;
			if (!b) {
				ulp_cat_done(s);
				rc = -ENOMEM;
				break;
			}
			seqs = b;
			cap = nc;
		}
		ids[n] = (uint64_t)sqlite3_column_int64(s, 0);
		seqs[n++] = (uint64_t)sqlite3_column_int64(s, 1);
	}
	if (rc == 0 && n == 0)
		rc = -ENOENT; /* no such path (or no history at all) */
	/* Newest first: the first keep_last are kept. */
	for (size_t i = keep_last; rc == 0 && i < n; i++) {
		if (keep_every && seqs[i] % keep_every == 0)
			continue;
		rc = ulp_version_is_current_locked(st, ids[i]);
		if (rc != 0) {
			rc = rc < 0 ? rc : 0; /* a live file's content */
			continue;
		}
		int64_t before = 0, after = 0;
		rc = ulp_cat_int(st->cat, &before, Q_STATE_OF, "u", ids[i]);
		if (rc >= 0)
			rc = ulp_versions_release(st, ids[i], &dead);
		if (rc >= 0)
			rc = ulp_cat_int(st->cat, &after, Q_STATE_OF, "u",
			                 ids[i]);
		if (rc >= 0) {
			if (after != before)
				(*dropped)++; /* pinned ones stay live */
			rc = 0;
		}
	}
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	else
		ulp_cat_rollback(st->cat);
	if (rc < 0) {
		dead.n = 0;
		*dropped = 0;
	}
unlock:
	pthread_mutex_unlock(&st->mu);
	ulp_obj_reap(st, &dead);
	free(ids);
	free(seqs);
	return rc;
}
