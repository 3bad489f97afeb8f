/*
 * lease.c - one writer per bucket store: the object PREFIX/LEASE says who
 * writes and until when.
 *
 *   ulpfs-lease 1
 *   owner host=H dir=CACHE_DIR pid=P nonce=N
 *   expires UNIX_SECONDS
 *
 * A writable mount takes the lease when there is none, when it has expired,
 * or when it names this host and cache directory (a daemon of this machine
 * that died: two live mounts of one cache directory are kept apart by the
 * store's own lock).  It is refreshed every lease_s/3 seconds and deleted
 * at umount; a writer killed with -9 leaves it to expire after lease_s
 * (120 s by default).
 *
 * Where the server honours If-None-Match: * on PUT (AWS S3, MinIO, recent
 * RGW) taking a missing lease is atomic.  Swift's s3api and older RGWs
 * answer 501: then the lease is written, read back after a pause, and kept
 * only if it still names this mount, which stops two writers that do not
 * start within the same instant, but not all races: the lease is then
 * advisory, and the mount says so in its log.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

typedef struct lease {
	char owner[512];
	long long expires;
} lease;

static int lease_parse(const char *buf, size_t len, lease *l)
{
	char tmp[1024];
	if (len >= sizeof tmp)
		return -EIO;
	memcpy(tmp, buf, len);
	tmp[len] = '\0';
	char *o = strstr(tmp, "\nowner "), *e = strstr(tmp, "\nexpires ");
	if (strncmp(tmp, "ulpfs-lease 1\n", 14) || !o || !e)
		return -EIO;
	o += 7;
	char *nl = strchr(o, '\n');
	if (!nl || (size_t)(nl - o) >= sizeof l->owner)
		return -EIO;
	memcpy(l->owner, o, (size_t)(nl - o));
	l->owner[nl - o] = '\0';
	l->expires = strtoll(e + 9, NULL, 10);
	return 0;
}

/* 0 found, -ENOENT none, else an error. */
static int lease_get(ulp_bucket *b, const char *key, lease *l,
                     ulp_s3_status *st)
{
	void *buf;
	size_t len;
	int rc = ulp_s3_get(b->s3, key, &buf, &len, st);
	if (rc)
		return rc;
	rc = lease_parse(buf, len, l);
	free(buf);
	return rc;
}

/* The lease's key (malloc'ed into *key) and content: 0, -ENOENT, -ENOMEM
 * (no key), or another error. */
static int lease_read(ulp_bucket *b, char **key, lease *l, ulp_s3_status *st)
{
	*key = ulp_bucket_key(b, "LEASE");
	return *key ? lease_get(b, *key, l, st) : -ENOMEM;
}

static int lease_put(ulp_bucket *b, const char *key, unsigned flags,
                     ulp_s3_status *st)
{
	char body[700];
	int n = snprintf(body, sizeof body,
	                 "ulpfs-lease 1\nowner %s\nexpires %lld\n", b->owner,
	                 (long long)time(NULL) + b->o.lease_s);
	return ulp_s3_put(b->s3, key, body, (size_t)n, flags, st);
}

/* "host=H dir=D " prefix of an owner id: the same machine and cache. */
static int same_place(const char *a, const char *b)
{
	const char *pa = strstr(a, " pid="), *pb = strstr(b, " pid=");
	return pa && pb && pa - a == pb - b && !strncmp(a, b, (size_t)(pa - a));
}

static void make_owner(ulp_bucket *b)
{
	char host[256] = "unknown";
	gethostname(host, sizeof host - 1);
	unsigned long long nonce = 0;
	if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce)
		nonce = (unsigned long long)time(NULL) ^
		        ((unsigned long long)getpid() << 32);
	snprintf(b->owner, sizeof b->owner, "host=%s dir=%s pid=%d nonce=%llx",
	         host, b->cache_dir, (int)getpid(), nonce);
}

static void status_err(char *err, size_t errlen, const char *what,
                       const ulp_bucket *b, const ulp_s3_status *st, int rc)
{
	char line[400];
	snprintf(err, errlen, "s3://%s/%s: %s: %s", b->bucket, b->prefix, what,
	         rc == -ENXIO ? "no such bucket"
	         : st->http || st->code[0]
	                 ? ulp_s3_strstatus(st, line, sizeof line)
	                 : strerror(-rc));
}

