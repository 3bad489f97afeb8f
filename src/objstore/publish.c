/*
 * publish.c - the catalog between the cache directory and the bucket.
 *
 * Publish: new versions coded as forward deltas for the bucket where
 * they can be (reps.c), the deferred uploads flushed (uploads.c), VACUUM
 * INTO a temporary file (a consistent snapshot, taken from a read-only
 * connection while the store keeps writing), rewritten to name each
 * version's bucket representation (reps.c), upload it under a
 * new name catalog/<UTC stamp>-<nonce>.db, then overwrite the small pointer
 * object CATALOG with that name.  A reader sees either the old pointer or
 * the new one, and both name complete snapshots; the one before the
 * previous is deleted (the previous stays for readers that fetched the
 * pointer just before).
 *
 * Seed: a cache directory without catalog.db gets the pointer's snapshot.
 * cache_dir/bucket-snapshot remembers which snapshot the local catalog
 * descends from; when the bucket's pointer names another one (someone else
 * wrote since), a read-only mount takes the newer snapshot and a writer
 * moves the old local catalog and staging aside (to stale-<time>/) first.
 * A crash between the pointer PUT and that record would make the next
 * mount take its own snapshot for someone else's: so the name goes to
 * cache_dir/bucket-snapshot-next (fsynced) before the pointer PUT, and the
 * seed accepts either file's name as this cache's own.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"
#include "objstore/catalog_pointer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char *cpath(const ulp_bucket *b, const char *name)
{
	size_t n = strlen(b->cache_dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", b->cache_dir, name);
	return p;
}

static int mkdir_p(const char *dir)
{
	char *d = strdup(dir);
	if (!d)
		return -ENOMEM;
	for (char *p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(d, 0755) < 0 && errno != EEXIST) {
			free(d);
			return -errno;
		}
		*p = '/';
	}
	int rc = mkdir(d, 0700) < 0 && errno != EEXIST ? -errno : 0;
	free(d);
	return rc;
}

#define STATE_FILE "bucket-snapshot"
#define INTENT_FILE "bucket-snapshot-next"

static void read_state(const ulp_bucket *b, const char *file, char *out,
                       size_t len)
{
	out[0] = '\0';
	char *p = cpath(b, file);
	FILE *f = p ? fopen(p, "r") : NULL;
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = '\0';
		fclose(f);
	}
	free(p);
}

static int write_state(const ulp_bucket *b, const char *file, const char *snap)
{
	char *p = cpath(b, file), *t = cpath(b, ".bucket-snapshot.tmp");
	int rc = p && t ? 0 : -ENOMEM;
	FILE *f = rc ? NULL : ulp_bucket_fopen_private(t);
	if (!rc && !f)
		rc = -errno;
	if (f) {
		fprintf(f, "%s\n", snap);
		if (fflush(f) || fsync(fileno(f)))
			rc = -errno;
		fclose(f);
		if (!rc && rename(t, p) < 0)
			rc = -errno;
	}
	free(p);
	free(t);
	return rc;
}

static void drop_intent(const ulp_bucket *b)
{
	char *p = cpath(b, INTENT_FILE);
	if (p)
		unlink(p);
	free(p);
}

/* The pointer's snapshot name into snap ("" when none). */
static int read_pointer(ulp_bucket *b, char *snap, size_t len,
                        ulp_s3_status *st)
{
	char *key = ulp_bucket_key(b, "CATALOG");
	if (!key)
		return -ENOMEM;
	void *buf;
	size_t n;
	int rc = ulp_s3_get(b->s3, key, &buf, &n, st);
	free(key);
	snap[0] = '\0';
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = ulp_catalog_pointer_parse(buf, n, snap, len);
	free(buf);
	return rc;
}

