/*
 * cmd_bench.c - `ulpfs bench FILE...`: the codec on a trajectory, against
 * baselines measured in the same run.
 *
 * The files are a trajectory in order: each is coded against the most
 * recent earlier argument with the same base name (what the filesystem does
 * for a path that is overwritten or saved in a new checkpoint directory).
 * A file may also be coded given an earlier argument of the same directory
 * (the side file: its fp32 tensors against their bf16 or fp32 copies
 * there, as optimizer.pt's master weights beside model.safetensors), as
 * the filesystem does for files of one checkpoint; --no-side measures
 * without.  Every round trip is verified; any mismatch makes the command
 * fail.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "cli.h"

typedef struct mem_sink {
	uint8_t *p;
	size_t len, cap;
} mem_sink;

static int sink_write(void *opaque, const void *buf, size_t len)
{
	mem_sink *s = opaque;
	if (s->len + len > s->cap) {
		size_t ncap = s->cap ? s->cap : 1 << 20;
		while (ncap < s->len + len)
			ncap *= 2;
		uint8_t *p = realloc(s->p, ncap);
		if (!p)
			return ULP_ERR_NOMEM;
		s->p = p;
		s->cap = ncap;
	}
	memcpy(s->p + s->len, buf, len);
	s->len += len;
	return ULP_OK;
}

/* Sizes and speeds of one file. */
typedef struct file_row {
	const char *path;
	char *base;
	int ref;  /* index of its reference, or -1 */
	int side; /* index of its side file, or -1 */
	uint64_t raw, ulp, z3, z19, bg;
	double enc1, dec1, encn, decn; /* MB/s */
	double z3enc, z3dec;           /* MB/s */
	double encn_cpu, decn_cpu; /* CPU seconds per wall second, n threads */
	ulp_stats st;
} file_row;

typedef struct bench_opts {
	unsigned threads, reps;
	int baselines, zstd19;
	int side;            /* code files given a sibling (0: --no-side) */
	int cpu_clock;       /* one-thread timings in process CPU time */
	const char *objects; /* --objects: where each file's object goes */
	uint32_t chunk;
	/* per-thread contexts kept across files, as a long-running encoder
	 * (the filesystem's pool) keeps them */
	ulp_cctx *cctx[64];
	ulp_dctx *dctx[64];
} bench_opts;

