/*
 * setattr.c - chmod, chown, truncate and utimens.
 */
#include "store/store_core.h"
#include "store/inode.h"
#include "store/staging.h"
#include "store/writers.h"

#include "store/ns_internal.h"
#include "store/overlay.h"

/* Truncate or extend a regular file: stage it (a copy-up on demand unless
 * the new size is 0), then ftruncate the staging file. */
static int set_size(ulp_store *st, uint64_t ino, uint64_t size)
{
	ulp_inode *in;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_inode_get(st, ino, &in);
	if (rc == 0 && !in->staged && in->size == size) {
		/* Committed and already that size: only the times change. */
		ulp_inode_put(st, in);
		pthread_mutex_unlock(&st->mu);
		return 1;
	}
	if (rc == 0)
		in->nwriters++;
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	rc = ulp_stage_acquire(st, in, size == 0);
	if (rc == 0) {
		ulp_data_wrlock(in);
		if (ftruncate(in->fd, (off_t)size) < 0)
			rc = -errno;
		else if (in->ov)
			ulp_overlay_truncate(in->ov, size);
		pthread_mutex_lock(&st->mu);
		if (rc == 0) {
			ulp_stage_set_size(st, in, size);
			in->mtime = in->ctime = ulp_now_ns();
			in->times_dirty = 1;
		} else {
			in->err = rc;
			in->err_seq++;
		}
		pthread_mutex_unlock(&st->mu);
		ulp_data_unlock(in);
	}
	pthread_mutex_lock(&st->mu);
	ulp_stage_writer_done(st, in);
	ulp_inode_put(st, in);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

int ulp_ns_setattr(ulp_store *st, uint64_t ino, const ulp_attr *attr,
                   unsigned mask, ulp_attr *out)
{
	ulp_cat_inode row;
	int rc;

	if (mask & ULP_SET_SIZE) {
		pthread_mutex_lock(&st->mu);
		rc = ulp_cat_inode_get(st->cat, ino, &row);
		pthread_mutex_unlock(&st->mu);
		if (rc < 0)
			return rc;
		if (row.kind == ULP_KIND_DIR)
			return -EISDIR;
		if (row.kind != ULP_KIND_FILE)
			return -EINVAL;
		if ((int64_t)attr->size < 0)
			return -EINVAL;
		rc = set_size(st, ino, attr->size);
		if (rc < 0)
			return rc;
		/* Unchanged size of a committed file: POSIX updates the
		 * times only when the size changes. */
	}
	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc < 0)
		goto out;
	ulp_inode *in = ulp_inode_find(st, ino);
	if (in && in->times_dirty) {
		row.mtime = in->mtime;
		row.ctime = in->ctime;
	}
	if (in && in->staged)
		row.size = in->size;
	int64_t now = ulp_now_ns();
	unsigned other = mask & ~ULP_SET_SIZE;
	if (mask & ULP_SET_MODE)
		row.mode = (row.mode & S_IFMT) | ((uint32_t)attr->mode & 07777);
	if (mask & ULP_SET_UID)
		row.uid = (uint32_t)attr->uid;
	if (mask & ULP_SET_GID)
		row.gid = (uint32_t)attr->gid;
	if (mask & ULP_SET_ATIME_NOW)
		row.atime = now;
	else if (mask & ULP_SET_ATIME)
		row.atime = ts_ns(&attr->atime);
	if (mask & ULP_SET_MTIME_NOW)
		row.mtime = now;
	else if (mask & ULP_SET_MTIME)
		row.mtime = ts_ns(&attr->mtime);
	uint32_t kill = 0;
	if (row.kind != ULP_KIND_DIR) {
		if (mask & ULP_SET_KILL_SUID)
			kill |= S_ISUID;
		if ((mask & ULP_SET_KILL_SGID) ||
		    ((mask & ULP_SET_KILL_SGIDX) && (row.mode & S_IXGRP)))
			kill |= S_ISGID;
	}
	kill &= row.mode;
	row.mode &= ~kill;
	other &= ~ULP_SET_KILLS;
	if (kill)
		other |= ULP_SET_MODE;
	if (other) {
		row.ctime = now;
		rc = ulp_cat_begin(st->cat);
		if (rc == 0)
			rc = ulp_cat_inode_update(st->cat, &row);
		if (rc == 0 && (other & ULP_SET_MODE))
			rc = ulp_acl_chmod(st, ino, row.mode);
		if (rc == 0)
			rc = ulp_cat_commit(st->cat);
		else
			ulp_cat_rollback(st->cat);
		if (rc == 0 && in && in->times_dirty) {
			in->mtime = row.mtime;
			in->ctime = row.ctime;
		}
	}
	if (rc == 0)
		ulp_ns_attr_of(st, &row, out);
out:
	pthread_mutex_unlock(&st->mu);
	return rc;
}
