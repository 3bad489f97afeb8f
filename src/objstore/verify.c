/*
 * verify.c - views of a writer's bucket-only representations (verify.h
 * says what a view is).  Why a private store rather than a check of the
 * bytes alone: the forward deltas decode only along their bucket chains
 * (their bases' bucket objects, the keyframes' too), and the store's
 * reader already does exactly that, checksums included, for a catalog that
 * names those objects; a fresh machine reads through the same code.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"
#include "objstore/reps.h"
#include "objstore/verify.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct view_item {
	uint64_t version, base;
	char *key;
} view_item;

struct ulp_bucket_view {
	ulp_bucket *b;
	char dir[4096];
	ulp_remote remote;
	ulp_store *st;
	view_item *item;
	size_t n;
	pthread_mutex_t mu;
	char failed[1024]; /* under mu */
};

static void note_failed(ulp_bucket_view *v, const char *key)
{
	pthread_mutex_lock(&v->mu);
	snprintf(v->failed, sizeof v->failed, "%s", key);
	pthread_mutex_unlock(&v->mu);
}

/* The view reads the bucket directly: the object cache would keep what
 * it fetched (CACHE/fetched) and answer later checks from there. */
static int view_size(void *ctx, const char *name, uint64_t *size)
{
	ulp_bucket_view *v = ctx;
	char *key = ulp_bucket_object_key(v->b, name);
	if (!key)
		return -ENOMEM;
	ulp_s3_status s = { 0, "", "" };
	int rc = ulp_s3_head(v->b->s3, key, size, &s);
	if (rc) {
		note_failed(v, key);
		rc = rc == -ENOENT ? -EIO : rc; /* the catalog names it */
	}
	free(key);
	return rc;
}

static int view_read_at(void *ctx, const char *name, uint64_t off, void *buf,
                        size_t len)
{
	ulp_bucket_view *v = ctx;
	char *key = ulp_bucket_object_key(v->b, name);
	if (!key)
		return -ENOMEM;
	ulp_s3_status s = { 0, "", "" };
	size_t got = 0;
	int rc = ulp_s3_get_range(v->b->s3, key, off, len, buf, &got, &s);
	if (rc || got != len)
		note_failed(v, key);
	free(key);
	return rc || got != len ? -EIO : 0;
}

static int view_put(void *ctx, int dir_fd, const char *name)
{
	(void)ctx;
	(void)dir_fd;
	(void)name;
	return -EROFS; /* nothing is committed in a view */
}

/* Uploaded representations that are not their version's local object. */
static int list_items(ulp_bucket_view *v)
{
	ulp_bucket *b = v->b;
	ulp_breps_item *it = NULL;
	size_t n = 0;
	int rc = ulp_breps_items(b->reps, &it, &n);
	if (!rc && n && !(v->item = calloc(n, sizeof *v->item)))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		view_item *vi = &v->item[v->n];
		vi->version = it[i].version;
		vi->base = it[i].base;
		vi->key = ulp_bucket_object_key(b, it[i].object);
		if (!vi->key)
			rc = -ENOMEM;
		else
			v->n++;
	}
	free(it);
	return rc;
}

static int rm_one(const char *p, const struct stat *sb, int flag,
                  struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_DP ? rmdir(p) : unlink(p))
		ulp_bucket_log("%s: %s", p, strerror(errno));
	return 0;
}

/* The catalog copy, rewritten as a publish rewrites it, and the store. */
static int view_store(ulp_bucket_view *v)
{
	char db[4200], live[4200];
	snprintf(db, sizeof db, "%s/catalog.db", v->dir);
	snprintf(live, sizeof live, "%s/catalog.db", v->b->cache_dir);
	int rc = ulp_cat_copy(live, db);
	if (!rc)
		rc = ulp_breps_rewrite(db);
	if (rc)
		return rc;
	v->remote = (ulp_remote){ .ctx = v,
		                  .put = view_put,
		                  .size = view_size,
		                  .read_at = view_read_at };
	ulp_store_opts o = { 0 };
	ulp_store_opts_default(&o);
	o.encoder_threads = 1;
	o.remote = &v->remote;
	rc = ulp_store_open(v->dir, &o, &v->st);
	if (rc)
		ulp_bucket_log("%s: the bucket's catalog does not open: %s",
		               v->dir, strerror(-rc));
	return rc;
}

int ulp_bucket_view_writer(const ulp_bucket *b)
{
	return b && b->reps;
}

int ulp_bucket_view_open(ulp_bucket *b, ulp_bucket_view **out)
{
	*out = NULL;
	if (!ulp_bucket_view_writer(b))
		return 0; /* read-only: the store reads the bucket itself */
	ulp_bucket_view *v = calloc(1, sizeof *v);
	if (!v)
		return -ENOMEM;
	v->b = b;
	pthread_mutex_init(&v->mu, NULL);
	int rc = list_items(v);
	if (!rc && v->n) {
		const char *t = getenv("TMPDIR");
		snprintf(v->dir, sizeof v->dir, "%s/ulpfs-verify.XXXXXX",
		         t && t[0] == '/' ? t : "/tmp");
		if (!mkdtemp(v->dir)) {
			rc = -errno;
			ulp_bucket_log("%s: %s", v->dir, strerror(errno));
			v->dir[0] = 0;
		}
	}
	if (!rc && v->n)
		rc = view_store(v);
	if (rc || !v->n) {
		ulp_bucket_view_close(v);
		return rc;
	}
	*out = v;
	return 0;
}

void ulp_bucket_view_close(ulp_bucket_view *v)
{
	if (!v)
		return;
	if (v->st)
		ulp_store_close(v->st);
	if (v->dir[0])
		nftw(v->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	for (size_t i = 0; i < v->n; i++)
		free(v->item[i].key);
	free(v->item);
	pthread_mutex_destroy(&v->mu);
	free(v);
}

ulp_store *ulp_bucket_view_store(ulp_bucket_view *v)
{
	return v->st;
}

size_t ulp_bucket_view_count(const ulp_bucket_view *v)
{
	return v ? v->n : 0;
}

uint64_t ulp_bucket_view_version(const ulp_bucket_view *v, size_t i)
{
	return v->item[i].version;
}

uint64_t ulp_bucket_view_base(const ulp_bucket_view *v, size_t i)
{
	return v->item[i].base;
}

const char *ulp_bucket_view_key(const ulp_bucket_view *v, size_t i)
{
	return v->item[i].key;
}

void ulp_bucket_view_failed(ulp_bucket_view *v, char *key, size_t len)
{
	pthread_mutex_lock(&v->mu);
	snprintf(key, len, "%s", v->failed);
	v->failed[0] = 0;
	pthread_mutex_unlock(&v->mu);
}
