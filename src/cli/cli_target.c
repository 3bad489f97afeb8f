/*
 * cli_target.c - which store a command acts on, and how it reaches it:
 * --store DIR (or s3://BUCKET/PREFIX, its default cache directory), or
 * the ulpfs mount that a path (or the working directory) lies in; over the daemon's control socket when one holds the store,
 * else by opening the store here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_target.h"
#include "mount_s3.h"

/* Absolute, resolved path of p, which may not exist (its parent must). */
static char *abs_of(const char *p)
{
	char *r = realpath(p, NULL);
	if (r)
		return r;
	char *d = strdup(p), *b = strdup(p), *out = NULL;
	if (d && b) {
		char *dr = realpath(dirname(d), NULL);
		if (dr && asprintf(&out, "%s/%s", strcmp(dr, "/") ? dr : "",
		                   basename(b)) < 0)
			out = NULL;
		free(dr);
	}
	free(d);
	free(b);
	return out;
}

/* --store s3://BUCKET/PREFIX: its default cache directory (bucket.h),
 * where a mount of it without -o cache_dir keeps its store too. */
static int find_url(cli_target *t, const char *url)
{
	char *bucket, *prefix, err[256];
	if (ulp_bucket_parse_url(url, &bucket, &prefix, err, sizeof err)) {
		cli_err("%s", err);
		return CLI_USAGE;
	}
	free(bucket);
	free(prefix);
	t->url = strdup(url);
	t->store = ulp_bucket_default_cache(url);
	if (!t->url || !t->store) {
		cli_err("out of memory");
		return CLI_FAIL;
	}
	cli_mount_ent e = { 0 };
	if (cli_find_mount(t->store, 1, &e) == 1) {
		t->mnt = e.target;
		e.target = NULL;
	}
	cli_mount_ent_free(&e);
	t->explicit_store = 1;
	return CLI_OK;
}

int cli_target_find(cli_target *t, const char *store, const char *hint)
{
	cli_mount_ent e = { 0 };
	memset(t, 0, sizeof(*t));
	if (store && ulp_bucket_is_url(store))
		return find_url(t, store);
	if (store) {
		t->store = realpath(store, NULL);
		if (!t->store) {
			cli_err("%s: %s", store, strerror(errno));
			return CLI_FAIL;
		}
		if (cli_find_mount(t->store, 1, &e) == 1) {
			t->mnt = e.target;
			e.target = NULL;
		}
		t->explicit_store = 1;
		cli_mount_ent_free(&e);
		return CLI_OK;
	}
	char *a = abs_of(hint ? hint : ".");
	int found = a ? cli_find_mount_of(a, &e) : -1;
	if (found != 1) {
		cli_err("%s: not in a ulpfs mount (give --store DIR)",
		        hint ? hint : "the working directory");
		free(a);
		cli_mount_ent_free(&e);
		return CLI_USAGE;
	}
	free(a);
	t->store = e.source;
	t->mnt = e.target;
	e.source = e.target = NULL;
	cli_mount_ent_free(&e);
	return CLI_OK;
}

char *cli_target_path(cli_target *t, const char *arg)
{
	char *a = NULL;
	if (t->mnt &&
	    (!t->explicit_store || arg[0] == '/' || access(arg, F_OK) == 0))
		a = abs_of(arg);
	size_t n = t->mnt ? strlen(t->mnt) : 0;
	if (a && strncmp(a, t->mnt, n) == 0 && (a[n] == '/' || a[n] == 0)) {
		char *r = strdup(a[n] ? a + n + 1 : "");
		free(a);
		return r;
	}
	free(a);
	if (!t->explicit_store) {
		cli_err("%s: not in the mount %s", arg, t->mnt);
		return NULL;
	}
	/* A path inside the store: "a/b", "/a/b/", "./a". */
	while (arg[0] == '/' || (arg[0] == '.' && arg[1] == '/'))
		arg += arg[0] == '/' ? 1 : 2;
	char *r = strdup(strcmp(arg, ".") ? arg : "");
	if (!r)
		return NULL;
	for (size_t l = strlen(r); l && r[l - 1] == '/'; l--)
		r[l - 1] = 0;
	/* ".." would name something outside the store. */
	for (const char *c = r; c; c = strchr(c, '/')) {
		c += *c == '/';
		if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || !c[2])) {
			cli_err("%s: outside the store", arg);
			free(r);
			return NULL;
		}
	}
	return r;
}

