/*
 * staging.c - plain copies of files being written: creating them, copying
 * a committed version up (on demand: overlay.h), truncation, and the
 * accounting behind the staging limit.
 */
#include "store/staging.h"
#include "store/versions.h"

#include "store/overlay.h"

#include <sys/stat.h>

/* Under st->mu. */
struct ulp_staging {
	uint64_t staged_bytes;  /* allocated bytes of staged files */
	uint64_t pending_bytes; /* ... of those that are queued or encoding */
	uint64_t failed_bytes;  /* ... of those whose last encode failed */
	pthread_cond_t space_cv;
	unsigned space_waiters;
	int stopping; /* the encoders stop: waiting for space cannot help */
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

void ulp_stage_stop_waiting(ulp_store *st)
{
	ULP_MU_HELD(st);
	st->staging->stopping = 1;
	ulp_stage_space_changed(st);
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
	while (!st->staging->stopping &&
	       st->staging->staged_bytes + grow > st->opts.staging_limit &&
	       st->staging->pending_bytes > st->staging->failed_bytes) {
		st->staging->space_waiters++;
		pthread_cond_wait(&st->staging->space_cv, &st->mu);
		st->staging->space_waiters--;
	}
}

/* The staging file starts sparse at the version's size and an overlay
 * says that all of it is still the version's; reads and the encoder take
 * it from there (copyup.c).  O(1) whatever the size: nothing is decoded
 * here. */
int ulp_stage_copy_up(ulp_store *st, uint64_t vid, int fd, uint64_t *size,
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

int ulp_stage_writer_left(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	if (--in->nwriters > 0 || !in->staged || in->unlinked)
		return 0;
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
	return 1;
}
