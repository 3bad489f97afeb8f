/*
 * staging.c - plain copies of files being written: creating them, copying
 * a committed version up (on demand: overlay.h), truncation, and the
 * accounting behind the staging limit.
 */
#include "store/staging.h"
#include "store/queue.h"
#include "store/encoder.h"
#include "store/versions.h"
#include "store/reserve.h"

#include "store/overlay.h"

#include <sys/stat.h>

/* Under st->mu. */
struct ulp_staging {
	uint64_t staged_bytes;  /* allocated bytes of staged files */
	uint64_t pending_bytes; /* ... of those that are queued or encoding */
	uint64_t failed_bytes;  /* ... of those whose last encode failed */
	pthread_cond_t space_cv;
	unsigned space_waiters;
	uint64_t last_closed_size;
};

int ulp_staging_new(ulp_staging **out)
{
	ulp_staging *s = calloc(1, sizeof *s);
	int e = s ? pthread_cond_init(&s->space_cv, NULL) : ENOMEM;

	if (e) {
		free(s);
		s = NULL;
	}
	*out = s;
	return -e;
}

void ulp_staging_free(ulp_staging *s)
{
	if (!s)
		return;
	pthread_cond_destroy(&s->space_cv);
	free(s);
}

uint64_t ulp_stage_bytes(ulp_store *st)
{
	ULP_MU_HELD(st);
	return st->staging->staged_bytes;
}

uint64_t ulp_stage_last_closed(ulp_store *st)
{
	ULP_MU_HELD(st);
	return st->staging->last_closed_size;
}

static void count(uint64_t *total, const ulp_inode *in, int sign)
{
	if (sign > 0)
		*total += in->acct;
	else
		*total -= in->acct;
}

void ulp_stage_count_queued(ulp_store *st, const ulp_inode *in, int sign)
{
	ULP_MU_HELD(st);
	count(&st->staging->pending_bytes, in, sign);
}

void ulp_stage_count_failed(ulp_store *st, const ulp_inode *in, int sign)
{
	ULP_MU_HELD(st);
	count(&st->staging->failed_bytes, in, sign);
}

void ulp_stage_space_changed(ulp_store *st)
{
	ULP_MU_HELD(st);
	if (st->staging->space_waiters)
		pthread_cond_broadcast(&st->staging->space_cv);
}

int ulp_stage_create(ulp_store *st, uint64_t ino)
{
	char name[32];
	int fd;

	ulp_stage_name(ino, name);
	fd = openat(st->stg_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
	            0600);
	return fd < 0 ? -errno : fd;
}

void ulp_stage_account(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	struct stat sb;
	/* Disk space, not the apparent size: a sparse file's holes take
	 * none.  Unknown (no fd): the size, as an upper bound. */
	uint64_t bytes = in->fd >= 0 && fstat(in->fd, &sb) == 0
	                         ? (uint64_t)sb.st_blocks * 512
	                         : in->size;
	st->staging->staged_bytes += bytes - in->acct;
	if (in->qstate != ULP_Q_NONE)
		st->staging->pending_bytes += bytes - in->acct;
	in->acct = bytes;
	ulp_stage_space_changed(st);
}

void ulp_stage_set_size(ulp_store *st, ulp_inode *in, uint64_t size)
{
	ULP_MU_HELD(st);
	in->size = size;
	ulp_stage_account(st, in);
}

void ulp_stage_drop(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	char name[40];

	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
	ulp_stage_kept_name(in, name);
	unlinkat(st->stg_fd, name, 0);
	in->bk_kept = ULP_BK_NONE;
	if (in->ov) {
		ulp_overlay_unlink(st->stg_fd, in->ino);
		ulp_overlay_free(in->ov);
		in->ov = NULL;
	}
	st->staging->staged_bytes -= in->acct;
	if (in->qstate != ULP_Q_NONE)
		st->staging->pending_bytes -= in->acct;
	in->acct = 0;
	in->staged = 0;
	ulp_stage_space_changed(st);
}

void ulp_stage_wait_space(ulp_store *st, uint64_t grow)
{
	ULP_MU_HELD(st);
	/* Only closed files waiting for an encoder can free space: with
	 * none (or only ones whose encoding keeps failing), waiting would
	 * never end, and the backing filesystem's own ENOSPC decides. */
	while (!ulp_queue_stopping(st) &&
	       st->staging->staged_bytes + grow > st->opts.staging_limit &&
	       st->staging->pending_bytes > st->staging->failed_bytes) {
		st->staging->space_waiters++;
		pthread_cond_wait(&st->staging->space_cv, &st->mu);
		st->staging->space_waiters--;
	}
}

/* Copy-up on demand: the staging file starts sparse at the version's
 * size and an overlay says that all of it is still the version's; reads
 * and the encoder take it from there (copyup.c).  O(1) whatever the
 * size: nothing is decoded here. */
static int copy_up(ulp_store *st, uint64_t vid, int fd, uint64_t *size,
                   ulp_overlay **ov)
{
	ulp_version_info v;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_version_get_locked(st, vid, &v);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	if (ftruncate(fd, (off_t)v.size) < 0)
		return -errno;
	*ov = ulp_overlay_new(vid, v.size);
	if (!*ov)
		return -ENOMEM;
	*size = v.size;
	return 0;
}

int ulp_stage_kind(const ulp_inode *in)
{
	return in->ov ? ULP_STAGED_OVERLAY : ULP_STAGED_FULL;
}

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
	clock_gettime(CLOCK_REALTIME, &dl);
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

	pthread_rwlock_wrlock(&in->data);
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
		rc = copy_up(st, version, fd, &size, &ov);
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
	pthread_rwlock_unlock(&in->data);
	return rc;
}

void ulp_stage_writer_done(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	if (--in->nwriters > 0 || !in->staged || in->unlinked)
		return;
	st->staging->last_closed_size = in->size;
	/* Persist size and times: getattr of an idle row and a reopen
	 * after a crash see them (recovery also has the file's own). */
	ulp_cat_inode row;
	if (in->ov && ulp_overlay_save(in->ov, st->stg_fd, in->ino, 0) < 0)
		fprintf(stderr,
		        "ulpfs: inode %llu: saving its copy-up map failed: "
		        "a crash before its commit keeps the previous "
		        "version\n",
		        (unsigned long long)in->ino);
	if (ulp_cat_inode_get(st->cat, in->ino, &row) == 0)
		(void)ulp_cat_inode_content(
			st->cat, in->ino, row.version, ulp_stage_kind(in),
			in->size, in->times_dirty ? in->mtime : row.mtime,
			in->times_dirty ? in->ctime : row.ctime);
	ulp_queue_add(st, in, (int64_t)st->opts.settle_ms * 1000000);
}
