/*
 * fs_file.c - FUSE file data operations: create, open, read, write, flush,
 * fsync, fallocate, lseek, release; the list of open handles; per-thread
 * buffers.
 *
 * fuse_file_info->fh points to an ulp_fs_handle that wraps the store's
 * ulp_file.  Page cache: the kernel keeps a file's cached pages across
 * opens only when the store says its content is committed (immutable).
 * Which opens bypass the page cache (passthrough, direct_io) is fs_io.c's
 * choice.  Writes that come here go to the store at once (no writeback
 * cache), so errors such as ENOSPC reach the writing process.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_node.h"

/* ------------------------------------------------------------- handles */

static ulp_fs_handle *handle_new(ulp_fs *fs, ulp_file *f, uint64_t version)
{
	ulp_fs_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->file = f;
	h->version = version;
	if (!f)
		h->ra = ulp_readahead_new(fs->st);
	pthread_mutex_lock(&fs->handles_mu);
	h->next = fs->handles.next;
	h->prev = &fs->handles;
	h->next->prev = h;
	fs->handles.next = h;
	pthread_mutex_unlock(&fs->handles_mu);
	return h;
}

/* Mark or unmark h as flushed-but-not-released (under handles_mu). */
static void handle_set_flushed(ulp_fs *fs, ulp_fs_handle *h, int flushed)
{
	if (h->flushed == flushed)
		return;
	h->flushed = flushed;
	if (flushed) {
		fs->nflushed++;
	} else {
		fs->nflushed--;
		pthread_cond_broadcast(&fs->released_cv);
	}
}

static void handle_free(ulp_fs *fs, ulp_fs_handle *h)
{
	pthread_mutex_lock(&fs->handles_mu);
	h->prev->next = h->next;
	h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_mu);
	if (h->file) {
		ulp_fs_io_close(fs, h->ino, h->file, h->io);
		ulp_file_release(h->file);
	}
	ulp_readahead_free(h->ra); /* drops its queued decodes */
	/* only now is the file queued: then sync may count it */
	pthread_mutex_lock(&fs->handles_mu);
	handle_set_flushed(fs, h, 0);
	pthread_mutex_unlock(&fs->handles_mu);
	free(h);
}

int ulp_fs_wait_released(ulp_fs *fs, unsigned timeout_ms)
{
	struct timespec until;
	int rc = 0;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&fs->handles_mu);
	while (fs->nflushed > 0 && rc == 0)
		rc = pthread_cond_timedwait(&fs->released_cv, &fs->handles_mu,
		                            &until);
	rc = fs->nflushed > 0 ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&fs->handles_mu);
	return rc;
}

void ulp_fs_release_all(ulp_fs *fs)
{
	for (;;) {
		pthread_mutex_lock(&fs->handles_mu);
		ulp_fs_handle *h = fs->handles.next;
		pthread_mutex_unlock(&fs->handles_mu);
		if (h == &fs->handles)
			break;
		handle_free(fs, h);
	}
}

/* Wrap f (or a version of the control directory) in a handle and reply
 * with it; if the reply cannot be delivered (the opening process was
 * interrupted), the kernel will never release it, so release it here.  e
 * is NULL for open, else the created entry (whose inode is ino). */
