/*
 * fs_node.h - kinds of node and their operations (src/fs only).
 *
 * As in the kernel's fs/, each kind of node has one table of operations,
 * chosen from its node id once per request (ulp_fs_node); the
 * fuse_lowlevel_ops entries (fs_node.c) dispatch through it.  The tables
 * live with their implementations: ulp_fs_live_ops in fs_ops.c for the
 * live tree (files, directories, symlinks and special files: the store
 * knows their type and answers ENOTDIR, EISDIR, ... itself), the control
 * directory's kinds in fs_ctl.c.
 *
 * What is common to every kind lives in fs_node.c too: name checks, the
 * read-only refusals, stat and directory-entry helpers.  fs_ops.c and
 * fs_ctl.c use those and never each other.
 */
#ifndef ULP_FS_NODE_H
#define ULP_FS_NODE_H

#include <string.h>

#include "fs/fs_internal.h"

/* A directory listing being filled for one readdir or readdirplus. */
typedef struct ulp_fs_dirbuf {
	fuse_req_t req;
	ulp_fs *fs;
	char *buf;
	size_t size, pos;
	int plus, count;
} ulp_fs_dirbuf;

/* One kind of node.  A NULL entry is an operation the kind does not
 * have; the dispatcher then answers as for a read-only node: EROFS for
 * changes, ENOTDIR for lookup and readdir, EINVAL for readlink, ENODATA
 * and an empty list for extended attributes; open: the node is a
 * directory (EISDIR once it exists). */
typedef struct ulp_fs_node_ops {
	/* The control directory: renames and links between it and the live
	 * tree fail with EXDEV, as between two filesystems. */
	int control;
	/* Attributes of node ino: 0 or -errno (getattr, opendir). */
	int (*stat)(ulp_fs *fs, fuse_ino_t ino, struct stat *st);
	/* Entry name of directory dir (the name was checked): 0 or -errno. */
	int (*lookup)(ulp_fs *fs, fuse_ino_t dir, const char *name,
	              struct fuse_entry_param *e);
	/* Entries of directory ino from offset off into d: 0 or -errno. */
	int (*readdir)(ulp_fs_dirbuf *d, fuse_ino_t ino, uint64_t off);
	void (*open)(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

	/* Changes to the node. */
	void (*setattr)(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
	                int to_set, struct fuse_file_info *fi);
	void (*readlink)(fuse_req_t req, fuse_ino_t ino);
	void (*setxattr)(fuse_req_t req, fuse_ino_t ino, const char *name,
	                 const char *value, size_t size, int flags);
	void (*getxattr)(fuse_req_t req, fuse_ino_t ino, const char *name,
	                 size_t size);
	void (*listxattr)(fuse_req_t req, fuse_ino_t ino, size_t size);
	void (*removexattr)(fuse_req_t req, fuse_ino_t ino, const char *name);
	/* A read-only view's one extended attribute, its access ACL (for
	 * kinds without getxattr and listxattr): as ulp_xattr_get, -ENODATA
	 * for none. */
	ssize_t (*acl)(ulp_fs *fs, fuse_ino_t ino, void *buf, size_t size);

	/* Changes to the names in directory parent; the dispatcher checked
	 * the names (and for rename and link, that neither end is in the
	 * control directory). */
	void (*mknod)(fuse_req_t req, fuse_ino_t parent, const char *name,
	              mode_t mode, dev_t rdev);
	void (*mkdir)(fuse_req_t req, fuse_ino_t parent, const char *name,
	              mode_t mode);
	void (*symlink)(fuse_req_t req, const char *link, fuse_ino_t parent,
	                const char *name);
	void (*create)(fuse_req_t req, fuse_ino_t parent, const char *name,
	               mode_t mode, struct fuse_file_info *fi);
	void (*unlink)(fuse_req_t req, fuse_ino_t parent, const char *name);
	void (*rmdir)(fuse_req_t req, fuse_ino_t parent, const char *name);
	void (*rename)(fuse_req_t req, fuse_ino_t parent, const char *name,
	               fuse_ino_t newparent, const char *newname,
	               unsigned int flags);
	void (*link)(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	             const char *newname);
} ulp_fs_node_ops;

/* The live tree (fs_ops.c). */
extern const ulp_fs_node_ops ulp_fs_live_ops;
/* The control directory (fs_ctl.c): .ulpfs itself; versions/ and its
 * mirror directories; snapshots/ and every entry below it (fs_snap.c); a
 * version file; a node id of the control range that names nothing. */
extern const ulp_fs_node_ops ulp_ctl_root_ops, ulp_ctl_versions_ops,
	ulp_ctl_snapshots_ops, ulp_ctl_vfile_ops, ulp_ctl_none_ops;

/* The operations of node ino, by its node id (ULP_CTL_* bits). */
const ulp_fs_node_ops *ulp_fs_node(fuse_ino_t ino);

/* The control directory's name at the root of the live tree: reserved
 * there (EEXIST to make, EROFS to remove or rename). */
static inline int ulp_fs_is_reserved(fuse_ino_t parent, const char *name)
{
	return parent == FUSE_ROOT_ID && strcmp(name, ULP_CTL_NAME) == 0;
}

/* 0, or ENAMETOOLONG / EINVAL for a name no directory may hold. */
int ulp_fs_check_name(const char *name);

/* Stat and entry helpers shared by every kind. */
void ulp_fs_attr_to_stat(const ulp_attr *a, struct stat *st);
/* e for node st->st_ino with attributes st and the mount's timeouts. */
void ulp_fs_entry_of(const ulp_fs *fs, const struct stat *st,
                     struct fuse_entry_param *e);
/* Add an entry to d; 1 when it does not fit (it then comes first in the
 * next call), else 0.  next_off: the offset of the entry after it. */
int ulp_fs_dirbuf_add(ulp_fs_dirbuf *d, const char *name, const struct stat *st,
                      uint64_t next_off);

/* Live-tree operations kept in fs_file.c and fs_xattr.c, for the table
 * in fs_ops.c. */
void ulp_fs_live_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                        mode_t mode, struct fuse_file_info *fi);
void ulp_fs_live_open(fuse_req_t req, fuse_ino_t ino,
                      struct fuse_file_info *fi);