static int download_catalog(ulp_bucket *b, const char *snap, ulp_s3_status *st)
{
	char *key = ulp_bucket_key(b, snap), *tmp = cpath(b, ".catalog-seed"),
	     *dst = cpath(b, "catalog.db");
	int rc = key && tmp && dst ? 0 : -ENOMEM;
	int fd = rc ? -1
	            : open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (!rc && fd < 0)
		rc = -errno;
	if (!rc)
		rc = ulp_s3_get_fd(b->s3, key, fd, NULL, st);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (!rc) {
		const char *side[] = { "catalog.db-wal", "catalog.db-shm" };
		for (int i = 0; i < 2; i++) {
			char *p = cpath(b, side[i]);
			if (p)
				unlink(p);
			free(p);
		}
		if (rename(tmp, dst) < 0)
			rc = -errno;
	}
	if (rc && tmp)
		unlink(tmp);
	if (!rc)
		rc = write_state(b, STATE_FILE, snap);
	if (!rc)
		drop_intent(b); /* one of the catalog just replaced */
	free(key);
	free(tmp);
	free(dst);
	return rc;
}

/* A writer whose local catalog descends from another snapshot than the
 * bucket's newest: keep the old one (and its staged bytes) aside. */
static int move_aside(ulp_bucket *b)
{
	char name[64];
	snprintf(name, sizeof name, "stale-%lld", (long long)time(NULL));
	char *dir = cpath(b, name);
	if (!dir || mkdir(dir, 0700) < 0) {
		free(dir);
		return -errno;
	}
	const char *what[] = { "catalog.db", "catalog.db-wal", "catalog.db-shm",
		               "staging" };
	for (int i = 0; i < 4; i++) {
		char *from = cpath(b, what[i]);
		size_t n = strlen(dir) + strlen(what[i]) + 2;
		char *to = malloc(n);
		if (from && to) {
			snprintf(to, n, "%s/%s", dir, what[i]);
			rename(from, to); /* missing side files are fine */
		}
		free(from);
		free(to);
	}
	ulp_bucket_log("s3://%s/%s was written elsewhere since this cache's "
	               "catalog; the old catalog and staging are in %s",
	               b->bucket, b->prefix, dir);
	free(dir);
	return 0;
}

int ulp_publish_seed(ulp_bucket *b, char *err, size_t errlen)
{
	int rc = mkdir_p(b->cache_dir);
	if (rc) {
		snprintf(err, errlen, "%s: %s", b->cache_dir, strerror(-rc));
		return rc;
	}
	ulp_s3_status st = { 0, "", "" };
	char snap[128], have[128];
	rc = read_pointer(b, snap, sizeof snap, &st);
	if (rc) {
		char line[400];
		snprintf(err, errlen, "s3://%s/%s: %s", b->bucket, b->prefix,
		         rc == -ENXIO ? "no such bucket"
		         : rc == -EIO && !st.http
		                 ? "the CATALOG pointer is malformed"
		                 : ulp_s3_strstatus(&st, line, sizeof line));
		return rc;
	}
	if (!snap[0])
		return 0; /* nothing published yet: a new store */
	snprintf(b->last_snapshot, sizeof b->last_snapshot, "%s", snap);
	char next[128];
	read_state(b, STATE_FILE, have, sizeof have);
	read_state(b, INTENT_FILE, next, sizeof next);
	char *cat = cpath(b, "catalog.db");
	if (!cat)
		return -ENOMEM;
	int local = access(cat, F_OK) == 0;
	free(cat);
	if (local && !strcmp(have, snap))
		return 0;
	if (local && !strcmp(next, snap)) {
		/* our own publish, cut off before it was recorded */
		ulp_bucket_log("s3://%s/%s: %s is this cache's own (its "
		               "publish was interrupted): kept",
		               b->bucket, b->prefix, snap);
		rc = write_state(b, STATE_FILE, snap);
		if (!rc)
			drop_intent(b);
		return rc;
	}
	if (local && !b->o.read_only && (rc = move_aside(b)) < 0) {
		snprintf(err, errlen,
		         "%s: cannot move the old catalog aside: %s",
		         b->cache_dir, strerror(-rc));
		return rc;
	}
	rc = download_catalog(b, snap, &st);
	if (rc) {
		char line[400];
		snprintf(err, errlen, "s3://%s/%s: fetching %s: %s", b->bucket,
		         b->prefix, snap,
		         st.http || st.code[0]
		                 ? ulp_s3_strstatus(&st, line, sizeof line)
		                 : strerror(-rc));
	}
	return rc;
}

