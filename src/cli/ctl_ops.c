/*
 * ctl_ops.c - the executor's long operations: stats, verify (the zstd
 * -19 figures of stats are in ctl_baseline.c, restore is ctl_restore.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "objstore/upload_errors.h"
#include "objstore/verify.h"
#include "stats_svg.h"

#define PIECE (4u << 20)

static void hex(const uint8_t h[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* ------------------------------------------------------------ versions */

/* Every version that still has bytes, and their total logical size. */
typedef struct vall {
	cli_vvec vec;
	uint64_t bytes;
} vall;

static int vall_cb(void *opaque, const ulp_version_info *v, const char *path)
{
	vall *a = opaque;
	if (v->state == ULP_VERSION_DELETED)
		return 0;
	int rc = cli_vvec_add(&a->vec, v, path);
	if (rc == 0)
		a->bytes += v->size;
	return rc;
}

static void vall_free(vall *a)
{
	cli_vvec_free(&a->vec);
}

/* ------------------------------------------------------------ verify */

/* Check the stored bytes of version v's object, decode v and check its
 * hash; the progress counts into *done of total.  0, or a message in why
 * and -1. */
static int verify_one(cli_env *env, ulp_store *st, const ulp_version_info *v,
                      uint8_t *buf, uint64_t *done, uint64_t total, char *why,
                      size_t whylen)
{
	/* Decodes check the decoded bytes only, and a chunk decoded before
	 * its object was damaged may still be cached. */
	size_t badc = 0;
	int err = ulp_version_check_stored(st, v->id, &badc);
	if (err == -EBADMSG) {
		snprintf(why, whylen,
		         "stored chunk %zu of its object fails its checksum",
		         badc);
		return -1;
	}
	if (err) {
		/* as the decode below would say: it reads the same object */
		snprintf(why, whylen, "cannot decode: %s", strerror(-err));
		return -1;
	}
	/* The catalog holds the hash of the kind the version was committed
	 * with (flat before object format 3): both are computed in the one
	 * pass. */
	ulp_hasher *tree = ulp_hasher_new(ULP_HASH_TREE);
	ulp_hasher *flat = ulp_hasher_new(ULP_HASH_FLAT);
	err = tree && flat ? 0 : -ENOMEM;
	for (uint64_t off = 0; !err && off < v->size;) {
		size_t n = v->size - off < PIECE ? (size_t)(v->size - off)
		                                 : PIECE;
		ssize_t got = ulp_version_read(st, v->id, buf, n, off);
		if (got <= 0) {
			err = got < 0 ? (int)got : -EIO;
			break;
		}
		ulp_hasher_update(tree, buf, (size_t)got);
		ulp_hasher_update(flat, buf, (size_t)got);
		off += (uint64_t)got;
		*done += (uint64_t)got;
		env->sink->progress(env->sink->opaque, "verify", *done, total);
	}
	uint8_t ht[16], hf[16];
	if (!err && (ulp_hasher_final(tree, ht) || ulp_hasher_final(flat, hf)))
		err = -EIO;
	ulp_hasher_free(tree);
	ulp_hasher_free(flat);
	if (err) {
		snprintf(why, whylen, "cannot decode: %s", strerror(-err));
		return -1;
	}
	if (memcmp(ht, v->hash, 16) != 0 && memcmp(hf, v->hash, 16) != 0) {
		char want[33], got[33];
		hex(v->hash, want);
		hex(ht, got);
		snprintf(why, whylen, "hash mismatch (catalog %s, decoded %s)",
		         want, got);
		return -1;
	}
	return 0;
}

/* The index of version id in all's list, or all->vec.n (deleted). */
static size_t vall_find(const vall *all, uint64_t id)
{
	size_t i = 0;
	while (i < all->vec.n && all->vec.v[i].id != id)
		i++;
	return i;
}

/* Why version j of view failed, beyond its own object: the bad base it is
 * coded along (its failure follows), or the object of its bucket chain
 * that could not be read.  "" when neither. */