static double median(double *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	if (!n)
		return 0;
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The process's CPU seconds (all threads). */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether the figures of nthreads count CPU seconds: with --cpu-time the
 * one-thread ones count the process's CPU time, which other processes on a
 * shared machine disturb far less than the wall clock; threaded figures
 * stay wall-clock (they measure the speed-up). */
static int bench_cpu_clock(const bench_opts *o, unsigned nthreads)
{
	return o->cpu_clock && nthreads <= 1;
}

/* Seconds on that clock. */
static double bench_now(const bench_opts *o, unsigned nthreads)
{
	return bench_cpu_clock(o, nthreads) ? cpu_now() : cli_now();
}

/* Median of the CPU seconds per wall second of reps timed runs: how many
 * threads were busy on average, which tells a serial part (below
 * nthreads) from threads that are busy but slower (at nthreads). */
static double busy_threads(const double *cpu, const double *wall, unsigned reps)
{
	double v[32];
	for (unsigned r = 0; r < reps; r++)
		v[r] = cpu[r] / (wall[r] > 1e-9 ? wall[r] : 1e-9);
	return median(v, reps);
}

/* Encode with nthreads, reps times, after one untimed run when warm: a
 * pass with another thread count leaves the contexts' spare buffers
 * spread over its lanes, and the first runs after it faulted in the rest
 * (the first file of a run encoded at a third of its speed in two of
 * three runs, bench/README.md).  The object of the last rep stays in
 * sink; *busy (if not NULL) gets busy_threads of the reps.  Returns the
 * median MB/s or a negative error. */
static double time_encode(ulp_encode_job *job, unsigned nthreads, unsigned reps,
                          int warm, mem_sink *sink, ulp_stats *st,
                          const bench_opts *o, double *busy)
{
	double v[32], cpu[32], wall[32];
	job->nthreads = nthreads;
	job->cctx = o->cctx;
	job->pool = cli_pool(o->threads); /* NULL: threads of its own */
	job->write = sink_write;
	job->write_opaque = sink;
	for (int r = warm ? -1 : 0; r < (int)reps; r++) {
		sink->len = 0;
		double c0 = cpu_now(), w0 = cli_now();
		int rc = ulp_encode_file(job, st, NULL, NULL);
		double c = cpu_now() - c0, w = cli_now() - w0;
		double t = bench_cpu_clock(o, nthreads) ? c : w;
		if (rc)
			return rc;
		if (r < 0)
			continue;
		cpu[r] = c;
		wall[r] = w;
		v[r] = (double)job->cur_size / 1e6 / (t > 1e-9 ? t : 1e-9);
	}
	if (busy)
		*busy = busy_threads(cpu, wall, reps);
	return median(v, reps);
}

static double time_decode(const ulp_object *obj, const cli_map *ref,
                          const cli_map *side, unsigned nthreads, unsigned reps,
                          uint8_t *dst, const cli_map *expect, int *mismatch,
                          const bench_opts *o, double *busy)
{
	double v[32], cpu[32], wall[32];
	for (unsigned r = 0; r < reps; r++) {
		memset(dst, 0, expect->size);
		double c0 = cpu_now(), w0 = cli_now();
		int rc = cli_decode_all_side(obj, ref, side, nthreads, o->dctx,
		                             dst, -1);
		cpu[r] = cpu_now() - c0;
		wall[r] = cli_now() - w0;
		double t = bench_cpu_clock(o, nthreads) ? cpu[r] : wall[r];
		if (rc || (expect->size &&
		           memcmp(dst, expect->data, expect->size) != 0)) {
			*mismatch = 1;
			return 0;
		}
		v[r] = (double)expect->size / 1e6 / (t > 1e-9 ? t : 1e-9);
	}
	if (busy)
		*busy = busy_threads(cpu, wall, reps);
	return median(v, reps);
}

/* zstd of the whole file at level; with o, the median speeds (MB/s) of
 * o->reps one-thread runs, timed as ulpfs's are. */
static uint64_t zstd_size(const cli_map *m, int level, double *enc, double *dec,
                          const bench_opts *o)
{
	size_t bound = ZSTD_compressBound(m->size);
	uint8_t *buf = malloc(bound ? bound : 1);
	uint8_t *back = o ? malloc(m->size ? m->size : 1) : NULL;
	unsigned reps = o ? o->reps : 1;
	double ve[32], vd[32];
	uint64_t out = 0;
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_DCtx *d = ZSTD_createDCtx();
	if (!buf || !c || !d || (o && !back))
		goto done;
	for (unsigned r = 0; r < reps; r++) {
		double t0 = o ? bench_now(o, 1) : 0;
		size_t z = ZSTD_compressCCtx(c, buf, bound, m->data, m->size,
		                             level);
		double t1 = o ? bench_now(o, 1) : 0;
		if (ZSTD_isError(z))
			goto done;
		out = z;
		ve[r] = (double)m->size / 1e6 / (t1 - t0 + 1e-9);
		if (!o)
			break;
		t0 = bench_now(o, 1);
		size_t back_len = ZSTD_decompressDCtx(d, back, m->size, buf, z);
		t1 = bench_now(o, 1);
		vd[r] = back_len == m->size
		                ? (double)m->size / 1e6 / (t1 - t0 + 1e-9)
		                : 0;
	}
	if (o) {
		*enc = median(ve, reps);
		*dec = median(vd, reps);
	}
done:
	ZSTD_freeCCtx(c);
	ZSTD_freeDCtx(d);
	free(back);
	free(buf);
	return out;
}

/* ZipNN-like: float tensors byte-grouped and entropy-coded, the rest
 * zstd -3. */
static uint64_t bytegroup_size(const cli_map *m, const ulp_tensor_map *map)
{
	uint64_t total = 0, pos = 0, sz;
	uint8_t *rest = malloc(m->size ? m->size : 1);
	size_t nrest = 0;
	if (!rest)
		return 0;
	for (size_t i = 0; i < map->n; i++) {
		const ulp_tensor *t = &map->v[i];
		memcpy(rest + nrest, m->data + pos, t->offset - pos);
		nrest += t->offset - pos;
		if (t->dtype != ULP_DT_GENERIC &&
		    !ulp_baseline_bytegroup(m->data + t->offset, t->nbytes,
		                            ulp_dtype_size(t->dtype), &sz)) {
			total += sz;
		} else {
			memcpy(rest + nrest, m->data + t->offset, t->nbytes);
			nrest += t->nbytes;
		}
		pos = t->offset + t->nbytes;
	}
	memcpy(rest + nrest, m->data + pos, m->size - pos);
	nrest += m->size - pos;
	cli_map r = { "", rest, nrest };
	total += nrest ? zstd_size(&r, 3, NULL, NULL, NULL) : 0;
	free(rest);
	return total;
}

/* The object of file i as DIR/NNN.obj (NNN its argument index), so
 * that the objects of two builds can be compared byte for byte. */
static int save_object(const char *dir, size_t i, const mem_sink *sink)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%03zu.obj", dir, i);
	FILE *f = fopen(path, "wb");
	if (!f) {
		cli_err("%s: cannot create", path);
		return ULP_ERR_IO;
	}
	size_t put = sink->len ? fwrite(sink->p, 1, sink->len, f) : 0;
	int bad = fclose(f) != 0 || put != sink->len;
	if (bad)
		cli_err("%s: write failed", path);
	return bad ? ULP_ERR_IO : ULP_OK;
}

