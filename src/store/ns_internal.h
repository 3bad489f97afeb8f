/*
 * ns_internal.h - helpers shared by the namespace operations
 * (namespace.c, rename.c, setattr.c).  All with ulp_store.mu held.
 */
#ifndef ULP_STORE_NS_INTERNAL_H
#define ULP_STORE_NS_INTERNAL_H

#include "store/store_core.h"

#define ULP_NAME_MAX 255
#define ULP_PATH_MAX 4096
/* Most names one inode may have (ext4 has 65000). */
#define ULP_LINK_MAX 65000

/* How long a file just created waits in the queue before it may be
 * committed empty (namespace.c): far longer than the gap between FUSE's
 * create and the open that follows it. */
#define ULP_CREATE_GRACE_NS (2 * 1000000000ll)

/* A symlink's target from a query of (kind, target) (namespace.c; mu
 * held): as ulp_ns_readlink. */
int ulp_ns_target_of(ulp_store *st, sqlite3_stmt *s, char *buf, size_t size);

/* 0, -EINVAL (empty, ".", "..", a slash) or -ENAMETOOLONG. */
int ulp_ns_check_name(const char *name);
/* Attributes of a row, with the in-memory state of an open or staged
 * file laid over it. */
void ulp_ns_attr_of(ulp_store *st, const ulp_cat_inode *r, ulp_attr *a);
/* The row of a directory: 0, -ENOENT, -ENOTDIR. */
int ulp_ns_dir_row(ulp_store *st, uint64_t ino, ulp_cat_inode *row);
/* A file loses its last name, inside the caller's transaction: an idle
 * file is destroyed, an open one keeps its row with nlink 0 and is
 * returned in *held for ulp_ns_unlinked_done() after the commit. */
int ulp_ns_drop_file(ulp_store *st, uint64_t ino, ulp_obj_list *dead,
                     ulp_inode **held);
void ulp_ns_unlinked_done(ulp_store *st, ulp_inode *in);

/* An entry of row (whose path was old_path, NULL when not a file) is
 * gone, inside the caller's transaction: with other names left, nlink
 * drops and ctime changes (versions follow the inode to its next name);
 * the last name drops the inode (ulp_ns_drop_file for a file, *held as
 * there). */
int ulp_ns_drop_name(ulp_store *st, const ulp_cat_inode *row,
                     const char *old_path, ulp_obj_list *dead,
                     ulp_inode **held);

/* Inside a new inode's transaction, after its row is inserted: inherit
 * parent's default ACL (acl.c); row->mode is updated, in the row too. */
int ulp_acl_inherit(ulp_store *st, uint64_t parent, ulp_cat_inode *row);
/* An access ACL is being set on row (in the caller's transaction): the
 * mode's permission bits become the ACL's (row->mode and the catalog);
 * *store_it is 0 when the mode says all the ACL does.  -EINVAL for a
 * malformed ACL. */
int ulp_acl_access_set(ulp_store *st, ulp_cat_inode *row, const void *acl,
                       size_t len, int *store_it);
/* chmod of ino to mode (in the caller's transaction): its access ACL, if
 * any, follows. */
int ulp_acl_chmod(ulp_store *st, uint64_t ino, uint32_t mode);

#endif /* ULP_STORE_NS_INTERNAL_H */
