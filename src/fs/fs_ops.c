/*
 * fs_ops.c - the live tree's operations (ulp_fs_live_ops): lookup,
 * attributes, directories, symlinks, special files, rename, link; and
 * statfs and the other requests that name no node's kind.
 *
 * The dispatcher (fs_node.c) has checked names and the control directory
 * before these run.  Every operation replies exactly once.  The store returns 0 or -errno and
 * the errno is passed to the kernel as is (ulp_fs_errno).  The kernel's
 * lookup counts are not tracked: inode lifetime belongs to the store, which
 * keys everything by its own inode numbers (FUSE nodeid == store inode,
 * FUSE_ROOT_ID == ULP_ROOT_INO == 1).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h> /* RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT */
#include <string.h>
#include <sys/statvfs.h>

#include "fs/fs_node.h"

_Static_assert(ULP_ROOT_INO == FUSE_ROOT_ID, "root inode numbers differ");

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

/* Whether the caller of req is in group gid (primary or supplementary). */
static int caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t groups[64];
	if (fuse_req_ctx(req)->gid == gid)
		return 1;
	int n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* The ULP_SET_KILL_* bits that req asks for on ino (0 when it has no such
 * bit): what Linux's setattr_should_drop_suidgid() gives for a caller
 * without CAP_FSETID.  A chown asks whatever the caller's privileges;
 * uid 0 counts as privileged there. */
static int kill_mask(fuse_req_t req, uint64_t ino, int chown, unsigned *mask)
{
	ulp_attr a;
	*mask = 0;
	int rc = ulp_ns_getattr(ulp_fs_of(req)->st, ino, &a);
	if (rc < 0)
		return rc;
	/* Directories keep them; chowns clear special files' too. */
	if (S_ISDIR(a.mode) || !(a.mode & (S_ISUID | S_ISGID)))
		return 0;
	*mask = ULP_SET_KILL_SUID | ULP_SET_KILL_SGIDX;
	if ((a.mode & (S_ISGID | S_IXGRP)) == S_ISGID &&
	    !(chown && fuse_req_ctx(req)->uid == 0) &&
	    !caller_in_group(req, a.gid))
		*mask |= ULP_SET_KILL_SGID;
	return 1;
}

/* The kernel's cached mode of ino is stale (attributes only: a write may be
 * holding its pages). */
static void inval_attr(ulp_fs *fs, uint64_t ino)
{
	(void)fuse_lowlevel_notify_inval_inode(fs->se, (fuse_ino_t)ino, -1, 0);
}

int ulp_fs_kill_suidgid(fuse_req_t req, uint64_t ino, int chown)
{
	ulp_fs *fs = ulp_fs_of(req);
	unsigned mask;
	int rc = kill_mask(req, ino, chown, &mask);
	if (rc <= 0)
		return rc;
	ulp_attr in = { .ino = ino }, out;
	rc = ulp_ns_setattr(fs->st, ino, &in, mask, &out);
	if (rc == 0)
		inval_attr(fs, ino);
	return rc;
}

static void reply_entry_or_err(fuse_req_t req, int rc, const ulp_attr *a)
{
	struct fuse_entry_param e;
	struct stat st;
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	ulp_fs_attr_to_stat(a, &st);
	ulp_fs_entry_of(ulp_fs_of(req), &st, &e);
	fuse_reply_entry(req, &e);
}

static int live_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	ulp_attr a;
	int rc = ulp_ns_getattr(fs->st, ino, &a);
	if (rc == 0)
		ulp_fs_attr_to_stat(&a, st);
	return rc;
}

