/*
 * ctl_stats.c - `ulpfs stats`: the store's figures, by kind, dtype, codec
 * path and chain depth, as text or JSON (the zstd -19 figures are
 * ctl_baseline.c's, the checkpoints ctl_ckpt.c's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_ops.h"
#include "objstore/upload_errors.h"

typedef struct acc {
	uint64_t count, logical, stored;
	uint64_t z19; /* zstd -19 bytes of the same versions (--zstd19) */
} acc;

static json_t *acc_json(const acc *a, int z19)
{
	json_t *o = json_pack(
		"{s:I,s:I,s:I,s:f}", "versions", (json_int_t)a->count,
		"logical", (json_int_t)a->logical, "stored",
		(json_int_t)a->stored, "ratio",
		a->stored ? (double)a->logical / (double)a->stored : 0.0);
	if (o && z19)
		json_object_set_new(o, "zstd19",
		                    json_pack("{s:I,s:I}", "bytes",
		                              (json_int_t)a->z19, "versions",
		                              (json_int_t)a->count));
	return o;
}

/* How much smaller (negative) or larger x is than zstd -19's z, in %. */
static double vs_z19(uint64_t x, uint64_t z)
{
	return z ? 100.0 * ((double)x - (double)z) / (double)z : 0.0;
}

static void acc_line(cli_env *env, const char *name, const acc *a, int z19)
{
	char l[32], s[32], z[32];
	cli_human(a->logical, l);
	cli_human(a->stored, s);
	cli_outf(env, "  %-14s %8" PRIu64 " %12s %12s %8.2f", name, a->count, l,
	         s, a->stored ? (double)a->logical / (double)a->stored : 0);
	if (z19 && a->count) {
		cli_human(a->z19, z);
		cli_outf(env, " %12s %+7.1f%%", z, vs_z19(a->stored, a->z19));
	} else if (z19) {
		cli_outf(env, " %12s %8s", "-", "-");
	}
	cli_outf(env, "\n");
}

/* A bucket store's failing uploads (objstore/upload_errors.h): null, or
 * what the daemon last wrote. */
static json_t *upload_errors_json(cli_env *env)
{
	ulp_upload_errors e;
	if (!env->dir || ulp_upload_errors_read(env->dir, &e) != 1)
		return json_null();
	json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:b,s:s}", "url", e.url,
	                      "failures", (json_int_t)e.failures, "first",
	                      (json_int_t)e.first, "last", (json_int_t)e.last,
	                      "permanent", e.permanent, "error", e.error);
	if (o && e.staged >= 0)
		json_object_set_new(o, "staged", json_integer(e.staged));
	return o ? o : json_null();
}

static void upload_errors_text(cli_env *env)
{
	ulp_upload_errors e;
	if (!env->dir || ulp_upload_errors_read(env->dir, &e) != 1)
		return;
	long long ago = (long long)time(NULL) - e.last;
	cli_outf(env,
	         "UPLOADS  %" PRIu64 " failed to %s (%s), the last %llds "
	         "ago: %s\n",
	         e.failures, e.url,
	         e.permanent ? "permanent: fix the bucket or credentials, "
	                       "the files stay staged"
	                     : "retried with backoff",
	         ago < 0 ? 0 : ago, e.error);
}

static void request_json(void *opaque, const char *op, uint64_t n)
{
	json_t *o = opaque;
	json_object_set_new(o, op, json_integer((json_int_t)n));
	json_object_set_new(
		o, "total",
		json_integer(json_integer_value(json_object_get(o, "total")) +
	                     (json_int_t)n));
}

/* The requests the daemon read, by opcode: null when not mounted or not
 * counted (write_mode=cached). */
static json_t *requests_json(cli_env *env)
{
	json_t *o = json_object();
	json_object_set_new(o, "total", json_integer(0));
	if (!env->fs || ulp_fs_requests(env->fs, request_json, o) < 0) {
		json_decref(o);
		return json_null();
	}
	return o;
}

static const char *const kinds[4] = { "other", "safetensors", "torch zip",
	                              "distcp" };

/* The figures of a stats request. */
typedef struct stats_fig {
	int z19; /* with the zstd -19 baselines */
	ulp_store_stats ss;
	ulp_store_disk disk;
	acc kind[4], dt[ULP_DT_COUNT], all;
	uint64_t paths[3], depth[65], recorded, cached;
	json_t *cks; /* by checkpoint, or NULL */
} stats_fig;

/* The zstd -19 size of every version of vec into *zb (and the ones gone
 * meanwhile into *gone), on nthreads threads (<= 0: a default). */
