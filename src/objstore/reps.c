/*
 * reps.c - forward deltas in the bucket while the local store keeps
 * reverse chains.
 *
 * Why.  Locally the newest version of a lineage is standalone, and once
 * its successor commits it is coded again as a reverse delta (store/gc.c).
 * A sync after every checkpoint must upload the newest version, so with
 * local objects only, each version went up twice: standalone, then as a
 * reverse delta (1.8 times the store).  Instead a version has a bucket
 * representation of its own (reps.h): at a publish, a new standalone
 * version whose predecessor (the version the store will flip against it)
 * is already represented in the bucket is coded as a forward delta against
 * that predecessor and uploaded in place of its standalone object; its
 * later reverse delta is never uploaded.  Every keyframe_every-th link
 * (or where the predecessor has no representation, or a forward delta
 * would not be smaller) the standalone object goes up instead and becomes
 * a bucket keyframe.  The published snapshot is rewritten so that the
 * bucket's catalog names these objects: a fresh machine decodes forward
 * chains of at most keyframe_every links (the store's reader follows a
 * reference in either direction).  A writer mounting that catalog holds
 * the forward chains as its local objects and flips them lazily, as it
 * does any forward chain; the flips' objects are superseded, never
 * uploaded.
 *
 * What stays true.
 *   - No cycle: a forward delta's base has an uploaded representation
 *     that is a keyframe or a forward delta itself, so representations
 *     chain only to older represented versions; a version without one is
 *     read from its local object, whose chain the store keeps acyclic.
 *     The rewrite checks that every version reaches a root anyway.
 *   - Liveness: a representation lives while its version has a row that
 *     is not deleted, its base's representation lives, and the side its
 *     chunks read (store/side.h: a forward delta of optimizer.pt is coded
 *     given its checkpoint's model, as the local object is) has a row
 *     that is not deleted.  The simplest
 *     correct rule for a deleted base: its dependants lose their
 *     representations too (at the next publish), and fall back to their
 *     local objects, uploaded then.  Their bucket objects, and those of
 *     the versions gone, are deleted after that publish, as every drop is.
 *   - Crash safety: a row is pending until its object is in the bucket,
 *     and only uploaded rows reach a snapshot; a pending row a crash left
 *     is dropped at the next publish (its object, if it got there, is
 *     deleted after it) and the version's standalone object uploaded (the
 *     next mount finds it missing from the bucket).
 *   - A superseded local object (its version is represented otherwise)
 *     exists only in the cache: it is never evicted without being
 *     uploaded first (object_cache.c).
 *   - Only a mount that defers uploads has representations.  Without
 *     deferral each object goes up as it is made, a flip's reverse delta
 *     before the flip commits, so nothing could hold it back as
 *     superseded: such a mount drops every representation at its first
 *     publish and the bucket holds the local objects.
 *
 * The bucket's own connection to catalog.db (WAL: the store keeps
 * writing), serialised by reps_mu; the table is created at a writer's
 * attach when missing (a catalog that never saw a bucket has none).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"
#include "objstore/reps.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local int own_put;

int ulp_reps_own_put(void)
{
	return own_put;
}

static const char SCHEMA[] = "CREATE TABLE IF NOT EXISTS bucket_reps("
			     " version INTEGER PRIMARY KEY,"
			     " object TEXT NOT NULL,"
			     " base INTEGER,"
			     " side INTEGER,"
			     " depth INTEGER NOT NULL,"
			     " stored INTEGER NOT NULL,"
			     " state INTEGER NOT NULL);"
			     "CREATE INDEX IF NOT EXISTS bucket_reps_object ON "
			     "bucket_reps(object);"
			     "CREATE INDEX IF NOT EXISTS bucket_reps_base ON "
			     "bucket_reps(base)"
			     " WHERE base IS NOT NULL;";

int ulp_reps_open(ulp_bucket *b)
{
	char *p = NULL;
	if (asprintf(&p, "%s/catalog.db", b->cache_dir) < 0)
		return -ENOMEM;
	sqlite3 *h = NULL;
	int rc = sqlite3_open_v2(p, &h, SQLITE_OPEN_READWRITE, NULL);
	free(p);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(h, 10000);
		rc = sqlite3_exec(h, SCHEMA, NULL, NULL, NULL);
	}
	if (rc != SQLITE_OK) {
		ulp_bucket_log("%s/catalog.db: bucket representations: %s",
		               b->cache_dir, sqlite3_errmsg(h));
		sqlite3_close(h);
		return -EIO;
	}
	b->reps_db = h;
	return 0;
}

void ulp_reps_close(ulp_bucket *b)
{
	sqlite3_close(b->reps_db);
	b->reps_db = NULL;
}

/* One integer answer of sql with text parameter name (0 when no row);
 * reps_mu held.  -1 on an error. */
