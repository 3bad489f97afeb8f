/*
 * inode.h - the in-memory inode table (inode.c).
 */
#ifndef ULP_STORE_INODE_H
#define ULP_STORE_INODE_H

#include "store/store_core.h"

/* ------------------------------------------------------------ inodes
 * (inode.c; all with st->mu held) */

/* Find or load the in-memory inode of a regular file and take a ref.
 * -ENOENT, -EISDIR, -EINVAL (not a regular file). */
int ulp_inode_get(ulp_store *st, uint64_t ino, ulp_inode **out);
ulp_inode *ulp_inode_find(ulp_store *st, uint64_t ino);
/* Drop a ref; the last one frees the inode, or destroys the file if it
 * was unlinked (staging, row and current version). */
void ulp_inode_put(ulp_store *st, ulp_inode *in);
/* The table of in-memory inodes (open: st->itab); 0 or -ENOMEM. */
int ulp_inode_table_new(ulp_store *st);
/* Drop every in-memory inode and the table (close). */
void ulp_inode_table_free(ulp_store *st);
/* Destroy the catalog row of a file nothing holds (unlink, rename over,
 * orphan recovery), inside the caller's transaction; the caller removes
 * any staging file after the commit.  The current version is released
 * unless its path still names an entry (then it is history of it). */
int ulp_inode_destroy_row(ulp_store *st, uint64_t ino, ulp_obj_list *dead);

#endif /* ULP_STORE_INODE_H */
