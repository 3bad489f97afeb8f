/*
 * floatcode_bench.c - the float codec's kernels alone, one thread.
 *
 *   bench/floatcode_bench [--reps R] FILE...
 *
 * FILE... is a trajectory of one kind of file (each coded against the one
 * before it, the first standalone).  Every float tensor that matches one
 * of the previous file by name, dtype and size is coded as one stream
 * (ulp_float_encode, as the pipeline codes a tensor that fits a chunk),
 * decoded and compared; the others are coded standalone.  Times are the
 * thread's CPU time, the median of R repetitions per file, so that other
 * processes on a shared machine disturb them less than `ulpfs bench`'s;
 * zstd -3 runs on the same float bytes in the same repetitions.  No
 * pipeline, hashing or copies: what the bitstream and its kernels cost.
 * Built on demand: make bench/floatcode_bench.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "bench_util.h"
#include "floatcode.h"
#include "ulpfs/ulp.h"

typedef struct bfile {
	uint8_t *data;
	size_t size;
	ulp_tensor_map map;
} bfile;

static int load(const char *path, bfile *f)
{
	FILE *fp = fopen(path, "rb");
	long n;
	memset(f, 0, sizeof(*f));
	if (!fp || fseek(fp, 0, SEEK_END) || (n = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET)) {
		if (fp)
			fclose(fp);
		return -1;
	}
	f->size = (size_t)n;
	f->data = malloc(f->size ? f->size : 1);
	if (!f->data || fread(f->data, 1, f->size, fp) != f->size) {
		fclose(fp);
		return -1;
	}
	fclose(fp);
	return ulp_format_parse(f->data, f->size, &f->map) ? -1 : 0;
}

static void unload(bfile *f)
{
	ulp_tensor_map_free(&f->map);
	free(f->data);
}

static double cpu_now(void)
{
	return bench_cpu_now(CLOCK_THREAD_CPUTIME_ID);
}

/* The tensor of prev matching t by name, dtype and size, or NULL. */
static const ulp_tensor *match(const bfile *prev, const ulp_tensor *t)
{
	for (size_t i = 0; prev && i < prev->map.n; i++) {
		const ulp_tensor *p = &prev->map.v[i];
		if (p->dtype == t->dtype && p->nbytes == t->nbytes &&
		    strcmp(p->name, t->name) == 0)
			return p;
	}
	return NULL;
}

typedef struct brow {
	double enc, dec, zenc, zdec; /* seconds, medians */
	uint64_t bytes, coded, zcoded, elems;
} brow;

/* One file against prev (NULL: standalone); returns 0, or -1 on a codec
 * error or a mismatch. */
static int bench_file(ulp_float_scratch *fs, const bfile *cur,
                      const bfile *prev, unsigned reps, brow *row)
{
	double te[64], td[64], tze[64], tzd[64];
	ulp_buf out = { 0 };
	uint8_t *dst = malloc(cur->size ? cur->size : 1);
	size_t *ends = calloc(cur->map.n + 1, sizeof(size_t));
	uint8_t *flat = malloc(cur->size ? cur->size : 1);
	size_t zb = ZSTD_compressBound(cur->size);
	uint8_t *z = malloc(zb);
	ZSTD_CCtx *zc = ZSTD_createCCtx();
	ZSTD_DCtx *zd = ZSTD_createDCtx();
	int rc = -1;
	memset(row, 0, sizeof(*row));
	if (!dst || !ends || !flat || !z || !zc || !zd)
		goto done;
	size_t nflat = 0;
	for (size_t i = 0; i < cur->map.n; i++) {
		const ulp_tensor *t = &cur->map.v[i];
		if (ulp_dtype_fmt(t->dtype).width == 0)
			continue;
		memcpy(flat + nflat, cur->data + t->offset, t->nbytes);
		nflat += t->nbytes;
	}
	for (unsigned r = 0; r < reps; r++) {
		out.len = 0;
		double t0 = cpu_now();
		for (size_t i = 0; i < cur->map.n; i++) {
			const ulp_tensor *t = &cur->map.v[i];
			ulp_float_fmt f = ulp_dtype_fmt(t->dtype);
			const ulp_tensor *p = match(prev, t);
			if (f.width &&
			    ulp_float_encode(fs, f, cur->data + t->offset,
			                     p ? prev->data + p->offset : NULL,
			                     t->nbytes / (f.width / 8), 0, &out,
			                     NULL))
				goto done;
			ends[i] = out.len;
		}
		double t1 = cpu_now();
		size_t start = 0;
		for (size_t i = 0; i < cur->map.n; i++) {
			const ulp_tensor *t = &cur->map.v[i];
			ulp_float_fmt f = ulp_dtype_fmt(t->dtype);
			const ulp_tensor *p = match(prev, t);
			if (!f.width)
				continue;
			if (ulp_float_decode(fs, f, out.p + start,
			                     ends[i] - start,
			                     p ? prev->data + p->offset : NULL,
			                     t->nbytes / (f.width / 8),
			                     dst + t->offset)) {
				fprintf(stderr, "%s: decoding failed\n",
				        t->name);
				goto done;
			}
			start = ends[i];
		}
		double t2 = cpu_now();
		/* compared after the clock stops: zstd's decode below is not
		 * timed with a comparison either */
		for (size_t i = 0; i < cur->map.n; i++) {
			const ulp_tensor *t = &cur->map.v[i];
			if (ulp_dtype_fmt(t->dtype).width &&
			    memcmp(dst + t->offset, cur->data + t->offset,
			           t->nbytes) != 0) {
				fprintf(stderr, "%s: round trip mismatch\n",
				        t->name);
				goto done;
			}
		}
		double tz = cpu_now();
		size_t zn = ZSTD_compressCCtx(zc, z, zb, flat, nflat, 3);
		double t3 = cpu_now();
		if (ZSTD_isError(zn) ||
		    ZSTD_decompressDCtx(zd, dst, cur->size, z, zn) != nflat)
			goto done;
		double t4 = cpu_now();
		te[r] = t1 - t0;
		td[r] = t2 - t1;
		tze[r] = t3 - tz;
		tzd[r] = t4 - t3;
		row->zcoded = zn;
	}
	row->enc = bench_median(te, reps);
	row->dec = bench_median(td, reps);
	row->zenc = bench_median(tze, reps);
	row->zdec = bench_median(tzd, reps);
	row->bytes = nflat;
	row->coded = out.len;
	for (size_t i = 0; i < cur->map.n; i++) {
		unsigned w = ulp_dtype_fmt(cur->map.v[i].dtype).width;
		row->elems += w ? cur->map.v[i].nbytes / (w / 8) : 0;
	}
	rc = 0;
done:
	ZSTD_freeCCtx(zc);
	ZSTD_freeDCtx(zd);
	free(z);
	free(flat);
	free(ends);
	free(dst);
	free(out.p);
	return rc;
}

