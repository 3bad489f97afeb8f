/*
 * overlay.h - copy-up on demand: which bytes of a staged file are in its
 * staging file, and which still come from the committed version it was
 * opened from (src/store only).
 *
 * Opening a committed file for writing without O_TRUNC does not decode
 * it: the staging file starts sparse at the file's size, and an overlay
 * records the ranges since written there (extents).  Bytes outside the
 * extents read from the base version below the limit (the smallest size
 * the file was cut to since) and as zeros above it.  The encoder fills
 * the gaps from the base before it encodes (ulp_stage_fill).
 *
 * Crash safety: the catalog row says staged = ULP_STAGED_OVERLAY, and the
 * overlay is saved beside the staging file (staging/<ino>.cu, replaced
 * atomically) at the last close and at fsync.  Recovery without a saved
 * overlay reads everything from the base: the committed version stands.
 *
 * An overlay has a mutex of its own, a leaf: nothing is taken while it is
 * held.  Writers add extents under the inode's data lock held shared;
 * truncation holds it exclusively.
 */
#ifndef ULP_OVERLAY_H
#define ULP_OVERLAY_H

#include <stdint.h>

/* inodes.staged: 1 the staging file holds the whole content; 2 it holds
 * what the overlay says, the rest is the committed version's. */
#define ULP_STAGED_FULL 1
#define ULP_STAGED_OVERLAY 2

typedef struct ulp_overlay ulp_overlay;

/* Where the bytes at an offset come from. */
enum { ULP_OV_STAGED = 0, ULP_OV_BASE = 1, ULP_OV_ZERO = 2 };

/* An overlay over version base whose first limit bytes show through;
 * NULL when out of memory. */
ulp_overlay *ulp_overlay_new(uint64_t base, uint64_t limit);
void ulp_overlay_free(ulp_overlay *ov);
uint64_t ulp_overlay_base(ulp_overlay *ov);
/* Staging bytes [lo, hi) hold the content now: 0 or -ENOMEM. */
int ulp_overlay_add(ulp_overlay *ov, uint64_t lo, uint64_t hi);
/* The file was cut to size (bytes past it read as zeros if it grows). */
void ulp_overlay_truncate(ulp_overlay *ov, uint64_t size);
/* The source of the bytes at off (ULP_OV_*) and in *len how many of the
 * next max bytes share it. */
int ulp_overlay_lookup(ulp_overlay *ov, uint64_t off, uint64_t max,
                       uint64_t *len);
/* Whether [0, size) is all in staging (nothing left to fill). */
int ulp_overlay_complete(ulp_overlay *ov, uint64_t size);
/* Whether [0, size) is all the base's (nothing written, nothing cut):
 * with size the base's size, the content is the base's. */
int ulp_overlay_pristine(ulp_overlay *ov, uint64_t size);

/* The base shows through up to to instead of from, the file's size
 * (which grows to to): a copy by reference continued.  0, or -EINVAL
 * when the limit is not from. */
int ulp_overlay_extend(ulp_overlay *ov, uint64_t from, uint64_t to);

/* Save to staging/<ino>.cu under the directory stg_fd (a temporary,
 * renamed over it; with durable, fsynced with the directory): 0 or
 * -errno.  Nothing is written when nothing changed since the last save. */
int ulp_overlay_save(ulp_overlay *ov, int stg_fd, uint64_t ino, int durable);
/* Load a saved overlay: 0, -ENOENT (none saved), -EINVAL (damaged), or
 * -errno. */
int ulp_overlay_load(int stg_fd, uint64_t ino, ulp_overlay **out);
void ulp_overlay_unlink(int stg_fd, uint64_t ino);
/* "<ino>.cu"; ULP_OVERLAY_SUFFIX is what recovery recognises. */
#define ULP_OVERLAY_SUFFIX ".cu"
void ulp_overlay_name(uint64_t ino, char buf[40]);

#endif /* ULP_OVERLAY_H */