static int stats_z19(cli_env *env, const cli_vvec *vec, json_int_t nthreads,
                     uint64_t **zb, char **gone, uint64_t *cached)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* at most 4 by default: each context holds about 170 MiB
	 * at level 19, inside the daemon when mounted */
	if (nthreads <= 0)
		nthreads = ncpu > 4 ? 4 : ncpu > 0 ? ncpu : 1;
	if (nthreads > 1024) /* as the helper's --threads allows */
		nthreads = 1024;
	*zb = calloc(vec->n ? vec->n : 1, sizeof(**zb));
	*gone = calloc(vec->n ? vec->n : 1, 1);
	return *zb && *gone ? cli_z19_sizes(env, vec, (unsigned)nthreads, *zb,
	                                    *gone, cached)
	                    : -ENOMEM;
}

/* Count version v (z: its zstd -19 bytes) into f: 1, or 0 when the store
 * has no usage for it (deleted meanwhile). */
static int stats_add(stats_fig *f, ulp_store *st, const ulp_version_info *v,
                     uint64_t z)
{
	ulp_stats es;
	int fmt;
	int have = ulp_version_usage(st, v->id, &fmt, &es);
	if (have < 0)
		return 0;
	int k = fmt >= 0 && fmt < 4 ? fmt : 0;
	f->kind[k].count++;
	f->kind[k].logical += v->size;
	f->kind[k].stored += v->stored;
	f->kind[k].z19 += z;
	f->all.count++;
	f->all.logical += v->size;
	f->all.stored += v->stored;
	f->all.z19 += z;
	f->depth[v->depth < 64 ? v->depth : 64]++;
	if (!have)
		return 1;
	f->recorded++;
	for (int d = 0; d < ULP_DT_COUNT; d++) {
		if (!es.dt[d].bytes_in)
			continue;
		f->dt[d].count++;
		f->dt[d].logical += es.dt[d].bytes_in;
		f->dt[d].stored += es.dt[d].bytes_out;
	}
	f->paths[0] += es.chunks_copy;
	f->paths[1] += es.chunks_delta;
	f->paths[2] += es.chunks_standalone;
	return 1;
}

/* Gather the figures of a stats request into f (with want_ck, by
 * checkpoint too).  0 or -errno. */
static int stats_gather(cli_env *env, json_t *req, int want_ck, stats_fig *f)
{
	json_int_t nthreads = json_integer_value(json_object_get(req, "thread"
	                                                              "s"));
	cli_vall a = { 0 };
	uint64_t *zb = NULL;
	char *gone = NULL, *counted = NULL;
	int rc = ulp_version_list(env->st, NULL, cli_vall_add, &a);

	if (rc == 0 && f->z19)
		rc = stats_z19(env, &a.vec, nthreads, &zb, &gone, &f->cached);
	/* After the (maybe long) compression: figures of the same moment. */
	if (rc == 0)
		rc = ulp_store_stats_get(env->st, &f->ss);
	if (rc == 0)
		rc = ulp_store_disk_get(env->st, &f->disk);
	if (rc == 0 && !(counted = calloc(a.vec.n ? a.vec.n : 1, 1)))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < a.vec.n; i++)
		if (!(gone && gone[i]))
			counted[i] = (char)stats_add(f, env->st, &a.vec.v[i],
			                             zb ? zb[i] : 0);
	if (rc == 0 && want_ck &&
	    !(f->cks = cli_stats_checkpoints(&a.vec, counted, zb)))
		rc = -ENOMEM;
	cli_vvec_free(&a.vec);
	free(zb);
	free(gone);
	free(counted);
	return rc;
}

static void stats_text(cli_env *env, const stats_fig *f);

