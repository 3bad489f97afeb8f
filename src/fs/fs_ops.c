/*
 * fs_ops.c - FUSE namespace operations: lookup, attributes, directories,
 * symlinks, rename, statfs.
 *
 * Every operation replies exactly once.  The store returns 0 or -errno and
 * the errno is passed to the kernel as is (ulp_fs_errno).  The kernel's
 * lookup counts are not tracked: inode lifetime belongs to the store, which
 * keys everything by its own inode numbers (FUSE nodeid == store inode,
 * FUSE_ROOT_ID == ULP_ROOT_INO == 1).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h> /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs/fs_internal.h"

_Static_assert(ULP_ROOT_INO == FUSE_ROOT_ID, "root inode numbers differ");

void ulp_fs_attr_to_stat(const ulp_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = ULP_FS_BLKSIZE;
	/* Logical size in 512-byte units: du(1) of the mount measures what
	 * is stored in it, not how well it compresses ("ulpfs stats" does). */
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_atim = a->atime;
	st->st_mtim = a->mtime;
	st->st_ctim = a->ctime;
	st->st_rdev = (dev_t)a->rdev;
}

static void fill_entry(const ulp_fs *fs, const ulp_attr *a,
                       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = (fuse_ino_t)a->ino;
	e->generation = 0;
	ulp_fs_attr_to_stat(a, &e->attr);
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
}

/* 0, or ENAMETOOLONG / EINVAL for a name no directory may hold. */
static int check_name(const char *name)
{
	size_t n = strnlen(name, ULP_FS_NAME_MAX + 1);
	if (n > ULP_FS_NAME_MAX)
		return ENAMETOOLONG;
	if (n == 0 || strchr(name, '/'))
		return EINVAL;
	return 0;
}

int ulp_fs_check_new(fuse_ino_t parent, const char *name)
{
	int err = check_name(name);
	if (err)
		return err;
	if (ulp_ctl_is(parent))
		return EROFS;
	if (ulp_ctl_is_name(parent, name))
		return EEXIST;
	return 0;
}

/* check_name for a removal or rename: the control directory is read-only
 * and cannot be removed or renamed. */
static int check_change(fuse_ino_t parent, const char *name)
{
	int err = check_name(name);
	if (err)
		return err == EINVAL ? ENOENT : err;
	if (ulp_ctl_is(parent) || ulp_ctl_is_name(parent, name))
		return EROFS;
	return 0;
}

/* The directory's set-group-ID bit gives new nodes its group (and new
 * directories the bit), as on Linux's local filesystems. */
int ulp_fs_new_owner(fuse_req_t req, fuse_ino_t parent, mode_t *mode,
                     uid_t *uid, gid_t *gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	ulp_attr pa;
	int rc = ulp_ns_getattr(ulp_fs_of(req)->st, parent, &pa);
	if (rc < 0)
		return rc;
	if (!S_ISDIR(pa.mode))
		return -ENOTDIR;
	*uid = ctx->uid;
	*gid = ctx->gid;
	if (ulp_fs_of(req)->posix_acl && !S_ISLNK(*mode)) {
		rc = ulp_acl_default_of(ulp_fs_of(req)->st, parent);
		if (rc < 0)
			return rc;
		if (rc == 0)
			*mode &= ~(ctx->umask & 0777);
	}
	if (pa.mode & S_ISGID) {
		*gid = pa.gid;
		if (S_ISDIR(*mode))
			*mode |= S_ISGID;
	}
	return 0;
}

static void reply_entry_or_err(fuse_req_t req, int rc, const ulp_attr *a)
{
	struct fuse_entry_param e;
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	fill_entry(ulp_fs_of(req), a, &e);
	fuse_reply_entry(req, &e);
}

void ulp_fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ulp_attr a;
	int err = check_name(name);
	if (err) {
		fuse_reply_err(req, err == EINVAL ? ENOENT : err);
		return;
	}
	if (ulp_ctl_is(parent) || ulp_ctl_is_name(parent, name)) {
		struct fuse_entry_param e;
		int rc = ulp_ctl_lookup(ulp_fs_of(req), parent, name, &e);
		if (rc < 0)
			fuse_reply_err(req, ulp_fs_errno(rc));
		else
			fuse_reply_entry(req, &e);
		return;
	}
	/* Negative entries are not cached (ENOENT rather than ino 0 with a
	 * timeout): a file the helper restores must appear at once. */
	int rc = ulp_ns_lookup(ulp_fs_of(req)->st, parent, name, &a);
	reply_entry_or_err(req, rc, &a);
}

void ulp_fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

