/*
 * cat_copy.c - the catalog copies a bucket store publishes
 * (bucket_reps.h): a consistent copy of the live catalog, and that copy
 * rewritten to name the bucket's objects.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "store/bucket_reps.h"
#include "store/catalog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ulp_cat_copy(const char *db, const char *out)
{
	ulp_catalog *c = NULL;
	int rc = ulp_cat_attach(db, 1, &c);
	if (!rc)
		rc = ulp_cat_vacuum_into(c, out);
	if (rc)
		fprintf(stderr, "ulpfs: VACUUM INTO %s: %s\n", out,
		        c ? ulp_cat_errmsg(c) : strerror(-rc));
	ulp_cat_close(c);
	return rc ? -EIO : 0;
}

/* Each represented version takes its representation's object, base, side
 * and bytes; the depths follow from the bases (d: each version reached
 * from a root, with its depth). */
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

static const char Q_HAS[] = "SELECT count(*) FROM sqlite_master"
			    " WHERE name = 'bucket_reps'";
static const char Q_LOST[] = "SELECT count(*) FROM versions"
			     " WHERE state <> 2 AND id NOT IN"
			     " (SELECT id FROM d)";

int ulp_breps_rewrite(const char *path)
{
	ulp_catalog *c = NULL;
	int64_t has = 0, lost = 0;
	int rc = ulp_cat_attach(path, 0, &c);
	if (!rc)
		rc = ulp_cat_int(c, &has, Q_HAS, "");
	if (rc >= 0 && has == 0) {
		ulp_cat_close(c);
		return 0; /* a catalog that never had representations */
	}
	if (rc >= 0)
		rc = ulp_cat_script(c, REWRITE);
	if (rc >= 0)
		rc = ulp_cat_int(c, &lost, Q_LOST, "");
	if (rc < 0 || lost != 0)
		fprintf(stderr, "ulpfs: %s: naming the bucket's objects: %s\n",
		        path,
		        rc >= 0 ? "a version reaches no keyframe"
		        : c     ? ulp_cat_errmsg(c)
		                : strerror(-rc));
	ulp_cat_close(c);
	return rc >= 0 && lost == 0 ? 0 : -EIO;
}
