/*
 * side.h - contexts from another file of the checkpoint (side.c): which
 * version of a sibling file a version is coded given (its side), and the
 * tensors matched between the two.
 *
 * Users and providers are told apart by name, so that no two files wait
 * for each other: a provider is a safetensors file (model.safetensors,
 * its shards), a user any other file with fp32 tensors (optimizer.pt,
 * whose fp32 master weights are nearly free given their bf16 copy).  A
 * provider has no side itself, so reading a version decodes at most one
 * side chain besides its own.
 */
#ifndef ULP_STORE_SIDE_H
#define ULP_STORE_SIDE_H

#include "store/store_core.h"

/* Whether a file at path with tensors map may be coded given a side. */
int ulp_side_wants(const char *path, const ulp_tensor_map *map);

/* Whether a provider in path's directory is staged, not committed yet:
 * 1, 0 or -errno (mu held).  Its user is then better encoded after it. */
int ulp_side_pending(ulp_store *st, const char *path);

/* The side of a version of path with tensors cur_map, read through
 * cur_read: of the live provider versions in path's directory, the
 * closest in commit time to created_ns that some tensor matches (a new
 * version: the providers just committed beside it; a flip: those of its
 * own checkpoint).  mu not held.  0 with out->v.id == 0
 * when there is none, or -errno; free with ulp_side_pick_free. */
typedef struct ulp_side_pick {
	ulp_version_info v;
	ulp_side_map map;
} ulp_side_pick;
int ulp_side_find(ulp_store *st, const char *path, int64_t created_ns,
                  const ulp_tensor_map *cur_map, ulp_ref_read_fn cur_read,
                  void *cur_opaque, ulp_side_pick *out);
/* The matches of a known side version (one a version was coded given
 * before): 0 with out->v.id == 0 when it is not live or matches nothing,
 * or -errno.  mu not held. */
int ulp_side_load(ulp_store *st, uint64_t side, const ulp_tensor_map *cur_map,
                  ulp_ref_read_fn cur_read, void *cur_opaque,
                  ulp_side_pick *out);
void ulp_side_pick_free(ulp_side_pick *p);

/* ulp_ref_read_fn over a memory buffer (the mmapped staging file). */
typedef struct ulp_side_mem {
	const uint8_t *p;
	uint64_t size;
} ulp_side_mem;
int ulp_side_mem_read(void *opaque, uint64_t off, void *buf, size_t len);

#endif /* ULP_STORE_SIDE_H */