static int live_lookup(ulp_fs *fs, fuse_ino_t dir, const char *name,
                       struct fuse_entry_param *e)
{
	ulp_attr a;
	struct stat st;
	/* Negative entries are not cached (ENOENT rather than ino 0 with a
	 * timeout): a file the helper restores must appear at once. */
	int rc = ulp_ns_lookup(fs->st, dir, name, &a);
	if (rc < 0)
		return rc;
	ulp_fs_attr_to_stat(&a, &st);
	ulp_fs_entry_of(fs, &st, e);
	return 0;
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

static void live_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                         int to_set, struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	ulp_attr in, out;
	struct stat st;
	unsigned mask = 0;
	int rc;
	(void)fi; /* ftruncate: the store truncates the inode's staging file,
	             which every handle of the inode shares */

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
	if (ulp_fs_io_kill_asked()) {
		/* a truncate or a chown: in the same update */
		unsigned kill;
		rc = kill_mask(req, ino,
		               (mask & (ULP_SET_UID | ULP_SET_GID)) != 0,
		               &kill);
		if (rc < 0) {
			fuse_reply_err(req, ulp_fs_errno(rc));
			return;
		}
		mask |= kill;
	}

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
	if ((mask & ULP_SET_MODE) && (in.mode & (S_ISUID | S_ISGID)))
		ulp_fs_io_sxid(fs, ino);
	ulp_fs_attr_to_stat(&out, &st);
	fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void live_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
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

static void live_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                       mode_t mode, dev_t rdev)
{
	ulp_attr a;
	uid_t uid;
	gid_t gid;
	/* FIFOs, sockets and device nodes are metadata only: the kernel
	 * serves their opens itself. */
	int rc = ulp_fs_new_owner(req, parent, &mode, &uid, &gid);
	if (rc == 0)
		rc = ulp_ns_mknod(ulp_fs_of(req)->st, parent, name, mode,
		                  (uint64_t)rdev, uid, gid, &a);
	reply_entry_or_err(req, rc, &a);
}

static void live_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                       mode_t mode)
{
	ulp_attr a;
	uid_t uid;
	gid_t gid;
	mode = (mode & 07777) | S_IFDIR;
	int rc = ulp_fs_new_owner(req, parent, &mode, &uid, &gid);
	if (rc == 0)
		rc = ulp_ns_mkdir(ulp_fs_of(req)->st, parent, name, mode, uid,
		                  gid, &a);
	reply_entry_or_err(req, rc, &a);
}

static void live_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                         const char *name)
{
	ulp_attr a;
	uid_t uid;
	gid_t gid;
	mode_t mode = S_IFLNK | 0777;
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

static void live_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int rc = ulp_ns_unlink(ulp_fs_of(req)->st, parent, name);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

static void live_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int rc = ulp_ns_rmdir(ulp_fs_of(req)->st, parent, name);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

static void live_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                        fuse_ino_t newparent, const char *newname,
                        unsigned int flags)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	unsigned uf = 0;
	if (flags & RENAME_NOREPLACE)
		uf |= ULP_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		uf |= ULP_RENAME_EXCHANGE;
	if (flags & RENAME_WHITEOUT)
		uf |= ULP_RENAME_WHITEOUT;
	/* Unknown flags; the store refuses contradictory ones, and
	 * RENAME_EXCHANGE where it cannot swap, with -EINVAL. */
	if (flags &
	    ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	int rc = ulp_ns_rename_as(ulp_fs_of(req)->st, parent, name, newparent,
	                          newname, uf, ctx->uid, ctx->gid);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

static void live_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                      const char *newname)
{
	ulp_attr a;
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

static int dir_fill_cb(void *opaque, const char *name, const ulp_attr *attr,
                       uint64_t next_off)
{
	struct stat st;
	ulp_fs_attr_to_stat(attr, &st);
	return ulp_fs_dirbuf_add(opaque, name, &st, next_off);
}

static int live_readdir(ulp_fs_dirbuf *d, fuse_ino_t ino, uint64_t off)
{
	return ulp_ns_readdir(d->fs->st, ino, off, dir_fill_cb, d);
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

const ulp_fs_node_ops ulp_fs_live_ops = {
	.control = 0,
	.stat = live_stat,
	.lookup = live_lookup,
	.readdir = live_readdir,
	.open = ulp_fs_live_open,
	.setattr = live_setattr,
	.readlink = live_readlink,
	.setxattr = ulp_fs_live_setxattr,
	.getxattr = ulp_fs_live_getxattr,
	.listxattr = ulp_fs_live_listxattr,
	.removexattr = ulp_fs_live_removexattr,
	.mknod = live_mknod,
	.mkdir = live_mkdir,
	.symlink = live_symlink,
	.create = ulp_fs_live_create,
	.unlink = live_unlink,
	.rmdir = live_rmdir,
	.rename = live_rename,
	.link = live_link,
};