/* The side file of file i: the latest earlier argument of the same
 * directory that some tensor of file i matches (its matches in *sm). */
static int find_side(const file_row *rows, size_t i, cli_map *maps,
                     const ulp_tensor_map *tmaps, ulp_side_map *sm)
{
	char *a = strdup(rows[i].path), *b;
	const char *dir_i = a ? dirname(a) : "";
	int found = -1;
	for (size_t j = i; j-- > 0 && found < 0;) {
		b = strdup(rows[j].path);
		if (b && strcmp(dirname(b), dir_i) == 0 &&
		    ulp_side_match_find(&tmaps[i], cli_map_read, &maps[i],
		                        &tmaps[j], cli_map_read, &maps[j],
		                        sm) == ULP_OK &&
		    sm->n)
			found = (int)j;
		free(b);
	}
	free(a);
	return found;
}

static int bench_file(file_row *rows, size_t i, cli_map *maps,
                      ulp_tensor_map *tmaps, const bench_opts *o)
{
	file_row *row = &rows[i];
	const cli_map *m = &maps[i];
	const cli_map *ref = row->ref >= 0 ? &maps[row->ref] : NULL;
	const cli_map *side = NULL;
	ulp_side_map sm = { 0, NULL };
	uint8_t ref_hash[16], side_hash[16];
	mem_sink sink = { 0 };
	ulp_encode_job job = { 0 };
	ulp_object *obj = NULL;
	int mismatch = 0, rc;
	uint8_t *dst = malloc(m->size ? m->size : 1);

	if (!dst)
		return ULP_ERR_NOMEM;
	if (ref)
		ulp_content_hash(ULP_HASH_TREE, ref->data, ref->size, ref_hash);
	job.cur = m->data;
	job.cur_size = m->size;
	job.cur_map = &tmaps[i];
	job.has_ref = ref != NULL;
	job.ref_size = ref ? ref->size : 0;
	job.ref_map = ref ? &tmaps[row->ref] : NULL;
	job.ref_hash = ref_hash;
	job.ref_read = cli_map_read;
	job.ref_opaque = (void *)ref;
	job.params.chunk_size = o->chunk;
	row->side = o->side ? find_side(rows, i, maps, tmaps, &sm) : -1;
	if (row->side >= 0) {
		side = &maps[row->side];
		ulp_content_hash(ULP_HASH_TREE, side->data, side->size,
		                 side_hash);
		job.side_hash = side_hash;
		job.side_size = side->size;
		job.side_map = &sm;
		job.side_read = cli_map_read;
		job.side_opaque = (void *)side;
	}

	/* statistics pass (slower models), then the timed passes */
	job.params.model_stats = 1;
	double v =
		time_encode(&job, o->threads, 1, 0, &sink, &row->st, o, NULL);
	job.params.model_stats = 0;
	if (v >= 0)
		v = row->enc1 =
			time_encode(&job, 1, o->reps, 1, &sink, NULL, o, NULL);
	if (v >= 0 && o->threads > 1)
		v = row->encn = time_encode(&job, o->threads, o->reps, 1, &sink,
		                            NULL, o, &row->encn_cpu);
	if (v < 0) {
		rc = (int)v;
		goto out;
	}
	row->ulp = sink.len;
	if (o->objects && (rc = save_object(o->objects, i, &sink)))
		goto out;
	/* decoded where it lies, as zstd -3 decodes its frame */
	rc = ulp_object_open_mem(sink.p, sink.len, &obj);
	if (rc)
		goto out;
	uint8_t h[16];
	if (ulp_content_hash(ulp_object_hash_kind(obj), m->data, m->size, h) !=
	            ULP_OK ||
	    memcmp(h, ulp_object_file_hash(obj), 16) != 0)
		mismatch = 1;
	row->dec1 = time_decode(obj, ref, side, 1, o->reps, dst, m, &mismatch,
	                        o, NULL);
	if (o->threads > 1 && !mismatch)
		row->decn = time_decode(obj, ref, side, o->threads, o->reps,
		                        dst, m, &mismatch, o, &row->decn_cpu);
	if (mismatch) {
		cli_err("%s: ROUND TRIP MISMATCH", row->path);
		rc = ULP_ERR_CORRUPT;
		goto out;
	}
	if (o->baselines) {
		row->z3 = zstd_size(m, 3, &row->z3enc, &row->z3dec, o);
		row->z19 = o->zstd19 ? zstd_size(m, 19, NULL, NULL, NULL) : 0;
		row->bg = bytegroup_size(m, &tmaps[i]);
	}
out:
	ulp_side_map_free(&sm);
	ulp_object_close(obj);
	free(sink.p);
	free(dst);
	return rc;
}

