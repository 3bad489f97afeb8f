/*
 * writers.c - a file's writers and the encode queue: an opener or a
 * truncate acquires the staged content (copying a committed version up,
 * or committing a closed content first when it is about to be replaced),
 * and the last writer to leave queues the file's encode.  Above both
 * staging.c and the encoder, which it joins.
 */
#include "store/writers.h"
#include "store/staging.h"
#include "store/queue.h"
#include "store/encoder.h"
#include "store/reserve.h"

#include "store/overlay.h"

/* Commit a closed file's staged content now, before it is replaced (mu
 * held, in->busy claimed by the caller; mu is dropped while encoding).
 * Without this, a file rewritten (cp over it, rename over it) within its
 * settle delay would lose its previous content from the history: every
 * closed content is a version.  An encode already under way is waited
 * for rather than cancelled; an empty file has nothing to keep.  0 or the
 * error that kept the content from being committed (it stays staged). */
static int preserve_closed(ulp_store *st, ulp_inode *in, int opener)
{
	int rc = 0;

	while (in->qstate == ULP_Q_ENCODING)
		pthread_cond_wait(&st->done_cv, &st->mu);
	if (!in->staged || in->unlinked || in->size == 0 || in->bk_kept)
		return 0;
	/* Queued: every writer has gone.  Not queued, with a truncating
	 * opener the only writer: the last one's release came after that
	 * open counted itself (acquire waited for it), and so did not
	 * queue its content. */
	if (in->qstate != ULP_Q_QUEUED &&
	    !(opener && in->qstate == ULP_Q_NONE && in->nwriters == 1))
		return 0;
	ulp_queue_cancel(st, in);
	pthread_mutex_unlock(&st->mu);
	rc = -EAGAIN;
	for (int tries = 0; rc == -EAGAIN && tries < 100; tries++)
		rc = ulp_encode_inode(st, st->opts.encoder_threads, in);
	pthread_mutex_lock(&st->mu);
	if (rc == 1)
		rc = 0; /* unlinked meanwhile: nothing left to keep */
	if (rc < 0 && in->staged && !in->nwriters)
		ulp_queue_add(st, in, 0); /* kept staged: retried as usual */
	return rc;
}

/* The writers of in, but self of them (a truncating opener counts
 * itself), have all called close(2): each flushed with no write since.
 * The kernel sends their RELEASE after close returns, so it may come after
 * this open or rename; their content is closed all the same and must
 * become a version.  Wait for those releases (mu held), a little: a
 * descriptor dup'd elsewhere that flushed and goes on writing never
 * releases. */
static void wait_closing_writers(ulp_store *st, ulp_inode *in, unsigned self)
{
	ULP_MU_HELD(st);
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 2;
	while (in->nwriters > self && in->nclosing == in->nwriters - self)
		if (pthread_cond_timedwait(&st->done_cv, &st->mu, &dl) ==
		    ETIMEDOUT)
			break;
}

int ulp_stage_preserve(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	while (in->busy)
		pthread_cond_wait(&st->done_cv, &st->mu);
	in->busy = 1;
	wait_closing_writers(st, in, 0);
	int rc = preserve_closed(st, in, 0);
	in->busy = 0;
	pthread_cond_broadcast(&st->done_cv);
	return rc;
}

int ulp_stage_acquire(ulp_store *st, ulp_inode *in, int trunc)
{
	ulp_cat_inode row;
	ulp_overlay *ov = NULL;
	int rc = 0, fd = -1;
	uint64_t size = 0;

	pthread_mutex_lock(&st->mu);
	while (in->busy)
		pthread_cond_wait(&st->done_cv, &st->mu);
	in->busy = 1;
	if (trunc)
		wait_closing_writers(st, in, 1);
	if (trunc && (rc = preserve_closed(st, in, 1)) < 0) {
		in->busy = 0;
		pthread_cond_broadcast(&st->done_cv);
		pthread_mutex_unlock(&st->mu);
		return rc;
	}
	ulp_queue_cancel(st, in);
	int staged = in->staged;
	uint64_t version = in->version;
	pthread_mutex_unlock(&st->mu);

	ulp_data_wrlock(in);
	if (staged) {
		/* A committed file kept as the kernel's backing file is
		 * this writer's staging file (backing.c). */
		pthread_mutex_lock(&st->mu);
		rc = ulp_stage_reclaim(st, in);
		pthread_mutex_unlock(&st->mu);
		if (rc == 0 && trunc && ftruncate(in->fd, 0) < 0)
			rc = -errno;
		if (trunc && rc == 0 && in->ov)
			ulp_overlay_truncate(in->ov, 0);
		pthread_mutex_lock(&st->mu);
		if (trunc && rc == 0) {
			ulp_stage_set_size(st, in, 0);
			in->mtime = in->ctime = ulp_now_ns();
			in->times_dirty = 1;
		}
		goto done;
	}
	fd = ulp_stage_create(st, in->ino);
	if (fd < 0)
		rc = fd;
	else if (!trunc && version)
		rc = ulp_stage_copy_up(st, version, fd, &size, &ov);
	pthread_mutex_lock(&st->mu);
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, in->ino, &row);
	if (rc == 0) {
		int64_t mt = in->times_dirty ? in->mtime : row.mtime;
		int64_t ct = in->times_dirty ? in->ctime : row.ctime;
		if (trunc && row.size)
			mt = ct = ulp_now_ns();
		int tried = 0;
		do {
			rc = ulp_cat_inode_content(st->cat, in->ino, version,
			                           ov ? ULP_STAGED_OVERLAY
			                              : ULP_STAGED_FULL,
			                           size, mt, ct);
		} while (trunc && ulp_ns_retry_nospc(st, rc, &tried));
		if (rc == 0) {
			in->fd = fd;
			in->ov = ov;
			ov = NULL;
			in->staged = 1;
			in->mtime = mt;
			in->ctime = ct;
			in->times_dirty = 1;
			ulp_stage_set_size(st, in, size);
		}
	}
	ulp_overlay_free(ov); /* not taken: failed */
	if (rc < 0 && fd >= 0) {
		char name[32];
		close(fd);
		ulp_stage_name(in->ino, name);
		unlinkat(st->stg_fd, name, 0);
	}
done:
	in->busy = 0;
	pthread_cond_broadcast(&st->done_cv);
	pthread_mutex_unlock(&st->mu);
	ulp_data_unlock(in);
	return rc;
}

void ulp_stage_writer_done(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	if (ulp_stage_writer_left(st, in))
		ulp_queue_add(st, in, (int64_t)st->opts.settle_ms * 1000000);
}
