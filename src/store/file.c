/*
 * file.c - open file handles: reads from staging or through the decoder,
 * writes to staging at native speed, deferred errors, release.
 */
#include "store/store_core.h"
#include "store/inode.h"
#include "store/staging.h"
#include "store/writers.h"
#include "store/reader.h"
#include "store/versions.h"
#include "store/plain.h"

#include "store/overlay.h"

#include <sys/stat.h>

struct ulp_file {
	ulp_store *st;
	ulp_inode *in;
	int writable; /* counted in in->nwriters */
	int append;
	int closing;         /* flushed, no write since (in->nclosing) */
	int pt;              /* written by the kernel (counted in in->npt) */
	uint64_t pt_reserve; /* admitted: expected to write that */
	struct ulp_file *pt_next; /* in st->pt_admitted */
	uint32_t err_seen;        /* in->err_seq already reported */
	ulp_readahead *ra;        /* reads of its committed version */
};

/* The sizes of the admitted passthrough writers' staging files, which the
 * daemon never sees grow, into the staging accounting (mu held): before a
 * write or an admission waits for, or checks, the limit. */
static void pt_sync(ulp_store *st)
{
	for (ulp_file *a = st->pt_admitted; a; a = a->pt_next)
		if (a->pt)
			ulp_stage_sync_backing(st, a->in);
}

/* A write through f after a flush: it was a close(2) of one descriptor
 * of several, not the last (mu held). */
static void file_active(ulp_file *f)
{
	ULP_MU_HELD(f->st);
	if (f->closing) {
		f->closing = 0;
		f->in->nclosing--;
	}
}

