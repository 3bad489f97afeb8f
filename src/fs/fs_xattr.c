/*
 * fs_xattr.c - FUSE extended attribute operations: setxattr, getxattr,
 * listxattr, removexattr, over the store's (ulp_xattr_*).
 *
 * POSIX ACLs (system.posix_acl_access, _default) are offered only when
 * the kernel enforces them (mounted with default_permissions, so that
 * init asked for FUSE_CAP_POSIX_ACL): an ACL nobody checks would be a
 * lie.  These are the live tree's; snapshots' entries answer through
 * the same replies with what the snapshot recorded (fs_snap.c), and the
 * control directory's other kinds have none (fs_node.c answers for them).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs/fs_node.h"

/* Whether a request for name was answered here: an ACL the kernel does
 * not enforce, with EOPNOTSUPP. */
static int refused(fuse_req_t req, const char *name)
{
	if (strncmp(name, "system.posix_acl_", 17) == 0 &&
	    !ulp_fs_of(req)->posix_acl) {
		fuse_reply_err(req, EOPNOTSUPP);
		return 1;
	}
	return 0;
}

void ulp_fs_live_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                          const char *value, size_t size, int flags)
{
	ulp_fs *fs = ulp_fs_of(req);
	unsigned f = 0;

	if (refused(req, name))
		return;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & XATTR_CREATE)
		f |= ULP_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		f |= ULP_XATTR_REPLACE;
	int rc = ulp_xattr_set(fs->st, ino, name, value, size, f);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}

/* Reply with the size (size 0) or the bytes got gives: rc bytes in buf. */
static void reply_sized(fuse_req_t req, ssize_t rc, size_t size,
                        const char *buf)
{
	if (rc < 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
}

void ulp_fs_reply_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                           size_t size, ulp_fs_xattr_get_fn get)
{
	char *buf = NULL;
	ssize_t rc;

	if (refused(req, name))
		return;
	if (size > ULP_XATTR_SIZE_MAX)
		size = ULP_XATTR_SIZE_MAX; /* nothing longer is stored */
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = get(ulp_fs_of(req), ino, name, buf, size);
	reply_sized(req, rc, size, buf);
	free(buf);
}

void ulp_fs_reply_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size,
                            ulp_fs_xattr_list_fn list)
{
	char *buf = NULL;
	ssize_t rc;

	if (size > ULP_XATTR_INODE_MAX)
		size = ULP_XATTR_INODE_MAX;
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = list(ulp_fs_of(req), ino, buf, size);
	reply_sized(req, rc, size, buf);
	free(buf);
}

static ssize_t live_get(ulp_fs *fs, fuse_ino_t ino, const char *name, void *buf,
                        size_t size)
{
	return ulp_xattr_get(fs->st, ino, name, buf, size);
}

static ssize_t live_list(ulp_fs *fs, fuse_ino_t ino, char *buf, size_t size)
{
	return ulp_xattr_list(fs->st, ino, buf, size);
}

void ulp_fs_live_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                          size_t size)
{
	ulp_fs_reply_getxattr(req, ino, name, size, live_get);
}

void ulp_fs_live_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	ulp_fs_reply_listxattr(req, ino, size, live_list);
}

void ulp_fs_live_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	ulp_fs *fs = ulp_fs_of(req);

	if (refused(req, name))
		return;
	int rc = ulp_xattr_remove(fs->st, ino, name);
	fuse_reply_err(req, rc < 0 ? ulp_fs_errno(rc) : 0);
}
