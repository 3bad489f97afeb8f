/*
 * fs_snap.c - the snapshots tree of the control directory (one kind,
 * ulp_ctl_snapshots_ops): .ulpfs/snapshots/ and everything below it.  A
 * snapshot's entries appear at the paths they had when it was taken, with
 * the attributes their inodes had then (owner, mode, times, a device's
 * number, a symlink's target), their extended attributes and ACLs, and
 * hard links as one node with several names; regular files read as their
 * pinned versions.  Snapshots taken before the store recorded inodes show
 * their files as version files (fs_ctl.c) below directories that the
 * paths imply.  Nothing here changes (the dispatcher answers EROFS).
 *
 * Entries have no node of their own in the store, so each one seen gets
 * a node id: an index into ulp_fs.sdirs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_ctl.h"

/* ------------------------------------------------------- node ids */

void ulp_ctl_free(ulp_fs *fs)
{
	for (size_t i = 0; i < fs->nsdirs; i++) {
		free(fs->sdirs[i].snap);
		free(fs->sdirs[i].path);
	}
	free(fs->sdirs);
	free(fs->sdir_heads);
	fs->sdirs = NULL;
	fs->sdir_heads = NULL;
	fs->nsdirs = fs->capsdirs = fs->nheads = 0;
	pthread_mutex_destroy(&fs->sdirs_mu);
}

