/*
 * fs_node.c - the fuse_lowlevel_ops entries that name a node: each picks
 * the node's kind from its id once and dispatches to that kind's table
 * (fs_node.h).  What holds for every kind is decided here, as the VFS
 * does: names too long or malformed, the read-only control directory
 * (EROFS), renames and links across it and the live tree (EXDEV), its
 * reserved name at the root.  Also the stat and directory-entry helpers
 * that every kind shares.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_node.h"

/* The kind bits of a node id (ULP_CTL_*, fs_internal.h): read here only,
 * once per request. */
static int ctl_is(uint64_t ino)
{
	return (ino & ULP_CTL_BIT) != 0;
}
static int ctl_is_vdir(uint64_t ino)
{
	return (ino & (ULP_CTL_BIT | ULP_CTL_KINDS)) ==
	       (ULP_CTL_BIT | ULP_CTL_K_VDIR);
}
static int ctl_is_sdir(uint64_t ino)
{
	return (ino & (ULP_CTL_BIT | ULP_CTL_KINDS)) ==
	       (ULP_CTL_BIT | ULP_CTL_K_SDIR);
}
static int ctl_is_vfile(uint64_t ino)
{
	return (ino & (ULP_CTL_BIT | ULP_CTL_K_VDIR | ULP_CTL_K_VFILE)) ==
	       (ULP_CTL_BIT | ULP_CTL_K_VFILE);
}

const ulp_fs_node_ops *ulp_fs_node(fuse_ino_t ino)
{
	if (!ctl_is(ino))
		return &ulp_fs_live_ops;
	if (ctl_is_sdir(ino) || ino == ULP_CTL_SNAPSHOTS)
		return &ulp_ctl_snapshots_ops;
	if (ctl_is_vdir(ino) || ino == ULP_CTL_VERSIONS)
		return &ulp_ctl_versions_ops;
	if (ctl_is_vfile(ino))
		return &ulp_ctl_vfile_ops;
	if (ino == ULP_CTL_ROOT)
		return &ulp_ctl_root_ops;
	return &ulp_ctl_none_ops;
}

/* ------------------------------------------------------- shared helpers */

int ulp_fs_check_name(const char *name)
{
	size_t n = strnlen(name, ULP_FS_NAME_MAX + 1);
	if (n > ULP_FS_NAME_MAX)
		return ENAMETOOLONG;
	if (n == 0 || strchr(name, '/'))
		return EINVAL;
	return 0;
}

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

void ulp_fs_entry_of(const ulp_fs *fs, const struct stat *st,
                     struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = (fuse_ino_t)st->st_ino;
	e->generation = 0;
	e->attr = *st;
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
}

int ulp_fs_dirbuf_add(ulp_fs_dirbuf *d, const char *name, const struct stat *st,
                      uint64_t next_off)
{
	size_t left = d->size - d->pos, n;
	if (next_off > (uint64_t)INT64_MAX)
		return 1; /* not representable as an off_t: treat as full */
	if (d->plus) {
		struct fuse_entry_param e;
		ulp_fs_entry_of(d->fs, st, &e);
		n = fuse_add_direntry_plus(d->req, d->buf + d->pos, left, name,
		                           &e, (off_t)next_off);
	} else {
		n = fuse_add_direntry(d->req, d->buf + d->pos, left, name, st,
		                      (off_t)next_off);
	}
	if (n > left)
		return 1;
	d->pos += n;
	d->count++;
	return 0;
}

/* ----------------------------------------------------------- node ops */

void ulp_fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ulp_fs *fs = ulp_fs_of(req);
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	struct fuse_entry_param e;
	struct stat st;
	int rc, err = ulp_fs_check_name(name);
	if (err) {
		fuse_reply_err(req, err == EINVAL ? ENOENT : err);
		return;
	}
	if (ulp_fs_is_reserved(parent, name)) {
		/* The control directory is mounted there, so to speak. */
		rc = ulp_ctl_root_ops.stat(fs, ULP_CTL_ROOT, &st);
		if (rc == 0)
			ulp_fs_entry_of(fs, &st, &e);
	} else {
		rc = n->lookup ? n->lookup(fs, parent, name, &e) : -ENOTDIR;
	}
	if (rc < 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		fuse_reply_entry(req, &e);
}

void ulp_fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
	ulp_fs *fs = ulp_fs_of(req);
	struct stat st;
	(void)fi;
	int rc = ulp_fs_node(ino)->stat(fs, ino, &st);
	if (rc < 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		fuse_reply_attr(req, &st, fs->attr_timeout);
}

void ulp_fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                       int to_set, struct fuse_file_info *fi)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	if (n->setattr)
		n->setattr(req, ino, attr, to_set, fi);
	else
		fuse_reply_err(req, EROFS);
}

void ulp_fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	if (n->readlink)
		n->readlink(req, ino);
	else
		fuse_reply_err(req, EINVAL); /* not a symlink */
}

void ulp_fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	struct stat st;
	if (n->open) {
		n->open(req, ino, fi);
		return;
	}
	int rc = n->stat(ulp_fs_of(req), ino, &st);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : EISDIR);
}

void ulp_fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
	struct stat st;
	int rc = ulp_fs_node(ino)->stat(ulp_fs_of(req), ino, &st);
	if (rc == 0 && !S_ISDIR(st.st_mode))
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

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       int plus)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	ulp_fs_dirbuf d = {
		.req = req, .fs = ulp_fs_of(req), .size = size, .plus = plus
	};
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!n->readdir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	d.buf = malloc(size ? size : 1);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = n->readdir(&d, ino, (uint64_t)off);
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

/* ------------------------------------------------------ extended attrs */

