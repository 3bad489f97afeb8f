/*
 * bucket.c - the store's remote hooks for an S3 bucket (uploads before
 * commit, ranged reads, deferred deletes, the local object cache bound),
 * the orphan sweep and the thread that publishes the catalog and refreshes
 * the lease.  Layout and rules: bucket.h.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void ulp_bucket_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("ulpfs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int ulp_bucket_is_url(const char *s)
{
	return !strncmp(s, "s3://", 5);
}

int ulp_bucket_parse_url(const char *url, char **bucket, char **prefix,
                         char *err, size_t errlen)
{
	*bucket = *prefix = NULL;
	if (!ulp_bucket_is_url(url) || !url[5] || url[5] == '/') {
		snprintf(err, errlen, "%s: want s3://BUCKET[/PREFIX]", url);
		return -EINVAL;
	}
	const char *b = url + 5, *slash = strchr(b, '/');
	*bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
	const char *p = slash ? slash + 1 : "";
	size_t n = strlen(p);
	while (n && p[n - 1] == '/')
		n--;
	*prefix = strndup(p, n);
	if (!*bucket || !*prefix) {
		free(*bucket);
		free(*prefix);
		*bucket = *prefix = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (strstr(*prefix, "//") || strstr(*prefix, "..")) {
		snprintf(err, errlen, "%s: empty or '..' parts in the prefix",
		         url);
		free(*bucket);
		free(*prefix);
		*bucket = *prefix = NULL;
		return -EINVAL;
	}
	return 0;
}

char *ulp_bucket_default_cache(const char *url)
{
	char *bucket, *prefix, err[64];
	if (ulp_bucket_parse_url(url, &bucket, &prefix, err, sizeof err))
		return NULL;
	const char *root = getenv("ULPFS_CACHE_ROOT");
	if (!root || root[0] != '/')
		root = "/var/cache/ulpfs";
	size_t n = strlen(root) + strlen(bucket) + 3 * strlen(prefix) + 40;
	char *out = malloc(n);
	if (out) {
		int k = snprintf(out, n, "%s/%s/", root, bucket);
		for (const char *p = prefix; *p; p++)
			k += snprintf(out + k, n - (size_t)k,
			              *p == '/' ? "%%2F" : "%c", *p);
		if (!*prefix)
			snprintf(out + k, n - (size_t)k, "%%2F");
	}
	free(bucket);
	free(prefix);
	return out;
}

char *ulp_bucket_key(const ulp_bucket *b, const char *what)
{
	size_t n = strlen(b->prefix) + strlen(what) + 2;
	char *k = malloc(n);
	if (k)
		snprintf(k, n, "%s%s%s", b->prefix, *b->prefix ? "/" : "",
		         what);
	return k;
}

char *ulp_bucket_object_key(const ulp_bucket *b, const char *name)
{
	char what[64];
	snprintf(what, sizeof what, "objects/%s", name);
	return ulp_bucket_key(b, what);
}

/* Transient failures after the client's own retries fail the encode as an
 * ordinary error, so that the queue backs off, retries, and sync/umount
 * report it instead of waiting (its -EAGAIN means "retry at once"). */
static int upload_errno(int rc)
{
	return rc == -EAGAIN ? -ETIMEDOUT : rc;
}

/* ---------------------------------------------------------------- hooks */

