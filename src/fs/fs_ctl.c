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
 * snapshots/ holds one directory per snapshot; below it the pinned files
 * appear at the paths they had when the snapshot was taken, as the same
 * read-only version files (node id of the version), so that loaders open
 * an old checkpoint unmodified.
 *
 * Node ids: the store's inode numbers and version ids stay below 2^61, so
 * the top bits mark synthetic nodes (ULP_CTL_*).  The kernel caches their
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

#include "fs/fs_internal.h"

#define PATH_BUF 16384

int ulp_ctl_is_name(fuse_ino_t parent, const char *name)
{
	return parent == FUSE_ROOT_ID && strcmp(name, ULP_CTL_NAME) == 0;
}

static void dir_stat(const ulp_attr *like, fuse_ino_t ino, struct stat *st)
{
	ulp_fs_attr_to_stat(like, st);
	st->st_ino = (ino_t)ino;
	st->st_mode = S_IFDIR | 0555;
	st->st_nlink = 2;
	st->st_size = 0;
	st->st_blocks = 0;
}

static void version_stat(const ulp_version_info *v, const ulp_attr *owner,
                         struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)(ULP_CTL_VFILE_OF(v->id));
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_uid = owner->uid;
	st->st_gid = owner->gid;
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

static int sdir_lookup(ulp_fs *fs, fuse_ino_t parent, const char *name,
                       fuse_ino_t *ino)
{
	char *snap = NULL, *path = NULL, *child = NULL;
	uint64_t vid = 0;
	int rc;
	if (parent == ULP_CTL_SNAPSHOTS) {
		rc = ulp_snapshot_lookup(fs->st, name, "", &vid);
		if (rc == 2)
			rc = sdir_intern(fs, name, "", ino);
		return rc < 0 ? rc : 0;
	}
	rc = sdir_get(fs, parent, &snap, &path);
	if (rc < 0)
		return rc;
	if (asprintf(&child, "%s%s%s", path, path[0] ? "/" : "", name) < 0) {
		child = NULL;
		rc = -ENOMEM;
	} else {
		rc = ulp_snapshot_lookup(fs->st, snap, child, &vid);
		if (rc == 1) {
			*ino = ULP_CTL_VFILE_OF(vid);
			rc = 0;
		} else if (rc == 2) {
			rc = sdir_intern(fs, snap, child, ino);
		}
	}
	free(snap);
	free(path);
	free(child);
	return rc;
}

int ulp_ctl_getattr(ulp_fs *fs, fuse_ino_t ino, struct stat *st)
{
	ulp_attr a;
	int rc;
	if (ulp_ctl_is_sdir(ino)) {
		rc = sdir_check(fs, ino);
		if (rc == 0)
			rc = ulp_ns_getattr(fs->st, ULP_ROOT_INO, &a);
		if (rc == 0)
			dir_stat(&a, ino, st);
		return rc;
	}
	if (ino == ULP_CTL_ROOT || ino == ULP_CTL_VERSIONS ||
	    ino == ULP_CTL_SNAPSHOTS) {
		rc = ulp_ns_getattr(fs->st, ULP_ROOT_INO, &a);
		if (rc == 0)
			dir_stat(&a, ino, st);
		return rc;
	}
	if (ulp_ctl_is_vdir(ino)) {
		rc = mirrored(fs, ino & ULP_CTL_PAYLOAD, &a);
		if (rc == 0)
			dir_stat(&a, ino, st);
		return rc;
	}
	if (ulp_ctl_is_vfile(ino)) {
		ulp_version_info v;
		rc = ulp_version_get(fs->st, ino & ULP_CTL_PAYLOAD, &v);
		if (rc == 0 && v.state == ULP_VERSION_DELETED)
			rc = -ENOENT;
		if (rc == 0)
			rc = ulp_ns_getattr(fs->st, ULP_ROOT_INO, &a);
		if (rc == 0)
			version_stat(&v, &a, st);
		return rc;
	}
	return -ENOENT;
}

int ulp_ctl_lookup(ulp_fs *fs, fuse_ino_t parent, const char *name,
                   struct fuse_entry_param *e)
{
	fuse_ino_t ino = 0;
	ulp_attr a;
	int rc;