int cli_op_stats(cli_env *env, json_t *req)
{
	int json = json_is_true(json_object_get(req, "json"));
	int want_ck = json_is_true(json_object_get(req, "checkpoints"));
	stats_fig f = { .z19 = json_is_true(json_object_get(req, "zstd19")) };
	int rc = stats_gather(env, req, json && want_ck, &f);
	const ulp_store_stats ss = f.ss;
	const ulp_store_disk disk = f.disk;
	const acc all = f.all, *kind = f.kind, *dt = f.dt;
	const uint64_t *paths = f.paths, *depth = f.depth;
	const uint64_t recorded = f.recorded, cached = f.cached;
	const int z19 = f.z19;
	json_t *cks = f.cks;

	if (rc < 0) {
		json_decref(cks);
		cli_errf(env, "stats: %s",
		         rc == -ECANCELED ? "interrupted" : strerror(-rc));
		return CLI_FAIL;
	}
	/* What the comparison counts as the store: the objects of the
	 * versions compared, and the catalog (not the fixed reserve). */
	uint64_t store = all.stored + disk.catalog_bytes;
	uint64_t lookups = ss.cache_hits + ss.cache_misses;
	double hit = lookups ? (double)ss.cache_hits / (double)lookups : 0;
	if (json) {
		json_t *o = json_pack(
			"{s:I,s:I,s:f,s:{s:I,s:I,s:I},s:I,s:I,s:I,s:I}",
			"logical", (json_int_t)ss.logical_bytes, "physical",
			(json_int_t)ss.stored_bytes, "ratio",
			ss.stored_bytes ? (double)ss.logical_bytes /
						  (double)ss.stored_bytes
					: 0.0,
			"versions", "live", (json_int_t)ss.versions[0], "ghost",
			(json_int_t)ss.versions[1], "deleted",
			(json_int_t)ss.versions[2], "ghosts",
			(json_int_t)ss.versions[1], "staged_bytes",
			(json_int_t)ss.staged_bytes, "queued",
			(json_int_t)ss.queued, "with_encoder_stats",
			(json_int_t)recorded);
		json_t *k = json_object(), *d = json_object(),
		       *h = json_object();
		json_object_set_new(
			o, "catalog_bytes",
			json_integer((json_int_t)disk.catalog_bytes));
		json_object_set_new(o, "plain",
		                    json_pack("{s:I,s:I}", "bytes",
		                              (json_int_t)ss.plain_bytes,
		                              "versions",
		                              (json_int_t)ss.plain_versions));
		json_object_set_new(
			o, "reserve_bytes",
			json_integer((json_int_t)disk.reserve_bytes));
		if (z19)
			json_object_set_new(
				o, "zstd19",
				json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "bytes",
			                  (json_int_t)all.z19, "versions",
			                  (json_int_t)all.count, "logical",
			                  (json_int_t)all.logical, "stored",
			                  (json_int_t)all.stored, "store",
			                  (json_int_t)store, "cached",
			                  (json_int_t)cached));
		for (int i = 0; i < 4; i++)
			json_object_set_new(k, kinds[i],
			                    acc_json(&kind[i], z19));
		for (int i = 0; i < ULP_DT_COUNT; i++)
			if (dt[i].count)
				json_object_set_new(d, ulp_dtype_name(i),
				                    acc_json(&dt[i], 0));
		for (int i = 0; i <= 64; i++)
			if (depth[i]) {
				char key[12];
				snprintf(key, sizeof(key), "%d", i);
				json_object_set_new(
					h, key,
					json_integer((json_int_t)depth[i]));
			}
		json_object_set_new(o, "by_kind", k);
		json_object_set_new(o, "by_dtype", d);
		json_object_set_new(
			o, "chunks_by_path",
			json_pack("{s:I,s:I,s:I}", "copy", (json_int_t)paths[0],
		                  "delta", (json_int_t)paths[1], "standalone",
		                  (json_int_t)paths[2]));
		json_object_set_new(o, "depth_histogram", h);
		/* Re-encodes since the mount: flips of older versions against
		 * their successors, rebases of dependants of deleted ones. */
		json_object_set_new(o, "reencodes",
		                    env->fs ? json_pack("{s:I,s:I}", "flips",
		                                        (json_int_t)ss.flips,
		                                        "rebases",
		                                        (json_int_t)ss.rebases)
		                            : json_null());
		/* the mount's write mode (null when not mounted) */
		json_object_set_new(
			o, "write_mode",
			env->fs ? json_string(ulp_fs_write_mode_active(env->fs))
				: json_null());
		json_object_set_new(o, "requests", requests_json(env));
		if (cks)
			json_object_set_new(o, "by_checkpoint", cks);
		json_object_set_new(o, "upload_errors",
		                    upload_errors_json(env));
		json_object_set_new(
			o, "cache",
			env->fs ? json_pack("{s:I,s:I,s:I,s:f,s:I}", "bytes",
		                            (json_int_t)ss.cache_bytes, "hits",
		                            (json_int_t)ss.cache_hits, "misses",
		                            (json_int_t)ss.cache_misses,
		                            "hit_rate", hit, "decodes",
		                            (json_int_t)ss.cache_decodes)
				: json_null());
		char *s = json_dumps(o, JSON_INDENT(2));
		json_decref(o);
		if (s)
			cli_outf(env, "%s\n", s);
		free(s);
		return CLI_OK;
	}
	stats_text(env, &f);
	return CLI_OK;
}