int main(int argc, char **argv)
{
	int a = 1;
	unsigned reps = bench_reps_arg(argc, argv, &a, 5);
	if (a >= argc || reps < 1 || reps > 64) {
		fprintf(stderr, "usage: %s [--reps R (1-64)] FILE...\n",
		        argv[0]);
		return 2;
	}
	ulp_float_scratch *fs = ulp_float_scratch_new();
	bfile files[2];
	double ve[2][256], vd[2][256], re[2][256], rd[2][256];
	unsigned nk[2] = { 0, 0 };
	uint64_t elems[2] = { 0, 0 }, coded[2] = { 0, 0 };
	if (!fs)
		return 1;
	printf("%-48s %8s %8s %8s %8s %7s\n", "file (float tensors)",
	       "enc MB/s", "dec MB/s", "enc/z3", "dec/z3", "bits/el");
	for (int i = a; i < argc; i++) {
		bfile *cur = &files[(i - a) % 2];
		const bfile *prev = i > a ? &files[(i - a - 1) % 2] : NULL;
		brow row;
		if (load(argv[i], cur) ||
		    bench_file(fs, cur, prev, reps, &row)) {
			fprintf(stderr, "%s: failed\n", argv[i]);
			return 1;
		}
		if (!row.bytes) {
			fprintf(stderr, "%s: no float tensors\n", argv[i]);
			return 1;
		}
		double mb = (double)row.bytes / 1e6;
		int k = prev != NULL; /* 0: standalone, 1: delta */
		if (nk[k] < 256) {
			ve[k][nk[k]] = mb / row.enc;
			vd[k][nk[k]] = mb / row.dec;
			re[k][nk[k]] = row.zenc / row.enc;
			rd[k][nk[k]] = row.zdec / row.dec;
			nk[k]++;
		}
		elems[k] += row.elems;
		coded[k] += row.coded;
		printf("%-48.48s %8.1f %8.1f %8.2f %8.2f %7.3f\n", argv[i],
		       mb / row.enc, mb / row.dec, row.zenc / row.enc,
		       row.zdec / row.dec, 8.0 * (double)row.coded / row.elems);
		if (prev)
			unload((bfile *)prev);
	}
	unload(&files[(argc - 1 - a) % 2]);
	for (int k = 0; k < 2; k++)
		if (nk[k])
			printf("median %-11s %8.1f %8.1f %8.2f %8.2f %7.3f "
			       "(%u files)\n",
			       k ? "deltas" : "standalone",
			       bench_median(ve[k], nk[k]),
			       bench_median(vd[k], nk[k]),
			       bench_median(re[k], nk[k]),
			       bench_median(rd[k], nk[k]),
			       8.0 * (double)coded[k] / (double)elems[k],
			       nk[k]);
	ulp_float_scratch_free(fs);
	return 0;
}