static void print_sizes(const char *name, uint64_t raw, uint64_t ulp,
                        uint64_t z3, uint64_t z19, uint64_t bg)
{
	printf("%-44.44s %12llu %12llu %6.3f", name, (unsigned long long)raw,
	       (unsigned long long)ulp, raw ? (double)ulp / (double)raw : 0);
	if (z3)
		printf(" %12llu %12llu %12llu %+6.1f%%", (unsigned long long)z3,
		       (unsigned long long)z19, (unsigned long long)bg,
		       z19 ? 100.0 * ((double)ulp / (double)z19 - 1) : 0);
	putchar('\n');
}

static void print_header(int baselines)
{
	printf("%-44s %12s %12s %6s", "file", "raw", "ulpfs", "ratio");
	if (baselines)
		printf(" %12s %12s %12s %7s", "zstd-3", "zstd-19", "bytegroup",
		       "vs z19");
	putchar('\n');
}

/* Totals over the files of one base name: all versions and deltas only. */
static void print_groups(const file_row *rows, size_t n, int baselines)
{
	printf("\n== per file kind (all versions | delta versions only) ==\n");
	print_header(baselines);
	for (size_t i = 0; i < n; i++) {
		int first = 1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(rows[j].base, rows[i].base) == 0)
				first = 0;
		if (!first)
			continue;
		for (int delta_only = 0; delta_only < 2; delta_only++) {
			uint64_t s[5] = { 0 };
			for (size_t j = i; j < n; j++) {
				if (strcmp(rows[j].base, rows[i].base) ||
				    (delta_only && rows[j].ref < 0))
					continue;
				s[0] += rows[j].raw;
				s[1] += rows[j].ulp;
				s[2] += rows[j].z3;
				s[3] += rows[j].z19;
				s[4] += rows[j].bg;
			}
			char name[96];
			snprintf(name, sizeof(name), "%s [%s]", rows[i].base,
			         delta_only ? "deltas" : "all");
			if (s[0])
				print_sizes(name, s[0], s[1], s[2], s[3], s[4]);
		}
	}
}

