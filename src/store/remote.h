/*
 * remote.h - where the store's object files also live, when they live
 * somewhere else too (an S3 bucket: src/objstore/bucket.h).  The store
 * stays a local directory; these hooks are the whole of what it knows about
 * the remote copy:
 *   - put: an object has just become durable in objects/; it must reach the
 *     remote before its version is committed (a failure fails the encode,
 *     the file stays staged and is retried);
 *   - removed: no version needs the object any more (local copy gone);
 *   - size/read_at: an object the catalog names is not in objects/ (a
 *     fresh cache, or evicted): read its byte ranges remotely;
 *   - synced: ulp_store_sync finished without error (publish the catalog).
 * Every hook may be called from several threads at once, never with the
 * store's lock held.  Hooks return 0 or a negative errno.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_STORE_REMOTE_H
#define ULP_STORE_REMOTE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ulp_remote {
	void *ctx;
	int (*put)(void *ctx, int obj_dir_fd, const char *name);
	void (*removed)(void *ctx, const char *name);
	int (*size)(void *ctx, const char *name, uint64_t *size);
	int (*read_at)(void *ctx, const char *name, uint64_t off, void *buf,
	               size_t len);
	int (*synced)(void *ctx);
} ulp_remote;

#endif