static long long one_int(sqlite3 *h, const char *sql, const char *name)
{
	sqlite3_stmt *s = NULL;
	long long v = -1;
	if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
		if (name)
			sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
		int rc = sqlite3_step(s);
		v = rc == SQLITE_ROW    ? sqlite3_column_int64(s, 0)
		    : rc == SQLITE_DONE ? 0
		                        : -1;
	}
	sqlite3_finalize(s);
	return v;
}

static const char Q_SUPERSEDED[] = "SELECT EXISTS(SELECT 1 FROM versions WHERE "
				   "object = ?1"
				   "  AND state <> 2)"
				   " AND NOT EXISTS(SELECT 1 FROM versions AS v"
				   "  LEFT JOIN bucket_reps AS r ON r.version "
				   "= v.id AND r.state = 1"
				   "  WHERE v.object = ?1 AND v.state <> 2"
				   "  AND (r.object IS NULL OR r.object = ?1))"
				   " AND NOT EXISTS(SELECT 1 FROM bucket_reps "
				   "WHERE object = ?1)";

/* A version of the object is being coded as a forward delta (its row
 * pending): the object was made meanwhile (a flip), and whether it is
 * superseded is known once that row is uploaded or dropped. */
static const char Q_UNDECIDED[] = "SELECT EXISTS(SELECT 1 FROM versions AS v"
				  " JOIN bucket_reps AS r ON r.version = v.id"
				  "  AND r.state = 0"
				  " WHERE v.object = ?1 AND v.state <> 2"
				  " AND r.object <> ?1)";

int ulp_reps_superseded(ulp_bucket *b, const char *name)
{
	pthread_mutex_lock(&b->reps_mu);
	long long v = b->reps_db ? one_int(b->reps_db, Q_SUPERSEDED, name) : 0;
	long long u = b->reps_db && v == 0
	                      ? one_int(b->reps_db, Q_UNDECIDED, name)
	                      : 0;
	pthread_mutex_unlock(&b->reps_mu);
	/* an error: upload it, as without representations */
	return v > 0 ? 1 : u > 0 ? 2 : 0;
}

int ulp_reps_names(ulp_bucket *b, const char *name)
{
	pthread_mutex_lock(&b->reps_mu);
	long long v = b->reps_db ? one_int(b->reps_db,
	                                   "SELECT EXISTS(SELECT 1 FROM "
	                                   "bucket_reps WHERE object = ?1)",
	                                   name)
	                         : 0;
	pthread_mutex_unlock(&b->reps_mu);
	return v != 0; /* an error: keep it, the next sweep decides */
}

/* Run sql with integer parameters (n of them); reps_mu held.  0 or -EIO. */
static int exec_ints(sqlite3 *h, const char *sql, int n, const long long *p)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(h, sql, -1, &s, NULL);
	for (int i = 0; rc == SQLITE_OK && i < n; i++)
		rc = sqlite3_bind_int64(s, i + 1, p[i]);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		ulp_bucket_log("bucket representations: %s", sqlite3_errmsg(h));
		return -EIO;
	}
	return 0;
}

/* ------------------------------------------------------------ dropping */

/* Representations that no longer hold: pending ones (a crash), those of
 * versions deleted, and what is coded against any of those; all of them
 * (?1 = 1) on a mount that uploads each object at once.  For each: its
 * object, and the version's local object when the version stays. */
