/*
 * mount_s3.c - the bucket side of "ulpfs mount s3://BUCKET/PREFIX".
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "mount_s3.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "objstore/upload_errors.h"

int mount_s3_option(mount_s3 *m, const char *opt)
{
	const char *eq = strchr(opt, '=');
	const char *v = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
#define KEY(k) (klen == sizeof(k) - 1 && strncmp(opt, k, klen) == 0)
	if (!strcmp(opt, "ro")) {
		m->read_only = 1;
		return 0; /* libfuse gets it too */
	}
	if (!strcmp(opt, "rw")) {
		m->read_only = 0;
		return 0;
	}
	if (KEY("cache_dir") && v && *v) {
		free(m->cache_dir);
		m->cache_dir = strdup(v);
		return m->cache_dir ? 1 : -1;
	}
	if (KEY("object_cache") && v) {
		if (cli_parse_size(v, &m->object_cache) < 0 ||
		    !m->object_cache) {
			cli_err("mount option '%s': invalid value", opt);
			return -1;
		}
		return 1;
	}
	if (KEY("upload_delay") && v) {
		unsigned u;
		if (cli_parse_uint(v, 86400, &u) < 0) {
			cli_err("mount option '%s': invalid value", opt);
			return -1;
		}
		m->upload_delay_s = u ? (long)u : -1;
		return 1;
	}
	if (KEY("publish_interval") && v) {
		unsigned u;
		if (cli_parse_uint(v, 86400, &u) < 0 || !u) {
			cli_err("mount option '%s': invalid value", opt);
			return -1;
		}
		m->publish_s = u;
		return 1;
	}
#undef KEY
	return 0;
}

const char *mount_s3_store_dir(mount_s3 *m, const char *url)
{
	char *bucket, *prefix, err[256];
	if (ulp_bucket_parse_url(url, &bucket, &prefix, err, sizeof err)) {
		cli_err("%s", err);
		return NULL;
	}
	free(bucket);
	free(prefix);
	m->url = url;
	char *dir = m->cache_dir ? strdup(m->cache_dir)
	                         : ulp_bucket_default_cache(url);
	if (!dir) {
		cli_err("out of memory");
		return NULL;
	}
	if (dir[0] != '/') {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd)) {
			cli_err("getcwd: %s", strerror(errno));
			free(dir);
			return NULL;
		}
		size_t n = strlen(cwd) + strlen(dir) + 2;
		char *abs = malloc(n);
		if (!abs) {
			free(dir);
			return NULL;
		}
		snprintf(abs, n, "%s/%s", cwd, dir);
		free(dir);
		dir = abs;
	}
	free(m->cache_dir);
	m->cache_dir = dir;
	return dir;
}

int mount_s3_open(mount_s3 *m, ulp_store_opts *sopts, char *err, size_t errlen)
{
	if (!m->url)
		return 0;
	ulp_bucket_opts bo = { .url = m->url,
		               .cache_dir = m->cache_dir,
		               .object_cache = m->object_cache,
		               .read_only = m->read_only,
		               .publish_s = m->publish_s,
		               .upload_delay_s = m->upload_delay_s,
		               .quiet = m->url_buf != NULL };
	if (ulp_bucket_open(&bo, &m->bucket, err, errlen) < 0)
		return -1;
	sopts->remote = ulp_bucket_remote(m->bucket);
	return 0;
}

void mount_s3_attach(mount_s3 *m, ulp_store *st)
{
	if (m->bucket)
		ulp_bucket_attach(m->bucket, st);
}

void mount_s3_detach(mount_s3 *m)
{
	if (m->bucket)
		ulp_bucket_detach(m->bucket);
}

int mount_s3_close(mount_s3 *m)
{
	int rc = m->bucket ? ulp_bucket_close(m->bucket) : 0;
	m->bucket = NULL;
	return rc;
}

void mount_s3_free(mount_s3 *m)
{
	if (m->bucket)
		ulp_bucket_close(m->bucket);
	free(m->cache_dir);
	free(m->url_buf);
	memset(m, 0, sizeof *m);
}

int mount_s3_umount_report(const char *store)
{
	ulp_upload_errors e;
	if (ulp_upload_errors_read(store, &e) != 1)
		return 0;
	int64_t staged = ulp_upload_errors_staged(store);
	/* A later mount clears the file once it has uploaded the objects. */
	if (staged <= 0 && e.pending <= 0)
		return 0; /* uploaded after all (by a later mount) */
	cli_err("%lld staged file(s) and %lld object(s) of closed files NOT "
	        "uploaded to %s (%s error, %" PRIu64 " failed uploads; the "
	        "last: %s); they stay in "
	        "%s and the next "
	        "mount uploads them",
	        (long long)(staged > 0 ? staged : 0), (long long)e.pending,
	        e.url, e.permanent ? "a permanent" : "a transient", e.failures,
	        e.error, store);
	return -1;
}

/* The bucket url (malloc'ed, taken over) of the store in dir, opened. */
static int open_cmd(mount_s3 **out, char *url, const char *dir, int read_only,
                    ulp_store_opts *sopts)
{
	mount_s3 *m = calloc(1, sizeof *m);
	char err[512];
	if (!m || !(m->cache_dir = strdup(dir))) {
		free(m);
		free(url);
		cli_err("out of memory");
		return -1;
	}
	m->url = m->url_buf = url;
	m->read_only = read_only;
	if (mount_s3_open(m, sopts, err, sizeof err) < 0) {
		cli_err("%s (the store of %s)", err, dir);
		mount_s3_free(m);
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

int mount_s3_open_cmd(mount_s3 **out, const char *dir, int read_only,
                      ulp_store_opts *sopts)
{
	*out = NULL;
	char *url = ulp_bucket_url_of(dir);
	return url ? open_cmd(out, url, dir, read_only, sopts) : 0;
}

int mount_s3_open_url(mount_s3 **out, const char *url, const char *dir,
                      int read_only, ulp_store_opts *sopts)
{
	*out = NULL;
	char *u = strdup(url);
	if (!u) {
		cli_err("out of memory");
		return -1;
	}
	return open_cmd(out, u, dir, read_only, sopts);
}