/* The key of an entry: (snap, sino), or (snap, path) when sino is 0. */
static size_t key_hash(const char *snap, const char *path, uint64_t sino)
{
	uint64_t h = 1469598103934665603ull ^ sino;
	for (const char *p = snap; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = (h ^ '/') * 1099511628211ull;
	for (const char *p = sino ? "" : path; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return (size_t)(h ^ (h >> 29));
}

static int key_eq(const struct ulp_sdir *d, const char *snap, const char *path,
                  uint64_t sino)
{
	return d->sino == sino && strcmp(d->snap, snap) == 0 &&
	       (sino || strcmp(d->path, path) == 0);
}

/* Keep about one entry per chain.  sdirs_mu held. */
static int rehash(ulp_fs *fs)
{
	size_t n = fs->nheads ? fs->nheads * 2 : 64;
	size_t *h = calloc(n, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < fs->nsdirs; i++) {
		struct ulp_sdir *d = &fs->sdirs[i];
		size_t b = key_hash(d->snap, d->path, d->sino) % n;
		d->next = h[b];
		h[b] = i + 1;
	}
	free(fs->sdir_heads);
	fs->sdir_heads = h;
	fs->nheads = n;
	return 0;
}

/* The node id of entry (snap, path, sino), added when new. */
static int sdir_intern(ulp_fs *fs, const char *snap, const char *path,
                       uint64_t sino, fuse_ino_t *out)
{
	int rc = 0;
	pthread_mutex_lock(&fs->sdirs_mu);
	size_t h = key_hash(snap, path, sino);
	for (size_t i = fs->nheads ? fs->sdir_heads[h % fs->nheads] : 0; i;
	     i = fs->sdirs[i - 1].next)
		if (key_eq(&fs->sdirs[i - 1], snap, path, sino)) {
			*out = ULP_CTL_SDIR_OF(i);
			goto out;
		}
	if (fs->nsdirs == fs->capsdirs) {
		size_t nc = fs->capsdirs ? fs->capsdirs * 2 : 16;
		struct ulp_sdir *v = realloc(fs->sdirs, nc * sizeof(*v));
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		fs->sdirs = v;
		fs->capsdirs = nc;
	}
	if (fs->nsdirs >= fs->nheads && (rc = rehash(fs)) < 0)
		goto out;
	char *a = strdup(snap), *b = strdup(path);
	if (!a || !b) {
		free(a);
		free(b);
		rc = -ENOMEM;
		goto out;
	}
	struct ulp_sdir *d = &fs->sdirs[fs->nsdirs++];
	*d = (struct ulp_sdir){ .snap = a, .path = b, .sino = sino };
	d->next = fs->sdir_heads[h % fs->nheads];
	fs->sdir_heads[h % fs->nheads] = fs->nsdirs;
	*out = ULP_CTL_SDIR_OF(fs->nsdirs);
out:
	pthread_mutex_unlock(&fs->sdirs_mu);
	return rc;
}

/* An entry by node id: copies of its snapshot's name and one of its paths
 * (free both), and what the snapshot recorded.  -ENOENT once the snapshot
 * is gone (or was taken again without it). */
typedef struct snode {
	char *snap, *path;
	ulp_snapshot_node n;
} snode;

static void snode_free(snode *s)
{
	free(s->snap);
	free(s->path);
}

static int snode_get(ulp_fs *fs, fuse_ino_t ino, snode *out)
{
	uint64_t i = ino & ULP_CTL_PAYLOAD, sino = 0;
	int rc = 0;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&fs->sdirs_mu);
	if (i == 0 || i > fs->nsdirs) {
		rc = -ENOENT;
	} else {
		out->snap = strdup(fs->sdirs[i - 1].snap);
		out->path = strdup(fs->sdirs[i - 1].path);
		sino = fs->sdirs[i - 1].sino;
		if (!out->snap || !out->path)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&fs->sdirs_mu);
	if (rc == 0)
		rc = ulp_snapshot_node_get(fs->st, out->snap, out->path,
		                           &out->n);
	if (rc == 0 && (out->n.recorded ? out->n.a.ino : 0) != sino)
		rc = -ENOENT;
	if (rc < 0)
		snode_free(out);
	return rc;
}

/* Attributes of an entry not recorded: a pin, as its version file; a
 * directory implied by the paths, as the live directory at its path, else
 * as the root's owner's alone (0500). */
static int implied_stat(ulp_fs *fs, fuse_ino_t ino, const ulp_snapshot_node *n,
                        struct stat *st)
{
	ulp_version_info v;
	ulp_version_perm p;
	ulp_attr a;
	int rc;
	if (S_ISREG(n->a.mode)) {
		rc = ulp_version_get(fs->st, n->version, &v);
		if (rc == 0)
			rc = ulp_version_perm_get(fs->st, v.id, &p);
		if (rc == 0)
			ulp_ctl_version_stat(&v, &p, st);
		return rc;
	}
	rc = n->live ? ulp_ns_getattr(fs->st, n->live, &a) : -ENOENT;
	if (rc == -ENOENT &&
	    (rc = ulp_ns_getattr(fs->st, ULP_ROOT_INO, &a)) == 0)
		a.mode = S_IFDIR | 0500;
	if (rc == 0)
		ulp_ctl_dir_stat(&a, ino, st);
	return rc;
}

/* Attributes of entry n with node id ino. */
static int snode_stat(ulp_fs *fs, fuse_ino_t ino, const ulp_snapshot_node *n,
                      struct stat *st)
{
	int rc = 0;
	if (n->recorded)
		ulp_fs_attr_to_stat(&n->a, st);
	else
		rc = implied_stat(fs, ino, n, st);
	st->st_ino = (ino_t)ino;
	return rc;
}

/* The node id and attributes of entry path of snap. */
static int snode_lookup(ulp_fs *fs, const char *snap, const char *path,
                        struct stat *st)
{
	ulp_snapshot_node n;
	fuse_ino_t ino = 0;
	int rc = ulp_snapshot_node_get(fs->st, snap, path, &n);
	if (rc == 0)
		rc = sdir_intern(fs, snap, path, n.recorded ? n.a.ino : 0,
		                 &ino);
	return rc < 0 ? rc : snode_stat(fs, ino, &n, st);
}

/* ------------------------------------------------------ the kind */

static int snapshots_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	snode s;
	if (ino == ULP_CTL_SNAPSHOTS)
		return ulp_ctl_root_stat(fs, ino, st);
	int rc = snode_get(fs, ino, &s);
	if (rc == 0) {
		rc = snode_stat(fs, ino, &s.n, st);
		snode_free(&s);
	}
	return rc;
}