static void print_dtypes(const file_row *rows, size_t n)
{
	ulp_stats t = { 0 };
	for (size_t i = 0; i < n; i++)
		ulp_stats_add(&t, &rows[i].st);
	printf("\n== floats: bits per element (ulpfs = coded size incl. "
	       "tables; model = entropy of the models used;\n"
	       "   over elements with a reference: FM-Delta-like = residual "
	       "without context,\n"
	       "   ULPack-like = in the reference exponent's context, "
	       "+prev-k = also the previous element's k) ==\n");
	printf("%-8s %12s %8s %8s %8s | %10s %8s %8s %8s %8s\n", "dtype",
	       "elements", "ulpfs", "model", "overhd", "with ref", "ulpfs",
	       "FMDelta", "ULPack", "+prev-k");
	for (int d = 1; d < ULP_DT_COUNT; d++) {
		const ulp_dtype_stats *s = &t.dt[d];
		if (!s->elems)
			continue;
		double e = (double)s->elems;
		printf("%-8s %12llu %8.3f %8.3f %7.2f%% |", ulp_dtype_name(d),
		       (unsigned long long)s->elems, s->bytes_out * 8.0 / e,
		       s->model_bits / e,
		       s->model_bits > 0
		               ? 100.0 * (s->bytes_out * 8.0 / s->model_bits -
		                          1)
		               : 0);
		ulp_dtype_stats r = { 0 };
		for (size_t i = 0; i < n; i++)
			if (rows[i].ref >= 0) {
				const ulp_dtype_stats *x = &rows[i].st.dt[d];
				r.ref_elems += x->ref_elems;
				r.elems += x->elems;
				r.bytes_out += x->bytes_out;
				r.delta_noctx_bits += x->delta_noctx_bits;
				r.delta_ctx_bits += x->delta_ctx_bits;
				r.delta_prevk_bits += x->delta_prevk_bits;
			}
		if (r.ref_elems) {
			double re = (double)r.ref_elems;
			printf(" %10llu %8.3f %8.3f %8.3f %8.3f",
			       (unsigned long long)r.ref_elems,
			       r.bytes_out * 8.0 / (double)r.elems,
			       r.delta_noctx_bits / re, r.delta_ctx_bits / re,
			       r.delta_prevk_bits / re);
		}
		putchar('\n');
	}
	for (int d = 1; d < ULP_DT_COUNT; d++)
		if (t.dt[d].side_elems)
			printf("%s coded given a side file (another file of "
			       "the checkpoint): %llu elements, %.3f bits/el\n",
			       ulp_dtype_name(d),
			       (unsigned long long)t.dt[d].side_elems,
			       t.dt[d].side_bytes * 8.0 /
			               (double)t.dt[d].side_elems);
	printf("generic bytes: %llu -> %llu; chunks: %llu identical, %llu "
	       "delta, %llu standalone\n",
	       (unsigned long long)t.dt[0].bytes_in,
	       (unsigned long long)t.dt[0].bytes_out,
	       (unsigned long long)t.chunks_copy,
	       (unsigned long long)t.chunks_delta,
	       (unsigned long long)t.chunks_standalone);
}

/* Which codec each file's bytes took: float elements (of which coded as
 * deltas against the reference) and the generic bytes zstd codes.  A flat
 * fp32 buffer that lost the float codec shows here as generic bytes. */
static void print_file_codecs(const file_row *rows, size_t n)
{
	printf("\n== per file: float codec | generic bytes (zstd) ==\n");
	printf("%-44s %-6s %10s %10s %10s %8s | %10s %10s\n", "file", "dtype",
	       "elements", "as delta", "vs side", "bits/el", "generic",
	       "coded");
	for (size_t i = 0; i < n; i++) {
		const ulp_stats *st = &rows[i].st;
		size_t len = strlen(rows[i].path);
		const char *name = rows[i].path + (len > 44 ? len - 44 : 0);
		int any = 0;
		for (int d = 1; d < ULP_DT_COUNT; d++) {
			const ulp_dtype_stats *s = &st->dt[d];
			if (!s->elems)
				continue;
			printf("%-44s %-6s %10llu %10llu %10llu %8.3f |\n",
			       name, ulp_dtype_name(d),
			       (unsigned long long)s->elems,
			       (unsigned long long)s->delta_elems,
			       (unsigned long long)s->side_elems,
			       s->bytes_out * 8.0 / (double)s->elems);
			any = 1;
		}
		printf("%-44s %-6s %10s %10s %10s %8s | %10llu %10llu\n", name,
		       any ? "" : "none", "", "", "", "",
		       (unsigned long long)st->dt[0].bytes_in,
		       (unsigned long long)st->dt[0].bytes_out);
	}
}

