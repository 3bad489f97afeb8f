/*
 * bucket_internal.h - what bucket.c, lease.c and publish.c share.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_BUCKET_INTERNAL_H
#define ULP_BUCKET_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "objstore/bucket.h"
#include "objstore/reps.h"
#include "objstore/s3_client.h"
#include "objstore/upload_errors.h"

/* Uploader threads of deferred uploads (several objects in flight, each
 * multipart with its own parts in flight). */
#define ULP_UPLOADERS 4

struct ulp_bucket {
	ulp_bucket_opts o;
	char *url, *cache_dir, *bucket, *prefix;
	ulp_s3 *s3;
	ulp_remote remote;
	ulp_store *st;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stopping;
	int have_thread;
	pthread_t thread; /* publisher and lease refresher */

	/* objects this mount began to upload before its orphan sweep ended:
	 * not committed yet, but no orphans */
	char **fresh;
	size_t nfresh, capfresh;
	int sweep_done;

	/* objects dropped by the catalog, deleted after the next publish */
	char **dead;
	size_t ndead, capdead;

	pthread_mutex_t pub_mu;  /* one publish at a time */
	char last_snapshot[128]; /* catalog/... the pointer names now */
	char prev_snapshot[128]; /* the one before, deleted at the next */
	long long pub_stamp;     /* catalog files' change stamp at it */

	/* what went up and came down, logged at close (bench/s3_bench.sh) */
	atomic_ullong up_objects, up_object_bytes, up_catalogs,
		up_catalog_bytes, down_ranges, down_bytes, cache_ranges,
		cache_bytes;

	/* uploads failing since the last success (under mu), mirrored in
	 * CACHE/upload-errors for stats and umount */
	ulp_upload_errors uerr;

	/* object_cache.c: bytes in objects/ and fetched/ (a running
	 * estimate, made exact by each trim), and one trim at a time */
	atomic_ullong cached_bytes;
	pthread_mutex_t trim_mu;

	/* uploads.c: objects whose upload waits (under mu) */
	int defer;      /* upload_delay_s > 0 and a writer */
	int obj_dir_fd; /* CACHE/objects, ours (uploads after the store's
	                   close) */
	struct ulp_pending *pend;
	size_t npend, cappend;
	int gate;   /* a publish is flushing: deferred puts wait (flush_cv) */
	int up_err; /* the last failure since the flush began */
	int up_stop;
	unsigned nup; /* uploader threads */
	pthread_t up_thread[ULP_UPLOADERS];
	pthread_cond_t up_cv;    /* uploaders: work is due, or stop */
	pthread_cond_t flush_cv; /* flushers: an upload ended */
	int have_up_cv;

	/* tests: where a publish kills the daemon (publish_crash.c) */
	int crash_at;
	unsigned crash_n;
	atomic_uint crash_uploads; /* uploads while the gate was closed */

	/* reps.c: the bucket representations' rows (a writer's, from its
	 * attach; NULL: none) */
	struct ulp_breps *reps;

	char owner[512]; /* this mount's lease owner id */
	int leased;
	int lease_advisory; /* the server refused If-None-Match */
};

/* PREFIX/what, malloc'ed. */
char *ulp_bucket_key(const ulp_bucket *b, const char *what);
void ulp_bucket_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* PREFIX/objects/name, malloc'ed. */
char *ulp_bucket_object_key(const ulp_bucket *b, const char *name);

/* Upload CACHE/objects/name (dir_fd is that directory): counted, a
 * failure logged and noted for stats and umount.  0 or -errno. */
int ulp_bucket_upload(ulp_bucket *b, int dir_fd, const char *name);
/* The same without the object cache's trim (the trim's own uploads). */
int ulp_bucket_upload_raw(ulp_bucket *b, int dir_fd, const char *name);
/* Delete object name from the bucket after the next publish (one that no
 * longer names it). */
void ulp_bucket_drop_later(ulp_bucket *b, const char *name);

