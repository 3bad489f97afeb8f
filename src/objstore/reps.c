/*
 * reps.c - forward deltas in the bucket while the local store keeps
 * reverse chains.
 *
 * Why.  Locally the newest version of a lineage is standalone, and once
 * its successor commits it is coded again as a reverse delta (store/gc.c).
 * A sync after every checkpoint must upload the newest version, so with
 * local objects only, each version went up twice: standalone, then as a
 * reverse delta (1.8 times the store).  Instead a version has a bucket
 * representation of its own (reps.h): at a publish, a new standalone
 * version whose predecessor (the version the store will flip against it)
 * is already represented in the bucket is coded as a forward delta against
 * that predecessor and uploaded in place of its standalone object; its
 * later reverse delta is never uploaded.  Every keyframe_every-th link
 * (or where the predecessor has no representation, or a forward delta
 * would not be smaller) the standalone object goes up instead and becomes
 * a bucket keyframe.  The published snapshot is rewritten so that the
 * bucket's catalog names these objects: a fresh machine decodes forward
 * chains of at most keyframe_every links (the store's reader follows a
 * reference in either direction).  A writer mounting that catalog holds
 * the forward chains as its local objects and flips them lazily, as it
 * does any forward chain; the flips' objects are superseded, never
 * uploaded.
 *
 * What stays true.
 *   - No cycle: a forward delta's base has an uploaded representation
 *     that is a keyframe or a forward delta itself, so representations
 *     chain only to older represented versions; a version without one is
 *     read from its local object, whose chain the store keeps acyclic.
 *     The rewrite checks that every version reaches a root anyway.
 *   - Liveness: a representation lives while its version has a row that
 *     is not deleted, its base's representation lives, and the side its
 *     chunks read (store/side.h: a forward delta of optimizer.pt is coded
 *     given its checkpoint's model, as the local object is) has a row
 *     that is not deleted.  The simplest
 *     correct rule for a deleted base: its dependants lose their
 *     representations too (at the next publish), and fall back to their
 *     local objects, uploaded then.  Their bucket objects, and those of
 *     the versions gone, are deleted after that publish, as every drop is.
 *   - Crash safety: a row is pending until its object is in the bucket,
 *     and only uploaded rows reach a snapshot; a pending row a crash left
 *     is dropped at the next publish (its object, if it got there, is
 *     deleted after it) and the version's standalone object uploaded (the
 *     next mount finds it missing from the bucket).
 *   - A superseded local object (its version is represented otherwise)
 *     exists only in the cache: it is never evicted without being
 *     uploaded first (object_cache.c).
 *   - Only a mount that defers uploads has representations.  Without
 *     deferral each object goes up as it is made, a flip's reverse delta
 *     before the flip commits, so nothing could hold it back as
 *     superseded: such a mount drops every representation at its first
 *     publish and the bucket holds the local objects.
 *
 * The rows live in the catalog, behind the store's calls
 * (store/bucket_reps.h); the handle is a writer's, from its attach.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"
#include "objstore/reps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ulp_reps_open(ulp_bucket *b)
{
	char *p = NULL;
	if (asprintf(&p, "%s/catalog.db", b->cache_dir) < 0)
		return -ENOMEM;
	int rc = ulp_breps_open(p, &b->reps);
	free(p);
	return rc;
}

void ulp_reps_close(ulp_bucket *b)
{
	ulp_breps_close(b->reps);
	b->reps = NULL;
}

int ulp_reps_superseded(ulp_bucket *b, const char *name)
{
	return b->reps ? ulp_breps_superseded(b->reps, name) : 0;
}

int ulp_reps_names(ulp_bucket *b, const char *name)
{
	return b->reps ? ulp_breps_names(b->reps, name) : 0;
}

/* ------------------------------------------------------------ dropping */