	memset(e, 0, sizeof(*e));
	if (parent == FUSE_ROOT_ID) {
		ino = ULP_CTL_ROOT; /* ulp_ctl_is_name() was checked */
	} else if (parent == ULP_CTL_ROOT) {
		if (strcmp(name, "versions") == 0)
			ino = ULP_CTL_VERSIONS;
		else if (strcmp(name, "snapshots") == 0)
			ino = ULP_CTL_SNAPSHOTS;
		else
			return -ENOENT;
	} else if (parent == ULP_CTL_SNAPSHOTS || ulp_ctl_is_sdir(parent)) {
		rc = sdir_lookup(fs, parent, name, &ino);
		if (rc < 0)
			return rc;
	} else if (parent == ULP_CTL_VERSIONS || ulp_ctl_is_vdir(parent)) {
		uint64_t dir = parent == ULP_CTL_VERSIONS
		                       ? ULP_ROOT_INO
		                       : (parent & ULP_CTL_PAYLOAD);
		rc = mirrored(fs, dir, &a);
		if (rc < 0)
			return rc;
		if (S_ISDIR(a.mode)) {
			rc = ulp_ns_lookup(fs->st, dir, name, &a);
			if (rc < 0)
				return rc;
			if (!S_ISDIR(a.mode) && !S_ISREG(a.mode))
				return -ENOENT;
			ino = ULP_CTL_VDIR_OF(a.ino);
		} else {
			/* A file's directory: entries are sequence numbers. */
			char *end;
			errno = 0;
			unsigned long long seq = strtoull(name, &end, 10);
			ulp_version_info v;
			if (errno || *end || name[0] < '1' || name[0] > '9')
				return -ENOENT;
			rc = find_version(fs, dir, seq, &v);
			if (rc < 0)
				return rc;
			ino = ULP_CTL_VFILE_OF(v.id);
		}
	} else {
		return ulp_ctl_is_vfile(parent) ? -ENOTDIR : -ENOENT;
	}
	rc = ulp_ctl_getattr(fs, ino, &e->attr);
	if (rc < 0)
		return rc;
	e->ino = ino;
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
	return 0;
}

/* ---------------------------------------------------------------- listing */

typedef struct ctl_fill {
	fuse_req_t req;
	ulp_fs *fs;
	char *buf;
	size_t size, pos;
	int plus, count;
	fuse_ino_t self, up; /* for "." and ".." */
} ctl_fill;