void ulp_fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        const char *value, size_t size, int flags)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	if (n->setxattr)
		n->setxattr(req, ino, name, value, size, flags);
	else
		fuse_reply_err(req, EROFS);
}

/* A read-only view's attributes: its access ACL and nothing else. */
static ssize_t view_get(ulp_fs *fs, fuse_ino_t ino, const char *name, void *buf,
                        size_t size)
{
	if (strcmp(name, ULP_ACL_ACCESS) != 0)
		return -ENODATA;
	return ulp_fs_node(ino)->acl(fs, ino, buf, size);
}

ssize_t ulp_fs_acl_names(const ulp_fs *fs, ssize_t n, char *buf, size_t size)
{
	if (!fs->posix_acl || n == -ENODATA)
		return 0; /* not offered where the kernel does not check it */
	if (n < 0)
		return n;
	if (size && size < sizeof(ULP_ACL_ACCESS))
		return -ERANGE;
	if (size)
		memcpy(buf, ULP_ACL_ACCESS, sizeof(ULP_ACL_ACCESS));
	return (ssize_t)sizeof(ULP_ACL_ACCESS);
}

static ssize_t view_list(ulp_fs *fs, fuse_ino_t ino, char *buf, size_t size)
{
	ssize_t n = fs->posix_acl ? ulp_fs_node(ino)->acl(fs, ino, NULL, 0) : 0;
	return ulp_fs_acl_names(fs, n, buf, size);
}

void ulp_fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        size_t size)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	if (n->getxattr)
		n->getxattr(req, ino, name, size);
	else if (n->acl && ulp_fs_of(req)->posix_acl)
		ulp_fs_reply_getxattr(req, ino, name, size, view_get);
	else /* a view has no ACL where the kernel does not check one */
		fuse_reply_err(req, ENODATA);
}

void ulp_fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	if (n->listxattr)
		n->listxattr(req, ino, size);
	else if (n->acl)
		ulp_fs_reply_listxattr(req, ino, size, view_list);
	else if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, "", 0);
}

void ulp_fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	if (n->removexattr)
		n->removexattr(req, ino, name);
	else
		fuse_reply_err(req, EROFS);
}

/* ----------------------------------------------------------- names */

/* Whether name may be made in parent, whose kind has the operation when
 * can: 0, ENAMETOOLONG or EINVAL, EROFS, EEXIST for the reserved name.
 * create, mknod, mkdir and symlink all pass here. */
static int new_err(int can, fuse_ino_t parent, const char *name)
{
	int err = ulp_fs_check_name(name);
	if (err)
		return err;
	if (!can)
		return EROFS;
	return ulp_fs_is_reserved(parent, name) ? EEXIST : 0;
}

/* The same for removing or renaming name: the control directory and
 * its name at the root are read-only. */
static int change_err(int can, fuse_ino_t parent, const char *name)
{
	int err = ulp_fs_check_name(name);
	if (err)
		return err == EINVAL ? ENOENT : err;
	return !can || ulp_fs_is_reserved(parent, name) ? EROFS : 0;
}

/* Whether name in parent belongs to the control directory. */
static int in_control(fuse_ino_t parent, const char *name)
{
	return ulp_fs_node(parent)->control || ulp_fs_is_reserved(parent, name);
}

/* Reply err (when non-zero) and return it: the dispatchers below go on to
 * the kind's operation only when the checks above found nothing. */
static int refuse(fuse_req_t req, int err)
{
	if (err)
		fuse_reply_err(req, err);
	return err;
}

void ulp_fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, dev_t rdev)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	if (!refuse(req, new_err(n->mknod != NULL, parent, name)))
		n->mknod(req, parent, name, mode, rdev);
}

void ulp_fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	if (!refuse(req, new_err(n->mkdir != NULL, parent, name)))
		n->mkdir(req, parent, name, mode);
}

void ulp_fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                       const char *name)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	if (!refuse(req, new_err(n->symlink != NULL, parent, name)))
		n->symlink(req, link, parent, name);
}

void ulp_fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode, struct fuse_file_info *fi)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	if (!refuse(req, new_err(n->create != NULL, parent, name)))
		n->create(req, parent, name, mode, fi);
}

void ulp_fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	if (!refuse(req, change_err(n->unlink != NULL, parent, name)))
		n->unlink(req, parent, name);
}

void ulp_fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	if (!refuse(req, change_err(n->rmdir != NULL, parent, name)))
		n->rmdir(req, parent, name);
}

void ulp_fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname,
                      unsigned int flags)
{
	const ulp_fs_node_ops *n = ulp_fs_node(parent);
	const ulp_fs_node_ops *nn = ulp_fs_node(newparent);
	int err = change_err(n->rename != NULL, parent, name);
	if (!err)
		err = change_err(nn->rename != NULL, newparent, newname);
	/* Between the control directory and the live tree, as between two
	 * filesystems: EXDEV (mv(1) then copies, and fails on EROFS). */
	if (err == EROFS &&
	    in_control(parent, name) != in_control(newparent, newname))
		err = EXDEV;
	if (!refuse(req, err))
		n->rename(req, parent, name, newparent, newname, flags);
}

void ulp_fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                    const char *newname)
{
	const ulp_fs_node_ops *n = ulp_fs_node(ino);
	int err = ulp_fs_check_name(newname);
	/* The control directory is another filesystem, as far as names
	 * go: nothing links into or out of it. */
	if (!err && (n->control || ulp_fs_node(newparent)->control))
		err = EXDEV;
	if (!err && ulp_fs_is_reserved(newparent, newname))
		err = EEXIST;
	if (!err && !n->link)
		err = EROFS;
	if (!refuse(req, err))
		n->link(req, ino, newparent, newname);
}
