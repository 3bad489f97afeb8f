/*
 * fs_ctl.c - the hidden, read-only control directory at the root of the
 * mount:
 *
 *   .ulpfs/                          not listed by readdir of the root, so
 *   .ulpfs/versions/                 that ls -a, du, find and rsync of the
 *   .ulpfs/versions/DIR/...          mount see only the live tree; reached
 *   .ulpfs/versions/PATH/N           by name (cd MNT/.ulpfs)
 *   .ulpfs/snapshots/NAME/PATH
 *
 * versions/ mirrors the live directory tree; for a regular file PATH it
 * holds a directory whose entries 1, 2, ... are the versions of PATH that
 * still exist (live or ghost), as read-only files with the size and mtime
 * the file had when each was committed.  Nothing here can be changed
 * (EROFS).
 *
 * Reaching a version needs what reaching its file needs: each directory
 * of versions/ takes the owner, group, mode and ACL of the live directory
 * it mirrors, write bits cleared, and each version file those its file
 * had when it was committed (ulp_version_perm_get), so that with
 * default_permissions the kernel refuses there whom it refuses in the
 * live tree.
 *
 * snapshots/ holds one directory per snapshot; below it its entries
 * appear at the paths they had when the snapshot was taken, with the
 * attributes and extended attributes they had, files reading as their
 * pinned versions, so that loaders open an old checkpoint unmodified
 * (fs_snap.c).
 *
 * Node ids: the store's inode numbers and version ids stay below 2^61, so
 * the top bits mark synthetic nodes (ULP_CTL_*), and fs_node.c picks one
 * of the kinds' tables from them: .ulpfs itself, the versions tree and a
 * version file (at the end of this file), the snapshots tree (fs_snap.c).  The kernel caches their
 * attributes and names for the usual timeouts; version files are immutable
 * and keep their page cache.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_ctl.h"

#define PATH_BUF 16384

void ulp_ctl_dir_stat(const ulp_attr *like, fuse_ino_t ino, struct stat *st)
{
	ulp_fs_attr_to_stat(like, st);
	st->st_ino = (ino_t)ino;
	/* a directory's own bits, read-only; a file's versions: listable */
	st->st_mode = S_IFDIR |
	              (S_ISDIR(like->mode) ? like->mode & 0555 : 0555);
	st->st_nlink = 2;
	st->st_size = 0;
	st->st_blocks = 0;
}

void ulp_ctl_version_stat(const ulp_version_info *v,
                          const ulp_version_perm *perm, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)(ULP_CTL_VFILE_OF(v->id));
	st->st_mode = S_IFREG | perm->mode;
	st->st_nlink = 1;
	st->st_uid = perm->uid;
	st->st_gid = perm->gid;
	st->st_size = (off_t)v->size;
	st->st_blksize = ULP_FS_BLKSIZE;
	st->st_blocks = (blkcnt_t)((v->size + 511) / 512);
	st->st_mtim.tv_sec = v->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = v->mtime_ns % 1000000000;
	st->st_atim = st->st_mtim;
	st->st_ctim.tv_sec = v->created_ns / 1000000000;
	st->st_ctim.tv_nsec = v->created_ns % 1000000000;
}

/* A live inode that versions/ mirrors: a directory or a regular file. */
static int mirrored(ulp_fs *fs, uint64_t ino, ulp_attr *a)
{
	int rc = ulp_ns_getattr(fs->st, ino, a);
	if (rc == 0 && !S_ISDIR(a->mode) && !S_ISREG(a->mode))
		rc = -ENOENT;
	return rc;
}

static int file_path(ulp_fs *fs, uint64_t ino, char **out)
{
	char *p = malloc(PATH_BUF);
	if (!p)
		return -ENOMEM;
	int rc = ulp_ns_path(fs->st, ino, p, PATH_BUF);
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* One version of a path by its sequence number (the store's one lookup). */
static int find_version(ulp_fs *fs, uint64_t ino, uint64_t seq,
                        ulp_version_info *out)
{
	char *path;
	int rc = seq ? file_path(fs, ino, &path) : -ENOENT; /* 0: newest */

	if (rc < 0)
		return rc;
	rc = ulp_version_find(fs->st, path, seq, out);
	free(path);
	return rc;
}

/* ------------------------------------------------------------- stat */

int ulp_ctl_root_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	ulp_attr a;
	int rc = ulp_ns_getattr(fs->st, ULP_ROOT_INO, &a);
	if (rc == 0)
		ulp_ctl_dir_stat(&a, ino, st);
	return rc;
}

static int versions_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	ulp_attr a;
	if (ino == ULP_CTL_VERSIONS)
		return ulp_ctl_root_stat(fs, ino, st);
	int rc = mirrored(fs, ino & ULP_CTL_PAYLOAD, &a);
	if (rc == 0)
		ulp_ctl_dir_stat(&a, ino, st);
	return rc;
}