static void chain_why(const ulp_bucket_view *view, const vall *all,
                      const char *badv, size_t j, const char *failed, char *out,
                      size_t len)
{
	uint64_t base = ulp_bucket_view_base(view, j);
	out[0] = 0;
	for (size_t k = 0; base && k < j; k++) {
		size_t i = vall_find(all, base);
		if (ulp_bucket_view_version(view, k) == base && badv[k] &&
		    i < all->vec.n) {
			snprintf(out, len, " (coded along %s@%" PRIu64 ", bad)",
			         all->vec.path[i], all->vec.v[i].seq);
			return;
		}
	}
	if (failed[0] && strcmp(failed, ulp_bucket_view_key(view, j)) != 0)
		snprintf(out, len, " (reading %s of its bucket chain)", failed);
}

/* The bucket-only representations of a writer's versions (all: the
 * writer's list), decoded from the bucket along their bucket chains
 * (objstore/verify.h).  The bad ones counted into *bad; *n the checked
 * ones.  0 or -errno (the view could not be made). */
static int verify_bucket(cli_env *env, const vall *all, uint8_t *buf,
                         uint64_t *bad, size_t *n)
{
	ulp_bucket_view *view = NULL;
	int rc = ulp_bucket_view_open(env->bucket, &view);
	*n = ulp_bucket_view_count(view);
	char *badv = calloc(*n ? *n : 1, 1);
	uint64_t total = 0, done = 0;
	if (!badv && !rc)
		rc = -ENOMEM;
	for (size_t j = 0; j < *n; j++) {
		size_t i = vall_find(all, ulp_bucket_view_version(view, j));
		total += i < all->vec.n ? all->vec.v[i].size : 0;
	}
	for (size_t j = 0; rc == 0 && j < *n; j++) {
		size_t i = vall_find(all, ulp_bucket_view_version(view, j));
		if (i == all->vec.n)
			continue; /* deleted since the list */
		char why[200], failed[1024], chain[1200];
		ulp_bucket_view_failed(view, failed, sizeof failed); /* clear */
		if (verify_one(env, ulp_bucket_view_store(view), &all->vec.v[i],
		               buf, &done, total, why, sizeof why) == 0)
			continue;
		ulp_bucket_view_failed(view, failed, sizeof failed);
		chain_why(view, all, badv, j, failed, chain, sizeof chain);
		cli_errf(env, "%s@%" PRIu64 ": bucket object %s: %s%s",
		         all->vec.path[i], all->vec.v[i].seq,
		         ulp_bucket_view_key(view, j), why, chain);
		badv[j] = 1;
		(*bad)++;
	}
	free(badv);
	ulp_bucket_view_close(view);
	return rc;
}

int cli_op_verify(cli_env *env, json_t *req)
{
	vall a = { 0 };
	uint64_t done = 0, bad = 0;
	uint8_t *buf = malloc(PIECE);
	int rc = buf ? ulp_version_list(env->st, NULL, vall_cb, &a) : -ENOMEM;
	(void)req;

	for (size_t i = 0; rc == 0 && i < a.vec.n; i++) {
		char why[200];
		if (verify_one(env, env->st, &a.vec.v[i], buf, &done, a.bytes,
		               why, sizeof why) < 0) {
			cli_errf(env, "%s@%" PRIu64 ": %s", a.vec.path[i],
			         a.vec.v[i].seq, why);
			bad++;
		}
	}
	if (rc == 0)
		env->sink->progress(env->sink->opaque, "verify", a.bytes,
		                    a.bytes);
	size_t nb = 0;
	int writer = ulp_bucket_view_writer(env->bucket);
	if (rc == 0 && writer)
		rc = verify_bucket(env, &a, buf, &bad, &nb);
	free(buf);
	size_t n = a.vec.n;
	vall_free(&a);
	if (rc < 0) {
		cli_errf(env, "verify: %s", strerror(-rc));
		return CLI_FAIL;
	}
	if (writer)
		cli_outf(env,
		         "%zu versions checked, %zu bucket-only objects "
		         "checked, %" PRIu64 " bad\n",
		         n, nb, bad);
	else
		cli_outf(env, "%zu versions checked, %" PRIu64 " bad\n", n,
		         bad);
	return bad ? CLI_FAIL : CLI_OK;
}

