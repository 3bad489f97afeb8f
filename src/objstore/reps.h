/*
 * reps.h - each version's bucket representation (reps.c says why and what
 * stays true; store/bucket_reps.h what a row is).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_REPS_H
#define ULP_REPS_H

#include "store/bucket_reps.h"
#include "store/store.h"

typedef struct ulp_bucket ulp_bucket;

/* A writer's attach: the bucket's own handle on the catalog's rows.  0 or
 * -errno (logged; versions then go up as their local objects). */
int ulp_reps_open(ulp_bucket *b);
void ulp_reps_close(ulp_bucket *b);

/* 1 when name is the local object of versions that all have another
 * uploaded representation: it is never uploaded (unless the object cache
 * must evict it); 2 when one of them is being given another (its row
 * pending): ask again once it is done; 0 otherwise (or without the
 * handle). */
int ulp_reps_superseded(ulp_bucket *b, const char *name);
/* 1 when a representation names object name: it stays in the bucket
 * whatever happens to the local file. */
int ulp_reps_names(ulp_bucket *b, const char *name);

/* Drop what no longer holds (representations of versions gone, crash
 * leftovers, and what is coded against those; every one on a mount that
 * does not defer uploads; their objects deleted after the next publish)
 * and re-queue the local objects of the versions that lost theirs.
 * Before a publish takes its deletes, so that these go with it.  0 or
 * -errno. */
int ulp_reps_drop(ulp_bucket *b);
/* A publish, gate closed, before the flush (st NULL: the store is closed,
 * no encoding): ulp_reps_drop again, then code each new
 * standalone version with a represented predecessor as a forward delta
 * and upload it.  0, or the error of the drop or of the listing; a failed
 * forward delta is logged, its version falls back to its local object. */
int ulp_reps_prepare(ulp_bucket *b, ulp_store *st);
/* After the flush: standalone versions without a representation become
 * bucket keyframes (their local objects are in the bucket now); none
 * without deferral. */
int ulp_reps_keyframes(ulp_bucket *b);

#endif