/* A directory of the tree by node id (the snapshot's root: path ""). */
static int sdir_get(ulp_fs *fs, fuse_ino_t ino, snode *out)
{
	int rc = snode_get(fs, ino, out);
	if (rc == 0 && !S_ISDIR(out->n.a.mode)) {
		snode_free(out);
		rc = -ENOTDIR;
	}
	return rc;
}

static int snapshots_lookup(ulp_fs *fs, fuse_ino_t dir, const char *name,
                            struct fuse_entry_param *e)
{
	struct stat st;
	char *child = NULL;
	snode s;
	int rc;
	if (dir == ULP_CTL_SNAPSHOTS) {
		rc = snode_lookup(fs, name, "", &st);
	} else if ((rc = sdir_get(fs, dir, &s)) == 0) {
		if (asprintf(&child, "%s%s%s", s.path, s.path[0] ? "/" : "",
		             name) < 0) {
			child = NULL;
			rc = -ENOMEM;
		} else {
			rc = snode_lookup(fs, s.snap, child, &st);
		}
		free(child);
		snode_free(&s);
	}
	if (rc == 0)
		ulp_fs_entry_of(fs, &st, e);
	return rc;
}

/* Snapshots (offset 3 + index) and the entries of a snapshot directory
 * (offset 3 + index among its names). */
typedef struct slist {
	ulp_ctl_fill *d;
	uint64_t index, from;
	int full;
	const char *snap, *path;
} slist;

/* Add entry path of snapshot snap as name: 1 when full. */
static int slist_add(slist *l, const char *snap, const char *path,
                     const char *name)
{
	struct stat st;
	uint64_t off = 3 + l->index++;
	if (off <= l->from)
		return 0;
	int rc = snode_lookup(l->d->b->fs, snap, path, &st);
	if (rc == -ENOENT)
		return 0; /* deleted meanwhile */
	if (rc < 0)
		return rc;
	if (ulp_ctl_add(l->d, name, &st, off)) {
		l->full = 1;
		return 1;
	}
	return 0;
}

static int snap_cb(void *opaque, const char *name,
                   const ulp_snapshot_info *info)
{
	(void)info;
	return slist_add(opaque, name, "", name);
}

static int child_cb(void *opaque, const char *name)
{
	slist *l = opaque;
	char *path = NULL;
	if (asprintf(&path, "%s%s%s", l->path, l->path[0] ? "/" : "", name) < 0)
		return -ENOMEM;
	int rc = slist_add(l, l->snap, path, name);
	free(path);
	return rc;
}

static int snapshots_readdir(ulp_fs_dirbuf *b, fuse_ino_t ino, uint64_t off)
{
	ulp_ctl_fill d = { .b = b, .self = ino, .up = ULP_CTL_ROOT };
	slist l = { .d = &d, .from = off };
	snode s;
	ulp_attr ra;
	int rc = ulp_ns_getattr(b->fs->st, ULP_ROOT_INO, &ra);
	if (rc < 0)
		return rc;
	if (ino == ULP_CTL_SNAPSHOTS) {
		if (ulp_ctl_dots(&d, &ra, off))
			return 0;
		rc = ulp_snapshot_list(b->fs->st, snap_cb, &l);
		return l.full ? 0 : rc;
	}
	d.up = ULP_CTL_SNAPSHOTS; /* only d_ino: good enough for ".." */
	rc = sdir_get(b->fs, ino, &s);
	if (rc < 0)
		return rc;
	if (ulp_ctl_dots(&d, &ra, off) == 0) {
		l.snap = s.snap;
		l.path = s.path;
		rc = ulp_snapshot_children(b->fs->st, s.snap, s.path, child_cb,
		                           &l);
	}
	snode_free(&s);
	return l.full ? 0 : rc;
}