void ulp_fs_op_forget_multi(fuse_req_t req, size_t count,
                            struct fuse_forget_data *forgets)
{
	(void)count;
	(void)forgets;
	fuse_reply_none(req);
}

void ulp_fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	ulp_attr a;
	struct stat st;
	(void)fi;
	if (ulp_ctl_is(ino)) {
		int rc = ulp_ctl_getattr(fs, ino, &st);
		if (rc < 0)
			fuse_reply_err(req, ulp_fs_errno(rc));
		else
			fuse_reply_attr(req, &st, fs->attr_timeout);
		return;
	}
	int rc = ulp_ns_getattr(fs->st, ino, &a);
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	ulp_fs_attr_to_stat(&a, &st);
	fuse_reply_attr(req, &st, fs->attr_timeout);
}

void ulp_fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                       int to_set, struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	ulp_attr in, out;
	struct stat st;
	unsigned mask = 0;
	int rc;
	(void)fi; /* ftruncate: the store truncates the inode's staging file,
	             which every handle of the inode shares */

	if (ulp_ctl_is(ino)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	memset(&in, 0, sizeof(in));
	in.ino = ino;
	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= ULP_SET_MODE;
		in.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= ULP_SET_UID;
		in.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= ULP_SET_GID;
		in.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		mask |= ULP_SET_SIZE;
		in.size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		mask |= ULP_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		mask |= ULP_SET_ATIME;
		in.atime = attr->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		mask |= ULP_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		mask |= ULP_SET_MTIME;
		in.mtime = attr->st_mtim;
	}
	/* FUSE_SET_ATTR_CTIME: the store sets ctime itself on every change. */

	/* Passthrough writes bypass the store: let it take their size and
	 * mtime first, or an explicit time set now would be overridden by
	 * them at the next getattr. */
	if (mask && ulp_fs_io_passthrough(fs, ino))
		(void)ulp_ns_getattr(fs->st, ino, &out);
	if (mask)
		rc = ulp_ns_setattr(fs->st, ino, &in, mask, &out);
	else
		rc = ulp_ns_getattr(fs->st, ino, &out);
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	ulp_fs_attr_to_stat(&out, &st);
	fuse_reply_attr(req, &st, fs->attr_timeout);
}

void ulp_fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	if (ulp_ctl_is(ino)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memset(buf, 0, sizeof(buf));
	int rc = ulp_ns_readlink(ulp_fs_of(req)->st, ino, buf, sizeof(buf));
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	/* The store NUL-terminates (and may return the length as well). */
	buf[sizeof(buf) - 1] = 0;
	if (rc > 0 && (size_t)rc < sizeof(buf))
		buf[rc] = 0;
	fuse_reply_readlink(req, buf);
}

void ulp_fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, dev_t rdev)
{
	ulp_attr a;
	uid_t uid;
	gid_t gid;
	int err = ulp_fs_check_new(parent, name);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	/* FIFOs, sockets and device nodes are metadata only: the kernel
	 * serves their opens itself. */
	int rc = ulp_fs_new_owner(req, parent, &mode, &uid, &gid);
	if (rc == 0)
		rc = ulp_ns_mknod(ulp_fs_of(req)->st, parent, name, mode,
		                  (uint64_t)rdev, uid, gid, &a);
	reply_entry_or_err(req, rc, &a);
}

void ulp_fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode)
{
	ulp_attr a;
	uid_t uid;
	gid_t gid;
	int err = ulp_fs_check_new(parent, name);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	mode = (mode & 07777) | S_IFDIR;
	int rc = ulp_fs_new_owner(req, parent, &mode, &uid, &gid);
	if (rc == 0)
		rc = ulp_ns_mkdir(ulp_fs_of(req)->st, parent, name, mode, uid,
		                  gid, &a);
	reply_entry_or_err(req, rc, &a);
}