/* Append a copy of name to a growable list; 0 or -ENOMEM. */
static int names_add(char ***v, size_t *n, size_t *cap, const char *name)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		char **nv = realloc(*v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	if (!((*v)[*n] = strdup(name)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* A failed upload, for stats and umount (upload_errors.h).  403 and a
 * missing bucket are permanent: the queue retries them, but only a person
 * can make them succeed. */
static void note_failure(ulp_bucket *b, const char *key, const char *why,
                         int rc)
{
	pthread_mutex_lock(&b->mu);
	ulp_upload_errors *e = &b->uerr;
	long long now = (long long)time(NULL);
	if (!e->failures)
		e->first = now;
	e->failures++;
	e->last = now;
	e->permanent = rc == -EACCES || rc == -ENXIO;
	e->staged = -1;
	snprintf(e->url, sizeof e->url, "%s", b->url);
	snprintf(e->error, sizeof e->error, "%s: %s", key, why);
	int wrc = ulp_upload_errors_write(b->cache_dir, e);
	pthread_mutex_unlock(&b->mu);
	if (wrc)
		ulp_bucket_log("%s/%s: %s", b->cache_dir,
		               ULP_UPLOAD_ERRORS_FILE, strerror(-wrc));
}

/* Everything closed is in the bucket: no failure is current any more. */
static void clear_failures(ulp_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	b->uerr.failures = 0;
	ulp_upload_errors_clear(b->cache_dir);
	pthread_mutex_unlock(&b->mu);
}

int ulp_bucket_upload_raw(ulp_bucket *b, int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat sb;
	int rc = fstat(fd, &sb) < 0 ? -errno : 0;
	char *key = ulp_bucket_object_key(b, name);
	ulp_s3_status st = { 0, "", "" };
	if (!rc && !key)
		rc = -ENOMEM;
	if (!rc)
		rc = ulp_s3_put_fd(b->s3, key, fd, (uint64_t)sb.st_size, &st);
	close(fd);
	if (!rc) {
		atomic_fetch_add(&b->up_objects, 1);
		atomic_fetch_add(&b->up_object_bytes,
		                 (unsigned long long)sb.st_size);
		ulp_publish_crash_upload(b);
	}
	if (rc) {
		char line[400];
		const char *why =
			st.code[0] || st.http
				? ulp_s3_strstatus(&st, line, sizeof line)
				: strerror(-rc);
		ulp_bucket_log("upload of s3://%s/%s failed: %s (%s)",
		               b->bucket, key ? key : name, why,
		               b->defer ? "retried; the local copy is kept"
		                        : "the file stays staged and is "
		                          "retried");
		note_failure(b, key ? key : name, why, rc);
	}
	free(key);
	return upload_errno(rc);
}

int ulp_bucket_upload(ulp_bucket *b, int dir_fd, const char *name)
{
	int rc = ulp_bucket_upload_raw(b, dir_fd, name);
	if (!rc)
		ulp_ocache_trim(b, name);
	return rc;
}

void ulp_bucket_drop_later(ulp_bucket *b, const char *name)
{
	pthread_mutex_lock(&b->mu);
	/* Out of memory: the next mount's sweep removes it. */
	names_add(&b->dead, &b->ndead, &b->capdead, name);
	pthread_mutex_unlock(&b->mu);
}

static int hook_put(void *ctx, int dir_fd, const char *name)
{
	ulp_bucket *b = ctx;
	if (b->o.read_only)
		return -EROFS;
	pthread_mutex_lock(&b->mu);
	/* Deferred, an object waits while a publish has its gate closed:
	 * its version commits after the snapshot, which need not hold it.
	 * Uploaded at once instead, a flip's object made while the publish
	 * codes that version's forward delta (reps.c) went up although the
	 * bucket never needs it, and stayed there. */
	while (b->defer && b->gate)
		pthread_cond_wait(&b->flush_cv, &b->mu);
	int rc = !b->sweep_done
	                 ? names_add(&b->fresh, &b->nfresh, &b->capfresh, name)
	                 : 0;
	if (!rc && b->defer)
		rc = ulp_up_defer(b, name);
	pthread_mutex_unlock(&b->mu);
	if (rc < 0)
		return rc; /* the sweep could take it for an orphan */
	/* Deferred (uploads.c), or uploaded before its version commits. */
	return rc == 1 ? 0 : ulp_bucket_upload(b, dir_fd, name);
}

static void hook_removed(void *ctx, const char *name)
{
	ulp_bucket *b = ctx;
	if (b->o.read_only)
		return;
	/* A version's bucket representation: it stays there (reps.c). */
	if (ulp_reps_names(b, name))
		return;
	pthread_mutex_lock(&b->mu);
	/* Never uploaded: nothing to delete.  Out of memory: the next
	 * mount's sweep removes it. */
	if (!ulp_up_forget(b, name))
		names_add(&b->dead, &b->ndead, &b->capdead, name);
	pthread_mutex_unlock(&b->mu);
}

static int hook_size(void *ctx, const char *name, uint64_t *size)
{
	ulp_bucket *b = ctx;
	char *key = ulp_bucket_object_key(b, name);
	if (!key)
		return -ENOMEM;
	ulp_s3_status st = { 0, "", "" };
	int rc = ulp_s3_head(b->s3, key, size, &st);
	if (rc) {
		char line[400];
		ulp_bucket_log("s3://%s/%s: %s", b->bucket, key,
		               ulp_s3_strstatus(&st, line, sizeof line));
		rc = rc == -ENOENT ? -EIO : rc; /* the catalog names it */
	}
	free(key);
	return rc;
}

static int hook_read_at(void *ctx, const char *name, uint64_t off, void *buf,
                        size_t len)
{
	ulp_bucket *b = ctx;
	char *key = ulp_bucket_object_key(b, name);
	if (!key)
		return -ENOMEM;
	if (ulp_ocache_get(b, name, off, buf, len)) {
		atomic_fetch_add(&b->cache_ranges, 1);
		atomic_fetch_add(&b->cache_bytes, (unsigned long long)len);
		free(key);
		return 0;
	}
	ulp_s3_status st = { 0, "", "" };
	size_t got = 0;
	int rc = ulp_s3_get_range(b->s3, key, off, len, buf, &got, &st);
	if (!rc && got == len)
		ulp_ocache_put(b, name, off, buf, len);
	if (!rc && got != len)
		rc = -EIO; /* truncated object: an error, never short bytes */
	if (!rc) {
		atomic_fetch_add(&b->down_ranges, 1);
		atomic_fetch_add(&b->down_bytes, (unsigned long long)len);
	}
	if (rc) {
		char line[400];
		ulp_bucket_log("read of s3://%s/%s [%llu, +%zu): %s", b->bucket,
		               key, (unsigned long long)off, len,
		               rc == -EIO && st.http < 300
		                       ? "short answer"
		                       : ulp_s3_strstatus(&st, line,
		                                          sizeof line));
	}
	free(key);
	return rc ? -EIO : 0;
}

static int hook_synced(void *ctx)
{
	ulp_bucket *b = ctx;
	if (!b->o.read_only)
		clear_failures(b);
	/* Deferred uploads wait for the flips first: a version whose
	 * successor has committed is about to become a delta, and its
	 * standalone object would go up only to be deleted right after. */
	pthread_mutex_lock(&b->mu);
	ulp_store *st = b->st;
	pthread_mutex_unlock(&b->mu);
	if (b->defer && st && ulp_up_count(b) > 0) {
		int rc = ulp_store_gc(st);
		if (rc < 0)
			ulp_bucket_log("s3://%s/%s: re-encoding before the "
			               "upload: %s (uploading as it is)",
			               b->bucket, b->prefix, strerror(-rc));
	}
	return ulp_bucket_publish(b);
}

const ulp_remote *ulp_bucket_remote(ulp_bucket *b)
{
	return &b->remote;
}

/* ---------------------------------------------------------------- deletes */

typedef struct deadlist {
	char **v;
	size_t n, cap;
} deadlist;

/* What the catalog has dropped so far: taken before a snapshot, deleted
 * once that snapshot (which no longer names them) is published.  Drops
 * after the snapshot wait for the next one. */
static deadlist take_dead(ulp_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	deadlist d = { b->dead, b->ndead, b->capdead };
	b->dead = NULL;
	b->ndead = b->capdead = 0;
	pthread_mutex_unlock(&b->mu);
	return d;
}

/* A publish failed: the names go back for the next one. */
static void return_dead(ulp_bucket *b, deadlist d)
{
	pthread_mutex_lock(&b->mu);
	for (size_t i = 0; i < d.n; i++) {
		names_add(&b->dead, &b->ndead, &b->capdead, d.v[i]);
		free(d.v[i]);
	}
	pthread_mutex_unlock(&b->mu);
	free(d.v);
}

static void flush_dead(ulp_bucket *b, deadlist d)
{
	if (d.n)
		ulp_publish_crash(b, ULP_CRASH_DELETES);
	char **dead = d.v;
	size_t n = d.n;
	for (size_t i = 0; i < n; i++) {
		char *key = ulp_bucket_object_key(b, dead[i]);
		ulp_s3_status st;
		if (key && ulp_s3_delete(b->s3, key, &st))
			ulp_bucket_log("delete of s3://%s/%s failed (the next "
			               "mount's sweep retries)",
			               b->bucket, key);
		free(key);
		free(dead[i]);
	}
	free(dead);
}

int ulp_bucket_publish(ulp_bucket *b)
{
	if (b->o.read_only)
		return 0;
	ulp_reps_drop(b); /* its drops go with this publish */
	deadlist d = take_dead(b);
	int rc = ulp_publish_now(b, 0);
	if (!rc)
		flush_dead(b, d);
	else
		return_dead(b, d);
	return rc;
}

/* ---------------------------------------------------------------- sweep */

typedef struct sweep {
	ulp_bucket *b;
	size_t plen;
	char **keys; /* orphans */
	size_t n, cap;
	char **have; /* every object listed */
	size_t nhave, caphave;
	int err;
} sweep;

static int sweep_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	sweep *s = ctx;
	const char *name = key + s->plen;
	if (names_add(&s->have, &s->nhave, &s->caphave, name) < 0)
		return -ENOMEM;
	int live = ulp_store_object_live(s->b->st, name);
	if (live < 0)
		return live;
	if (!live)
		live = ulp_reps_names(s->b, name);
	if (live)
		return 0;
	ulp_bucket *b = s->b;
	pthread_mutex_lock(&b->mu);
	for (size_t i = 0; i < b->nfresh && !live; i++)
		live = !strcmp(b->fresh[i], name);
	pthread_mutex_unlock(&b->mu);
	return live ? 0 : names_add(&s->keys, &s->n, &s->cap, key);
}

typedef struct abort_ctx {
	ulp_bucket *b;
	int n;
} abort_ctx;

static int abort_one(void *ctx, const char *key, const char *id)
{
	abort_ctx *a = ctx;
	ulp_s3_status st;
	if (ulp_s3_abort_upload(a->b->s3, key, id, &st) == 0) {
		ulp_bucket_log("aborted an unfinished upload of s3://%s/%s",
		               a->b->bucket, key);
		a->n++;
	}
	return 0;
}

/* Multipart uploads a crash left unfinished (their parts are stored).
 * Called before the store opens: the lease makes this mount the only
 * writer and its encoders have not started, so none is in progress (an
 * upload aborted while its completion runs would leave an object without
 * its parts). */
static void abort_unfinished(ulp_bucket *b)
{
	char *all = ulp_bucket_key(b, "");
	if (!all)
		return;
	ulp_s3_status ust;
	abort_ctx a = { b, 0 };
	for (int round = 0; round < 100; round++) {
		a.n = 0;
		if (ulp_s3_list_uploads(b->s3, all, abort_one, &a, &ust) ||
		    a.n == 0)
			break;
	}
	free(all);
}

static int by_name(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Live objects of CACHE/objects the bucket lacks (have: sorted; listed 0:
 * the listing failed): a crash came before their deferred upload
 * (uploads.c).  Up they go, now. */
static void upload_missing(ulp_bucket *b, int listed, char **have, size_t nhave)
{
	DIR *d = fdopendir(dup(b->obj_dir_fd));
	struct dirent *e;
	unsigned n = 0;
	while (d && (e = readdir(d))) {
		const char *name = e->d_name;
		if (strlen(name) != 32 ||
		    strspn(name, "0123456789abcdef") != 32 ||
		    (nhave &&
		     bsearch(&name, have, nhave, sizeof *have, by_name)) ||
		    ulp_store_object_live(b->st, name) != 1 ||
		    ulp_reps_superseded(b, name))
			continue;
		n += ulp_up_recover(b, name) == 1;
	}
	if (d)
		closedir(d);
	if (n && listed)
		ulp_bucket_log("s3://%s/%s: %u object(s) of committed versions "
		               "were not in the bucket (a crash before their "
		               "upload): uploading them",
		               b->bucket, b->prefix, n);
	else if (n)
		ulp_bucket_log("s3://%s/%s: the bucket could not be listed: "
		               "uploading the %u object(s) of the cache again "
		               "(some may be missing from the bucket)",
		               b->bucket, b->prefix, n);
}

/* Objects in the bucket no version names: uploads a crash cut off before
 * their commit, deletes a crash cut off after it.  Objects this mount is
 * uploading meanwhile (its encoders run already) are spared.  Then the
 * other way round: live objects the bucket lacks. */
static int sweep_orphans(ulp_bucket *b)
{
	char *pfx = ulp_bucket_object_key(b, "");
	if (!pfx)
		return -ENOMEM;
	sweep s = { .b = b, .plen = strlen(pfx) };
	ulp_s3_status st = { 0, "", "" };
	int rc = ulp_s3_list(b->s3, pfx, sweep_cb, &s, &st);
	/* The published catalog may still name them (the crash came after
	 * the local commit that dropped them, before the publish): they go
	 * with the next publish, as the catalog's own drops do. */
	pthread_mutex_lock(&b->mu);
	for (size_t i = 0; !rc && i < s.n; i++)
		names_add(&b->dead, &b->ndead, &b->capdead, s.keys[i] + s.plen);
	pthread_mutex_unlock(&b->mu);
	if (!rc && s.n)
		ulp_bucket_log("s3://%s/%s: %zu orphan object(s) (no version "
		               "names them), deleted after the next publish",
		               b->bucket, b->prefix, s.n);
	/* Unlisted, the bucket counts as empty: an object it lacks must
	 * not wait for its upload unknown to the cache's eviction. */
	if (!rc)
		qsort(s.have, s.nhave, sizeof *s.have, by_name);
	upload_missing(b, !rc, s.have, rc ? 0 : s.nhave);
	names_free(s.keys, s.n);
	names_free(s.have, s.nhave);
	free(pfx);
	pthread_mutex_lock(&b->mu);
	b->sweep_done = 1;
	names_free(b->fresh, b->nfresh);
	b->fresh = NULL;
	b->nfresh = b->capfresh = 0;
	pthread_mutex_unlock(&b->mu);
	return rc;
}

/* ---------------------------------------------------------------- thread */

static void *bg_main(void *arg)
{
	ulp_bucket *b = arg;
	unsigned lease_every = b->o.lease_s / 3 ? b->o.lease_s / 3 : 1;
	time_t next_pub = time(NULL) + b->o.publish_s;
	time_t next_lease = time(NULL) + lease_every;
	time_t last_pub = time(NULL);
	pthread_mutex_lock(&b->mu);
	while (!b->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&b->cv, &b->mu, &ts);
		if (b->stopping)
			break;
		time_t now = time(NULL);
		pthread_mutex_unlock(&b->mu);
		if (b->leased && now >= next_lease) {
			if (ulp_lease_refresh(b) == 0)
				next_lease = now + lease_every;
			else
				next_lease = now + 2;
		}
		/* A periodic publish uploads what is pending first, so it
		 * waits while an upload is deferred, up to upload_delay_s
		 * after the last one (uploads.c). */
		if (now >= next_pub &&
		    (!b->defer || now - last_pub >= b->o.upload_delay_s ||
		     !ulp_up_young(b))) {
			ulp_reps_drop(b);
			deadlist d = take_dead(b);
			if (ulp_publish_now(b, d.n == 0) == 0)
				flush_dead(b, d);
			else
				return_dead(b, d);
			next_pub = now + b->o.publish_s;
			last_pub = now;
		}
		pthread_mutex_lock(&b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

static void write_url(const ulp_bucket *b); /* with the open, below */

int ulp_bucket_attach(ulp_bucket *b, ulp_store *st)
{
	pthread_mutex_lock(&b->mu); /* the object cache's trims read it */
	b->st = st;
	pthread_mutex_unlock(&b->mu);
	write_url(b); /* after the store's open: a new store starts empty */
	if (b->o.read_only)
		return 0;
	/* Without the table (logged), versions go up as their local
	 * objects, as before representations. */
	ulp_reps_open(b);
	ulp_publish_sweep(b);
	int rc = sweep_orphans(b);
	if (rc)
		ulp_bucket_log("orphan sweep of s3://%s/%s failed: %s",
		               b->bucket, b->prefix, strerror(-rc));
	if (pthread_create(&b->thread, NULL, bg_main, b) == 0)
		b->have_thread = 1;
	return 0;
}

void ulp_bucket_detach(ulp_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	b->stopping = 1;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	if (b->have_thread)
		pthread_join(b->thread, NULL);
	b->have_thread = 0;
	pthread_mutex_lock(&b->mu);
	b->st = NULL;
	pthread_mutex_unlock(&b->mu);
}

/* ---------------------------------------------------------------- open */

static void bucket_free(ulp_bucket *b)
{
	ulp_up_stop(b);
	names_free(b->fresh, b->nfresh);
	for (size_t i = 0; i < b->ndead; i++)
		free(b->dead[i]);
	free(b->dead);
	ulp_reps_close(b);
	ulp_s3_close(b->s3);
	if (b->obj_dir_fd >= 0)
		close(b->obj_dir_fd);
	pthread_mutex_destroy(&b->mu);
	pthread_mutex_destroy(&b->pub_mu);
	pthread_mutex_destroy(&b->trim_mu);
	pthread_cond_destroy(&b->cv);
	pthread_cond_destroy(&b->flush_cv);
	free(b->url);
	free(b->cache_dir);
	free(b->bucket);
	free(b->prefix);
	free(b);
}

#define URL_FILE "bucket-url"

char *ulp_bucket_url_of(const char *cache_dir)
{
	char *p = NULL, line[1100];
	if (asprintf(&p, "%s/" URL_FILE, cache_dir) < 0)
		return NULL;
	FILE *f = fopen(p, "re");
	free(p);
	if (!f)
		return NULL;
	char *url = fgets(line, sizeof line, f) ? strdup(line) : NULL;
	fclose(f);
	if (url)
		url[strcspn(url, "\n")] = 0;
	if (url && !ulp_bucket_is_url(url)) {
		free(url);
		url = NULL;
	}
	return url;
}

/* The cache directory names its bucket (bucket.h); a failure costs only
 * the commands that would find the bucket through it. */
static void write_url(const ulp_bucket *b)
{
	char *have = ulp_bucket_url_of(b->cache_dir);
	int same = have && !strcmp(have, b->url);
	free(have);
	char *p = NULL, *tmp = NULL;
	if (same || asprintf(&p, "%s/" URL_FILE, b->cache_dir) < 0)
		return;
	FILE *f = asprintf(&tmp, "%s.tmp", p) < 0
	                  ? NULL
	                  : ulp_bucket_fopen_private(tmp);
	if (f) {
		int ok = fprintf(f, "%s\n", b->url) > 0;
		if (fclose(f) != 0 || !ok || rename(tmp, p) < 0) {
			ulp_bucket_log("%s: %s", p, strerror(errno));
			unlink(tmp);
		}
	}
	free(tmp);
	free(p);
}

FILE *ulp_bucket_fopen_private(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f && fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

/* CACHE/objects, which the store creates too: deferred uploads read it
 * after the store's close, and before its open (recovered objects). */
static int open_objects(ulp_bucket *b, char *err, size_t errlen)
{
	char *p = NULL;
	if (asprintf(&p, "%s/objects", b->cache_dir) < 0)
		return -ENOMEM;
	int rc = mkdir(p, 0700) < 0 && errno != EEXIST ? -errno : 0;
	if (!rc &&
	    (b->obj_dir_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = -errno;
	if (rc)
		snprintf(err, errlen, "%s: %s", p, strerror(-rc));
	free(p);
	return rc;
}

int ulp_bucket_open(const ulp_bucket_opts *o, ulp_bucket **out, char *err,
                    size_t errlen)
{
	*out = NULL;
	ulp_bucket *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->mu, NULL);
	pthread_mutex_init(&b->pub_mu, NULL);
	pthread_mutex_init(&b->trim_mu, NULL);
	/* unknown until the first trim counts it */
	atomic_store(&b->cached_bytes, ~0ull >> 1);
	pthread_cond_init(&b->cv, NULL);
	pthread_cond_init(&b->flush_cv, NULL);
	b->obj_dir_fd = -1;
	b->o = *o;
	if (!b->o.object_cache)
		b->o.object_cache = 4ull << 30;
	if (!b->o.publish_s)
		b->o.publish_s = 60;
	if (!b->o.lease_s)
		b->o.lease_s = 120;
	if (!b->o.upload_delay_s)
		b->o.upload_delay_s = ULP_UPLOAD_DELAY_DEFAULT;
	b->defer = !o->read_only && b->o.upload_delay_s > 0;
	b->url = strdup(o->url);
	b->cache_dir = strdup(o->cache_dir);
	int rc = b->url && b->cache_dir ? 0 : -ENOMEM;
	if (!rc)
		rc = ulp_bucket_parse_url(o->url, &b->bucket, &b->prefix, err,
		                          errlen);
	ulp_s3_config cfg;
	if (!rc) {
		rc = ulp_s3_config_load(&cfg, err, errlen);
		if (!rc) {
			b->s3 = ulp_s3_open(&cfg, b->bucket, err, errlen);
			ulp_s3_config_free(&cfg);
			if (!b->s3)
				rc = -EINVAL;
		}
	}
	b->remote = (ulp_remote){ .ctx = b,
		                  .put = hook_put,
		                  .removed = hook_removed,
		                  .size = hook_size,
		                  .read_at = hook_read_at,
		                  .synced = hook_synced };
	b->sweep_done = o->read_only;
	ulp_publish_crash_init(b);
	if (!rc && !o->read_only)
		rc = ulp_lease_acquire(b, err, errlen);
	if (!rc && !o->read_only)
		abort_unfinished(b);
	if (!rc)
		rc = ulp_publish_seed(b, err, errlen);
	if (!rc && !o->read_only)
		rc = open_objects(b, err, errlen);
	if (!rc && !o->read_only && (rc = ulp_up_start(b)) < 0)
		snprintf(err, errlen, "starting the uploaders: %s",
		         strerror(-rc));
	if (rc) {
		if (b->leased)
			ulp_lease_release(b);
		bucket_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* After the store's close and the last publish: what is still staged was
 * not encoded into an object, and what is still pending (uploads.c) was
 * not uploaded.  The file then says so to umount; with neither it goes.
 * -EIO when something was left behind, else rc. */
static int close_failures(ulp_bucket *b, int rc)
{
	int64_t staged = ulp_upload_errors_staged(b->cache_dir);
	int64_t pending = (int64_t)ulp_up_count(b);
	if (staged == 0 && pending == 0) {
		ulp_upload_errors_clear(b->cache_dir);
		return rc;
	}
	if (staged < 0 || !b->uerr.failures)
		return rc;
	b->uerr.staged = staged;
	b->uerr.pending = pending;
	int wrc = ulp_upload_errors_write(b->cache_dir, &b->uerr);
	ulp_bucket_log("s3://%s/%s: %lld staged file(s) and %lld object(s) "
	               "NOT uploaded (last error: %s); they stay in %s for "
	               "the next mount",
	               b->bucket, b->prefix, (long long)staged,
	               (long long)pending, b->uerr.error, b->cache_dir);
	if (wrc)
		ulp_bucket_log("%s/%s: %s", b->cache_dir,
		               ULP_UPLOAD_ERRORS_FILE, strerror(-wrc));
	return rc ? rc : -EIO;
}

int ulp_bucket_close(ulp_bucket *b)
{
	if (!b)
		return 0;
	ulp_bucket_detach(b);
	int rc = ulp_bucket_publish(b);
	if (rc)
		ulp_bucket_log("s3://%s/%s: the last catalog was not published "
		               "(%s); the local cache %s still has it",
		               b->bucket, b->prefix, strerror(-rc),
		               b->cache_dir);
	if (!b->o.read_only)
		rc = close_failures(b, rc);
	if (b->leased)
		ulp_lease_release(b);
	if (!b->o.quiet)
		ulp_bucket_log("s3://%s/%s: uploaded %llu objects (%llu bytes) "
		               "and "
		               "%llu catalog snapshots (%llu bytes); read %llu "
		               "ranges "
		               "(%llu bytes) from the bucket, %llu ranges "
		               "(%llu "
		               "bytes) from the object cache",
		               b->bucket, b->prefix,
		               atomic_load(&b->up_objects),
		               atomic_load(&b->up_object_bytes),
		               atomic_load(&b->up_catalogs),
		               atomic_load(&b->up_catalog_bytes),
		               atomic_load(&b->down_ranges),
		               atomic_load(&b->down_bytes),
		               atomic_load(&b->cache_ranges),
		               atomic_load(&b->cache_bytes));
	bucket_free(b);
	return rc;
}
