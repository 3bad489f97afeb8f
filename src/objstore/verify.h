/*
 * verify.h - a writer's check of its bucket-only representations
 * (reps.h): the forward deltas that only the bucket holds, which are what
 * a fresh machine reads, and which the writer itself never reads.
 *
 * A view is a private store in a temporary directory: a copy of the live
 * catalog rewritten to name the bucket's objects (as a publish does), and
 * no local objects, so every byte it decodes comes from the bucket with
 * ranged GETs made directly, past the object cache (nothing lands in
 * CACHE/objects or CACHE/fetched).  Its remote refuses every write.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_BUCKET_VERIFY_H
#define ULP_BUCKET_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct ulp_bucket ulp_bucket;
typedef struct ulp_bucket_view ulp_bucket_view;

/* 1 when b is a writer's (it keeps representations: a view may have
 * something to check), else 0. */
int ulp_bucket_view_writer(const ulp_bucket *b);
/* A view of the uploaded representations whose object is not their
 * version's local object.  *out NULL (and 0) when there are none or b is
 * not a writer's.  0 or -errno (logged). */
int ulp_bucket_view_open(ulp_bucket *b, ulp_bucket_view **out);
void ulp_bucket_view_close(ulp_bucket_view *v);
/* The view's store: read the versions below with ulp_version_read. */
ulp_store *ulp_bucket_view_store(ulp_bucket_view *v);
size_t ulp_bucket_view_count(const ulp_bucket_view *v);
/* The i-th version to check and its object's key in the bucket. */
uint64_t ulp_bucket_view_version(const ulp_bucket_view *v, size_t i);
const char *ulp_bucket_view_key(const ulp_bucket_view *v, size_t i);
/* The version the i-th is coded against in the bucket (0: a keyframe).
 * Items come oldest first, so a base in the view comes before. */
uint64_t ulp_bucket_view_base(const ulp_bucket_view *v, size_t i);
/* The key of the last object a read of the view failed on (this thread),
 * "" when none since the last call; the call clears it. */
void ulp_bucket_view_failed(ulp_bucket_view *v, char *key, size_t len);

#endif
