/*
 * upload_errors.h - CACHE/upload-errors: what a writer mount of a bucket
 * store could not upload, for "ulpfs stats" and "ulpfs umount" (which run
 * in other processes, and after the daemon is gone).  The daemon writes it
 * at each failed upload and removes it once everything closed is in the
 * bucket (a sync that succeeded, or a close with nothing left staged or
 * pending).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_UPLOAD_ERRORS_H
#define ULP_UPLOAD_ERRORS_H

#include <stdint.h>

#define ULP_UPLOAD_ERRORS_FILE "upload-errors"

typedef struct ulp_upload_errors {
	char url[512];         /* s3://BUCKET/PREFIX */
	char error[512];       /* the last failure, as the server said it */
	uint64_t failures;     /* failed uploads since the last success */
	long long first, last; /* when (Unix time) */
	int permanent;         /* 403, missing bucket: retrying won't help */
	int64_t staged;        /* files staged at the daemon's close, or -1 */
	int64_t pending;       /* objects of committed versions not uploaded
	                          at the close (deferred uploads) */
} ulp_upload_errors;

/* Write it (atomically: a temporary, then rename).  0 or -errno. */
int ulp_upload_errors_write(const char *cache_dir, const ulp_upload_errors *e);
/* 1 and e filled when the store has one, 0 when not, -errno. */
int ulp_upload_errors_read(const char *cache_dir, ulp_upload_errors *e);
/* Remove it (none is no error). */
void ulp_upload_errors_clear(const char *cache_dir);
/* Files in CACHE/staging (not yet in the bucket), or -errno. */
int64_t ulp_upload_errors_staged(const char *cache_dir);

#endif