void ulp_fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                       const char *name)
{
	ulp_attr a;
	uid_t uid;
	gid_t gid;
	mode_t mode = S_IFLNK | 0777;
	int err = ulp_fs_check_new(parent, name);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (strnlen(link, PATH_MAX) >= PATH_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	int rc = ulp_fs_new_owner(req, parent, &mode, &uid, &gid);
	if (rc == 0)
		rc = ulp_ns_symlink(ulp_fs_of(req)->st, parent, name, link, uid,
		                    gid, &a);
	reply_entry_or_err(req, rc, &a);
}

void ulp_fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int err = check_change(parent, name);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	int rc = ulp_ns_unlink(ulp_fs_of(req)->st, parent, name);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

void ulp_fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int err = check_change(parent, name);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	int rc = ulp_ns_rmdir(ulp_fs_of(req)->st, parent, name);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

void ulp_fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname,
                      unsigned int flags)
{
	unsigned uf = 0;
	int sctl = ulp_ctl_is(parent) || ulp_ctl_is_name(parent, name);
	int dctl = ulp_ctl_is(newparent) || ulp_ctl_is_name(newparent, newname);
	int err = check_change(parent, name);
	if (!err)
		err = check_change(newparent, newname);
	/* Between the control directory and the live tree, as between two
	 * filesystems: EXDEV (mv(1) then copies, and fails on EROFS). */
	if (err == EROFS && sctl != dctl)
		err = EXDEV;
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		uf |= ULP_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		uf |= ULP_RENAME_EXCHANGE;
	/* RENAME_WHITEOUT (overlayfs) and unknown flags; EXCHANGE together
	 * with NOREPLACE is contradictory. */
	if ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
	    uf == (ULP_RENAME_NOREPLACE | ULP_RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* The store answers -EINVAL for RENAME_EXCHANGE if it cannot swap. */
	int rc = ulp_ns_rename(ulp_fs_of(req)->st, parent, name, newparent,
	                       newname, uf);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

void ulp_fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                    const char *newname)
{
	ulp_attr a;
	int err = check_name(newname);
	/* The control directory is another filesystem, as far as names
	 * go: nothing links into or out of it. */
	if (!err && (ulp_ctl_is(ino) || ulp_ctl_is(newparent)))
		err = EXDEV;
	if (!err && ulp_ctl_is_name(newparent, newname))
		err = EEXIST;
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	int rc = ulp_ns_link(ulp_fs_of(req)->st, ino, newparent, newname, &a);
	reply_entry_or_err(req, rc, &a);
}

void ulp_fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	(void)ino;
	memset(&sv, 0, sizeof(sv));
	int rc = ulp_store_statfs(ulp_fs_of(req)->st, &sv);
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	sv.f_namemax = ULP_FS_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ------------------------------------------------------------ directories */

void ulp_fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
	ulp_attr a;
	int rc;
	if (ulp_ctl_is(ino)) {
		struct stat st;
		rc = ulp_ctl_getattr(ulp_fs_of(req), ino, &st);
		a.mode = st.st_mode;
	} else {
		rc = ulp_ns_getattr(ulp_fs_of(req)->st, ino, &a);
	}
	if (rc == 0 && !S_ISDIR(a.mode))
		rc = -ENOTDIR;
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	/* Listings are read from the catalog at each readdir; the kernel
	 * must not cache them, as the helper may change the directory. */
	fi->fh = 0;
	fi->cache_readdir = 0;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

typedef struct dir_fill {
	fuse_req_t req;
	ulp_fs *fs;
	char *buf;
	size_t size, pos;
	int plus;
	int count;
} dir_fill;

static int dir_fill_cb(void *opaque, const char *name, const ulp_attr *attr,
                       uint64_t next_off)
{
	dir_fill *d = opaque;
	size_t left = d->size - d->pos, n;
	if (next_off > (uint64_t)INT64_MAX)
		return 1; /* not representable as an off_t: treat as full */
	if (d->plus) {
		struct fuse_entry_param e;
		fill_entry(d->fs, attr, &e);
		n = fuse_add_direntry_plus(d->req, d->buf + d->pos, left, name,
		                           &e, (off_t)next_off);
	} else {
		struct stat st;
		memset(&st, 0, sizeof(st));
		st.st_ino = (ino_t)attr->ino;
		st.st_mode = attr->mode;
		n = fuse_add_direntry(d->req, d->buf + d->pos, left, name, &st,
		                      (off_t)next_off);
	}
	if (n > left)
		return 1; /* full: this entry comes first in the next call */
	d->pos += n;
	d->count++;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       int plus)
{
	dir_fill d = {
		.req = req, .fs = ulp_fs_of(req), .size = size, .plus = plus
	};
	if (ulp_ctl_is(ino)) {
		ulp_ctl_readdir(req, ino, size, off, plus);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	d.buf = malloc(size ? size : 1);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = ulp_ns_readdir(d.fs->st, ino, (uint64_t)off, dir_fill_cb, &d);
	/* An error after some entries: return those; the next call (from
	 * their offset) reports it. */
	if (rc < 0 && d.count == 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		fuse_reply_buf(req, d.buf, d.pos);
	free(d.buf);
}

void ulp_fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 0);
}

void ulp_fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                           off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 1);
}

void ulp_fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

void ulp_fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                        struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	/* Namespace changes are durable once their SQLite transaction has
	 * committed, before the operation replied. */
	fuse_reply_err(req, 0);
}