static const char Q_GONE[] =
	"WITH RECURSIVE gone(v) AS ("
	" SELECT version FROM bucket_reps WHERE ?1 OR state <> 1"
	"  OR version NOT IN (SELECT id FROM versions WHERE state <> 2)"
	"  OR side NOT IN (SELECT id FROM versions WHERE state <> 2)"
	" UNION SELECT r.version FROM bucket_reps AS r JOIN gone"
	"  ON r.base = gone.v)"
	" SELECT r.version, r.object,"
	"  (SELECT object FROM versions WHERE id = r.version AND state <> 2),"
	"  EXISTS(SELECT 1 FROM versions WHERE object = r.object"
	"   AND state <> 2)"
	" FROM bucket_reps AS r WHERE r.version IN gone";

typedef struct gone_row {
	long long version;
	char object[40], local[40];
	int local_named; /* the rep's object is some version's local one */
} gone_row;

int ulp_reps_drop(ulp_bucket *b)
{
	if (!b->reps_db)
		return 0;
	gone_row *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	pthread_mutex_lock(&b->reps_mu);
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(b->reps_db, Q_GONE, -1, &s, NULL) != SQLITE_OK)
		rc = -EIO;
	/* Without deferral a flip's reverse delta goes up as it is made,
	 * before anything could tell it superseded: the bucket holds the
	 * local objects, and a representation left by a deferring mount
	 * would keep a second copy of its version there. */
	if (!rc)
		sqlite3_bind_int(s, 1, !b->defer);
	while (!rc && sqlite3_step(s) == SQLITE_ROW) {
		if (ulp_bucket_grow((void **)&v, &cap, n, sizeof *v) < 0) {
			rc = -ENOMEM;
			break;
		}
		gone_row *g = &v[n++];
		const char *o = (const char *)sqlite3_column_text(s, 1);
		const char *l = (const char *)sqlite3_column_text(s, 2);
		g->version = sqlite3_column_int64(s, 0);
		snprintf(g->object, sizeof g->object, "%s", o ? o : "");
		snprintf(g->local, sizeof g->local, "%s", l ? l : "");
		g->local_named = sqlite3_column_int(s, 3);
	}
	sqlite3_finalize(s);
	for (size_t i = 0; !rc && i < n; i++)
		rc = exec_ints(b->reps_db,
		               "DELETE FROM bucket_reps WHERE version = ?1", 1,
		               &v[i].version);
	pthread_mutex_unlock(&b->reps_mu);
	for (size_t i = 0; !rc && i < n; i++) {
		/* Still a version's local object: its own removal says when
		 * it goes from the bucket. */
		if (!v[i].local_named)
			ulp_bucket_drop_later(b, v[i].object);
		/* It may never have been uploaded (superseded until now). */
		if (v[i].local[0] && strcmp(v[i].local, v[i].object))
			ulp_up_recover(b, v[i].local);
	}
	if (!rc && n)
		ulp_bucket_log("s3://%s/%s: %zu bucket representation(s) "
		               "dropped (%s); their versions' own objects go "
		               "up instead",
		               b->bucket, b->prefix, n,
		               b->defer ? "their version or base is gone"
		                        : "uploads are not deferred");
	free(v);
	return rc;
}

/* ------------------------------------------------------------ forward */

/* New standalone versions without a representation, oldest first, with
 * their predecessor (the live version the store flips, or has flipped,
 * against them) and its uploaded representation's depth. */
static const char Q_NEW[] =
	"SELECT v.id, v.object, v.stored, p.id, r.depth FROM versions AS v"
	" JOIN versions AS p ON p.id = (SELECT max(q.id) FROM versions AS q"
	"  WHERE q.id < v.id AND q.state = 0"
	"  AND (q.flip = v.id OR q.ref = v.id))"
	" JOIN bucket_reps AS r ON r.version = p.id AND r.state = 1"
	" WHERE v.state = 0 AND v.ref IS NULL AND v.object <> ''"
	" AND NOT EXISTS(SELECT 1 FROM bucket_reps WHERE version = v.id)"
	" ORDER BY v.id";

typedef struct cand {
	long long id, base, depth;
	unsigned long long stored;
	char object[40];
} cand;

