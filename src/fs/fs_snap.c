/*
 * fs_snap.c - the snapshots tree of the control directory (one kind,
 * ulp_ctl_snapshots_ops): .ulpfs/snapshots/ and the directories below
 * it.  A snapshot's pinned files appear at the paths they had when it
 * was taken, as the version files of fs_ctl.c.
 *
 * Its directories have no inode of their own in the store, so each
 * (snapshot, path) seen gets a node id: an index into ulp_fs.sdirs.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_ctl.h"

/* ------------------------------------------------------- snapshot dirs */

void ulp_ctl_free(ulp_fs *fs)
{
	for (size_t i = 0; i < fs->nsdirs; i++) {
		free(fs->sdirs[i].snap);
		free(fs->sdirs[i].path);
	}
	free(fs->sdirs);
	fs->sdirs = NULL;
	fs->nsdirs = fs->capsdirs = 0;
	pthread_mutex_destroy(&fs->sdirs_mu);
}

/* The node id of directory (snap, path), added when new. */
static int sdir_intern(ulp_fs *fs, const char *snap, const char *path,
                       fuse_ino_t *out)
{
	int rc = 0;
	pthread_mutex_lock(&fs->sdirs_mu);
	for (size_t i = 0; i < fs->nsdirs; i++)
		if (strcmp(fs->sdirs[i].snap, snap) == 0 &&
		    strcmp(fs->sdirs[i].path, path) == 0) {
			*out = ULP_CTL_SDIR_OF(i + 1);
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
	char *a = strdup(snap), *b = strdup(path);
	if (!a || !b) {
		free(a);
		free(b);
		rc = -ENOMEM;
		goto out;
	}
	fs->sdirs[fs->nsdirs].snap = a;
	fs->sdirs[fs->nsdirs].path = b;
	fs->nsdirs++;
	*out = ULP_CTL_SDIR_OF(fs->nsdirs);
out:
	pthread_mutex_unlock(&fs->sdirs_mu);
	return rc;
}

/* Copies of the (snap, path) of a node id (free both). */
static int sdir_get(ulp_fs *fs, fuse_ino_t ino, char **snap, char **path)
{
	uint64_t i = ino & ULP_CTL_PAYLOAD;
	int rc = 0;
	*snap = *path = NULL;
	pthread_mutex_lock(&fs->sdirs_mu);
	if (i == 0 || i > fs->nsdirs) {
		rc = -ENOENT;
	} else {
		*snap = strdup(fs->sdirs[i - 1].snap);
		*path = strdup(fs->sdirs[i - 1].path);
		if (!*snap || !*path)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&fs->sdirs_mu);
	if (rc < 0) {
		free(*snap);
		free(*path);
	}
	return rc;
}

/* Whether a snapshot directory still exists (the snapshot may be gone). */
static int sdir_check(ulp_fs *fs, fuse_ino_t ino)
{
	char *snap, *path;
	uint64_t vid;
	int rc = sdir_get(fs, ino, &snap, &path);
	if (rc < 0)
		return rc;
	rc = ulp_snapshot_lookup(fs->st, snap, path, &vid);
	free(snap);
	free(path);
	return rc == 2 ? 0 : rc < 0 ? rc : -ENOENT;
}

/* ------------------------------------------------------ the kind */

static int snapshots_stat(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	int rc = ino == ULP_CTL_SNAPSHOTS ? 0 : sdir_check(fs, ino);
	return rc < 0 ? rc : ulp_ctl_root_stat(fs, ino, st);
}

static int snapshots_lookup(ulp_fs *fs, fuse_ino_t dir, const char *name,
                            struct fuse_entry_param *e)
{
	char *snap = NULL, *path = NULL, *child = NULL;
	fuse_ino_t ino;
	uint64_t vid = 0;
	int rc;
	if (dir == ULP_CTL_SNAPSHOTS) {
		rc = ulp_snapshot_lookup(fs->st, name, "", &vid);
		if (rc == 2)
			rc = sdir_intern(fs, name, "", &ino);
		else if (rc >= 0)
			rc = -ENOENT;
		return rc < 0 ? rc : ulp_ctl_entry(fs, ino, snapshots_stat, e);
	}
	rc = sdir_get(fs, dir, &snap, &path);
	if (rc < 0)
		return rc;
	if (asprintf(&child, "%s%s%s", path, path[0] ? "/" : "", name) < 0) {
		child = NULL;
		rc = -ENOMEM;
	} else {
		rc = ulp_snapshot_lookup(fs->st, snap, child, &vid);
		if (rc == 1) {
			rc = ulp_ctl_entry(fs, ULP_CTL_VFILE_OF(vid),
			                   ulp_ctl_vfile_stat, e);
		} else if (rc == 2) {
			rc = sdir_intern(fs, snap, child, &ino);
			if (rc == 0)
				rc = ulp_ctl_entry(fs, ino, snapshots_stat, e);
		} else if (rc >= 0) {
			rc = -ENOENT;
		}
	}
	free(snap);
	free(path);
	free(child);
	return rc;
}

/* Snapshots (offset 3 + index) and the entries of a snapshot directory
 * (offset 3 + index among its distinct children). */
typedef struct slist {
	ulp_ctl_fill *d;
	const ulp_attr *like;
	uint64_t index, from;
	int full;
	const char *snap, *path;
	size_t plen;
	char *last; /* the previous child name (items come sorted) */
} slist;

static int slist_cb(void *opaque, const char *name,
                    const ulp_snapshot_info *info)
{
	slist *l = opaque;
	struct stat st;
	fuse_ino_t ino;
	(void)info;
	uint64_t off = 3 + l->index++;
	if (off <= l->from)
		return 0;
	if (sdir_intern(l->d->b->fs, name, "", &ino) < 0)
		return 0;
	ulp_ctl_dir_stat(l->like, ino, &st);
	if (ulp_ctl_add(l->d, name, &st, off)) {
		l->full = 1;
		return 1;
	}
	return 0;
}

static int item_cb(void *opaque, const char *path, const ulp_version_info *v)
{
	slist *l = opaque;
	const char *rest = path + l->plen + (l->plen ? 1 : 0);
	const char *slash = strchr(rest, '/');
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
	struct stat st;
	char *name;
	if (n == 0 || strlen(path) < l->plen)
		return 0;
	name = strndup(rest, n);
	if (!name)
		return -ENOMEM;
	if (l->last && strcmp(l->last, name) == 0) {
		free(name);
		return 0; /* another file below the same directory */
	}
	free(l->last);
	l->last = name;
	uint64_t off = 3 + l->index++;
	if (off <= l->from)
		return 0;
	if (slash) {
		fuse_ino_t ino;
		char *child = NULL;
		if (asprintf(&child, "%.*s", (int)(rest + n - path), path) < 0)
			return -ENOMEM;
		int rc = sdir_intern(l->d->b->fs, l->snap, child, &ino);
		free(child);
		if (rc < 0)
			return rc;
		ulp_ctl_dir_stat(l->like, ino, &st);
	} else {
		ulp_ctl_version_stat(v, l->like, &st);
	}
	if (ulp_ctl_add(l->d, name, &st, off)) {
		l->full = 1;
		return 1;
	}
	return 0;
}

static int snapshots_readdir(ulp_fs_dirbuf *b, fuse_ino_t ino, uint64_t off)
{
	ulp_ctl_fill d = { .b = b, .self = ino, .up = ULP_CTL_ROOT };
	char *snap, *path;
	ulp_attr ra;
	int rc = ulp_ns_getattr(b->fs->st, ULP_ROOT_INO, &ra);
	if (rc < 0)
		return rc;
	if (ino == ULP_CTL_SNAPSHOTS) {
		if (ulp_ctl_dots(&d, &ra, off))
			return 0;
		slist l = { .d = &d, .like = &ra, .from = off };
		rc = ulp_snapshot_list(b->fs->st, slist_cb, &l);
		return l.full ? 0 : rc;
	}
	d.up = ULP_CTL_SNAPSHOTS;
	rc = sdir_get(b->fs, ino, &snap, &path);
	if (rc < 0)
		return rc;
	if (ulp_ctl_dots(&d, &ra, off)) {
		free(snap);
		free(path);
		return 0;
	}
	slist l = { .d = &d,
		    .like = &ra,
		    .from = off,
		    .snap = snap,
		    .path = path,
		    .plen = strlen(path) };
	rc = ulp_snapshot_items(b->fs->st, snap, path, item_cb, &l);
	if (l.full)
		rc = 0;
	free(l.last);
	free(snap);
	free(path);
	return rc;
}

const ulp_fs_node_ops ulp_ctl_snapshots_ops = {
	.control = 1,
	.stat = snapshots_stat,
	.lookup = snapshots_lookup,
	.readdir = snapshots_readdir,
};

void ulp_fs_invalidate_snapshot(ulp_fs *fs, const char *name)
{
	if (fs && fs->se)
		(void)fuse_lowlevel_notify_inval_entry(
			fs->se, ULP_CTL_SNAPSHOTS, name, strlen(name));
}
