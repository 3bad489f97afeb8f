/*
 * bucket_reps.c - the rows of the bucket representations (bucket_reps.h),
 * on a catalog connection of their own.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "store/bucket_reps.h"
#include "store/catalog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ulp_breps {
	ulp_catalog *cat;
	pthread_mutex_t mu; /* the connection */
};

static int fail(ulp_breps *r, int rc)
{
	fprintf(stderr, "ulpfs: bucket representations: %s\n",
	        ulp_cat_errmsg(r->cat));
	return rc < 0 ? rc : -EIO;
}

int ulp_breps_open(const char *path, ulp_breps **out)
{
	ulp_breps *r = calloc(1, sizeof *r);
	*out = NULL;
	if (!r)
		return -ENOMEM;
	int rc = ulp_cat_attach(path, 0, &r->cat);
	int64_t has = 0;
	if (!rc)
		rc = ulp_cat_int(r->cat, &has,
		                 "SELECT count(*) FROM sqlite_master"
		                 " WHERE name = 'bucket_reps'",
		                 "");
	if (rc >= 0 && has == 0)
		rc = -ENOENT; /* a catalog older than schema version 10 */
	if (rc < 0) {
		fprintf(stderr, "ulpfs: %s: bucket representations: %s\n", path,
		        strerror(-rc));
		ulp_cat_close(r->cat);
		free(r);
		return rc;
	}
	pthread_mutex_init(&r->mu, NULL);
	*out = r;
	return 0;
}

void ulp_breps_close(ulp_breps *r)
{
	if (!r)
		return;
	ulp_cat_close(r->cat);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* Fills one element from the row s is on. */
typedef void (*row_fn)(ulp_cat_stmt *s, void *row);

/* Every row of s (from ulp_cat_q; NULL: its failure), each one element
 * of size bytes filled by fn, into a malloc()ed array; mu held.  0 or
 * -errno (what was read is returned all the same). */
static int collect(ulp_breps *r, ulp_cat_stmt *s, size_t size, row_fn fn,
                   void **out, size_t *nout)
{
	char *v = NULL;
	size_t n = 0, cap = 0;
	int rc;
	while ((rc = ulp_cat_step(r->cat, s)) == 1) {
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			char *p = realloc(v, c * size);
			if (!p) {
				ulp_cat_done(s);
				rc = -ENOMEM;
				break;
			}
			v = p;
			cap = c;
		}
		fn(s, v + n++ * size);
	}
	*out = v;
	*nout = n;
	return rc == -ENOMEM ? rc : rc < 0 ? fail(r, rc) : 0;
}

static void copy_text(char *dst, size_t len, ulp_cat_stmt *s, int col)
{
	snprintf(dst, len, "%s", ulp_cat_col_text(s, col));
}