/* Requests that change the store: on a bucket store they take the lease,
 * as a writer mount does; the others read without it. */
static int op_writes(json_t *req)
{
	static const char *const w[] = {
		"sync", "gc", "prune", "restore", "snap-create", "snap-delete"
	};
	const char *op = json_string_value(json_object_get(req, "op"));
	for (size_t i = 0; op && i < sizeof w / sizeof w[0]; i++)
		if (!strcmp(op, w[i]))
			return 1;
	return 0;
}

static void target_s3_free(cli_target *t)
{
	if (t->s3) {
		mount_s3_free(t->s3);
		free(t->s3);
		t->s3 = NULL;
	}
}

int cli_target_run(cli_target *t, json_t *req, const cli_sink *sink)
{
	int rc = CLI_FAIL;
	int r = cli_remote(t->store, req, sink, &rc);
	if (r == 0)
		return rc;
	char why[256];
	if (r == -EACCES) {
		cli_err("%s: %s", t->store,
		        cli_store_error(t->store, r, why, sizeof why));
		return CLI_FAIL;
	}
	if (r != -ENOENT && r != -ECONNREFUSED) {
		cli_err("%s: control channel: %s", t->store, strerror(-r));
		return CLI_FAIL;
	}
	if (!t->st) {
		ulp_store_opts o;
		memset(&o, 0, sizeof(o));
		ulp_store_opts_default(&o);
		/* A bucket store's cache: with the bucket, as a mount (which
		 * seeds a new cache directory from the bucket's catalog). */
		if (t->url && mount_s3_open_url(&t->s3, t->url, t->store,
		                                !op_writes(req), &o) < 0)
			return CLI_FAIL;
		/* Never create a store by accident. */
		char *cat = NULL;
		if (asprintf(&cat, "%s/catalog.db", t->store) < 0)
			return CLI_FAIL;
		int exists = access(cat, F_OK) == 0 ? 1 : -errno;
		free(cat);
		if (exists == -EACCES) {
			target_s3_free(t);
			cli_err("%s: %s", t->store,
			        cli_store_error(t->store, exists, why,
			                        sizeof why));
			return CLI_FAIL;
		}
		if (exists < 0) {
			target_s3_free(t);
			cli_err(t->url ? "%s: no catalog published there"
			               : "%s: not a ulpfs store",
			        t->url ? t->url : t->store);
			return CLI_FAIL;
		}
		if (!t->url && mount_s3_open_cmd(&t->s3, t->store,
		                                 !op_writes(req), &o) < 0)
			return CLI_FAIL;
		r = ulp_store_open(t->store, &o, &t->st);
		if (r < 0) {
			target_s3_free(t);
			cli_err("%s: %s", t->store,
			        r == -EBUSY ? "in use by another process, "
			                      "which "
			                      "does not answer on control.sock"
			                    : cli_store_error(t->store, r, why,
			                                      sizeof why));
			return CLI_FAIL;
		}
		if (t->s3)
			mount_s3_attach(t->s3, t->st);
	}
	cli_env env = { t->st, NULL, sink, t->store,
		        t->s3 ? t->s3->bucket : NULL };
	return cli_exec(&env, req);
}

void cli_target_free(cli_target *t)
{
	if (t->s3)
		mount_s3_detach(t->s3);
	if (t->st)
		ulp_store_close(t->st);
	if (t->s3 && mount_s3_close(t->s3) < 0)
		cli_err("%s: the catalog was not published to the bucket "
		        "(see above)",
		        t->store);
	target_s3_free(t);
	free(t->store);
	free(t->url);
	free(t->mnt);
	memset(t, 0, sizeof(*t));
}