static void reply_opened(fuse_req_t req, uint64_t ino, ulp_file *f,
                         uint64_t version, int keep_cache,
                         const struct fuse_entry_param *e,
                         struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	int io = ULP_IO_CACHED;
	if (f) {
		io = ulp_fs_io_open(fs, ino, f, e != NULL, keep_cache, fi);
		if (io < 0) {
			ulp_file_release(f);
			fuse_reply_err(req, ulp_fs_errno(io));
			return;
		}
	} else {
		fi->keep_cache = keep_cache ? 1 : 0;
		fi->direct_io = 0;
	}
	ulp_fs_handle *h = handle_new(fs, f, version);
	if (!h) {
		if (f) {
			ulp_fs_io_close(fs, ino, f, io);
			ulp_file_release(f);
		}
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->ino = ino;
	h->io = io;
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->nonseekable = 0;
	int rc = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
	if (rc != 0)
		handle_free(fs, h);
}

/* --------------------------------------------------------------- open */

/* The dispatcher checked the name as for mknod and mkdir; the owner is
 * theirs too (ulp_fs_new_owner). */
void ulp_fs_live_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                        mode_t mode, struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	struct fuse_entry_param e;
	ulp_attr a;
	ulp_file *f = NULL;
	int keep = 0, rc;

	if (!S_ISREG(mode) && (mode & S_IFMT) != 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	uid_t uid;
	gid_t gid;
	mode = (mode & 07777) | S_IFREG;
	rc = ulp_fs_new_owner(req, parent, &mode, &uid, &gid);
	if (rc == 0)
		rc = ulp_ns_create(fs->st, parent, name,
		                   (mode & 07777) | S_IFREG, uid, gid, &a);
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	/* The file is new and empty: O_TRUNC and O_EXCL mean nothing more. */
	rc = ulp_file_open(fs->st, a.ino, fi->flags & ~(O_CREAT | O_EXCL), &f,
	                   &keep);
	if (rc < 0) {
		/* Do not leave a file behind that open(2) says it did not
		 * create. */
		ulp_ns_unlink(fs->st, parent, name);
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	struct stat st;
	ulp_fs_attr_to_stat(&a, &st);
	ulp_fs_entry_of(fs, &st, &e);
	reply_opened(req, a.ino, f, 0, keep, &e, fi);
}

void ulp_fs_open_version(fuse_req_t req, fuse_ino_t ino, uint64_t version,
                         struct fuse_file_info *fi)
{
	/* A version never changes: keep its page cache. */
	reply_opened(req, ino, NULL, version, 1, NULL, fi);
}

void ulp_fs_live_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	ulp_file *f = NULL;
	int keep = 0;
	/* With FUSE_CAP_ATOMIC_O_TRUNC, O_TRUNC arrives here (instead of a
	 * setattr first), so the store can skip the copy-up of a committed
	 * file that is about to be emptied. */
	int rc = ulp_file_open(fs->st, ino, fi->flags, &f, &keep);
	/* O_TRUNC by a caller without CAP_FSETID (KILLPRIV_V2) */
	if (rc == 0 && ulp_fs_io_kill_asked() &&
	    (rc = ulp_fs_kill_suidgid(req, ino, 0)) < 0)
		ulp_file_release(f);
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	reply_opened(req, ino, f, 0, keep, NULL, fi);
}

/* ---------------------------------------------------------------- data */

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_rc;

typedef struct tls_buf {
	size_t size;
	unsigned char data[];
} tls_buf;

static void tls_free(void *p)
{
	free(p);
}

static void tls_make_key(void)
{
	tls_rc = pthread_key_create(&tls_key, tls_free);
}

int ulp_fs_tls_init(void)
{
	pthread_once(&tls_once, tls_make_key);
	return tls_rc ? -tls_rc : 0;
}

void *ulp_fs_tls_buf(size_t size)
{
	tls_buf *b = pthread_getspecific(tls_key);
	if (b && b->size >= size)
		return b->data;
	/* Grow to the request size, at least 128 KiB, so that a thread
	 * settles on one buffer. */
	size_t want = size < (128u << 10) ? (128u << 10) : size;
	tls_buf *nb = malloc(sizeof(*nb) + want);
	if (!nb)
		return NULL;
	nb->size = want;
	if (pthread_setspecific(tls_key, nb) != 0) {
		free(nb);
		return NULL;
	}
	free(b);
	return nb->data;
}

/* A read's reply, written from the store's cached chunks in place: the
 * kernel copies them out of the daemon once, with no copy into a reply
 * buffer first. */
typedef struct read_reply {
	fuse_req_t req;
	int sent;
} read_reply;

static int reply_pieces(void *opaque, const struct iovec *iov, int count)
{
	read_reply *r = opaque;

	r->sent = 1;
	int rc = count ? fuse_reply_iov(r->req, iov, count)
	               : fuse_reply_buf(r->req, NULL, 0);
	return rc < 0 ? rc : 0;
}

void ulp_fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	(void)ino;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* scratch for reads that are not in the cache's chunks */
	void *buf = ulp_fs_tls_buf(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ulp_fs_handle *h = ulp_fs_handle_of(fi);
	read_reply r = { req, 0 };
	ssize_t n = h->file ? ulp_file_read_iov(h->file, size, off, buf,
	                                        reply_pieces, &r)
	                    : ulp_version_read_iov(ulp_fs_of(req)->st, h->ra,
	                                           h->version, size,
	                                           (uint64_t)off, buf,
	                                           reply_pieces, &r);
	if (n < 0 && !r.sent)
		fuse_reply_err(req, ulp_fs_errno(n));
}

void ulp_fs_op_write_buf(fuse_req_t req, fuse_ino_t ino,
                         struct fuse_bufvec *bufv, off_t off,
                         struct fuse_file_info *fi)
{
	const void *p;
	size_t size = fuse_buf_size(bufv);
	ulp_fs_handle *h = ulp_fs_handle_of(fi);
	(void)ino;
	if (!h->file) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* Without splice (disabled in init unless -o splice_read is given)
	 * the data is one memory buffer inside the request: no copy. */
	if (bufv->count - bufv->idx == 1 &&
	    !(bufv->buf[bufv->idx].flags & FUSE_BUF_IS_FD)) {
		p = (const char *)bufv->buf[bufv->idx].mem + bufv->off;
	} else {
		void *tmp = ulp_fs_tls_buf(size ? size : 1);
		if (!tmp) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
		dst.buf[0].mem = tmp;
		ssize_t c = fuse_buf_copy(&dst, bufv, 0);
		if (c < 0) {
			fuse_reply_err(req, ulp_fs_errno(c));
			return;
		}
		size = (size_t)c;
		p = tmp;
	}
	/* a writer without CAP_FSETID (KILLPRIV_V2), before its data lands */
	if (ulp_fs_io_kill_asked()) {
		int rc = ulp_fs_kill_suidgid(req, h->ino, 0);
		if (rc < 0) {
			fuse_reply_err(req, ulp_fs_errno(rc));
			return;
		}
	}
	if (h->flushed) { /* written again through a dup'ed descriptor */
		ulp_fs *fs = ulp_fs_of(req);
		pthread_mutex_lock(&fs->handles_mu);
		handle_set_flushed(fs, h, 0);
		pthread_mutex_unlock(&fs->handles_mu);
	}
	ssize_t n = ulp_file_write(h->file, p, size, off);
	if (n < 0) {
		fuse_reply_err(req, ulp_fs_errno(n));
		return;
	}
	fuse_reply_write(req, (size_t)n);
}

void ulp_fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	ulp_fs_handle *h = ulp_fs_handle_of(fi);
	int rc = h->file ? ulp_file_flush(h->file) : 0;
	if (h->file) {
		ulp_fs *fs = ulp_fs_of(req);
		pthread_mutex_lock(&fs->handles_mu);
		handle_set_flushed(fs, h, 1);
		pthread_mutex_unlock(&fs->handles_mu);
	}
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

void ulp_fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                     struct fuse_file_info *fi)
{
	(void)ino;
	ulp_fs_handle *h = ulp_fs_handle_of(fi);
	int rc = h->file ? ulp_file_fsync(h->file, datasync) : 0;
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

void ulp_fs_op_release(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(ulp_fs_of(req), ulp_fs_handle_of(fi));
	fuse_reply_err(req, 0);
}

void ulp_fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                         off_t length, struct fuse_file_info *fi)
{
	(void)ino;
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (offset > INT64_MAX - length) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	/* The store serves mode 0, KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE on
	 * the staging file; collapse and insert range are EOPNOTSUPP. */
	ulp_fs_handle *h = ulp_fs_handle_of(fi);
	int rc = h->file ? ulp_file_fallocate(h->file, mode, offset, length)
	                 : -EBADF;
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

void ulp_fs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi)
{
	(void)ino;
	ulp_fs_handle *h = ulp_fs_handle_of(fi);
	off_t r;

	if (h->file) {
		r = ulp_file_seek(h->file, off, whence);
	} else {
		/* A version of the control directory: data throughout. */
		ulp_version_info v;
		int rc = ulp_version_get(ulp_fs_of(req)->st, h->version, &v);
		if (rc < 0)
			r = rc;
		else if (whence != SEEK_DATA && whence != SEEK_HOLE)
			r = -EINVAL;
		else if (off < 0 || (uint64_t)off >= v.size)
			r = -ENXIO;
		else
			r = whence == SEEK_DATA ? off : (off_t)v.size;
	}
	if (r < 0)
		fuse_reply_err(req, ulp_fs_errno((int)r));
	else
		fuse_reply_lseek(req, r);
}
