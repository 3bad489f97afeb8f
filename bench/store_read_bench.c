/*
 * store_read_bench.c - the mount's read path without FUSE: every version of
 * a trajectory read through the store, one thread, CPU time.
 *
 *   bench/store_read_bench [--reps R] [--iov] STOREDIR FILE...
 *
 * FILE... are written in order as versions of one path of a new store at
 * STOREDIR (the store reverse-codes them: the newest standalone, a
 * keyframe every 4 versions, the others deltas against the next newer), as
 * a training run saving a checkpoint does; then each version is read
 * through ulp_version_read in 1 MiB pieces, newest first, compared with
 * its file, and zstd -3 decodes the same file's bytes in the same
 * repetition.  The decoded-chunk cache is at the store's floor (20 MiB
 * with a keyframe every 4), so that reading a trajectory larger than
 * that evicts chunks as a large checkpoint does; a smaller one is read
 * from the cache after its first repetition.
 * Prints each version's read speed over zstd -3's (CPU time, median of
 * R repetitions) and the medians over keyframes and deltas.  `ulpfs bench`
 * measures the codec through the CLI's decoder, which maps references;
 * this one what the store adds (cache, reference reads, object reads).
 * --iov reads as the mount does (ulp_version_read_iov: the bytes handed
 * over in place from the cache, as a FUSE reply is written from them);
 * the check of each piece is left out of the time.
 * Built on demand: make bench/store_read_bench.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "bench_util.h"
#include "store/store.h"
#include "ulpfs/ulp.h"

#define MAXV 64
#define MAXR 31

/* the process's: reference chunks may be decoded on other threads */
static double cpu_now(void)
{
	return bench_cpu_now(CLOCK_PROCESS_CPUTIME_ID);
}

typedef struct vlist {
	ulp_version_info v[MAXV];
	size_t n;
} vlist;

static int add_version(void *opaque, const ulp_version_info *v,
                       const char *path)
{
	vlist *l = opaque;
	(void)path;
	if (l->n == MAXV)
		return 1;
	l->v[l->n++] = *v;
	return 0;
}

/* The sink of an in-place read: the pieces checked against the file
 * (base + off), the check's CPU time kept apart from the read's. */
typedef struct sink {
	const uint8_t *want;
	uint64_t off;
	double check;
	int bad;
} sink;

static int sink_check(void *opaque, const struct iovec *iov, int count)
{
	sink *k = opaque;
	double c0 = cpu_now();
	for (int j = 0; j < count; j++) {
		k->bad |= memcmp(iov[j].iov_base, k->want + k->off,
		                 iov[j].iov_len) != 0;
		k->off += iov[j].iov_len;
	}
	k->check += cpu_now() - c0;
	return 0;
}

/* Read version v whole in 1 MiB pieces: into buf, or in place (checked
 * against want); returns the CPU seconds, -1 on a failed read. */
static double read_version(ulp_store *st, const ulp_version_info *v,
                           uint8_t *buf, const uint8_t *want, int iov)
{
	sink k = { want, 0, 0, 0 };
	double c0 = cpu_now();
	for (uint64_t off = 0; off < v->size;) {
		ssize_t got = iov ? ulp_version_read_iov(st, NULL, v->id,
		                                         1u << 20, off, buf,
		                                         sink_check, &k)
		                  : ulp_version_read(st, v->id, buf + off,
		                                     1u << 20, off);
		if (got <= 0 || k.bad) {
			fprintf(stderr, "read: %s\n",
			        k.bad ? "MISMATCH"
			              : strerror(got ? (int)-got : EIO));
			return -1;
		}
		off += (uint64_t)got;
	}
	double t = cpu_now() - c0 - k.check;
	if (iov)
		memcpy(buf, want, v->size); /* checked above */
	return t;
}

/* Write data as the new content of name (created if needed) and wait for
 * its commit. */
static int put(ulp_store *st, const char *name, const uint8_t *data, size_t len)
{
	ulp_attr a;
	ulp_file *f;
	int rc = ulp_ns_lookup(st, ULP_ROOT_INO, name, &a);
	if (rc == -ENOENT)
		rc = ulp_ns_create(st, ULP_ROOT_INO, name, 0644, 0, 0, &a);
	if (!rc)
		rc = ulp_file_open(st, a.ino, O_WRONLY | O_TRUNC, &f, NULL);
	if (rc)
		return rc;
	/* FUSE-sized writes */
	for (size_t done = 0; done < len && !rc;) {
		size_t n = len - done < 131072 ? len - done : 131072;
		ssize_t w = ulp_file_write(f, data + done, n, (off_t)done);
		rc = w == (ssize_t)n ? 0 : w < 0 ? (int)w : -EIO;
		done += n;
	}
	if (!rc)
		rc = ulp_file_flush(f);
	ulp_file_release(f);
	return rc ? rc : ulp_store_sync(st);
}