/* uploads.c (uploads.c says why and what stays true).  With mu held:
 * ulp_up_defer queues name (1), or says to upload it now (0: a publish is
 * flushing; hook_put waits for the gate to open first), or -ENOMEM; ulp_up_forget drops a pending name that is not
 * in flight (1: it was never uploaded) or does nothing (0).  Without mu:
 * the rest. */
int ulp_up_defer(ulp_bucket *b, const char *name);
int ulp_up_forget(ulp_bucket *b, const char *name);
int ulp_up_start(ulp_bucket *b);
void ulp_up_stop(ulp_bucket *b);
/* A live object the bucket lacks (a crash before its upload): due now.
 * 1 queued, 2 queued already (this mount's), -errno. */
int ulp_up_recover(ulp_bucket *b, const char *name);
/* Hold a pending name back from the uploaders (hold 1) or let it go again
 * (0): 1 done, 0 not pending or in flight already. */
int ulp_up_hold(ulp_bucket *b, const char *name, int hold);
/* Whether name waits for its upload (never evicted meanwhile). */
int ulp_bucket_pending(ulp_bucket *b, const char *name);
/* Whether some pending upload is not due yet. */
int ulp_up_young(ulp_bucket *b);
size_t ulp_up_count(ulp_bucket *b);
/* Publishes: close the gate, flush (upload everything pending; 0 or the
 * first error), snapshot, open it. */
void ulp_up_gate(ulp_bucket *b, int closed);
int ulp_up_flush(ulp_bucket *b);

/* lease.c */
int ulp_lease_acquire(ulp_bucket *b, char *err, size_t errlen);
int ulp_lease_refresh(ulp_bucket *b);
void ulp_lease_release(ulp_bucket *b);

/* object_cache.c: a range fetched before (1, buf filled) or not (0); a
 * range just fetched; the bound enforced, keep (a file name) spared. */
int ulp_ocache_get(ulp_bucket *b, const char *name, uint64_t off, void *buf,
                   size_t len);
void ulp_ocache_put(ulp_bucket *b, const char *name, uint64_t off,
                    const void *buf, size_t len);
void ulp_ocache_trim(ulp_bucket *b, const char *keep);

/* publish.c */
int ulp_publish_seed(ulp_bucket *b, char *err, size_t errlen);
int ulp_publish_now(ulp_bucket *b, int only_if_changed);
/* A writer's mount: delete the catalog snapshots crashes left (all but the
 * pointer's and the one before it). */
void ulp_publish_sweep(ulp_bucket *b);

/* Tests: ULPFS_TEST_CRASH_PUBLISH=POINT[:N] makes a writer's publish kill
 * its own process (SIGKILL, as kill -9 would) at POINT: flush:N after the
 * N-th upload while the gate is closed (or at the flush's end when it
 * uploads fewer), snapshot once the snapshot is taken (before its
 * upload), pointer once the snapshot is uploaded (before the pointer
 * PUT), record once the pointer is PUT (before the cache records it),
 * deletes once published (before the objects it dropped are deleted),
 * forward once a forward delta is uploaded (before its representation is
 * marked uploaded: reps.c).
 * ulp_publish_crash_init reads it at open; ulp_publish_crash raises at
 * the point; ulp_publish_crash_upload counts an upload. */
enum {
	ULP_CRASH_NONE,
	ULP_CRASH_FLUSH,
	ULP_CRASH_SNAPSHOT,
	ULP_CRASH_POINTER,
	ULP_CRASH_RECORD,
	ULP_CRASH_DELETES,
	ULP_CRASH_FORWARD
};
void ulp_publish_crash_init(ulp_bucket *b);
void ulp_publish_crash(const ulp_bucket *b, int point);
void ulp_publish_crash_upload(ulp_bucket *b);

/* A file of the cache directory opened for writing, created 0600 (a
 * store is its user's alone, whatever the umask): as fopen(path, "we"). */
FILE *ulp_bucket_fopen_private(const char *path);

#endif