int ulp_lease_acquire(ulp_bucket *b, char *err, size_t errlen)
{
	make_owner(b);
	char *key;
	ulp_s3_status st = { 0, "", "" };
	lease cur;
	int rc = lease_read(b, &key, &cur, &st);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && !same_place(cur.owner, b->owner) &&
	    cur.expires > (long long)time(NULL)) {
		char when[64];
		time_t t = (time_t)cur.expires;
		struct tm tm;
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC",
		         gmtime_r(&t, &tm));
		snprintf(err, errlen,
		         "s3://%s/%s is mounted for writing elsewhere (lease "
		         "of "
		         "%s until %s); mount it with -o ro, or wait for the "
		         "lease to expire",
		         b->bucket, b->prefix, cur.owner, when);
		free(key);
		return -EBUSY;
	}
	if (rc == -EIO) {
		snprintf(err, errlen, "s3://%s/%s: unreadable LEASE object",
		         b->bucket, b->prefix);
		free(key);
		return rc;
	}
	if (rc && rc != -ENOENT) {
		status_err(err, errlen, "reading the lease", b, &st, rc);
		free(key);
		return rc;
	}
	int fresh = rc == -ENOENT;
	rc = lease_put(b, key, fresh ? ULP_S3_IF_NONE_MATCH : 0, &st);
	if (rc == -ENOTSUP) {
		b->lease_advisory = 1;
		rc = lease_put(b, key, 0, &st);
	}
	if (rc == -EEXIST) {
		snprintf(err, errlen,
		         "s3://%s/%s: another writer took the lease just now",
		         b->bucket, b->prefix);
		free(key);
		return -EBUSY;
	}
	if (rc) {
		status_err(err, errlen, "writing the lease", b, &st, rc);
		free(key);
		return rc;
	}
	if (b->lease_advisory || !fresh) {
		/* no atomic create: the last writer wins; look again later */
		struct timespec ts = { 0, 300 * 1000000L };
		nanosleep(&ts, NULL);
		rc = lease_get(b, key, &cur, &st);
		if (rc == 0 && strcmp(cur.owner, b->owner)) {
			snprintf(err, errlen,
			         "s3://%s/%s: another writer (%s) took the "
			         "lease at the same time",
			         b->bucket, b->prefix, cur.owner);
			free(key);
			return -EBUSY;
		}
		if (rc) {
			status_err(err, errlen, "reading the lease back", b,
			           &st, rc);
			free(key);
			return rc;
		}
	}
	if (b->lease_advisory)
		ulp_bucket_log("s3://%s/%s: the server refuses conditional "
		               "PUTs; the writer's lease is advisory",
		               b->bucket, b->prefix);
	b->leased = 1;
	free(key);
	return 0;
}

int ulp_lease_refresh(ulp_bucket *b)
{
	char *key;
	ulp_s3_status st = { 0, "", "" };
	lease cur;
	int rc = lease_read(b, &key, &cur, &st);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && strcmp(cur.owner, b->owner)) {
		ulp_bucket_log("s3://%s/%s: the lease was taken by %s; "
		               "another writer may be changing this store",
		               b->bucket, b->prefix, cur.owner);
		free(key);
		return -EBUSY;
	}
	if (rc == 0 || rc == -ENOENT)
		rc = lease_put(b, key, 0, &st);
	if (rc) {
		char line[400];
		ulp_bucket_log("s3://%s/%s: lease refresh failed: %s",
		               b->bucket, b->prefix,
		               ulp_s3_strstatus(&st, line, sizeof line));
	}
	free(key);
	return rc;
}

void ulp_lease_release(ulp_bucket *b)
{
	char *key = ulp_bucket_key(b, "LEASE");
	if (!key)
		return;
	ulp_s3_status st;
	lease cur;
	if (lease_get(b, key, &cur, &st) == 0 && !strcmp(cur.owner, b->owner))
		ulp_s3_delete(b->s3, key, &st);
	b->leased = 0;
	free(key);
}
