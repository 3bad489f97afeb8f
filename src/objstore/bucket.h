/*
 * bucket.h - a ulpfs store whose objects live in an S3 bucket
 * (s3://BUCKET/PREFIX).  The store itself stays a local directory, the
 * cache directory: catalog.db, staging/ and objects/ (a bounded cache of
 * the objects this machine wrote).  In the bucket, under PREFIX/:
 *   objects/<name>        every object a published version needs,
 *                         uploaded before the snapshot that names it
 *                         (uploads.c: deferred by upload_delay_s)
 *   catalog/<stamp>.db    consistent catalog snapshots (VACUUM INTO),
 *                         each under a new name
 *   CATALOG               the pointer: the name of the newest snapshot
 *   LEASE                 the writer's lease (lease.c)
 *
 * A fresh cache directory is seeded from the pointer's snapshot, so any
 * machine mounts from the bucket alone and reads every version that had
 * been published; objects it does not hold are read with ranged GETs.
 * Objects the catalog dropped are deleted from the bucket only after a
 * snapshot that no longer names them is published (an older snapshot a
 * reader mounted stays readable until then); what a crash leaves behind
 * is swept at the writer's next mount.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_BUCKET_H
#define ULP_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "store/remote.h"
#include "store/store.h"

typedef struct ulp_bucket ulp_bucket;

/* upload_delay_s when none is given (ulp_bucket_opts) */
#define ULP_UPLOAD_DELAY_DEFAULT 300

typedef struct ulp_bucket_opts {
	const char *url;       /* s3://BUCKET[/PREFIX] */
	const char *cache_dir; /* the local store directory */
	uint64_t object_cache; /* bytes of objects kept locally (0: 4 GiB) */
	int read_only;         /* no lease, nothing written to the bucket */
	unsigned publish_s;    /* periodic catalog publish (0: 60 s) */
	unsigned lease_s;      /* lease lifetime (0: 120 s; refreshed at 1/3) */
	/* seconds an object waits in the cache before its upload, so that a
	 * version replaced meanwhile (the previous newest, coded again as a
	 * delta) is never uploaded standalone; a publish (sync, umount,
	 * periodic) uploads every object first.  0: the default (300 s);
	 * < 0: none, each object is uploaded before its version commits. */
	long upload_delay_s;
	int quiet; /* no traffic summary at close (commands) */
} ulp_bucket_opts;

/* 1 when s names a bucket store (s3://...). */
int ulp_bucket_is_url(const char *s);
/* s3://BUCKET/PREFIX -> malloc'ed bucket and prefix ("" or "a/b", no
 * trailing slash).  -EINVAL with err filled on a malformed URL. */
int ulp_bucket_parse_url(const char *url, char **bucket, char **prefix,
                         char *err, size_t errlen);
/* ROOT/BUCKET/PREFIX-with-slashes-as-%2F, malloc'ed; ROOT is
 * $ULPFS_CACHE_ROOT when that is an absolute path, else /var/cache/ulpfs. */
char *ulp_bucket_default_cache(const char *url);

/*
 * Credentials and endpoint (s3_client.h), a check that the bucket answers,
 * the lease (writers), the cache directory seeded from the bucket when it
 * has no catalog (or, read-only, when the bucket has a newer snapshot).
 * Returns 0, or a negative errno with err filled: -EACCES (credentials),
 * -ENXIO (no such bucket), -EBUSY (another writer's lease), -EAGAIN
 * (server unreachable), -EIO.
 */
int ulp_bucket_open(const ulp_bucket_opts *o, ulp_bucket **out, char *err,
                    size_t errlen);
/* The hooks for ulp_store_opts.remote (valid until ulp_bucket_close). */
const ulp_remote *ulp_bucket_remote(ulp_bucket *b);
/* After ulp_store_open: a writer sweeps bucket objects no version names
 * and starts the periodic publisher and the lease refresher. */
int ulp_bucket_attach(ulp_bucket *b, ulp_store *st);
/* Before ulp_store_close: stop the threads that use the store. */
void ulp_bucket_detach(ulp_bucket *b);
/* After ulp_store_close: publish the catalog, delete what it dropped,
 * release the lease, free.  Returns the first error (already logged). */
int ulp_bucket_close(ulp_bucket *b);

/* CACHE/bucket-url names the bucket store a cache directory belongs to
 * (written at each ulp_bucket_attach), so that commands given the cache
 * directory reach the bucket too.  The URL malloc'ed, or NULL (none). */
char *ulp_bucket_url_of(const char *cache_dir);

/* Publish a catalog snapshot now (what ulpfs sync does through the store's
 * synced hook).  0 or a negative errno. */
int ulp_bucket_publish(ulp_bucket *b);

#endif