static void print_speeds(const file_row *rows, size_t n, const bench_opts *o)
{
	double *v = calloc(n ? n : 1, sizeof(double));
	printf("\n== speed, MB/s of logical bytes, median over files "
	       "(same run) ==\n");
	printf("%-24s %10s %10s", "kind", "enc 1T", "dec 1T");
	if (o->threads > 1)
		printf(" %7s%-3u %7s%-3u", "enc ", o->threads, "dec ",
		       o->threads);
	if (o->baselines)
		printf(" %10s %10s", "zstd-3 enc", "zstd-3 dec");
	putchar('\n');
	for (size_t i = 0; v && i < n; i++) {
		int first = 1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(rows[j].base, rows[i].base) == 0)
				first = 0;
		if (!first)
			continue;
		double med[6];
		for (int k = 0; k < 6; k++) {
			size_t m = 0;
			for (size_t j = i; j < n; j++) {
				if (strcmp(rows[j].base, rows[i].base))
					continue;
				double x[6] = { rows[j].enc1,  rows[j].dec1,
					        rows[j].encn,  rows[j].decn,
					        rows[j].z3enc, rows[j].z3dec };
				v[m++] = x[k];
			}
			med[k] = median(v, m);
		}
		printf("%-24.24s %10.1f %10.1f", rows[i].base, med[0], med[1]);
		if (o->threads > 1)
			printf(" %10.1f %10.1f", med[2], med[3]);
		if (o->baselines)
			printf(" %10.1f %10.1f", med[4], med[5]);
		putchar('\n');
	}
	free(v);
	/* Per file, since one large file is where scaling within a file
	 * shows, and a median over a trajectory mixes keyframes (each kind's
	 * first file) and deltas.  With one thread the NT columns are 0. */
	printf("\n== speed per file, MB/s: %u threads (NT) against 1 (busy = "
	       "CPU seconds per\n"
	       "   wall second of the NT runs: below N, a part ran alone) ==\n",
	       o->threads);
	printf("%-44s %8s %8s %8s %8s %6s %6s %5s %5s", "file", "enc 1T",
	       "dec 1T", "enc NT", "dec NT", "enc x", "dec x", "busy", "busy");
	if (o->baselines)
		printf(" %8s %8s", "z3 enc", "z3 dec");
	putchar('\n');
	for (size_t i = 0; i < n; i++) {
		const file_row *r = &rows[i];
		size_t len = strlen(r->path);
		printf("%-44s %8.1f %8.1f %8.1f %8.1f %6.2f %6.2f %5.2f %5.2f",
		       r->path + (len > 44 ? len - 44 : 0), r->enc1, r->dec1,
		       r->encn, r->decn, r->enc1 > 0 ? r->encn / r->enc1 : 0,
		       r->dec1 > 0 ? r->decn / r->dec1 : 0, r->encn_cpu,
		       r->decn_cpu);
		if (o->baselines)
			printf(" %8.1f %8.1f", r->z3enc, r->z3dec);
		putchar('\n');
	}
}

static void bench_usage(FILE *f)
{
	fputs("usage: ulpfs bench [--threads N] [--reps R] [--chunk-size "
	      "SIZE]\n"
	      "                   [--no-baselines] [--no-zstd19] [--cpu-time] "
	      "[--no-side]\n"
	      "                   [--objects DIR] FILE...\n"
	      "Code FILE... as a trajectory (each against the latest earlier "
	      "file\nwith the same base name), verify every round trip and "
	      "compare with\nzstd -3, zstd -19 and a byte-grouped entropy "
	      "coder.\n"
	      "  --cpu-time  one-thread speeds from process CPU time (for a "
	      "shared machine)\n"
	      "  --no-side   code no file given another file of its "
	      "directory\n"
	      "  --objects DIR  write the object of the N-th FILE (from 0) to "
	      "DIR/NNN.obj\n",
	      f);
}

