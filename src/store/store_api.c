/*
 * store_api.c - the store's own entry points (store.h): opening and
 * closing it, syncing, gc and its figures.  Each takes the lock where it
 * needs it and calls the modules; the namespace, file, version and
 * snapshot entry points are in their modules.
 */
#include "store/store_core.h"

#include "store/cache.h"
#include "store/gc.h"
#include "store/inode.h"
#include "store/objects.h"
#include "store/queue.h"
#include "store/reader.h"
#include "store/recover.h"
#include "store/staging.h"
#include "store/versions.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

void ulp_store_opts_default(ulp_store_opts *o)
{
	if (!o->cache_bytes)
		o->cache_bytes = 256ull << 20;
	if (!o->encoder_threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		o->encoder_threads = n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
	}
	if (!o->keyframe_every)
		o->keyframe_every = 16;
	/* Decoding a chunk reads its reference through the cache, run by
	 * run.  A cache that cannot hold one chunk per chain level makes each
	 * of those reads decode the reference chunk again, recursively: the
	 * cost grows exponentially with depth.  Keep room for every level of
	 * two concurrent readers. */
	uint64_t floor =
		2ull * (o->keyframe_every + 1) * ULP_CHUNK_SIZE_DEFAULT;
	if (o->cache_bytes < floor)
		o->cache_bytes = floor;
	if (!o->settle_ms)
		o->settle_ms = 500;
	if (!o->plain_newest)
		o->plain_newest = ULP_PLAIN_DEFAULT;
	/* staging_limit 0 is resolved by ulp_store_open, which knows the
	 * backing filesystem. */
}

/* ------------------------------------------------------------ open/close */

