/*
 * test_chains.c - unit tests of version history: every closed content is
 * a version, reverse-delta chains (the newest version standalone, older
 * ones coded against their successor), deletion and rotation, and stores
 * written before reverse chains.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "store/store.h"
#include "ulpfs/ulp.h"

#include "test_store_util.h"

TestSuite(chains, .init = setup, .fini = teardown);

typedef struct vlist {
	ulp_version_info v[64];
	int n;
} vlist;

static int collect(void *opaque, const ulp_version_info *v, const char *path)
{
	vlist *l = opaque;

	(void)path;
	if (v->state != ULP_VERSION_LIVE)
		return 0;
	cr_assert_lt(l->n, 64);
	l->v[l->n++] = *v;
	return 0;
}

static vlist live_versions(ulp_store *st, const char *path)
{
	vlist l = { .n = 0 };

	cr_assert_eq(ulp_version_list(st, path, collect, &l), 0);
	return l;
}

static ulp_store *open_settle(unsigned settle_ms)
{
	ulp_store_opts o = { 0 };

	o.settle_ms = settle_ms;
	o.encoder_threads = 2;
	o.cache_bytes = 8u << 20;
	return open_opts(&o);
}

/* ------------------------------------------------ every closed version */

/* Rewrites of one path in quick succession (O_TRUNC reopens, and saves
 * to a temporary name renamed over it) each land as a version, whatever
 * the settle delay; an append reopen continues the version it appends
 * to; the temporary name gets no history. */
static void rewrites_keep_every_version(unsigned settle_ms)
{
	ulp_store *st = open_settle(settle_ms);
	enum { N = 5 };
	sfile v[2 * N];

	for (int i = 0; i < 2 * N; i++) {
		v[i] = i ? st_copy(&v[i - 1]) : st_make(64 * 64, 32, 5);
		if (i)
			st_step(&v[i], 900 + (uint64_t)i);
	}
	for (int i = 0; i < N; i++)
		put_file(st, ULP_ROOT_INO, "latest.safetensors", v[i].p,
		         v[i].len);
	for (int i = N; i < 2 * N; i++) {
		put_file(st, ULP_ROOT_INO, "tmp.safetensors", v[i].p, v[i].len);
		cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "tmp.safetensors",
		                           ULP_ROOT_INO, "latest.safetensors",
		                           0),
		             0);
	}
	/* An append within the settle delay: the same version grows. */
	uint64_t ino = put_file(st, ULP_ROOT_INO, "log.txt", "one\n", 4);
	ulp_file *f;
	cr_assert_eq(ulp_file_open(st, ino, O_WRONLY | O_APPEND, &f, NULL), 0);
	write_all(f, "two\n", 4, 4);
	cr_assert_eq(ulp_file_flush(f), 0);
	ulp_file_release(f);
	sync_ok(st);

	vlist l = live_versions(st, "latest.safetensors");
	cr_assert_eq(l.n, 2 * N, "settle %u: %d versions of %d", settle_ms, l.n,
	             2 * N);
	for (int i = 0; i < l.n; i++)
		expect_version(st, l.v[i].id, v[i].p, v[i].len);
	cr_assert_eq(live_versions(st, "tmp.safetensors").n, 0);
	l = live_versions(st, "log.txt");
	cr_assert_eq(l.n, 1, "append: %d versions", l.n);
	expect_version(st, l.v[0].id, "one\ntwo\n", 8);
	check_integrity(st);
	ulp_store_close(st);
	for (int i = 0; i < 2 * N; i++)
		free(v[i].p);
}

Test(chains, rewrites_keep_every_version_settle_1)
{
	rewrites_keep_every_version(1);
}

Test(chains, rewrites_keep_every_version_settle_default)
{
	rewrites_keep_every_version(0);
}

Test(chains, rewrites_keep_every_version_settle_2000)
{
	rewrites_keep_every_version(2000);
}
