/*
 * fs_ctl.h - what the control directory's kinds share (src/fs only):
 * fs_ctl.c (.ulpfs itself, the versions tree, version files) and
 * fs_snap.c (the snapshots tree).
 */
#ifndef ULP_FS_CTL_H
#define ULP_FS_CTL_H

#include "fs/fs_node.h"

/* Attributes of a control directory: those of like (owner, times), made
 * a read-only directory with node id ino. */
void ulp_ctl_dir_stat(const ulp_attr *like, fuse_ino_t ino, struct stat *st);
/* Attributes of version v as a read-only file, with the owner, group
 * and mode perm gives (ulp_version_perm_get). */
void ulp_ctl_version_stat(const ulp_version_info *v,
                          const ulp_version_perm *perm, struct stat *st);
/* Attributes of a fixed control directory (.ulpfs, versions/,
 * snapshots/): the root's, as a directory.  0 or -errno. */
int ulp_ctl_root_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st);
/* Attributes of version file ino; -ENOENT once the version is deleted. */
int ulp_ctl_vfile_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st);
/* Its access ACL, read-only, as ulp_xattr_get. */
ssize_t ulp_ctl_vfile_acl(ulp_fs *fs, fuse_ino_t ino, void *buf, size_t size);
/* e for node ino, whose attributes stat gives: 0 or -errno. */
int ulp_ctl_entry(ulp_fs *fs, fuse_ino_t ino,
                  int (*stat)(ulp_fs *, fuse_ino_t, struct stat *),
                  struct fuse_entry_param *e);

/* A listing of a control directory: the buffer, and the node ids of "."
 * and "..". */
typedef struct ulp_ctl_fill {
	ulp_fs_dirbuf *b;
	fuse_ino_t self, up;
} ulp_ctl_fill;

/* Add one entry; 1 when the buffer is full. */
int ulp_ctl_add(ulp_ctl_fill *d, const char *name, const struct stat *st,
                uint64_t next_off);
/* "." and ".." (offsets 1 and 2) from off, with like's attributes; 1
 * when the buffer is full. */
int ulp_ctl_dots(ulp_ctl_fill *d, const ulp_attr *like, uint64_t off);

#endif /* ULP_FS_CTL_H */
