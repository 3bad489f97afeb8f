/*
 * object_cache.c - the bounded local object cache of a bucket store
 * (-o object_cache=SIZE): CACHE/objects/, the objects this machine wrote
 * (the store reads them as local files), and CACHE/fetched/, the byte
 * ranges that reads fetched from the bucket, one file each, named
 * NAME.OFFSET.LENGTH.  The store reads an object it does not hold with
 * the same ranges every time (its header, then whole chunks), so a second
 * read of a version finds them here and fetches nothing.  A range file
 * carries its own checksum: a damaged one is fetched again from the bucket
 * (and the chunks' checksums are checked after either source, so nothing
 * damaged is ever returned).  Eviction goes oldest first (a hit renews
 * a file), over both directories together.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define FETCHED "fetched"

static char *range_path(const ulp_bucket *b, const char *name, uint64_t off,
                        size_t len)
{
	char *p = NULL;
	if (asprintf(&p, "%s/" FETCHED "/%s.%llu.%zu", b->cache_dir, name,
	             (unsigned long long)off, len) < 0)
		return NULL;
	return p;
}

/* Each range file holds the bytes and, after them, their XXH3-64 (little
 * endian): a damaged file is found here and fetched again, where the
 * chunk's own checksum would only make the read fail. */
#define TRAILER 8

static int pread_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t put = 0;
	while (put < len) {
		ssize_t w = write(fd, (const char *)buf + put, len - put);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		put += (size_t)w;
	}
	return 0;
}

static void trailer_of(const void *buf, size_t len, uint8_t t[TRAILER])
{
	uint64_t h = XXH3_64bits(buf, len);
	for (int i = 0; i < TRAILER; i++)
		t[i] = (uint8_t)(h >> (8 * i));
}

int ulp_ocache_get(ulp_bucket *b, const char *name, uint64_t off, void *buf,
                   size_t len)
{
	char *p = range_path(b, name, off, len);
	int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0) {
		free(p);
		return 0;
	}
	struct stat sb;
	uint8_t have[TRAILER], want[TRAILER];
	int ok = fstat(fd, &sb) == 0 &&
	         (uint64_t)sb.st_size == (uint64_t)len + TRAILER &&
	         pread_all(fd, buf, len) == 0 &&
	         pread(fd, have, TRAILER, (off_t)len) == TRAILER;
	if (ok) {
		trailer_of(buf, len, want);
		ok = !memcmp(have, want, TRAILER);
		if (!ok) {
			ulp_bucket_log("%s: damaged (checksum), fetched again "
			               "from the bucket",
			               p);
			unlink(p);
		}
	}
	if (ok)
		futimens(fd, NULL); /* recently used: evicted last */
	close(fd);
	free(p);
	return ok;
}

void ulp_ocache_put(ulp_bucket *b, const char *name, uint64_t off,
                    const void *buf, size_t len)
{
	char *dir = NULL, *tmp = NULL, *dst = range_path(b, name, off, len);
	if (!dst || asprintf(&dir, "%s/" FETCHED, b->cache_dir) < 0 ||
	    asprintf(&tmp, "%s/.tmp.%ld.%p", dir, (long)getpid(),
	             (void *)&dir) < 0) {
		free(dst);
		return; /* not cached: the next read fetches it again */
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		goto out;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	uint8_t t[TRAILER];
	trailer_of(buf, len, t);
	int w = write_full(fd, buf, len) == 0 &&
	        write_full(fd, t, TRAILER) == 0;
	if (close(fd) == 0 && w && rename(tmp, dst) == 0) {
		unsigned long long now =
			atomic_fetch_add(&b->cached_bytes, len + TRAILER) +
			len + TRAILER;
		if (now > b->o.object_cache)
			ulp_ocache_trim(b, strrchr(dst, '/') + 1);
	} else {
		unlink(tmp);
	}
out:
	free(dir);
	free(tmp);
	free(dst);
}

typedef struct cfile {
	char *path;
	time_t mtime;
	uint64_t size;
	int upload; /* superseded: uploaded before it goes (reps.c) */
} cfile;

static int by_age(const void *a, const void *b)
{
	const cfile *x = a, *y = b;
	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Whether an object of objects/ may be evicted: only once it is in the
 * bucket.  Until then (renamed into objects/ with its upload under way, or
 * deferred: uploads.c) it is the only copy.  An object that is neither
 * pending nor uploading is in the bucket once its version has committed;
 * without the store (before the attach, after the detach) no object can
 * be told safe. */
static int evictable(ulp_bucket *b, ulp_store *st, const char *name)
{
	return st && ulp_store_object_live(st, name) == 1 &&
	       !ulp_bucket_pending(b, name);
}

/* The files of one cache directory that may go, keep left out; st: the
 * store that says which objects of objects/ are safe to evict (NULL for
 * fetched/, whose ranges all are).  total counts them all. */
static void list_dir(ulp_bucket *b, const char *dir, int objects, ulp_store *st,
                     const char *keep, cfile **v, size_t *n, size_t *cap,
                     uint64_t *total)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		struct stat sb;
		char *p = NULL;
		if (e->d_name[0] == '.' ||
		    (objects && strlen(e->d_name) != 32) ||
		    asprintf(&p, "%s/%s", dir, e->d_name) < 0)
			continue;
		if (stat(p, &sb) < 0 || !S_ISREG(sb.st_mode)) {
			free(p);
			continue;
		}
		*total += (uint64_t)sb.st_size;
		if (!strcmp(e->d_name, keep) ||
		    (objects && !evictable(b, st, e->d_name))) {
			free(p);
			continue;
		}
		/* A reverse delta never uploaded, its version being in the
		 * bucket otherwise: the only copy until uploaded. */
		int up = objects && ulp_reps_superseded(b, e->d_name);
		if (*n == *cap) {
			size_t nc = *cap ? 2 * *cap : 64;
			cfile *nv = realloc(*v, nc * sizeof *nv);
			if (!nv) {
				free(p);
				break;
			}
			*v = nv;
			*cap = nc;
		}
		(*v)[*n] = (cfile){ p, sb.st_mtime, (uint64_t)sb.st_size, up };
		(*n)++;
	}
	if (d)
		closedir(d);
}

/* Keep objects/ and fetched/ together under the object_cache bound: the
 * oldest evictable files go first, never keep (the object just written, or
 * the range just fetched: the likeliest next read); readers holding one
 * open keep their descriptor. */
void ulp_ocache_trim(ulp_bucket *b, const char *keep)
{
	char *od = NULL, *fd = NULL;
	if (asprintf(&od, "%s/objects", b->cache_dir) < 0)
		return;
	if (asprintf(&fd, "%s/" FETCHED, b->cache_dir) < 0) {
		free(od);
		return;
	}
	pthread_mutex_lock(&b->mu);
	ulp_store *st = b->st;
	pthread_mutex_unlock(&b->mu);
	pthread_mutex_lock(&b->trim_mu);
	cfile *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	list_dir(b, od, 1, st, keep, &v, &n, &cap, &total);
	list_dir(b, fd, 0, NULL, keep, &v, &n, &cap, &total);
	qsort(v, n, sizeof *v, by_age);
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(v[i].path, '/') + 1;
		if (total > b->o.object_cache &&
		    (!v[i].upload ||
		     ulp_bucket_upload_raw(b, b->obj_dir_fd, base) == 0) &&
		    unlink(v[i].path) == 0)
			total -= v[i].size;
		free(v[i].path);
	}
	free(v);
	atomic_store(&b->cached_bytes, (unsigned long long)total);
	pthread_mutex_unlock(&b->trim_mu);
	free(od);
	free(fd);
}