int ulp_ctl_vfile_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	ulp_version_info v;
	ulp_version_perm p;
	int rc = ulp_version_get(fs->st, ino & ULP_CTL_PAYLOAD, &v);
	if (rc == 0 && v.state == ULP_VERSION_DELETED)
		rc = -ENOENT;
	if (rc == 0)
		rc = ulp_version_perm_get(fs->st, v.id, &p);
	if (rc == 0)
		ulp_ctl_version_stat(&v, &p, st);
	return rc;
}

static int none_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	(void)fs;
	(void)ino;
	(void)st;
	return -ENOENT;
}

int ulp_ctl_entry(ulp_fs *fs, fuse_ino_t ino,
                  int (*stat)(ulp_fs *, fuse_ino_t, struct stat *),
                  struct fuse_entry_param *e)
{
	struct stat st;
	int rc = stat(fs, ino, &st);
	if (rc == 0)
		ulp_fs_entry_of(fs, &st, e);
	return rc;
}

/* ----------------------------------------------------------- lookup */

static int root_lookup(ulp_fs *fs, fuse_ino_t dir, const char *name,
                       struct fuse_entry_param *e)
{
	(void)dir;
	/* Both are fixed directories, with the root's attributes. */
	if (strcmp(name, "versions") == 0)
		return ulp_ctl_entry(fs, ULP_CTL_VERSIONS, ulp_ctl_root_stat,
		                     e);
	if (strcmp(name, "snapshots") == 0)
		return ulp_ctl_entry(fs, ULP_CTL_SNAPSHOTS, ulp_ctl_root_stat,
		                     e);
	return -ENOENT;
}

static int versions_lookup(ulp_fs *fs, fuse_ino_t dir, const char *name,
                           struct fuse_entry_param *e)
{
	uint64_t live = dir == ULP_CTL_VERSIONS ? ULP_ROOT_INO
	                                        : (dir & ULP_CTL_PAYLOAD);
	ulp_attr a;
	int rc = mirrored(fs, live, &a);
	if (rc < 0)
		return rc;
	if (S_ISDIR(a.mode)) {
		rc = ulp_ns_lookup(fs->st, live, name, &a);
		if (rc < 0)
			return rc;
		if (!S_ISDIR(a.mode) && !S_ISREG(a.mode))
			return -ENOENT;
		return ulp_ctl_entry(fs, ULP_CTL_VDIR_OF(a.ino), versions_stat,
		                     e);
	}
	/* A file's directory: entries are sequence numbers. */
	char *end;
	errno = 0;
	unsigned long long seq = strtoull(name, &end, 10);
	ulp_version_info v;
	if (errno || *end || name[0] < '1' || name[0] > '9')
		return -ENOENT;
	rc = find_version(fs, live, seq, &v);
	if (rc < 0)
		return rc;
	return ulp_ctl_entry(fs, ULP_CTL_VFILE_OF(v.id), ulp_ctl_vfile_stat, e);
}

static int none_lookup(ulp_fs *fs, fuse_ino_t dir, const char *name,
                       struct fuse_entry_param *e)
{
	(void)fs;
	(void)dir;
	(void)name;
	(void)e;
	return -ENOENT;
}

/* ---------------------------------------------------------------- listing */

int ulp_ctl_add(ulp_ctl_fill *d, const char *name, const struct stat *st,
                uint64_t next_off)
{
	return ulp_fs_dirbuf_add(d->b, name, st, next_off);
}

int ulp_ctl_dots(ulp_ctl_fill *d, const ulp_attr *like, uint64_t off)
{
	struct stat st;
	ulp_ctl_dir_stat(like, d->self, &st);
	if (off < 1 && ulp_ctl_add(d, ".", &st, 1))
		return 1;
	ulp_ctl_dir_stat(like, d->up, &st);
	if (off < 2 && ulp_ctl_add(d, "..", &st, 2))
		return 1;
	return 0;
}

/* A live directory's entries as mirror directories (offsets: the
 * store's, "." 1 and ".." 2 as in the live tree). */
static int mirror_cb(void *opaque, const char *name, const ulp_attr *attr,
                     uint64_t next_off)
{
	ulp_ctl_fill *d = opaque;
	struct stat st;
	fuse_ino_t ino;
	if (strcmp(name, ".") == 0)
		ino = d->self;
	else if (strcmp(name, "..") == 0)
		ino = d->up;
	else if (S_ISDIR(attr->mode) || S_ISREG(attr->mode))
		ino = ULP_CTL_VDIR_OF(attr->ino);
	else
		return 0; /* symlinks have no versions */
	ulp_ctl_dir_stat(attr, ino, &st);
	return ulp_ctl_add(d, name, &st, next_off);
}

typedef struct vlist {
	ulp_ctl_fill *d;
	uint64_t index, from;
	int full;
} vlist;

/* A file's versions: offset 3 + the index among the listed ones. */
static int vlist_cb(void *opaque, const ulp_version_info *v, const char *path)
{
	vlist *l = opaque;
	char name[24];
	struct stat st;
	(void)path;
	if (v->state == ULP_VERSION_DELETED)
		return 0;
	uint64_t off = 3 + l->index++;
	if (off <= l->from)
		return 0;
	snprintf(name, sizeof(name), "%" PRIu64, v->seq);
	ulp_version_perm p;
	int rc = ulp_version_perm_get(l->d->b->fs->st, v->id, &p);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc; /* deleted meanwhile */
	ulp_ctl_version_stat(v, &p, &st);
	if (ulp_ctl_add(l->d, name, &st, off)) {
		l->full = 1;
		return 1;
	}
	return 0;
}