/* One integer answer of sql with text parameter name; mu held.  -errno. */
static int64_t one_int(ulp_breps *r, const char *sql, const char *name)
{
	int64_t v = 0;
	int rc = ulp_cat_int(r->cat, &v, sql, "s", name);
	return rc < 0 ? fail(r, rc) : v;
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

static const char Q_NAMES[] = "SELECT EXISTS(SELECT 1 FROM bucket_reps"
			      " WHERE object = ?1)";

int ulp_breps_superseded(ulp_breps *r, const char *name)
{
	pthread_mutex_lock(&r->mu);
	int64_t v = one_int(r, Q_SUPERSEDED, name);
	int64_t u = v == 0 ? one_int(r, Q_UNDECIDED, name) : 0;
	pthread_mutex_unlock(&r->mu);
	/* an error: upload it, as without representations */
	return v > 0 ? 1 : u > 0 ? 2 : 0;
}

int ulp_breps_names(ulp_breps *r, const char *name)
{
	pthread_mutex_lock(&r->mu);
	int64_t v = one_int(r, Q_NAMES, name);
	pthread_mutex_unlock(&r->mu);
	return v != 0; /* an error: keep it, the next sweep decides */
}

/* ------------------------------------------------------------ dropping */

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

static const char Q_DELETE[] = "DELETE FROM bucket_reps WHERE version = ?1";

static void gone_row(ulp_cat_stmt *s, void *row)
{
	ulp_breps_gone *g = row;
	g->version = ulp_cat_col_int(s, 0);
	copy_text(g->object, sizeof g->object, s, 1);
	copy_text(g->local, sizeof g->local, s, 2);
	g->local_named = (int)ulp_cat_col_int(s, 3);
}

int ulp_breps_take_gone(ulp_breps *r, int all, ulp_breps_gone **out,
                        size_t *nout)
{
	ulp_breps_gone *v = NULL;
	size_t n = 0;
	pthread_mutex_lock(&r->mu);
	int rc = collect(r, ulp_cat_q(r->cat, Q_GONE, "d", all), sizeof *v,
	                 gone_row, (void **)&v, &n);
	for (size_t i = 0; !rc && i < n; i++) {
		rc = ulp_cat_exec(r->cat, Q_DELETE, "i", v[i].version);
		if (rc < 0)
			rc = fail(r, rc);
	}
	pthread_mutex_unlock(&r->mu);
	if (rc < 0) {
		free(v);
		v = NULL;
		n = 0;
	}
	*out = v;
	*nout = n;
	return rc;
}

/* ------------------------------------------------------------ forward */

static const char Q_NEW[] =
	"SELECT v.id, v.object, v.stored, p.id, r.depth FROM versions AS v"
	" JOIN versions AS p ON p.id = (SELECT max(q.id) FROM versions AS q"
	"  WHERE q.id < v.id AND q.state = 0"
	"  AND (q.flip = v.id OR q.ref = v.id))"
	" JOIN bucket_reps AS r ON r.version = p.id AND r.state = 1"
	" WHERE v.state = 0 AND v.ref IS NULL AND v.object <> ''"
	" AND NOT EXISTS(SELECT 1 FROM bucket_reps WHERE version = v.id)"
	" ORDER BY v.id";

static void cand_row(ulp_cat_stmt *s, void *row)
{
	ulp_breps_cand *c = row;
	c->id = ulp_cat_col_int(s, 0);
	copy_text(c->object, sizeof c->object, s, 1);
	c->stored = (uint64_t)ulp_cat_col_int(s, 2);
	c->base = ulp_cat_col_int(s, 3);
	c->depth = ulp_cat_col_int(s, 4);
}

int ulp_breps_candidates(ulp_breps *r, ulp_breps_cand **out, size_t *n)
{
	pthread_mutex_lock(&r->mu);
	int rc = collect(r, ulp_cat_q(r->cat, Q_NEW, ""), sizeof **out,
	                 cand_row, (void **)out, n);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static const char Q_ADD[] = "INSERT INTO bucket_reps(version, object,"
			    " base, side, depth, stored, state)"
			    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, 0)";

int ulp_breps_add(ulp_breps *r, int64_t version, const char *object,
                  int64_t base, int64_t side, int64_t depth, uint64_t stored)
{
	pthread_mutex_lock(&r->mu);
	int rc = ulp_cat_exec(r->cat, Q_ADD, "isirii", version, object, base,
	                      (uint64_t)side, depth, (int64_t)stored);
	if (rc < 0)
		rc = fail(r, rc);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static const char Q_UPLOADED[] = "UPDATE bucket_reps SET state = 1"
				 " WHERE version = ?1";

int ulp_breps_settle(ulp_breps *r, int64_t version, int uploaded)
{
	pthread_mutex_lock(&r->mu);
	int rc = ulp_cat_exec(r->cat, uploaded ? Q_UPLOADED : Q_DELETE, "i",
	                      version);
	if (rc < 0)
		rc = fail(r, rc);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static const char Q_KEYFRAMES[] = "INSERT INTO bucket_reps(version, object, "
				  "base, side, depth, stored, state)"
				  " SELECT id, object, NULL, side, 0, stored, 1"
				  " FROM versions AS v WHERE state = 0"
				  " AND ref IS NULL AND object <> ''"
				  " AND NOT EXISTS(SELECT 1 FROM bucket_reps"
				  "  WHERE version = v.id)";

int ulp_breps_keyframes(ulp_breps *r)
{
	pthread_mutex_lock(&r->mu);
	int rc = ulp_cat_exec(r->cat, Q_KEYFRAMES, "");
	if (rc < 0)
		rc = fail(r, rc);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

/* ------------------------------------------------------------- views */

static const char Q_ITEMS[] = "SELECT r.version, r.object, coalesce(r.base, 0)"
			      " FROM bucket_reps AS r"
			      " JOIN versions AS v ON v.id = r.version"
			      " WHERE r.state = 1 AND v.state <> 2"
			      " AND r.object <> v.object ORDER BY r.version";

static void item_row(ulp_cat_stmt *s, void *row)
{
	ulp_breps_item *it = row;
	it->version = (uint64_t)ulp_cat_col_int(s, 0);
	copy_text(it->object, sizeof it->object, s, 1);
	it->base = (uint64_t)ulp_cat_col_int(s, 2);
}

int ulp_breps_items(ulp_breps *r, ulp_breps_item **out, size_t *n)
{
	pthread_mutex_lock(&r->mu);
	int rc = collect(r, ulp_cat_q(r->cat, Q_ITEMS, ""), sizeof **out,
	                 item_row, (void **)out, n);
	pthread_mutex_unlock(&r->mu);
	return rc;
}
