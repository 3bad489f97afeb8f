/*
 * encoder.h - encoding staged files into objects and committing them
 * (encoder.c).
 */
#ifndef ULP_STORE_ENCODER_H
#define ULP_STORE_ENCODER_H

#include "store/store_core.h"
#include "store/side.h"

/* Write an encoded object: plan + encode cur[0..size) against ref (0: a
 * keyframe) into objects/<name>, fsynced.  cancel, if not NULL, aborts
 * the write when *cancel != gen.  On success fills name and *stored. */
typedef struct ulp_encode_req {
	const uint8_t *cur;
	uint64_t size;
	uint64_t from; /* else (cur NULL): this version's bytes, decoded
	                  chunk by chunk through the cache as encoded */
	const ulp_tensor_map *map;
	uint64_t ref; /* reference version or 0 */
	uint64_t ref_size;
	const uint8_t *ref_hash; /* 16 bytes when ref */
	const ulp_tensor_map *ref_map;
	unsigned threads; /* chunks encoded at once, on st->pool (0: 1) */
	_Atomic uint64_t *cancel; /* abort when *cancel != gen */
	uint64_t gen;
	_Atomic int *stop; /* abort when set (may be NULL) */
	ulp_stats *stats;  /* filled with the encoder's statistics (may be
	                      NULL) */
	/* zeros in cur never read (ulp_stage_holes; may be NULL) */
	const uint64_t (*holes)[2];
	size_t nholes;
	/* bytes equal to ref's at the same offsets (ulp_stage_unchanged;
	 * may be NULL) */
	const uint64_t (*same)[2];
	size_t nsame;
	/* the content hash's kind: a version committed with a flat hash
	 * keeps it when coded again (other objects name it by that hash) */
	int flat_hash;
	/* the content hash when known (cur is a copy of ref; may be NULL) */
	const uint8_t *known_hash;
	/* the side version the tensors side_map names may be coded given
	 * (0: none; side.h), its size and content hash */
	uint64_t side;
	uint64_t side_size;
	const uint8_t *side_hash;
	const ulp_side_map *side_map;
	/* the object is the caller's: the remote's put hook is not told
	 * (a remote's own copy, delta_api.c) */
	int own;
} ulp_encode_req;
int ulp_encode_object(ulp_store *st, const ulp_encode_req *req,
                      char name[ULP_OBJ_NAME_LEN], uint64_t *stored,
                      uint8_t hash[16]);

/* Code committed version d (tensors dmap) again against version n (n->id
 * 0: standalone; tensors nmap), given side (side->v.id 0: none), into
 * objects/<name> (ulp_encode_object; stop as there): a flip's or a
 * rebase's object (gc.c), or a remote's own copy (delta_api.c).  The
 * version keeps the kind of hash it was committed with (objects coded
 * against it name it by that hash), and the decoded hash is checked
 * against d's: a mismatch is -EIO, the object unlinked.  quiet: the
 * object is the caller's, the remote never told of it (req.own).  *side_read: the side
 * some chunk reads (0: none, also on an error); *est: the encoder's
 * statistics.  mu not held. */
int ulp_encode_again(ulp_store *st, const ulp_version_info *d,
                     const ulp_tensor_map *dmap, const ulp_version_info *n,
                     const ulp_tensor_map *nmap, const ulp_side_pick *side,
                     _Atomic int *stop, int quiet, char name[ULP_OBJ_NAME_LEN],
                     uint64_t *stored, uint64_t *side_read, ulp_stats *est);

/* Encode a dequeued inode and commit it (encoder.c).  0: committed (or
 * nothing to do), 1: discarded (content changed meanwhile), -errno:
 * failed, to retry (-EAGAIN: retry at once). */
int ulp_encode_inode(ulp_store *st, unsigned threads, ulp_inode *in);

#endif /* ULP_STORE_ENCODER_H */
