/*
 * writers.h - a file's writers and the encode queue (writers.c): the
 * encoder layer, above staging.
 */
#ifndef ULP_STORE_WRITERS_H
#define ULP_STORE_WRITERS_H

#include "store/store_core.h"

/* Bring an inode's content to staging for a change (open for writing,
 * truncate): cancel a queued or running encode, copy a committed version
 * up (unless trunc, which empties the file).  The caller holds a ref and
 * has counted itself in in->nwriters (so that no encode can start);
 * called without st->mu. */
int ulp_stage_acquire(ulp_store *st, ulp_inode *in, int trunc);
/* A file about to be replaced by a rename (mu held, a ref held): if its
 * staged content is closed and not yet committed, commit it now, so that
 * it stays in the history.  Drops mu while encoding. */
int ulp_stage_preserve(ulp_store *st, ulp_inode *in);
/* A writer (handle or truncate) is done with in (mu held): the last one
 * persists size and times and queues the file. */
void ulp_stage_writer_done(ulp_store *st, ulp_inode *in);

#endif /* ULP_STORE_WRITERS_H */