/* Regular files open read-only, as their pinned version. */
static void snapshots_open(fuse_req_t req, fuse_ino_t ino,
                           struct fuse_file_info *fi)
{
	snode s;
	int rc = snode_get(ulp_fs_of(req), ino, &s);
	if (rc < 0) {
		fuse_reply_err(req, ulp_fs_errno(rc));
		return;
	}
	if (S_ISDIR(s.n.a.mode))
		rc = -EISDIR;
	else if (!S_ISREG(s.n.a.mode) || (fi->flags & O_ACCMODE) != O_RDONLY ||
	         (fi->flags & O_TRUNC))
		rc = -EROFS;
	if (rc < 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		ulp_fs_open_version(req, ino, s.n.version, fi);
	snode_free(&s);
}

static void snapshots_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	snode s;
	int rc = snode_get(ulp_fs_of(req), ino, &s);
	if (rc == 0) {
		rc = s.n.recorded
		             ? ulp_snapshot_readlink(ulp_fs_of(req)->st, s.snap,
		                                     s.path, buf, sizeof(buf))
		             : -EINVAL;
		snode_free(&s);
	}
	if (rc < 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		fuse_reply_readlink(req, buf);
}

/* The access ACL of an entry not recorded, read-only: its version's, or
 * its live directory's (implied_stat's attributes). */
static ssize_t implied_acl(ulp_fs *fs, const ulp_snapshot_node *n, void *buf,
                           size_t size)
{
	if (S_ISREG(n->a.mode))
		return ulp_version_acl_get(fs->st, n->version, buf, size);
	return n->live ? ulp_xattr_acl_readonly(fs->st, n->live, buf, size)
	               : -ENODATA;
}

/* Extended attributes of recorded entries; the others have their ACL. */
static ssize_t snap_getxattr(ulp_fs *fs, fuse_ino_t ino, const char *name,
                             void *buf, size_t size)
{
	snode s;
	ssize_t rc = snode_get(fs, ino, &s);
	if (rc < 0)
		return rc;
	if (s.n.recorded)
		rc = ulp_snapshot_xattr_get(fs->st, s.snap, s.n.a.ino, name,
		                            buf, size);
	else if (strcmp(name, ULP_ACL_ACCESS) == 0)
		rc = implied_acl(fs, &s.n, buf, size);
	else
		rc = -ENODATA;
	snode_free(&s);
	return rc;
}

static ssize_t snap_listxattr(ulp_fs *fs, fuse_ino_t ino, char *buf,
                              size_t size)
{
	snode s;
	if (ino == ULP_CTL_SNAPSHOTS)
		return 0;
	ssize_t rc = snode_get(fs, ino, &s);
	if (rc < 0)
		return rc;
	if (s.n.recorded) {
		rc = ulp_snapshot_xattr_list(fs->st, s.snap, s.n.a.ino, buf,
		                             size);
	} else {
		rc = fs->posix_acl ? implied_acl(fs, &s.n, NULL, 0) : 0;
		rc = ulp_fs_acl_names(fs, rc, buf, size);
	}
	snode_free(&s);
	return rc;
}

static void snapshots_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                               size_t size)
{
	if (ino == ULP_CTL_SNAPSHOTS) /* as the other fixed directories */
		fuse_reply_err(req, ENODATA);
	else
		ulp_fs_reply_getxattr(req, ino, name, size, snap_getxattr);
}

static void snapshots_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	ulp_fs_reply_listxattr(req, ino, size, snap_listxattr);
}

const ulp_fs_node_ops ulp_ctl_snapshots_ops = {
	.control = 1,
	.stat = snapshots_stat,
	.lookup = snapshots_lookup,
	.readdir = snapshots_readdir,
	.open = snapshots_open,
	.readlink = snapshots_readlink,
	.getxattr = snapshots_getxattr,
	.listxattr = snapshots_listxattr,
};

void ulp_fs_invalidate_snapshot(ulp_fs *fs, const char *name)
{
	if (fs && fs->se)
		(void)fuse_lowlevel_notify_inval_entry(
			fs->se, ULP_CTL_SNAPSHOTS, name, strlen(name));
}