void ulp_fs_live_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                          const char *value, size_t size, int flags);
void ulp_fs_live_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                          size_t size);
void ulp_fs_live_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void ulp_fs_live_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/* getxattr and listxattr replies (fs_xattr.c) over a kind's getter:
 * ACL names refused where the kernel does not enforce them, sizes capped,
 * the length for size 0, ERANGE, ENODATA. */
typedef ssize_t (*ulp_fs_xattr_get_fn)(ulp_fs *fs, fuse_ino_t ino,
                                       const char *name, void *buf,
                                       size_t size);
typedef ssize_t (*ulp_fs_xattr_list_fn)(ulp_fs *fs, fuse_ino_t ino, char *buf,
                                        size_t size);
void ulp_fs_reply_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                           size_t size, ulp_fs_xattr_get_fn get);
void ulp_fs_reply_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size,
                            ulp_fs_xattr_list_fn list);
/* The names of a node whose one extended attribute is an access ACL of n
 * bytes (n as ulp_xattr_get answers with size 0: -ENODATA for none): none
 * where the kernel does not enforce ACLs; as listxattr answers. */
ssize_t ulp_fs_acl_names(const ulp_fs *fs, ssize_t n, char *buf, size_t size);
/* Reply to an open of version file ino (version id version) with a
 * read-only handle that keeps its page cache (fs_file.c). */
void ulp_fs_open_version(fuse_req_t req, fuse_ino_t ino, uint64_t version,
                         struct fuse_file_info *fi);

#endif /* ULP_FS_NODE_H */
