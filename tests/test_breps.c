/*
 * test_breps.c - unit tests of the bucket representations' rows
 * (store/bucket_reps.h): the calls a bucket store makes on a live catalog,
 * the catalog copy a publish rewrites, and schema version 10, which
 * creates the table and keeps one an older bucket store created itself.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "store/bucket_reps.h"
#include "store/store.h"

#include "test_store_util.h"

TestSuite(breps, .init = setup, .fini = teardown);

static const char *db_of(const char *name)
{
	static char p[400];
	snprintf(p, sizeof p, "%s/%s", store_dir(), name);
	return p;
}

Test(breps, rows_follow_the_catalog)
{
	ulp_store *st = open_default();
	sfile f = st_make(16 * 1024, 64, 71);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "m.safetensors", f.p, f.len);
	sync_ok(st);
	ulp_version_info v1 = current(st, ino);
	ulp_breps *r = NULL;
	cr_assert_eq(ulp_breps_open(db_of("catalog.db"), &r), 0);

	/* The standalone version becomes a bucket keyframe: its own object,
	 * which it names, and which is not superseded. */
	cr_assert_eq(ulp_breps_keyframes(r), 0);
	cr_assert_eq(cat_sql("SELECT count(*) FROM bucket_reps WHERE base IS"
	                     " NULL AND state = 1 AND depth = 0"),
	             1);
	cr_assert_eq(ulp_breps_names(r, v1.object), 1);
	cr_assert_eq(ulp_breps_names(r, "0123"), 0);
	cr_assert_eq(ulp_breps_superseded(r, v1.object), 0);
	ulp_breps_item *it = NULL;
	size_t n = 9;
	cr_assert_eq(ulp_breps_items(r, &it, &n), 0);
	cr_assert_eq(n, 0, "a keyframe is its version's local object");
	free(it);

	/* The next version is standalone, its predecessor represented: a
	 * candidate for a forward delta against it. */
	st_step(&f, 72);
	put_file(st, ULP_ROOT_INO, "m.safetensors", f.p, f.len);
	sync_ok(st);
	ulp_version_info v2 = current(st, ino);
	cr_assert_neq(v2.id, v1.id);
	ulp_breps_cand *c = NULL;
	cr_assert_eq(ulp_breps_candidates(r, &c, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(c[0].id, (int64_t)v2.id);
	cr_assert_eq(c[0].base, (int64_t)v1.id);
	cr_assert_eq(c[0].depth, 0);
	cr_assert_str_eq(c[0].object, v2.object);
	free(c);

	/* Pending, its local object is undecided; uploaded, superseded. */
	const char *fwd = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0";
	cr_assert_eq(ulp_breps_add(r, (int64_t)v2.id, fwd, (int64_t)v1.id, 0, 1,
	                           123),
	             0);
	cr_assert_eq(ulp_breps_add(r, (int64_t)v2.id, fwd, (int64_t)v1.id, 0, 1,
	                           123),
	             -EEXIST, "one representation per version");
	cr_assert_eq(ulp_breps_superseded(r, v2.object), 2);
	cr_assert_eq(ulp_breps_settle(r, (int64_t)v2.id, 1), 0);
	cr_assert_eq(ulp_breps_superseded(r, v2.object), 1);
	cr_assert_eq(ulp_breps_names(r, fwd), 1);
	cr_assert_eq(cat_sql("SELECT count(*) FROM bucket_reps WHERE side IS"
	                     " NULL"),
	             2, "side 0 is stored as none");
	cr_assert_eq(ulp_breps_items(r, &it, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(it[0].version, v2.id);
	cr_assert_eq(it[0].base, v1.id);
	cr_assert_str_eq(it[0].object, fwd);
	free(it);

	/* The published copy names the bucket's objects; the live catalog
	 * keeps the local ones. */
	char copy[400];
	snprintf(copy, sizeof copy, "%s/copy.db", tdir);
	cr_assert_eq(ulp_cat_copy(db_of("catalog.db"), copy), 0);
	cr_assert_neq(ulp_cat_copy(db_of("catalog.db"), copy), 0,
	              "never over an existing file");
	cr_assert_eq(ulp_breps_rewrite(copy), 0);
	char q[160];
	snprintf(q, sizeof q,
	         "SELECT count(*) FROM versions WHERE id = %llu AND object ="
	         " '%s' AND ref = %llu AND depth = 1 AND stored = 123",
	         (unsigned long long)v2.id, fwd, (unsigned long long)v1.id);
	cr_assert_eq(sql_at(copy, q), 1);
	cr_assert_eq(cat_sql(q), 0);

	/* A pending row is a crash's leftover: dropped, and its version's
	 * local object goes up instead. */
	cr_assert_eq(ulp_breps_settle(r, (int64_t)v2.id, 0), 0);
	cr_assert_eq(ulp_breps_names(r, fwd), 0, "abandoned: row deleted");
	cr_assert_eq(ulp_breps_add(r, (int64_t)v2.id, fwd, (int64_t)v1.id, 0, 1,
	                           123),
	             0);
	ulp_breps_gone *g = NULL;
	cr_assert_eq(ulp_breps_take_gone(r, 0, &g, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(g[0].version, (int64_t)v2.id);
	cr_assert_str_eq(g[0].object, fwd);
	cr_assert_str_eq(g[0].local, v2.object);
	cr_assert_eq(g[0].local_named, 0);
	free(g);
	cr_assert_eq(ulp_breps_take_gone(r, 0, &g, &n), 0);
	cr_assert_eq(n, 0, "the keyframe holds");
	free(g);
	/* A mount that does not defer uploads drops them all. */
	cr_assert_eq(ulp_breps_take_gone(r, 1, &g, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(g[0].version, (int64_t)v1.id);
	free(g);
	cr_assert_eq(cat_sql("SELECT count(*) FROM bucket_reps"), 0);

	ulp_breps_close(r);
	ulp_store_close(st);
	free(f.p);
}

/* What an older bucket store ran on a writer's catalog at its attach. */
static const char OLD_TABLE[] = "CREATE TABLE IF NOT EXISTS bucket_reps("
				" version INTEGER PRIMARY KEY,"
				" object TEXT NOT NULL,"
				" base INTEGER,"
				" side INTEGER,"
				" depth INTEGER NOT NULL,"
				" stored INTEGER NOT NULL,"
				" state INTEGER NOT NULL)";

Test(breps, schema_10_keeps_an_older_table)
{
	ulp_store *st = open_default();
	ulp_store_close(st);
	cr_assert_eq(cat_sql("SELECT value FROM meta WHERE key ="
	                     " 'schema_version'"),
	             10);
	cr_assert_eq(cat_sql("SELECT count(*) FROM sqlite_master WHERE name IN"
	                     " ('bucket_reps', 'bucket_reps_object',"
	                     " 'bucket_reps_base')"),
	             3);

	/* A version-9 catalog without the table: the store adds it. */
	cat_sql("DROP TABLE bucket_reps");
	cat_sql("UPDATE meta SET value = 9 WHERE key = 'schema_version'");
	ulp_breps *r = NULL;
	cr_assert_eq(ulp_breps_open(db_of("catalog.db"), &r), -ENOENT);
	cr_assert_eq(ulp_breps_rewrite(db_of("catalog.db")), 0,
	             "nothing to rewrite without the table");
	st = open_default();
	ulp_store_close(st);
	cr_assert_eq(cat_sql("SELECT count(*) FROM sqlite_master WHERE name IN"
	                     " ('bucket_reps', 'bucket_reps_object',"
	                     " 'bucket_reps_base')"),
	             3);

	/* One where an older bucket store made it: its rows stay. */
	cat_sql("DROP TABLE bucket_reps");
	cat_sql(OLD_TABLE);
	cat_sql("INSERT INTO bucket_reps VALUES(7, 'x', NULL, NULL, 0, 5, 1)");
	cat_sql("UPDATE meta SET value = 9 WHERE key = 'schema_version'");
	st = open_default();
	ulp_store_close(st);
	cr_assert_eq(cat_sql("SELECT value FROM meta WHERE key ="
	                     " 'schema_version'"),
	             10);
	cr_assert_eq(cat_sql("SELECT count(*) FROM bucket_reps WHERE version ="
	                     " 7 AND object = 'x'"),
	             1);
	cr_assert_eq(ulp_breps_open(db_of("catalog.db"), &r), 0);
	cr_assert_eq(ulp_breps_names(r, "x"), 1);
	ulp_breps_close(r);
}