static const struct option bench_longopts[] = {
	{ "threads", required_argument, NULL, 't' },
	{ "reps", required_argument, NULL, 'r' },
	{ "chunk-size", required_argument, NULL, 'c' },
	{ "no-baselines", no_argument, NULL, 'B' },
	{ "no-zstd19", no_argument, NULL, 'Z' },
	{ "cpu-time", no_argument, NULL, 'C' },
	{ "no-side", no_argument, NULL, 'S' },
	{ "objects", required_argument, NULL, 'O' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int cmd_bench(int argc, char **argv)
{
	bench_opts o = {
		.threads = 2, .reps = 3, .baselines = 1, .zstd19 = 1, .side = 1
	};
	int c;

	while ((c = getopt_long(argc, argv, "t:r:c:h", bench_longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 't':
			if (cli_parse_uint(optarg, 64, &o.threads) < 0 ||
			    !o.threads) {
				cli_err("bench: --threads must be 1..64");
				return CLI_USAGE;
			}
			break;
		case 'r':
			if (cli_parse_uint(optarg, 31, &o.reps) < 0 ||
			    !o.reps) {
				cli_err("bench: --reps must be 1..31");
				return CLI_USAGE;
			}
			break;
		case 'c':
			if (cli_parse_chunk_size("bench", optarg, &o.chunk) < 0)
				return CLI_USAGE;
			break;
		case 'B':
			o.baselines = 0;
			break;
		case 'Z':
			o.zstd19 = 0;
			break;
		case 'C':
			o.cpu_clock = 1;
			break;
		case 'S':
			o.side = 0;
			break;
		case 'O':
			o.objects = optarg;
			break;
		case 'h':
			bench_usage(stdout);
			return CLI_OK;
		default:
			bench_usage(stderr);
			return CLI_USAGE;
		}
	}
	size_t n = (size_t)(argc - optind);
	if (n == 0) {
		bench_usage(stderr);
		return CLI_USAGE;
	}

	for (unsigned t = 0; t < o.threads; t++) {
		o.cctx[t] = ulp_cctx_new();
		o.dctx[t] = cli_dctx_new(); /* as unpack decodes */
		if (!o.cctx[t] || !o.dctx[t]) {
			cli_err("bench: out of memory");
			return CLI_FAIL;
		}
	}
	file_row *rows = calloc(n, sizeof(*rows));
	cli_map *maps = calloc(n, sizeof(*maps));
	ulp_tensor_map *tmaps = calloc(n, sizeof(*tmaps));
	int fail = 0;
	if (!rows || !maps || !tmaps) {
		cli_err("bench: out of memory");
		free(rows);
		free(maps);
		free(tmaps);
		return CLI_FAIL;
	}
	print_header(o.baselines);
	for (size_t i = 0; i < n && !fail; i++) {
		file_row *r = &rows[i];
		char *tmp = strdup(argv[optind + i]);
		r->path = argv[optind + i];
		r->base = strdup(tmp ? basename(tmp) : "");
		free(tmp);
		r->ref = -1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(rows[j].base, r->base) == 0)
				r->ref = (int)j;
		if (cli_map_open(&maps[i], r->path) < 0) {
			fail = 1;
			break;
		}
		r->raw = maps[i].size;
		int rc =
			ulp_format_parse(maps[i].data, maps[i].size, &tmaps[i]);
		if (!rc)
			rc = bench_file(rows, i, maps, tmaps, &o);
		if (rc) {
			cli_err("%s: %s", r->path, ulp_strerror(rc));
			fail = 1;
			break;
		}
		print_sizes(r->path, r->raw, r->ulp, r->z3, r->z19, r->bg);
		fflush(stdout);
	}
	size_t done = fail ? 0 : n;
	if (done) {
		uint64_t s[5] = { 0 };
		for (size_t i = 0; i < n; i++) {
			s[0] += rows[i].raw;
			s[1] += rows[i].ulp;
			s[2] += rows[i].z3;
			s[3] += rows[i].z19;
			s[4] += rows[i].bg;
		}
		print_sizes("TOTAL", s[0], s[1], s[2], s[3], s[4]);
		print_groups(rows, n, o.baselines);
		print_dtypes(rows, n);
		print_file_codecs(rows, n);
		print_speeds(rows, n, &o);
		printf("\nall %zu round trips verified\n", n);
	}
	for (size_t i = 0; i < n; i++) {
		free(rows[i].base);
		cli_map_close(&maps[i]);
		ulp_tensor_map_free(&tmaps[i]);
	}
	free(rows);
	free(maps);
	free(tmaps);
	for (unsigned t = 0; t < o.threads; t++) {
		ulp_cctx_free(o.cctx[t]);
		ulp_dctx_free(o.dctx[t]);
	}
	return fail ? CLI_FAIL : CLI_OK;
}