int ulp_reps_drop(ulp_bucket *b)
{
	if (!b->reps)
		return 0;
	ulp_breps_gone *v = NULL;
	size_t n = 0;
	/* Without deferral a flip's reverse delta goes up as it is made,
	 * before anything could tell it superseded: the bucket holds the
	 * local objects, and a representation left by a deferring mount
	 * would keep a second copy of its version there. */
	int rc = ulp_breps_take_gone(b->reps, !b->defer, &v, &n);
	for (size_t i = 0; !rc && i < n; i++) {
		/* Still a version's local object: its own removal says when
		 * it goes from the bucket. */
		if (!v[i].local_named)
			ulp_bucket_drop_later(b, v[i].object);
		/* It may never have been uploaded (superseded until now). */
		if (v[i].local[0] && strcmp(v[i].local, v[i].object))
			ulp_up_recover(b, v[i].local);
	}
	if (!rc && n)
		ulp_bucket_log("s3://%s/%s: %zu bucket representation(s) "
		               "dropped (%s); their versions' own objects go "
		               "up instead",
		               b->bucket, b->prefix, n,
		               b->defer ? "their version or base is gone"
		                        : "uploads are not deferred");
	free(v);
	return rc;
}

/* ------------------------------------------------------------ forward */

/* forward_one's work, c's standalone object held.  The delta is the
 * caller's (the store does not pass it to the put hook): uploaded here. */
static int forward_held(ulp_bucket *b, ulp_store *st, const ulp_breps_cand *c)
{
	char name[33];
	uint64_t stored = 0, side = 0;
	int rc = ulp_store_encode_delta(st, (uint64_t)c->id, (uint64_t)c->base,
	                                name, &stored, &side);
	int done = 0;
	if (rc == 0 && stored >= c->stored) {
		unlinkat(b->obj_dir_fd, name, 0); /* no smaller: a keyframe */
	} else if (rc == 0) {
		rc = ulp_breps_add(b->reps, c->id, name, c->base, (int64_t)side,
		                   c->depth + 1, stored);
		if (rc == 0)
			rc = ulp_bucket_upload(b, b->obj_dir_fd, name);
		if (rc == 0)
			ulp_publish_crash(b, ULP_CRASH_FORWARD);
		if (rc == 0)
			rc = ulp_breps_settle(b->reps, c->id, 1);
		else
			ulp_breps_settle(b->reps, c->id, 0);
		/* The writer reads its local objects; the bucket holds this
		 * one (a failed upload or row: the next publish drops it). */
		unlinkat(b->obj_dir_fd, name, 0);
		done = rc == 0;
	}
	return rc < 0 ? rc : done;
}

/* Code c as a forward delta against its base and upload it in place of
 * its standalone object.  That one stays pending, held back from the
 * uploaders meanwhile (so never evicted: the only copy); once the
 * representation is uploaded, they find it superseded and drop it.  1
 * done, 0 not worth it or not possible (the standalone object goes up as
 * it is), -errno. */
static int forward_one(ulp_bucket *b, ulp_store *st, const ulp_breps_cand *c)
{
	if (!ulp_up_hold(b, c->object, 1))
		return 0; /* in the bucket already, or on its way */
	int rc = forward_held(b, st, c);
	ulp_up_hold(b, c->object, 0);
	return rc;
}

int ulp_reps_prepare(ulp_bucket *b, ulp_store *st)
{
	if (!b->reps)
		return 0;
	int rc = ulp_reps_drop(b);
	if (rc || !st || !b->defer)
		return rc; /* without deferral every object went up at once */
	ulp_breps_cand *v;
	size_t n;
	if ((rc = ulp_breps_candidates(b->reps, &v, &n)) < 0) {
		free(v);
		return rc;
	}
	int64_t k = (int64_t)ulp_store_keyframe_every(st);
	for (size_t i = 0; i < n; i++) {
		if (v[i].depth + 1 > k - 1)
			continue; /* a bucket keyframe (ulp_reps_keyframes) */
		int r = forward_one(b, st, &v[i]);
		if (r < 0)
			ulp_bucket_log("s3://%s/%s: forward delta of version "
			               "%lld: %s (its own object goes up)",
			               b->bucket, b->prefix, (long long)v[i].id,
			               strerror(-r));
	}
	free(v);
	/* A failed forward delta costs bytes, not data: the publish goes
	 * on with the standalone object. */
	return 0;
}

int ulp_reps_keyframes(ulp_bucket *b)
{
	/* without deferral, no representations (ulp_reps_drop says why) */
	if (!b->reps || !b->defer)
		return 0;
	return ulp_breps_keyframes(b->reps);
}