static int root_readdir(ulp_fs_dirbuf *b, fuse_ino_t ino, uint64_t off)
{
	ulp_ctl_fill d = { .b = b, .self = ino, .up = FUSE_ROOT_ID };
	struct stat st;
	ulp_attr ra;
	int rc = ulp_ns_getattr(b->fs->st, ULP_ROOT_INO, &ra);
	if (rc < 0 || ulp_ctl_dots(&d, &ra, off))
		return rc;
	ulp_ctl_dir_stat(&ra, ULP_CTL_VERSIONS, &st);
	if (off < 3 && ulp_ctl_add(&d, "versions", &st, 3))
		return 0;
	ulp_ctl_dir_stat(&ra, ULP_CTL_SNAPSHOTS, &st);
	if (off < 4)
		ulp_ctl_add(&d, "snapshots", &st, 4);
	return 0;
}

static int versions_readdir(ulp_fs_dirbuf *b, fuse_ino_t ino, uint64_t off)
{
	/* ".." of a mirror: good enough as versions/ (only d_ino). */
	ulp_ctl_fill d = { .b = b, .self = ino, .up = ULP_CTL_VERSIONS };
	uint64_t live = ino & ULP_CTL_PAYLOAD;
	char *path;
	ulp_attr a;
	if (ino == ULP_CTL_VERSIONS) {
		d.up = ULP_CTL_ROOT;
		return ulp_ns_readdir(b->fs->st, ULP_ROOT_INO, off, mirror_cb,
		                      &d);
	}
	int rc = mirrored(b->fs, live, &a);
	if (rc < 0)
		return rc;
	if (S_ISDIR(a.mode))
		return ulp_ns_readdir(b->fs->st, live, off, mirror_cb, &d);
	if (ulp_ctl_dots(&d, &a, off))
		return 0;
	rc = file_path(b->fs, live, &path);
	if (rc < 0)
		return rc;
	vlist l = { .d = &d, .from = off };
	rc = ulp_version_list(b->fs->st, path, vlist_cb, &l);
	free(path);
	return l.full ? 0 : rc;
}

/* ------------------------------------------------------------ ACLs */

/* The fixed directories: the root's ACL, read-only. */
static ssize_t root_acl(ulp_fs *fs, fuse_ino_t ino, void *buf, size_t size)
{
	(void)ino;
	return ulp_xattr_acl_readonly(fs->st, ULP_ROOT_INO, buf, size);
}

/* A mirror: its live directory's ACL, read-only; a file's versions have
 * none (each version has its own). */
static ssize_t versions_acl(ulp_fs *fs, fuse_ino_t ino, void *buf, size_t size)
{
	ulp_attr a;
	if (ino == ULP_CTL_VERSIONS)
		return root_acl(fs, ino, buf, size);
	int rc = mirrored(fs, ino & ULP_CTL_PAYLOAD, &a);
	if (rc < 0)
		return rc;
	if (!S_ISDIR(a.mode))
		return -ENODATA;
	return ulp_xattr_acl_readonly(fs->st, a.ino, buf, size);
}

ssize_t ulp_ctl_vfile_acl(ulp_fs *fs, fuse_ino_t ino, void *buf, size_t size)
{
	return ulp_version_acl_get(fs->st, ino & ULP_CTL_PAYLOAD, buf, size);
}

/* ------------------------------------------------------------- open */

/* Version files are read-only: any open for writing or truncation fails
 * with EROFS. */
static void vfile_open(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
	struct stat st;
	int rc = ulp_ctl_vfile_stat(ulp_fs_of(req), ino, &st);
	if (rc == 0 &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)))
		rc = -EROFS;
	if (rc < 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		ulp_fs_open_version(req, ino, ino & ULP_CTL_PAYLOAD, fi);
}

/* The kinds.  Nothing in the control directory changes (the NULL entries:
 * EROFS), and its only extended attributes are the ACLs of the views. */
const ulp_fs_node_ops ulp_ctl_root_ops = {
	.control = 1,
	.stat = ulp_ctl_root_stat,
	.lookup = root_lookup,
	.readdir = root_readdir,
	.acl = root_acl,
};

const ulp_fs_node_ops ulp_ctl_versions_ops = {
	.control = 1,
	.stat = versions_stat,
	.lookup = versions_lookup,
	.readdir = versions_readdir,
	.acl = versions_acl,
};

const ulp_fs_node_ops ulp_ctl_vfile_ops = {
	.control = 1,
	.stat = ulp_ctl_vfile_stat,
	.open = vfile_open,
	.acl = ulp_ctl_vfile_acl,
};

/* A node id of the control range that names nothing (never handed out). */
const ulp_fs_node_ops ulp_ctl_none_ops = {
	.control = 1,
	.stat = none_stat,
	.lookup = none_lookup,
};