/* Changes of catalog.db and its WAL since the last publish. */
static long long catalog_stamp(const ulp_bucket *b)
{
	long long s = 0;
	const char *files[] = { "catalog.db", "catalog.db-wal" };
	for (int i = 0; i < 2; i++) {
		char *p = cpath(b, files[i]);
		struct stat sb;
		if (p && stat(p, &sb) == 0)
			s = s * 31 +
			    (long long)sb.st_mtim.tv_sec * 1000000000LL +
			    sb.st_mtim.tv_nsec + sb.st_size;
		free(p);
	}
	return s;
}

int ulp_publish_now(ulp_bucket *b, int only_if_changed)
{
	pthread_mutex_lock(&b->pub_mu);
	long long stamp = catalog_stamp(b);
	if (only_if_changed && stamp == b->pub_stamp) {
		pthread_mutex_unlock(&b->pub_mu);
		return 0;
	}
	char *db = cpath(b, "catalog.db"), *tmp = cpath(b, ".catalog-publish");
	char snap[128], stampbuf[32];
	unsigned nonce = 0;
	if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce)
		nonce = (unsigned)getpid();
	time_t now = time(NULL);
	struct tm tm;
	strftime(stampbuf, sizeof stampbuf, "%Y%m%dT%H%M%SZ",
	         gmtime_r(&now, &tm));
	snprintf(snap, sizeof snap, "catalog/%s-%08x.db", stampbuf, nonce);
	char *key = ulp_bucket_key(b, snap), *ptr = ulp_bucket_key(b, "CATALO"
	                                                              "G");
	int rc = db && tmp && key && ptr ? 0 : -ENOMEM;
	ulp_s3_status st = { 0, "", "" };
	if (!rc) {
		/* Every object the snapshot names is in the bucket first:
		 * the deferred ones are uploaded, and puts until the
		 * snapshot is taken upload before they commit (uploads.c). */
		ulp_up_gate(b, 1);
		pthread_mutex_lock(&b->mu);
		ulp_store *store = b->st;
		pthread_mutex_unlock(&b->mu);
		/* New versions as forward deltas where they can be (reps.c),
		 * the rest as their own objects; then the snapshot names
		 * what the bucket holds. */
		ulp_reps_prepare(b, store);
		rc = ulp_up_flush(b);
		if (!rc)
			ulp_publish_crash(b, ULP_CRASH_FLUSH);
		if (!rc)
			rc = ulp_reps_keyframes(b);
		unlink(tmp);
		if (!rc)
			rc = ulp_cat_copy(db, tmp);
		ulp_up_gate(b, 0);
		if (!rc)
			rc = ulp_breps_rewrite(tmp);
		if (!rc)
			ulp_publish_crash(b, ULP_CRASH_SNAPSHOT);
	}
	int fd = -1;
	if (!rc && (fd = open(tmp, O_RDONLY | O_CLOEXEC)) < 0)
		rc = -errno;
	struct stat sb;
	if (!rc && fstat(fd, &sb) < 0)
		rc = -errno;
	if (!rc)
		rc = ulp_s3_put_fd(b->s3, key, fd, (uint64_t)sb.st_size, &st);
	if (fd >= 0)
		close(fd);
	if (!rc) {
		atomic_fetch_add(&b->up_catalogs, 1);
		atomic_fetch_add(&b->up_catalog_bytes,
		                 (unsigned long long)sb.st_size);
		ulp_publish_crash(b, ULP_CRASH_POINTER);
		/* Kept after a failed PUT too: a timeout may have stored it. */
		rc = write_state(b, INTENT_FILE, snap);
	}
	if (!rc)
		rc = ulp_s3_put(b->s3, ptr, snap, strlen(snap), 0, &st);
	if (!rc) {
		ulp_publish_crash(b, ULP_CRASH_RECORD);
		/* the previous snapshot stays for a reader that fetched the
		 * old pointer just now; the one before it goes */
		if (b->prev_snapshot[0]) {
			char *ok = ulp_bucket_key(b, b->prev_snapshot);
			if (ok)
				ulp_s3_delete(b->s3, ok, &st);
			free(ok);
		}
		memcpy(b->prev_snapshot, b->last_snapshot,
		       sizeof b->prev_snapshot);
		snprintf(b->last_snapshot, sizeof b->last_snapshot, "%s", snap);
		b->pub_stamp = stamp;
		if (write_state(b, STATE_FILE, snap) == 0)
			drop_intent(b);
	} else {
		char line[400];
		ulp_bucket_log(
			"publishing the catalog to s3://%s/%s failed: %s",
			b->bucket, key ? key : snap,
			st.http || st.code[0]
				? ulp_s3_strstatus(&st, line, sizeof line)
				: strerror(-rc));
		rc = rc == -EAGAIN ? -ETIMEDOUT : rc;
	}
	if (tmp)
		unlink(tmp);
	free(db);
	free(tmp);
	free(key);
	free(ptr);
	pthread_mutex_unlock(&b->pub_mu);
	return rc;
}