/* Add one entry; 1 when the buffer is full. */
static int add(ctl_fill *d, const char *name, const struct stat *st,
               uint64_t next_off)
{
	size_t left = d->size - d->pos, n;
	if (d->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.ino = (fuse_ino_t)st->st_ino;
		e.attr = *st;
		e.attr_timeout = d->fs->attr_timeout;
		e.entry_timeout = d->fs->entry_timeout;
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

static int dots(ctl_fill *d, const ulp_attr *like, uint64_t off)
{
	struct stat st;
	dir_stat(like, d->self, &st);
	if (off < 1 && add(d, ".", &st, 1))
		return 1;
	dir_stat(like, d->up, &st);
	if (off < 2 && add(d, "..", &st, 2))
		return 1;
	return 0;
}

/* A live directory's entries as mirror directories (offsets: the
 * store's, "." 1 and ".." 2 as in the live tree). */
static int mirror_cb(void *opaque, const char *name, const ulp_attr *attr,
                     uint64_t next_off)
{
	ctl_fill *d = opaque;
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
	dir_stat(attr, ino, &st);
	return add(d, name, &st, next_off);
}

typedef struct vlist {
	ctl_fill *d;
	const ulp_attr *owner;
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
	version_stat(v, l->owner, &st);
	if (add(l->d, name, &st, off)) {
		l->full = 1;
		return 1;
	}
	return 0;
}

/* Snapshots (offset 3 + index) and the entries of a snapshot directory
 * (offset 3 + index among its distinct children). */
typedef struct slist {
	ctl_fill *d;
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
	if (sdir_intern(l->d->fs, name, "", &ino) < 0)
		return 0;
	dir_stat(l->like, ino, &st);
	if (add(l->d, name, &st, off)) {
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
		int rc = sdir_intern(l->d->fs, l->snap, child, &ino);
		free(child);
		if (rc < 0)
			return rc;
		dir_stat(l->like, ino, &st);
	} else {
		version_stat(v, l->like, &st);
	}
	if (add(l->d, name, &st, off)) {
		l->full = 1;
		return 1;
	}
	return 0;
}

void ulp_ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     int plus)
{
	ctl_fill d = { .req = req,
		       .fs = ulp_fs_of(req),
		       .size = size,
		       .plus = plus,
		       .self = ino };
	ulp_attr ra, a;
	int rc = 0;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	d.buf = malloc(size ? size : 1);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = ulp_ns_getattr(d.fs->st, ULP_ROOT_INO, &ra);
	if (rc < 0)
		goto out;
	if (ino == ULP_CTL_ROOT) {
		struct stat st;
		d.up = FUSE_ROOT_ID;
		if (dots(&d, &ra, (uint64_t)off))
			goto out;
		dir_stat(&ra, ULP_CTL_VERSIONS, &st);
		if (off < 3 && add(&d, "versions", &st, 3))
			goto out;
		dir_stat(&ra, ULP_CTL_SNAPSHOTS, &st);
		if (off < 4)
			add(&d, "snapshots", &st, 4);
	} else if (ino == ULP_CTL_SNAPSHOTS) {
		d.up = ULP_CTL_ROOT;
		if (dots(&d, &ra, (uint64_t)off))
			goto out;
		slist l = { .d = &d, .like = &ra, .from = (uint64_t)off };
		rc = ulp_snapshot_list(d.fs->st, slist_cb, &l);
		if (l.full)
			rc = 0;
	} else if (ulp_ctl_is_sdir(ino)) {
		char *snap, *path;
		d.up = ULP_CTL_SNAPSHOTS;
		rc = sdir_get(d.fs, ino, &snap, &path);
		if (rc < 0)
			goto out;
		if (dots(&d, &ra, (uint64_t)off)) {
			free(snap);
			free(path);
			goto out;
		}
		slist l = { .d = &d,
			    .like = &ra,
			    .from = (uint64_t)off,
			    .snap = snap,
			    .path = path,
			    .plen = strlen(path) };
		rc = ulp_snapshot_items(d.fs->st, snap, path, item_cb, &l);
		if (l.full)
			rc = 0;
		free(l.last);
		free(snap);
		free(path);
	} else if (ino == ULP_CTL_VERSIONS) {
		d.up = ULP_CTL_ROOT;
		rc = ulp_ns_readdir(d.fs->st, ULP_ROOT_INO, (uint64_t)off,
		                    mirror_cb, &d);
	} else if (ulp_ctl_is_vdir(ino)) {
		uint64_t live = ino & ULP_CTL_PAYLOAD;
		rc = mirrored(d.fs, live, &a);
		if (rc < 0)
			goto out;
		/* ".." of a mirror: good enough as versions/ (only d_ino). */
		d.up = ULP_CTL_VERSIONS;
		if (S_ISDIR(a.mode)) {
			rc = ulp_ns_readdir(d.fs->st, live, (uint64_t)off,
			                    mirror_cb, &d);
		} else {
			char *path;
			if (dots(&d, &a, (uint64_t)off))
				goto out;
			rc = file_path(d.fs, live, &path);
			if (rc < 0)
				goto out;
			vlist l = { .d = &d,
				    .owner = &ra,
				    .from = (uint64_t)off };
			rc = ulp_version_list(d.fs->st, path, vlist_cb, &l);
			if (l.full)
				rc = 0;
			free(path);
		}
	} else {
		rc = -ENOTDIR;
	}
out:
	if (rc < 0 && d.count == 0)
		fuse_reply_err(req, ulp_fs_errno(rc));
	else
		fuse_reply_buf(req, d.buf, d.pos);
	free(d.buf);
}

void ulp_fs_invalidate_snapshot(ulp_fs *fs, const char *name)
{
	if (fs && fs->se)
		(void)fuse_lowlevel_notify_inval_entry(
			fs->se, ULP_CTL_SNAPSHOTS, name, strlen(name));
}
