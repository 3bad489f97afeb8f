/*
 * mount_s3.h - "ulpfs mount s3://BUCKET/PREFIX MOUNTPOINT": the options
 * of a bucket store and the daemon's steps around the store's life
 * (src/objstore/bucket.h does the work).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_CLI_MOUNT_S3_H
#define ULP_CLI_MOUNT_S3_H

#include <stddef.h>
#include <stdint.h>

#include "objstore/bucket.h"

typedef struct mount_s3 {
	const char *url; /* NULL: a local store */
	char *url_buf;   /* url, when this owns it (mount_s3_open_cmd/_url) */
	char *cache_dir; /* -o cache_dir=DIR (malloc'ed, absolute) */
	uint64_t object_cache;
	unsigned publish_s;
	long upload_delay_s; /* 0: the default; < 0: none (upload_delay=0) */
	int read_only;       /* -o ro */
	ulp_bucket *bucket;
} mount_s3;

/* One -o option: 1 consumed, 0 not ours, -1 bad value (reported). */
int mount_s3_option(mount_s3 *m, const char *opt);
/* A bucket store: fill m->cache_dir (the default when not given) and
 * return it as the local store's directory; NULL with an error printed. */
const char *mount_s3_store_dir(mount_s3 *m, const char *url);
/* In the daemon, before ulp_store_open: open the bucket (lease, catalog
 * seed) and set sopts->remote.  0, or -1 with err filled. */
int mount_s3_open(mount_s3 *m, ulp_store_opts *sopts, char *err, size_t errlen);
/* After ulp_store_open / before ulp_store_close / after it. */
void mount_s3_attach(mount_s3 *m, ulp_store *st);
void mount_s3_detach(mount_s3 *m);
int mount_s3_close(mount_s3 *m);
void mount_s3_free(mount_s3 *m);
/* A command on an unmounted bucket store, given its cache directory (the
 * cache names its bucket): open the bucket as a mount would (writers take
 * the lease) and set sopts->remote.  *out NULL when dir is a local store.
 * 0, or -1 after printing why. */
int mount_s3_open_cmd(mount_s3 **out, const char *dir, int read_only,
                      ulp_store_opts *sopts);
/* The same for --store s3://BUCKET/PREFIX with dir its cache directory
 * (seeded from the bucket's catalog when it has none). */
int mount_s3_open_url(mount_s3 **out, const char *url, const char *dir,
                      int read_only, ulp_store_opts *sopts);
/* ulpfs umount, after the daemon of store is gone: -1 after printing what
 * a bucket store could not upload (still staged), else 0. */
int mount_s3_umount_report(const char *store);

#endif
