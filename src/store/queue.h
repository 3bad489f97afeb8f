/*
 * queue.h - the encode queue and its threads (queue.c).
 */
#ifndef ULP_STORE_QUEUE_H
#define ULP_STORE_QUEUE_H

#include "store/store_core.h"

/* The queue, which the store holds (st->queue) from open to close; its
 * threads run from ulp_encoder_start to ulp_encoder_stop. */
/* The queue's state of in (in->q), allocated with the in-memory inode
 * (inode.c) and freed with it: 0 or -ENOMEM. */
int ulp_qentry_new(ulp_inode *in);
void ulp_qentry_free(ulp_inode *in);
int ulp_queue_new(ulp_queue **out);
void ulp_queue_free(ulp_queue *q);
/* Files queued or being encoded (mu held). */
unsigned ulp_queue_count(ulp_store *st);

int ulp_encoder_start(ulp_store *st);
/* Drain the queue and join the threads (close). */
void ulp_encoder_stop(ulp_store *st);
/* Queue a staged inode with no writer (mu held); takes a ref. */
void ulp_queue_add(ulp_store *st, ulp_inode *in, int64_t delay_ns);
/* Take a queued inode off the queue (mu held) and drop the queue's ref:
 * the caller must hold a ref of its own. */
void ulp_queue_remove(ulp_store *st, ulp_inode *in);
/* Cancel a queued or running encode of in: bump gen, unqueue, wait for a
 * running encoder to let go (mu held; may wait on done_cv). */
void ulp_queue_cancel(ulp_store *st, ulp_inode *in);
/* The same without waiting: a file being unlinked (the encoder notices
 * the new gen and discards its work). */
void ulp_queue_cancel_nowait(ulp_store *st, ulp_inode *in);
/* Wait until every closed file is committed or failed (ulp_store_sync):
 * 0 or the error of a failed one. */
int ulp_queue_sync(ulp_store *st);
/* Make every queued entry due now (mu held). */
void ulp_queue_expedite(ulp_store *st);

#endif /* ULP_STORE_QUEUE_H */