int main(int argc, char **argv)
{
	int a = 1;
	unsigned reps = bench_reps_arg(argc, argv, &a, 5);
	int iov = a < argc && strcmp(argv[a], "--iov") == 0;
	a += iov;
	if (argc - a < 2 || reps < 1 || reps > MAXR || argc - a - 1 > MAXV) {
		fprintf(stderr,
		        "usage: store_read_bench [--reps R (1..%d)] [--iov] "
		        "STOREDIR FILE... (at most %d)\n",
		        MAXR, MAXV);
		return 2;
	}
	const char *dir = argv[a++];
	size_t nf = (size_t)(argc - a);
	ulp_store_opts o = { 0 };
	o.settle_ms = 1;
	o.encoder_threads = 1;
	o.cache_bytes = 1; /* raised to the floor */
	o.keyframe_every = 4;
	ulp_store *st;
	int rc = ulp_store_open(dir, &o, &st);
	if (rc) {
		fprintf(stderr, "%s: %s\n", dir, strerror(-rc));
		return 1;
	}
	uint8_t *raw[MAXV];
	size_t len[MAXV], maxlen = 1;
	char *tmp = strdup(argv[a]);
	char *name = tmp ? strdup(basename(tmp)) : NULL;
	free(tmp);
	for (size_t i = 0; i < nf && name; i++) {
		int fd = open(argv[a + i], O_RDONLY);
		struct stat sb;
		if (fd < 0 || fstat(fd, &sb) || sb.st_size == 0) {
			fprintf(stderr, "%s: cannot read\n", argv[a + i]);
			return 1;
		}
		len[i] = (size_t)sb.st_size;
		raw[i] = mmap(NULL, len[i], PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (raw[i] == MAP_FAILED) {
			fprintf(stderr, "%s: cannot map\n", argv[a + i]);
			return 1;
		}
		maxlen = len[i] > maxlen ? len[i] : maxlen;
		rc = put(st, name, raw[i], len[i]);
		if (rc) {
			fprintf(stderr, "%s: %s\n", argv[a + i], strerror(-rc));
			return 1;
		}
	}
	vlist l = { .n = 0 };
	if (!name || ulp_store_gc(st) ||
	    ulp_version_list(st, name, add_version, &l) || l.n != nf) {
		fprintf(stderr, "%s: versions not committed\n", dir);
		return 1;
	}
	uint8_t *buf = malloc(maxlen);
	uint8_t *z = malloc(ZSTD_compressBound(maxlen));
	ZSTD_DCtx *zd = ZSTD_createDCtx();
	static double ratio[MAXV][MAXR];
	if (!buf || !z || !zd)
		return 1;
	for (unsigned r = 0; r < reps; r++) {
		/* newest first, as a resume reads, then the older ones */
		for (size_t k = nf; k-- > 0;) {
			const ulp_version_info *v = &l.v[k];
			double t = read_version(st, v, buf, raw[k], iov);
			if (t < 0)
				return 1;
			if (v->size != len[k] || memcmp(buf, raw[k], len[k])) {
				fprintf(stderr, "version %zu: MISMATCH\n", k);
				return 1;
			}
			size_t zl = ZSTD_compress(z, ZSTD_compressBound(len[k]),
			                          raw[k], len[k], 3);
			double c0 = cpu_now();
			size_t back =
				ZSTD_decompressDCtx(zd, buf, len[k], z, zl);
			double tz = cpu_now() - c0;
			if (back != len[k])
				return 1;
			ratio[k][r] = tz / (t > 1e-9 ? t : 1e-9);
		}
	}
	double key[MAXV], delta[MAXV];
	size_t nk = 0, nd = 0;
	printf("%-4s %-8s %12s %10s\n", "seq", "kind", "bytes", "read/z3dec");
	for (size_t k = 0; k < nf; k++) {
		double m = bench_median(ratio[k], reps);
		printf("%-4zu %-8s %12zu %10.3f\n", k + 1,
		       l.v[k].keyframe ? "keyframe" : "delta", len[k], m);
		if (l.v[k].keyframe)
			key[nk++] = m;
		else
			delta[nd++] = m;
	}
	printf("median read speed over zstd -3 decode: keyframes %.3f (%zu), "
	       "deltas %.3f (%zu)\n",
	       bench_median(key, nk), nk, bench_median(delta, nd), nd);
	ZSTD_freeDCtx(zd);
	free(z);
	free(buf);
	free(name);
	ulp_store_close(st);
	return 0;
}
