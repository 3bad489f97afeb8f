/*
 * fs_copy.c - copy_file_range(2) between files of the mount, served by
 * the daemon (without it the kernel falls back to reading and writing
 * through user space, a round trip per page-cache request).
 *
 * A copy of a committed file whole into an empty one (what cp does with a
 * new file), or of whole chunks of it at the same offsets, is a
 * reference: the destination becomes a copy-up on demand of the source's
 * version (ulp_file_copy_version), nothing is read or written, and its
 * commit codes those chunks as identical to the source's.
 * Anything else is copied through staging: the source read (from staging
 * or decoded), the destination written as a write(2) would (the staging
 * limit, and for a passthrough opener the staging file the kernel writes
 * too).  The source's holes stay holes.  A copy is at most COPY_MAX bytes
 * per call: a short count, which copy_file_range(2) callers loop on.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs_node.h"

#define COPY_PIECE (1u << 20)
#define COPY_MAX (64u << 20)
/* A reply counts 32 bits (struct fuse_write_out): a reference copy is cut
 * at the last chunk boundary below 4 GiB, and the caller's next call goes
 * on from there by reference too. */
#define COPY_REF_MAX \
	((uint64_t)UINT32_MAX / ULP_CHUNK_SIZE_DEFAULT * ULP_CHUNK_SIZE_DEFAULT)

/* Read from the source handle: a file, or a version of the control
 * directory. */
static ssize_t src_read(ulp_fs *fs, ulp_fs_handle *h, void *buf, size_t n,
                        uint64_t off)
{
	if (h->file)
		return ulp_file_read(h->file, buf, n, (off_t)off);
	return ulp_version_read_ra(fs->st, h->ra, h->version, buf, n, off);
}

/* The extent of the source at off: *data whether it is data, and in
 * *end where it stops (at most end_max); 0, or 1 at the source's end. */
static int src_extent(ulp_fs_handle *h, uint64_t off, uint64_t end_max,
                      uint64_t size, int *data, uint64_t *end)
{
	if (off >= size)
		return 1;
	*data = 1;
	*end = size < end_max ? size : end_max;
	if (!h->file)
		return 0; /* a version is data throughout */
	off_t d = ulp_file_seek(h->file, (off_t)off, SEEK_DATA);
	if (d == -ENXIO || (d >= 0 && (uint64_t)d > off)) {
		*data = 0; /* a hole up to the next data or the end */
		if (d >= 0 && (uint64_t)d < *end)
			*end = (uint64_t)d;
		return 0;
	}
	off_t hole = ulp_file_seek(h->file, (off_t)off, SEEK_HOLE);
	if (hole > 0 && (uint64_t)hole > off && (uint64_t)hole < *end)
		*end = (uint64_t)hole;
	return 0;
}

/* Make [off, off + n) of the destination read as zeros, a hole: punched
 * below its size, the size grown past it. */
static int dst_hole(ulp_fs *fs, fuse_ino_t ino, ulp_file *f, uint64_t off,
                    uint64_t n)
{
	ulp_attr a, out;
	int rc = ulp_ns_getattr(fs->st, ino, &a);

	if (rc < 0)
		return rc;
	if (off < a.size) {
		uint64_t k = a.size - off < n ? a.size - off : n;
		rc = ulp_file_fallocate(
			f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)off, (off_t)k);
		if (rc < 0)
			return rc;
	}
	if (off + n <= a.size)
		return 0;
	memset(&a, 0, sizeof a);
	a.size = off + n;
	return ulp_ns_setattr(fs->st, ino, &a, ULP_SET_SIZE, &out);
}

static ssize_t copy_bytes(ulp_fs *fs, ulp_fs_handle *hi, uint64_t size_in,
                          fuse_ino_t ino_out, ulp_file *out, uint64_t off_in,
                          uint64_t off_out, uint64_t len)
{
	uint8_t *buf = malloc(COPY_PIECE);
	uint64_t done = 0;
	ssize_t rc = 0;

	if (!buf)
		return -ENOMEM;
	while (done < len) {
		int data;
		uint64_t end;
		if (src_extent(hi, off_in + done, off_in + len, size_in, &data,
		               &end))
			break;
		uint64_t n = end - (off_in + done);
		if (!data) {
			rc = dst_hole(fs, ino_out, out, off_out + done, n);
			if (rc < 0)
				break;
			done += n;
			continue;
		}
		if (n > COPY_PIECE)
			n = COPY_PIECE;
		ssize_t got = src_read(fs, hi, buf, (size_t)n, off_in + done);
		if (got <= 0) {
			rc = got;
			break;
		}
		ssize_t put = ulp_file_write(out, buf, (size_t)got,
		                             (off_t)(off_out + done));
		if (put < 0) {
			rc = put;
			break;
		}
		done += (uint64_t)put;
		if (put < got)
			break;
	}
	free(buf);
	/* Bytes copied before an error are what the call did. */
	return done ? (ssize_t)done : rc;
}

void ulp_fs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                               struct fuse_file_info *fi_in, fuse_ino_t ino_out,
                               off_t off_out, struct fuse_file_info *fi_out,
                               size_t len, int flags)
{
	ulp_fs *fs = ulp_fs_of(req);
	ulp_fs_handle *hi = ulp_fs_handle_of(fi_in),
		      *ho = ulp_fs_handle_of(fi_out);
	uint64_t version = 0, size_in;
	ssize_t n = 0;
	int rc;

	if (flags) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!ho->file) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* The source's size and, when it is committed, its version. */
	if (hi->file) {
		ulp_attr a;
		rc = ulp_ns_getattr(fs->st, ino_in, &a);
		size_in = a.size;
		if (rc == 0)
			rc = ulp_ns_version(fs->st, ino_in, &version);
	} else {
		ulp_version_info v;
		rc = ulp_version_get(fs->st, hi->version, &v);
		size_in = v.size;
		version = hi->version;
	}
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	if ((uint64_t)off_in >= size_in || len == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	if (version)
		n = ulp_file_copy_version(
			ho->file, version, (uint64_t)off_in, (uint64_t)off_out,
			len < COPY_REF_MAX ? len : COPY_REF_MAX);
	if (n == 0) {
		uint64_t want = len < COPY_MAX ? len : COPY_MAX;
		if (want > size_in - (uint64_t)off_in)
			want = size_in - (uint64_t)off_in;
		n = copy_bytes(fs, hi, size_in, ino_out, ho->file,
		               (uint64_t)off_in, (uint64_t)off_out, want);
	}
	if (n < 0)
		fuse_reply_err(req, ulp_fs_errno(n));
	else
		fuse_reply_write(req, (size_t)n);
}