/* ------------------------------------------------------------ stats */

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

int cli_op_stats(cli_env *env, json_t *req)
{
	static const char *const kinds[3] = { "other", "safetensors",
		                              "torch zip" };
	int json = json_is_true(json_object_get(req, "json"));
	int z19 = json_is_true(json_object_get(req, "zstd19"));
	int want_ck = json_is_true(json_object_get(req, "checkpoints"));
	json_t *jt = json_object_get(req, "threads");
	json_int_t nthreads = json_integer_value(jt);
	ulp_store_stats ss;
	ulp_store_disk disk;
	vall a = { 0 };
	acc kind[3] = { { 0 } }, dt[ULP_DT_COUNT] = { { 0 } }, all = { 0 };
	uint64_t paths[3] = { 0 }, depth[65] = { 0 }, recorded = 0, cached = 0;
	uint64_t *zb = NULL;
	char *gone = NULL, *counted = NULL;
	json_t *cks = NULL;
	int rc = ulp_version_list(env->st, NULL, vall_cb, &a);

	if (rc == 0 && z19) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		/* at most 4 by default: each context holds about 170 MiB
		 * at level 19, inside the daemon when mounted */
		if (nthreads <= 0)
			nthreads = ncpu > 4 ? 4 : ncpu > 0 ? ncpu : 1;
		if (nthreads > 1024) /* as the helper's --threads allows */
			nthreads = 1024;
		zb = calloc(a.vec.n ? a.vec.n : 1, sizeof(*zb));
		gone = calloc(a.vec.n ? a.vec.n : 1, 1);
		rc = zb && gone ? cli_z19_sizes(env, &a.vec, (unsigned)nthreads,
		                                zb, gone, &cached)
		                : -ENOMEM;
	}
	/* After the (maybe long) compression: figures of the same moment. */
	if (rc == 0)
		rc = ulp_store_stats_get(env->st, &ss);
	if (rc == 0)
		rc = ulp_store_disk_get(env->st, &disk);
	if (rc == 0 && !(counted = calloc(a.vec.n ? a.vec.n : 1, 1)))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < a.vec.n; i++) {
		ulp_stats es;
		int fmt;
		if (gone && gone[i])
			continue;
		int have = ulp_version_usage(env->st, a.vec.v[i].id, &fmt, &es);
		if (have < 0)
			continue;
		counted[i] = 1;
		int k = fmt >= 0 && fmt < 3 ? fmt : 0;
		kind[k].count++;
		kind[k].logical += a.vec.v[i].size;
		kind[k].stored += a.vec.v[i].stored;
		kind[k].z19 += zb ? zb[i] : 0;
		all.count++;
		all.logical += a.vec.v[i].size;
		all.stored += a.vec.v[i].stored;
		all.z19 += zb ? zb[i] : 0;
		depth[a.vec.v[i].depth < 64 ? a.vec.v[i].depth : 64]++;
		if (!have)
			continue;
		recorded++;
		for (int d = 0; d < ULP_DT_COUNT; d++) {
			if (!es.dt[d].bytes_in)
				continue;
			dt[d].count++;
			dt[d].logical += es.dt[d].bytes_in;
			dt[d].stored += es.dt[d].bytes_out;
		}
		paths[0] += es.chunks_copy;
		paths[1] += es.chunks_delta;
		paths[2] += es.chunks_standalone;
	}
	if (rc == 0 && json && want_ck &&
	    !(cks = cli_stats_checkpoints(&a.vec, counted, zb)))
		rc = -ENOMEM;
	vall_free(&a);
	free(zb);
	free(gone);
	free(counted);
	if (rc < 0) {
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
		for (int i = 0; i < 3; i++)
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
	for (int i = 0; i < 3; i++)
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
	return CLI_OK;
}