int ulp_store_open(const char *dir, const ulp_store_opts *opts, ulp_store **out)
{
	ulp_store *st = calloc(1, sizeof *st);
	char *cat_path = NULL;
	int rc;

	*out = NULL;
	if (!st)
		return -ENOMEM;
	st->dir_fd = st->obj_fd = st->stg_fd = st->lock_fd = -1;
	if (opts)
		st->opts = *opts;
	ulp_store_opts_default(&st->opts);
	st->dir = strdup(dir);
	rc = st->dir ? ulp_staging_new(&st->staging) : -ENOMEM;
	if (rc == 0)
		rc = ulp_queue_new(&st->queue);
	if (rc == 0)
		rc = ulp_sync_init(st);
	if (rc < 0) {
		ulp_queue_free(st->queue);
		ulp_staging_free(st->staging);
		free(st->dir);
		free(st);
		return rc;
	}
	rc = ulp_dirs_open(st);
	if (rc == 0 && !st->opts.staging_limit) {
		struct statvfs sv;
		if (fstatvfs(st->stg_fd, &sv) == 0)
			st->opts.staging_limit =
				(uint64_t)sv.f_bavail * sv.f_frsize / 2;
		if (st->opts.staging_limit < (64u << 20))
			st->opts.staging_limit = 64u << 20;
	}
	if (rc == 0 && asprintf(&cat_path, "%s/catalog.db", dir) < 0) {
		cat_path = NULL;
		rc = -ENOMEM;
	}
	if (rc == 0)
		rc = ulp_inode_table_new(st);
	if (rc == 0)
		rc = ulp_cat_open(cat_path, geteuid(), getegid(), &st->cat);
	free(cat_path);
	if (rc == 0)
		rc = ulp_reader_new(st, &st->reader);
	if (rc == 0 && !(st->cache = ulp_cache_new(st->opts.cache_bytes)))
		rc = -ENOMEM;
	if (rc == 0 && !(st->pool = ulp_pool_new(st->opts.encoder_threads)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = ulp_ra_pool_new(st, 0, &st->ra);
	if (rc == 0)
		rc = ulp_recover(st);
	if (rc == 0)
		rc = ulp_gc_start(st);
	if (rc == 0)
		rc = ulp_encoder_start(st);
	if (rc < 0) {
		ulp_store_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void ulp_store_close(ulp_store *st)
{
	if (!st)
		return;
	ulp_ra_pool_stop(st->ra); /* nothing is left to read ahead for */
	ulp_encoder_stop(st);     /* drains the queue first */
	/* The flips of this session's commits: a store unmounted after a
	 * save holds its older versions as deltas (a failure only leaves
	 * them pending for the next open).  A session that committed
	 * nothing (ulpfs log --store, say) does not wait for re-encoding. */
	if (atomic_load(&st->stat_commits))
		(void)ulp_gc_request(st, 0);
	ulp_gc_stop(st);
	ulp_inode_table_free(st);
	ulp_ra_pool_free(st->ra); /* gc and encoders, which read, are gone */
	ulp_pool_free(st->pool);  /* and so are all the jobs it ran */
	ulp_reader_free(st->reader);
	ulp_cache_free(st->cache);
	ulp_cat_close(st->cat);
	if (st->obj_fd >= 0)
		close(st->obj_fd);
	if (st->stg_fd >= 0)
		close(st->stg_fd);
	if (st->dir_fd >= 0)
		close(st->dir_fd);
	if (st->lock_fd >= 0)
		close(st->lock_fd); /* releases the flock */
	pthread_cond_destroy(&st->done_cv);
	ulp_staging_free(st->staging);
	ulp_queue_free(st->queue);
	pthread_mutex_destroy(&st->mu);
	free(st->dir);
	free(st);
}

int ulp_store_statfs(ulp_store *st, struct statvfs *out)
{
	return fstatvfs(st->dir_fd, out) < 0 ? -errno : 0;
}

/* ------------------------------------------------------------ upkeep */

int ulp_store_sync(ulp_store *st)
{
	return ulp_queue_sync(st);
}

int ulp_store_gc(ulp_store *st)
{
	return ulp_gc_request(st, 1);
}

/* ------------------------------------------------------------ files */

int ulp_store_object_live(ulp_store *st, const char *name)
{
	pthread_mutex_lock(&st->mu);
	int rc = ulp_obj_live(st, name);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_store_staging_tmpfd(ulp_store *st)
{
	return ulp_stage_tmpfd(st);
}

/* ------------------------------------------------------------ figures */

ulp_pool *ulp_store_pool(ulp_store *st)
{
	return st->pool;
}

int ulp_store_stats_get(ulp_store *st, ulp_store_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&st->mu);
	int rc = ulp_versions_tally(st, out);
	out->staged_bytes = ulp_stage_bytes(st);
	out->staging_limit = st->opts.staging_limit;
	out->queued = ulp_queue_count(st);
	pthread_mutex_unlock(&st->mu);
	ulp_cache_stats cs;
	ulp_cache_counters(st->cache, &cs);
	out->cache_bytes = cs.bytes;
	out->cache_hits = cs.hits;
	out->cache_misses = cs.misses;
	out->cache_decodes = cs.decodes;
	out->cache_waits = cs.waits;
	out->readahead = atomic_load(&st->stat_readahead);
	out->commits = atomic_load(&st->stat_commits);
	out->discards = atomic_load(&st->stat_discards);
	out->rebases = atomic_load(&st->stat_rebases);
	out->flips = atomic_load(&st->stat_flips);
	return rc;
}

static uint64_t file_bytes(int dir_fd, const char *name)
{
	struct stat sb;

	return fstatat(dir_fd, name, &sb, 0) == 0 && S_ISREG(sb.st_mode)
	               ? (uint64_t)sb.st_size
	               : 0;
}

int ulp_store_disk_get(ulp_store *st, ulp_store_disk *out)
{
	static const char *const cat[] = { "catalog.db", "catalog.db-wal",
		                           "catalog.db-shm" };

	memset(out, 0, sizeof *out);
	/* mu: the WAL is written (and checkpointed) under it. */
	pthread_mutex_lock(&st->mu);
	for (size_t i = 0; i < sizeof cat / sizeof cat[0]; i++)
		out->catalog_bytes += file_bytes(st->dir_fd, cat[i]);
	out->reserve_bytes = file_bytes(st->dir_fd, "reserve");
	pthread_mutex_unlock(&st->mu);
	return 0;
}
