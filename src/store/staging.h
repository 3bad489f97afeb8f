/*
 * staging.h - staged files: the staging directory, its accounting and copy-up
 * (staging.c, copyup.c, backing.c).
 */
#ifndef ULP_STORE_STAGING_H
#define ULP_STORE_STAGING_H

#include "store/store_core.h"

/* ------------------------------------------------------------ staging
 * (staging.c) */

/* The accounting behind the staging limit, which the store holds
 * (st->staging); all with st->mu held but new and free. */
int ulp_staging_new(ulp_staging **out);
void ulp_staging_free(ulp_staging *s);
/* Allocated bytes of staged files. */
uint64_t ulp_stage_bytes(ulp_store *st);
/* The size of the last file closed: what the next writer is expected to
 * write (passthrough admission, file.c). */
uint64_t ulp_stage_last_closed(ulp_store *st);
/* in (staged) enters (sign 1) or leaves (-1) the encode queue, or its
 * last encode failed (ulp_stage_count_failed): its bytes are counted as
 * pending or failed, which ulp_stage_wait_space weighs. */
void ulp_stage_count_queued(ulp_store *st, const ulp_inode *in, int sign);
void ulp_stage_count_failed(ulp_store *st, const ulp_inode *in, int sign);
/* Staged space may have been freed or may be freed by waiting no more:
 * wake the writers waiting in ulp_stage_wait_space. */
void ulp_stage_space_changed(ulp_store *st);

/* Create the staging file of a new inode (ulp_ns_create, in its
 * transaction): returns an fd or -errno. */
int ulp_stage_create(ulp_store *st, uint64_t ino);
/* Wait (st->mu held) until growing staged data by grow bytes fits the
 * staging limit, or until waiting cannot help. */
void ulp_stage_wait_space(ulp_store *st, uint64_t grow);
/* A writer (handle or truncate) is done with in (mu held): the last one
 * persists size and times and returns 1, for its caller to queue the
 * file (ulp_stage_writer_done); else 0. */
int ulp_stage_writer_left(ulp_store *st, ulp_inode *in);
/* Copy committed version vid up into the new staging file fd, on demand
 * (overlay.h): *size its size, *ov the overlay.  0 or -errno. */
int ulp_stage_copy_up(ulp_store *st, uint64_t vid, int fd, uint64_t *size,
                      struct ulp_overlay **ov);
/* The encoders stop (mu held): writers waiting for staging space no
 * longer wait, as no encode will free any. */
void ulp_stage_stop_waiting(ulp_store *st);
/* Set the logical size of a staged inode and its accounting (mu held). */
void ulp_stage_set_size(ulp_store *st, ulp_inode *in, uint64_t size);
/* Count the disk space the staging file of in takes now (its allocated
 * blocks) against the staging limit (mu held). */
void ulp_stage_account(ulp_store *st, ulp_inode *in);
/* Take size and mtime from the staging file, which the kernel writes
 * directly for passthrough handles (mu held; backing.c). */
void ulp_stage_sync_backing(ulp_store *st, ulp_inode *in);
/* Before the first passthrough handle: what the staging file holds now is
 * not a write, only later changes of its mtime are (mu held). */
void ulp_stage_mark_backing(ulp_inode *in);
/* Read a staged file (data lock held shared): from its staging file, and
 * for a copy-up on demand from the version below it too (copyup.c).  ra
 * (may be NULL): read-ahead of that version.  Never with st->mu held. */
ssize_t ulp_stage_read(ulp_store *st, ulp_inode *in, void *buf, size_t size,
                       uint64_t off, ulp_readahead *ra);
/* Before encoding a copy-up on demand (ov, its fd and size taken under
 * st->mu): copy what still comes from the version into the staging file,
 * so that it holds the whole content, except the nskip ranges skip
 * (sorted), which the encoder reads from the version itself.  0, 1
 * (in->gen moved on: a writer came) or -errno.  No lock held; readers
 * may run meanwhile. */
int ulp_stage_fill(ulp_store *st, ulp_inode *in, struct ulp_overlay *ov, int fd,
                   uint64_t size, uint64_t gen, const uint64_t (*skip)[2],
                   size_t nskip);
/* FALLOC_FL_ZERO_RANGE on a staging file that is to be size bytes long
 * (KEEP_SIZE unless the range ends past it), by punching a hole where
 * the filesystem has no ZERO_RANGE: 0 or -errno. */
int ulp_stage_zero(int fd, off_t off, off_t len, uint64_t size);
/* SEEK_DATA / SEEK_HOLE in a staged file from off < size (data lock held
 * shared): in the staging file's holes, and for a copy-up on demand the
 * version's bytes are data and the zeros past its limit a hole. */
off_t ulp_stage_seek(ulp_inode *in, uint64_t off, int whence);
/* The holes of the first size bytes of fd (of 64 KiB or more), for the
 * encoder to skip: *n pairs [lo, hi) in a malloc()ed array.  0, -ENOMEM. */
int ulp_stage_holes(int fd, uint64_t size, uint64_t (**out)[2], size_t *n);
/* The ranges of a copy-up on demand of size bytes still unchanged from
 * its base version (which the caller read under st->mu), before
 * ulp_stage_fill: the new version is coded against the base with those
 * chunks identical.  *n 0 (nothing malloc()ed) when it should be a
 * keyframe instead: the chain would grow past keyframe_every, or most of
 * it was written.  plan (NULL: none): only the whole chunks of plan in
 * each range, the chunks the encoder cuts the file into.  0 or
 * -ENOMEM. */
int ulp_stage_unchanged(ulp_store *st, struct ulp_overlay *ov, uint64_t size,
                        const ulp_version_info *base, const ulp_plan *plan,
                        uint64_t (**out)[2], size_t *n);
/* Whether the parse of a copy-up on demand of size bytes gives map, its
 * base's (of base_size bytes), because what was written (or cut and
 * grown) is none of what the parser reads: for safetensors, nothing of
 * the header, the file not shorter; for a torch zip, only bytes inside
 * tensors, the size the same. */
int ulp_stage_same_map(struct ulp_overlay *ov, uint64_t size,
                       uint64_t base_size, const ulp_tensor_map *map);
/* The inodes.staged value of a staged inode (ULP_STAGED_*). */
int ulp_stage_kind(const ulp_inode *in);
/* Drop an inode's staging fd and file and its accounting (mu held). */
void ulp_stage_drop(ulp_store *st, ulp_inode *in);
/* At a commit (data and mu held): 1 if the staging file stays, as the
 * kernel's backing file of open files (then in->bk_kept), else 0 (drop
 * it). */
int ulp_stage_keep_backing(ulp_store *st, ulp_inode *in);
/* A writer of a kept file (data and mu held): the staging file becomes
 * staging/<ino> again and the catalog says staged.  0 or -errno. */
int ulp_stage_reclaim(ulp_store *st, ulp_inode *in);
/* An unnamed file in staging/ (O_TMPFILE): fd or -errno. */
int ulp_stage_tmpfd(ulp_store *st);
/* The name of in's staging file in staging/ (kept or not). */
void ulp_stage_kept_name(const ulp_inode *in, char buf[40]);

#endif /* ULP_STORE_STAGING_H */