/* ---------------------------------------------------------------- sweep */

typedef struct snaps {
	size_t plen; /* of PREFIX/ */
	char **v;
	size_t n, cap;
} snaps;

static int snap_cb(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	snaps *s = ctx;
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 16;
		char **nv = realloc(s->v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		s->v = nv;
		s->cap = nc;
	}
	if (!(s->v[s->n] = strdup(key + s->plen)))
		return -ENOMEM;
	s->n++;
	return 0;
}

static int by_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

void ulp_publish_sweep(ulp_bucket *b)
{
	char *all = ulp_bucket_key(b, ""), *pfx = ulp_bucket_key(b, "catalog/");
	snaps s = { .plen = all ? strlen(all) : 0 };
	ulp_s3_status st = { 0, "", "" };
	pthread_mutex_lock(&b->pub_mu);
	int rc = all && pfx ? ulp_s3_list(b->s3, pfx, snap_cb, &s, &st)
	                    : -ENOMEM;
	/* Names sort by time: the one before the pointer's stays for a
	 * reader that fetched the old pointer (the next publish deletes it),
	 * every other is left by a crash and goes now. */
	size_t keep = s.n;
	if (!rc) {
		qsort(s.v, s.n, sizeof *s.v, by_str);
		for (size_t i = 0; i < s.n; i++)
			if (strcmp(s.v[i], b->last_snapshot) < 0)
				keep = i;
	}
	unsigned gone = 0;
	for (size_t i = 0; !rc && i < s.n; i++) {
		if (i == keep || !strcmp(s.v[i], b->last_snapshot))
			continue;
		char *key = ulp_bucket_key(b, s.v[i]);
		gone += key && ulp_s3_delete(b->s3, key, &st) == 0;
		free(key);
	}
	if (!rc && keep < s.n && !b->prev_snapshot[0])
		snprintf(b->prev_snapshot, sizeof b->prev_snapshot, "%s",
		         s.v[keep]);
	pthread_mutex_unlock(&b->pub_mu);
	if (gone)
		ulp_bucket_log("s3://%s/%s: deleted %u stale catalog "
		               "snapshot(s)",
		               b->bucket, b->prefix, gone);
	for (size_t i = 0; i < s.n; i++)
		free(s.v[i]);
	free(s.v);
	free(all);
	free(pfx);
}