int ulp_file_open(ulp_store *st, uint64_t ino, int flags, ulp_file **out,
                  int *keep_cache)
{
	int acc = flags & O_ACCMODE, trunc = (flags & O_TRUNC) != 0;
	int writer = acc != O_RDONLY || trunc;
	ulp_file *f = calloc(1, sizeof *f);
	ulp_inode *in;
	int rc;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&st->mu);
	rc = ulp_inode_get(st, ino, &in);
	if (rc == 0) {
		if (writer)
			in->nwriters++;
		f->err_seen = in->err_seq;
	}
	pthread_mutex_unlock(&st->mu);
	if (rc < 0) {
		free(f);
		return rc;
	}
	f->st = st;
	f->in = in;
	f->writable = acc != O_RDONLY;
	/* Only a reader of committed content decodes (a writer stages). */
	if (!writer)
		f->ra = ulp_readahead_new(st);
	f->append = (flags & O_APPEND) != 0;
	if (writer)
		rc = ulp_stage_acquire(st, in, trunc);
	pthread_mutex_lock(&st->mu);
	if (writer && (rc < 0 || !f->writable))
		ulp_stage_writer_done(st, in); /* O_RDONLY | O_TRUNC */
	if (rc < 0) {
		ulp_inode_put(st, in);
		ulp_readahead_free(f->ra);
		free(f);
	} else {
		if (keep_cache)
			*keep_cache = !in->staged;
		*out = f;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

ssize_t ulp_file_read(ulp_file *f, void *buf, size_t size, off_t off)
{
	ulp_store *st = f->st;
	ulp_inode *in = f->in;
	ssize_t n = 0;

	if (off < 0)
		return -EINVAL;
	/* staged, fd and version change only under the data lock held
	 * exclusively; size is atomic: no st->mu on the read path. */
	ulp_data_rdlock(in);
	int staged = in->staged;
	uint64_t version = in->version;
	if (staged) {
		n = ulp_stage_read(st, in, buf, size, (uint64_t)off, f->ra);
	} else if (version) {
		n = ulp_read_version(st, version, buf, size, (uint64_t)off,
		                     f->ra);
	}
	ulp_data_unlock(in);
	return n;
}

ssize_t ulp_file_read_iov(ulp_file *f, size_t size, off_t off, void *scratch,
                          ulp_read_sink fn, void *opaque)
{
	ulp_store *st = f->st;
	ulp_inode *in = f->in;
	ulp_read_view v;
	ssize_t n = 0;

	if (off < 0)
		return -EINVAL;
	ulp_data_rdlock(in);
	if (!in->staged && in->version) {
		n = ulp_read_version_view(st, in->version, size, (uint64_t)off,
		                          f->ra, scratch, &v);
	} else {
		if (in->staged)
			n = ulp_stage_read(st, in, scratch, size, (uint64_t)off,
			                   f->ra);
		ulp_read_view_buf(&v, scratch, n);
	}
	ulp_data_unlock(in);
	/* Neither f nor in from here: the reply lets the kernel release
	 * the file, in another thread, before fn has even returned. */
	return ulp_read_view_done(st, &v, n, fn, opaque);
}

static void record_error(ulp_store *st, ulp_inode *in, int err)
{
	pthread_mutex_lock(&st->mu);
	in->err = err;
	in->err_seq++;
	pthread_mutex_unlock(&st->mu);
}

ssize_t ulp_file_write(ulp_file *f, const void *buf, size_t size, off_t off)
{
	ulp_store *st = f->st;
	ulp_inode *in = f->in;
	size_t done = 0;
	int rc = 0;

	if (!f->writable)
		return -EBADF;
	if (off < 0 || (uint64_t)off + size < (uint64_t)off)
		return -EINVAL;
	/* At most size bytes more are allocated (fewer over written
	 * ones; none past them, the holes a sparse write leaves). */
	pthread_mutex_lock(&st->mu);
	file_active(f);
	pt_sync(st);
	ulp_stage_wait_space(st, size);
	pthread_mutex_unlock(&st->mu);

	/* Appends are serialised: each lands at the size it sees. */
	if (f->append)
		ulp_data_wrlock(in);
	else
		ulp_data_rdlock(in);
	if (!in->staged || in->fd < 0) {
		ulp_data_unlock(in);
		return -EIO;
	}
	if (f->append) {
		pthread_mutex_lock(&st->mu);
		off = (off_t)in->size;
		pthread_mutex_unlock(&st->mu);
	}
	while (done < size) {
		ssize_t n = pwrite(in->fd, (const char *)buf + done,
		                   size - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	/* A copy-up on demand reads these bytes from staging from now on. */
	if (done && in->ov &&
	    ulp_overlay_add(in->ov, (uint64_t)off, (uint64_t)off + done) < 0)
		rc = -ENOMEM, done = 0;
	if (rc < 0)
		record_error(st, in, rc);
	pthread_mutex_lock(&st->mu);
	if (done) {
		uint64_t e = (uint64_t)off + done;
		if (e > in->size)
			ulp_stage_set_size(st, in, e);
		else
			ulp_stage_account(st, in);
		in->mtime = in->ctime = ulp_now_ns();
		in->times_dirty = 1;
	}
	pthread_mutex_unlock(&st->mu);
	ulp_data_unlock(in);
	return done ? (ssize_t)done : rc;
}

static int take_error(ulp_file *f)
{
	ulp_store *st = f->st;
	int rc = 0;

	pthread_mutex_lock(&st->mu);
	if (f->in->err_seq != f->err_seen) {
		f->err_seen = f->in->err_seq;
		rc = f->in->err;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Size and mtime of a passthrough writer's inode from its staging file. */
static void sync_pt(ulp_file *f)
{
	if (!f->pt)
		return;
	pthread_mutex_lock(&f->st->mu);
	ulp_stage_sync_backing(f->st, f->in);
	pthread_mutex_unlock(&f->st->mu);
}

int ulp_file_flush(ulp_file *f)
{
	sync_pt(f);
	if (f->writable) {
		pthread_mutex_lock(&f->st->mu);
		if (!f->closing) {
			f->closing = 1;
			f->in->nclosing++;
		}
		pthread_mutex_unlock(&f->st->mu);
	}
	return take_error(f);
}

int ulp_file_partial(ulp_file *f)
{
	ulp_data_rdlock(f->in);
	int partial = f->in->staged && f->in->ov != NULL;
	ulp_data_unlock(f->in);
	return partial;
}

int ulp_file_staging_fd(ulp_file *f)
{
	int fd = -ENOENT;

	ulp_data_rdlock(f->in);
	if (f->in->ov) {
		fd = -EBUSY; /* holes where the version shows through */
	} else if (f->in->staged && f->in->fd >= 0) {
		fd = fcntl(f->in->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			fd = -errno;
	}
	ulp_data_unlock(f->in);
	return fd;
}

int ulp_file_plain_fd(ulp_file *f)
{
	ulp_data_rdlock(f->in);
	int staged = f->in->staged;
	uint64_t vid = f->in->version;
	ulp_data_unlock(f->in);
	if (staged || !vid)
		return -ENOENT;
	return ulp_plain_open(f->st, vid);
}

/* Give back f's admission (mu held). */
static void pt_unreserve(ulp_file *f)
{
	ulp_store *st = f->st;

	if (!f->pt_reserve)
		return;
	for (ulp_file **p = &st->pt_admitted; *p; p = &(*p)->pt_next)
		if (*p == f) {
			*p = f->pt_next;
			break;
		}
	f->pt_reserve = 0;
	ulp_stage_space_changed(st);
}

/* What the admitted passthrough writers are still expected to write
 * (mu held, after pt_sync). */
static uint64_t pt_expected(ulp_store *st)
{
	uint64_t sum = 0;

	for (ulp_file *a = st->pt_admitted; a; a = a->pt_next) {
		if (a->in->size < a->pt_reserve)
			sum += a->pt_reserve - a->in->size;
	}
	return sum;
}

int ulp_file_passthrough_admit(ulp_file *f)
{
	ulp_store *st = f->st;
	int ok;

	if (!f->writable)
		return 0;
	pthread_mutex_lock(&st->mu);
	pt_sync(st);
	ulp_stage_wait_space(st, 0);
	pt_sync(st); /* it may have waited */
	uint64_t lim = st->opts.staging_limit;
	uint64_t want = ulp_stage_last_closed(st);
	if (want < lim / 16)
		want = lim / 16;
	if (want > lim)
		want = lim; /* a file bigger than the limit: when empty */
	if (want == 0)
		want = 1;
	uint64_t exp = pt_expected(st);
	ok = ulp_stage_bytes(st) + exp + want <= lim;
	if (ok) {
		f->pt_reserve = want;
		f->pt_next = st->pt_admitted;
		st->pt_admitted = f;
	}
	pthread_mutex_unlock(&st->mu);
	return ok;
}

void ulp_file_passthrough_cancel(ulp_file *f)
{
	pthread_mutex_lock(&f->st->mu);
	pt_unreserve(f);
	pthread_mutex_unlock(&f->st->mu);
}

void ulp_file_set_passthrough(ulp_file *f)
{
	ulp_store *st = f->st;

	if (f->pt || !f->writable)
		return;
	pthread_mutex_lock(&st->mu);
	if (f->in->npt++ == 0)
		ulp_stage_mark_backing(f->in);
	f->pt = 1;
	pthread_mutex_unlock(&st->mu);
}

void ulp_file_backing_hold(ulp_file *f)
{
	pthread_mutex_lock(&f->st->mu);
	f->in->bk_held++;
	pthread_mutex_unlock(&f->st->mu);
}

void ulp_file_backing_release(ulp_file *f)
{
	ulp_store *st = f->st;
	ulp_inode *in = f->in;

	ulp_data_wrlock(in);
	pthread_mutex_lock(&st->mu);
	if (in->bk_held > 0 && --in->bk_held == 0 && in->bk_kept)
		ulp_stage_drop(st, in); /* committed: nothing else needs it */
	pthread_mutex_unlock(&st->mu);
	ulp_data_unlock(in);
}

int ulp_file_fsync(ulp_file *f, int datasync)
{
	ulp_inode *in = f->in;
	int rc = 0;

	ulp_data_rdlock(in);
	if (in->staged && in->fd >= 0) {
		if ((datasync ? fdatasync(in->fd) : fsync(in->fd)) < 0)
			rc = -errno;
		/* The staging file's own name, for a file created lately;
		 * a copy-up on demand's map with it. */
		if (rc == 0 && in->ov)
			rc = ulp_overlay_save(in->ov, f->st->stg_fd, in->ino,
			                      1);
		else if (rc == 0 && fsync(f->st->stg_fd) < 0)
			rc = -errno;
	}
	ulp_data_unlock(in);
	if (rc < 0)
		record_error(f->st, in, rc);
	sync_pt(f);
	return take_error(f);
}

int ulp_file_fallocate(ulp_file *f, int mode, off_t off, off_t len)
{
	ulp_store *st = f->st;
	ulp_inode *in = f->in;
	int keep = (mode & FALLOC_FL_KEEP_SIZE) != 0;
	int op = mode & ~FALLOC_FL_KEEP_SIZE;
	int rc = 0;

	/* Collapse and insert range would move the bytes of a copy-up on
	 * demand's version as well; the encoder has no use for them. */
	if (op != 0 && op != FALLOC_FL_PUNCH_HOLE && op != FALLOC_FL_ZERO_RANGE)
		return -EOPNOTSUPP;
	if (op == FALLOC_FL_PUNCH_HOLE && !keep)
		return -EOPNOTSUPP; /* as Linux: punching keeps the size */
	if (!f->writable)
		return -EBADF;
	if (off < 0 || len <= 0)
		return -EINVAL;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	pthread_mutex_lock(&st->mu);
	file_active(f);
	pt_sync(st);
	if (in->npt)
		ulp_stage_sync_backing(st, in); /* the size the kernel wrote */
	ulp_stage_wait_space(st, op ? 0 : (uint64_t)len);
	pthread_mutex_unlock(&st->mu);
	ulp_data_rdlock(in);
	uint64_t size = in->size, new_size = !keep && end > size ? end : size;
	if (!in->staged || in->fd < 0)
		rc = -EIO;
	else if (op == FALLOC_FL_ZERO_RANGE)
		rc = ulp_stage_zero(in->fd, off, len, new_size);
	else if (fallocate(in->fd, mode, off, len) < 0)
		rc = -errno;
	/* Zeros from now on, not the version's bytes. */
	if (rc == 0 && op && in->ov && (uint64_t)off < new_size)
		rc = ulp_overlay_add(in->ov, (uint64_t)off,
		                     end < new_size ? end : new_size);
	if (rc == 0) {
		pthread_mutex_lock(&st->mu);
		if (new_size > size)
			ulp_stage_set_size(st, in, new_size);
		else
			ulp_stage_account(st, in); /* reserved or freed */
		if (op || new_size > size) {
			in->mtime = in->ctime = ulp_now_ns();
			in->times_dirty = 1;
		}
		pthread_mutex_unlock(&st->mu);
	}
	ulp_data_unlock(in);
	return rc;
}

off_t ulp_file_seek(ulp_file *f, off_t off, int whence)
{
	ulp_inode *in = f->in;
	off_t r;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (off < 0)
		return -ENXIO;
	pthread_mutex_lock(&f->st->mu);
	if (in->npt)
		ulp_stage_sync_backing(f->st,
		                       in); /* the size the kernel wrote */
	pthread_mutex_unlock(&f->st->mu);
	ulp_data_rdlock(in);
	uint64_t size = in->size;
	if ((uint64_t)off >= size)
		r = -ENXIO;
	else if (in->staged && in->fd >= 0)
		r = ulp_stage_seek(in, (uint64_t)off, whence);
	else /* a version is data throughout */
		r = whence == SEEK_DATA ? off : (off_t)size;
	ulp_data_unlock(in);
	return r;
}

void ulp_file_release(ulp_file *f)
{
	ulp_store *st;

	if (!f)
		return;
	st = f->st;
	pthread_mutex_lock(&st->mu);
	if (f->pt) {
		/* before writer_done records the size and queues the file */
		ulp_stage_sync_backing(st, f->in);
		f->in->npt--;
	}
	pt_unreserve(f);
	if (f->closing)
		f->in->nclosing--;
	if (f->writable) {
		ulp_stage_writer_done(st, f->in);
		/* a truncating open may wait for this release (staging.c) */
		pthread_cond_broadcast(&st->done_cv);
	}
	ulp_inode_put(st, f->in);
	pthread_mutex_unlock(&st->mu);
	ulp_readahead_free(f->ra);
	free(f);
}

/* ------------------------------------------------------------ copies */

/* The end of a copy of [off, off + len) of a version of size vsize by
 * reference, 0 when none qualifies: from a chunk boundary to the last one
 * in the range, or to the version's end, so that the commit codes those
 * chunks as the version's (generic files: encoder.c, copyup.c).  A
 * shorter count is what copy_file_range(2) may return (and a FUSE reply
 * counts under 4 GiB: fs_copy.c). */
static uint64_t ref_copy_end(uint64_t vsize, uint64_t off, uint64_t len)
{
	if (off >= vsize || off % ULP_CHUNK_SIZE_DEFAULT)
		return 0;
	uint64_t end = len < vsize - off ? off + len : vsize;
	if (end < vsize)
		end -= end % ULP_CHUNK_SIZE_DEFAULT;
	return end > off ? end : 0;
}

/* Whether in, of which f is the only writer and the kernel writes
 * nothing, can take a copy of vid at off by reference: empty and staged
 * in full (created, or cut to 0), or a copy by reference of vid that
 * ends at off (the previous call of the same copy).  1 yes, 0 no. */
static int ref_copy_into(ulp_inode *in, uint64_t vid, uint64_t off)
{
	struct stat sb;

	if (!in->staged || in->nwriters != 1 || in->npt || in->bk_held ||
	    in->unlinked || fstat(in->fd, &sb) < 0)
		return 0;
	if (!in->ov)
		return in->size == 0 && sb.st_size == 0 && sb.st_blocks == 0;
	return off && in->size == off && (uint64_t)sb.st_size == off &&
	       in->version == vid && ulp_overlay_base(in->ov) == vid;
}

ssize_t ulp_file_copy_version(ulp_file *f, uint64_t vid, uint64_t off_in,
                              uint64_t off_out, uint64_t len)
{
	ulp_store *st = f->st;
	ulp_inode *in = f->in;
	ulp_version_info v;
	uint64_t end = 0;
	int rc;

	if (!f->writable || f->pt || off_in != off_out)
		return 0;
	ulp_data_wrlock(in);
	pthread_mutex_lock(&st->mu);
	rc = ulp_version_get_locked(st, vid, &v);
	if (rc == -ENOENT)
		rc = 1;
	if (rc == 0 && !(end = ref_copy_end(v.size, off_in, len)))
		rc = 1;
	/* Nobody but the daemon sees the file become (or grow as) a
	 * copy-up. */
	if (rc == 0 &&
	    (v.state != ULP_VERSION_LIVE || !ref_copy_into(in, vid, off_in)))
		rc = 1;
	/* The version shows through up to end; before off_in the staging
	 * file's hole, zeros, as written (or the copy's previous part). */
	ulp_overlay *ov = NULL, *cur = in->ov;
	if (rc == 0 && !cur) {
		cur = ov = ulp_overlay_new(vid, end);
		if (!ov)
			rc = -ENOMEM;
		else if (off_in)
			rc = ulp_overlay_add(ov, 0, off_in);
	} else if (rc == 0 && ulp_overlay_extend(cur, off_in, end) < 0) {
		rc = 1; /* cut since: bytes, not a reference */
	}
	if (rc == 0 && ftruncate(in->fd, (off_t)end) < 0)
		rc = -errno;
	/* A part of the version: its map saved before the row names it, or
	 * recovery would show all of the version (a whole copy needs none). */
	int saved = rc == 0 && (off_in || end < v.size);
	if (saved)
		rc = ulp_overlay_save(cur, st->stg_fd, in->ino, 0);
	int64_t now = ulp_now_ns();
	/* The row names vid as the file's version, which keeps vid from
	 * being released (its own file deleted) until this one commits;
	 * recovery makes the same copy-up of it. */
	if (rc == 0)
		rc = ulp_cat_inode_content(st->cat, in->ino, vid,
		                           ULP_STAGED_OVERLAY, end, now, now);
	if (rc < 0 && cur && cur != ov) {
		/* The previous part stands. */
		ulp_overlay_truncate(cur, off_in);
		if (ftruncate(in->fd, (off_t)off_in) < 0)
			rc = -errno;
	} else if (rc < 0) {
		if (saved)
			ulp_overlay_unlink(st->stg_fd, in->ino);
		if (ftruncate(in->fd, 0) < 0)
			rc = -errno;
	}
	if (rc == 0) {
		atomic_fetch_add(&in->gen, 1);
		if (ov)
			in->ov = ov;
		ov = NULL;
		in->version = vid;
		in->mtime = in->ctime = now;
		in->times_dirty = 1;
		ulp_stage_set_size(st, in, end);
	}
	pthread_mutex_unlock(&st->mu);
	ulp_data_unlock(in);
	ulp_overlay_free(ov);
	return rc < 0 ? rc : rc == 1 ? 0 : (ssize_t)(end - off_in);
}