static int candidates(ulp_bucket *b, cand **out, size_t *nout)
{
	cand *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	pthread_mutex_lock(&b->reps_mu);
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(b->reps_db, Q_NEW, -1, &s, NULL) != SQLITE_OK)
		rc = -EIO;
	while (!rc && sqlite3_step(s) == SQLITE_ROW) {
		if (ulp_bucket_grow((void **)&v, &cap, n, sizeof *v) < 0) {
			rc = -ENOMEM;
			break;
		}
		cand *c = &v[n++];
		const char *o = (const char *)sqlite3_column_text(s, 1);
		c->id = sqlite3_column_int64(s, 0);
		snprintf(c->object, sizeof c->object, "%s", o ? o : "");
		c->stored = (unsigned long long)sqlite3_column_int64(s, 2);
		c->base = sqlite3_column_int64(s, 3);
		c->depth = sqlite3_column_int64(s, 4);
	}
	if (rc)
		ulp_bucket_log("bucket representations: %s",
		               sqlite3_errmsg(b->reps_db));
	sqlite3_finalize(s);
	pthread_mutex_unlock(&b->reps_mu);
	*out = v;
	*nout = n;
	return rc;
}

static int insert_rep(ulp_bucket *b, long long version, const char *object,
                      long long base, long long side, long long depth,
                      unsigned long long stored)
{
	pthread_mutex_lock(&b->reps_mu);
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(b->reps_db,
	                            "INSERT INTO bucket_reps(version, object,"
	                            " base, side, depth, stored, state)"
	                            " VALUES(?1, ?2, ?3, nullif(?4, 0), ?5, ?6,"
	                            " 0)",
	                            -1, &s, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(s, 1, version);
		sqlite3_bind_text(s, 2, object, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, base);
		sqlite3_bind_int64(s, 4, side);
		sqlite3_bind_int64(s, 5, depth);
		sqlite3_bind_int64(s, 6, (sqlite3_int64)stored);
		rc = sqlite3_step(s);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		ulp_bucket_log("bucket representations: %s",
		               sqlite3_errmsg(b->reps_db));
	pthread_mutex_unlock(&b->reps_mu);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int set_rep(ulp_bucket *b, long long version, int uploaded)
{
	pthread_mutex_lock(&b->reps_mu);
	int rc = exec_ints(b->reps_db,
	                   uploaded ? "UPDATE bucket_reps SET state = 1"
	                              " WHERE version = ?1"
	                            : "DELETE FROM bucket_reps"
	                              " WHERE version = ?1",
	                   1, &version);
	pthread_mutex_unlock(&b->reps_mu);
	return rc;
}

/* forward_one's work, c's standalone object held. */
static int forward_held(ulp_bucket *b, ulp_store *st, const cand *c)
{
	char name[33];
	unsigned long long stored = 0;
	uint64_t st64 = 0;
	own_put = 1;
	uint64_t side = 0;
	int rc = ulp_store_encode_delta(st, (uint64_t)c->id, (uint64_t)c->base,
	                                name, &st64, &side);
	own_put = 0;
	stored = st64;
	int done = 0;
	if (rc == 0 && stored >= c->stored) {
		unlinkat(b->obj_dir_fd, name, 0); /* no smaller: a keyframe */
	} else if (rc == 0) {
		rc = insert_rep(b, c->id, name, c->base, (long long)side,
		                c->depth + 1, stored);
		if (rc == 0)
			rc = ulp_bucket_upload(b, b->obj_dir_fd, name);
		if (rc == 0)
			ulp_publish_crash(b, ULP_CRASH_FORWARD);
		if (rc == 0)
			rc = set_rep(b, c->id, 1);
		else
			set_rep(b, c->id, 0);
		/* The writer reads its local objects; the bucket holds this
		 * one (a failed upload or row: the next publish drops it). */
		unlinkat(b->obj_dir_fd, name, 0);
		done = rc == 0;
	}
	return rc < 0 ? rc : done;
}

/* Code c as a forward delta against its base and upload it in place of
 * its standalone object.  That one stays pending, held back from the
 * uploaders meanwhile (so never evicted: the only copy); once the
 * representation is uploaded, they find it superseded and drop it.  1
 * done, 0 not worth it or not possible (the standalone object goes up as
 * it is), -errno. */
static int forward_one(ulp_bucket *b, ulp_store *st, const cand *c)
{
	if (!ulp_up_hold(b, c->object, 1))
		return 0; /* in the bucket already, or on its way */
	int rc = forward_held(b, st, c);
	ulp_up_hold(b, c->object, 0);
	return rc;
}

int ulp_reps_prepare(ulp_bucket *b, ulp_store *st)
{
	if (!b->reps_db)
		return 0;
	int rc = ulp_reps_drop(b);
	if (rc || !st || !b->defer)
		return rc; /* without deferral every object went up at once */
	cand *v;
	size_t n;
	if ((rc = candidates(b, &v, &n)) < 0)
		return rc;
	long long k = (long long)ulp_store_keyframe_every(st);
	for (size_t i = 0; i < n; i++) {
		if (v[i].depth + 1 > k - 1)
			continue; /* a bucket keyframe (ulp_reps_keyframes) */
		int r = forward_one(b, st, &v[i]);
		if (r < 0) {
			ulp_bucket_log("s3://%s/%s: forward delta of version "
			               "%lld: %s (its own object goes up)",
			               b->bucket, b->prefix, v[i].id,
			               strerror(-r));
			if (!rc)
				rc = r;
		}
	}
	free(v);
	/* A failed forward delta costs bytes, not data: the publish goes
	 * on with the standalone object. */
	return 0;
}

int ulp_reps_keyframes(ulp_bucket *b)
{
	/* without deferral, no representations (ulp_reps_drop says why) */
	if (!b->reps_db || !b->defer)
		return 0;
	pthread_mutex_lock(&b->reps_mu);
	int rc = exec_ints(b->reps_db,
	                   "INSERT INTO bucket_reps(version, object, base,"
	                   " side, depth, stored, state)"
	                   " SELECT id, object, NULL, side, 0,"
	                   " stored, 1"
	                   " FROM versions AS v WHERE state = 0"
	                   " AND ref IS NULL AND object <> ''"
	                   " AND NOT EXISTS(SELECT 1 FROM bucket_reps"
	                   "  WHERE version = v.id)",
	                   0, NULL);
	pthread_mutex_unlock(&b->reps_mu);
	return rc;
}

/* ------------------------------------------------------------ rewrite */

static const char REWRITE[] =
	"DELETE FROM bucket_reps WHERE state <> 1;"
	"UPDATE versions SET object = r.object, ref = r.base,"
	" side = r.side, stored = r.stored,"
	" keyframe = (r.base IS NULL)"
	" FROM bucket_reps AS r WHERE r.version = versions.id;"
	"CREATE TEMP TABLE d(id INTEGER PRIMARY KEY, depth INTEGER);"
	"WITH RECURSIVE w(id, depth) AS ("
	" SELECT id, 0 FROM versions WHERE ref IS NULL UNION ALL"
	" SELECT v.id, w.depth + 1 FROM versions AS v JOIN w ON v.ref = w.id"
	"  WHERE w.depth < 65536)"
	" INSERT OR IGNORE INTO d SELECT id, depth FROM w;"
	"UPDATE versions SET depth = d.depth FROM d WHERE d.id = versions.id;";

int ulp_reps_rewrite(const char *path)
{
	sqlite3 *h = NULL;
	int rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL);
	long long has = rc == SQLITE_OK ? one_int(h,
	                                          "SELECT count(*) FROM "
	                                          "sqlite_master"
	                                          " WHERE name = 'bucket_reps'",
	                                          NULL)
	                                : -1;
	if (has == 0) {
		sqlite3_close(h);
		return 0; /* a catalog that never had representations */
	}
	if (has > 0)
		rc = sqlite3_exec(h, REWRITE, NULL, NULL, NULL);
	else
		rc = SQLITE_ERROR;
	long long lost = rc == SQLITE_OK ? one_int(h,
	                                           "SELECT count(*) FROM "
	                                           "versions"
	                                           " WHERE state <> 2 AND id "
	                                           "NOT IN"
	                                           " (SELECT id FROM d)",
	                                           NULL)
	                                 : -1;
	if (rc != SQLITE_OK || lost != 0)
		ulp_bucket_log("%s: naming the bucket's objects: %s", path,
		               lost > 0 ? "a version reaches no keyframe"
		                        : sqlite3_errmsg(h));
	sqlite3_close(h);
	return rc == SQLITE_OK && lost == 0 ? 0 : -EIO;
}