/* The answer as text. */
static void stats_text(cli_env *env, const stats_fig *f)
{
	const ulp_store_stats ss = f->ss;
	const ulp_store_disk disk = f->disk;
	const acc all = f->all, *kind = f->kind, *dt = f->dt;
	const uint64_t *paths = f->paths, *depth = f->depth;
	const uint64_t recorded = f->recorded;
	const int z19 = f->z19;
	uint64_t store = all.stored + disk.catalog_bytes;
	uint64_t lookups = ss.cache_hits + ss.cache_misses;
	double hit = lookups ? (double)ss.cache_hits / (double)lookups : 0;
	char l[32], p[32], sb[32], c[32];
	cli_human(ss.logical_bytes, l);
	cli_human(ss.stored_bytes, p);
	cli_human(ss.staged_bytes, sb);
	cli_human(ss.stored_bytes + disk.catalog_bytes, c);
	cli_outf(env,
	         "logical  %s\nphysical %s of objects, %s with the catalog\n"
	         "ratio    %.2f\n",
	         l, p, c,
	         ss.stored_bytes
	                 ? (double)ss.logical_bytes / (double)ss.stored_bytes
	                 : 0.0);
	if (ss.plain_versions) {
		char e[32], pl[32];
		cli_human(ss.stored_bytes - ss.plain_bytes, e);
		cli_human(ss.plain_bytes, pl);
		cli_outf(env,
		         "plain    %s in %" PRIu64 " plain newest versions "
		         "(read by passthrough), %s encoded\n",
		         pl, ss.plain_versions, e);
	}
	if (z19) {
		char z[32], sv[32], r[32], sr[32];
		int64_t saved = (int64_t)all.z19 - (int64_t)store;
		int64_t saved_raw = (int64_t)all.logical - (int64_t)store;
		cli_human(all.z19, z);
		cli_human((uint64_t)(saved < 0 ? -saved : saved), sv);
		cli_human(all.logical, r);
		cli_human((uint64_t)(saved_raw < 0 ? -saved_raw : saved_raw),
		          sr);
		double pct = vs_z19(store, all.z19);
		cli_outf(env,
		         "zstd -19 %s (%" PRIu64 " versions, %s raw; the "
		         "store, catalog included, is %.1f%% %s, %s %s)\n",
		         z, all.count, r, pct < 0 ? -pct : pct,
		         saved < 0 ? "larger" : "smaller",
		         saved < 0 ? "costing" : "saving", sv);
		cli_outf(env, "saved vs raw: %s%s (%.1f%%)\n",
		         saved_raw < 0 ? "-" : "", sr,
		         all.logical ? 100.0 * (double)saved_raw /
		                               (double)all.logical
		                     : 0.0);
	}
	cli_outf(env,
	         "versions %" PRIu64 " live, %" PRIu64 " ghost (waiting for "
	         "rebase), %" PRIu64 " deleted\n"
	         "staged   %s, %" PRIu64 " files queued for encoding\n",
	         ss.versions[0], ss.versions[1], ss.versions[2], sb, ss.queued);
	if (env->fs)
		cli_outf(env, "writes   %s\n",
		         ulp_fs_write_mode_active(env->fs));
	json_t *rq = requests_json(env);
	if (json_is_object(rq)) {
		const char *k;
		json_t *v;
		cli_outf(env, "requests");
		json_object_foreach(rq, k, v)
		{
			cli_outf(env, " %s %" JSON_INTEGER_FORMAT, k,
			         json_integer_value(v));
		}
		cli_outf(env, "\n");
	}
	json_decref(rq);
	upload_errors_text(env);
	cli_outf(env, "\nby kind:         %8s %12s %12s %8s", "VERSIONS",
	         "LOGICAL", "STORED", "RATIO");
	if (z19)
		cli_outf(env, " %12s %8s", "ZSTD-19", "VS Z19");
	cli_outf(env, "\n");
	for (int i = 0; i < 4; i++)
		if (i < 3 || kind[i].count)
			acc_line(env, kinds[i], &kind[i], z19);
	cli_outf(env, "\nby dtype (%" PRIu64 " versions with encoder stats):\n",
	         recorded);
	for (int i = 0; i < ULP_DT_COUNT; i++)
		if (dt[i].count)
			acc_line(env, ulp_dtype_name(i), &dt[i], 0);
	cli_outf(env,
	         "\nchunks by codec path: %" PRIu64 " copy, %" PRIu64
	         " delta, %" PRIu64 " standalone\n",
	         paths[0], paths[1], paths[2]);
	cli_outf(env, "\nchain depth histogram:\n");
	for (int i = 0; i <= 64; i++)
		if (depth[i])
			cli_outf(env, "  %3d%s %8" PRIu64 "\n", i,
			         i == 64 ? "+" : " ", depth[i]);
	if (env->fs)
		cli_outf(env,
		         "\ndecoded-chunk cache: %" PRIu64 " hits, %" PRIu64
		         " misses (hit rate %.1f%%), %" PRIu64 " chunks "
		         "decoded\n",
		         ss.cache_hits, ss.cache_misses, 100 * hit,
		         ss.cache_decodes);
}
