/*
 * delta_api.c - a version coded again against another one into an object
 * no row names (ulp_store_encode_delta), for a remote that keeps its own
 * representation of versions (src/objstore/reps.c: forward deltas in the
 * bucket while the local store keeps reverse chains).
 */
#include "store/encoder.h"
#include "store/reader.h"
#include "store/side.h"
#include "store/versions.h"

unsigned ulp_store_keyframe_every(ulp_store *st)
{
	return st->opts.keyframe_every;
}

int ulp_store_encode_delta(ulp_store *st, uint64_t vid, uint64_t base,
                           char name[33], uint64_t *stored, uint64_t *side)
{
	ulp_version_info v, b;
	ulp_tensor_map vmap = { 0 }, bmap = { 0 };
	ulp_side_pick pick = { 0 };
	ulp_stats est = { 0 };

	pthread_mutex_lock(&st->mu);
	int rc = ulp_version_get_locked(st, vid, &v);
	if (rc == 0)
		rc = ulp_version_get_locked(st, base, &b);
	if (rc == 0 &&
	    (v.state == ULP_VERSION_DELETED || b.state == ULP_VERSION_DELETED))
		rc = -ENOENT;
	if (rc == 0)
		rc = ulp_version_tmap_locked(st, vid, &vmap);
	if (rc == 0)
		rc = ulp_version_tmap_locked(st, base, &bmap);
	pthread_mutex_unlock(&st->mu);
	/* The side it was coded given, as a flip keeps it (gc.c), so that
	 * the bucket's copy is as small as the local one (none when that
	 * side is no longer live). */
	ulp_ref_ctx vctx = { st, vid, 0, NULL };
	if (rc == 0 && v.side)
		rc = ulp_side_load(st, v.side, &vmap, ulp_ref_read, &vctx,
		                   &pick);
	/* quiet: the object is the caller's, the remote is not told */
	if (rc == 0)
		rc = ulp_encode_again(st, &v, &vmap, &b, &bmap, &pick, NULL, 1,
		                      name, stored, side, &est);
	ulp_side_pick_free(&pick);
	ulp_tensor_map_free(&vmap);
	ulp_tensor_map_free(&bmap);
	return rc;
}
