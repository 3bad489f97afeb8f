/*
 * ctl_restore.c - "ulpfs restore --snapshot NAME": the snapshot's tree
 * back into the live one, at its paths.  Files get the snapshot's content
 * as a new version (the history is kept, not rewound; a file whose content
 * is already the snapshot's is left as it is).  Every entry the snapshot
 * recorded (store schema 6, snap_tree.c) also gets back its kind (special
 * files, symlinks and directories are made where missing), owner, mode,
 * atime and mtime, extended attributes and ACLs, and the hard links of its
 * inode: a missing name of a file linked in the snapshot is linked again;
 * a name that is now another file gets the content but stays its own
 * inode.  Entries made since the snapshot are left alone.  Snapshots taken
 * before schema 6 bring back file contents and mtimes only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_ops.h"

#define PIECE (4u << 20)

/* One entry to bring back: its path and what the snapshot has. */
typedef struct ritem {
	char *path, *target;
	ulp_snapshot_node n;
	ulp_version_info v; /* a regular file's pinned version */
	uint64_t live;      /* its inode in the live tree once restored */
} ritem;

typedef struct rlist {
	ritem *v;
	size_t n, cap;
	uint64_t bytes;
} rlist;

static ritem *rlist_new(rlist *l, const char *path)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		ritem *r = realloc(l->v, nc * sizeof(*r));
		if (!r)
			return NULL;
		l->v = r;
		l->cap = nc;
	}
	ritem *it = &l->v[l->n];
	memset(it, 0, sizeof(*it));
	if (!(it->path = strdup(path)))
		return NULL;
	l->n++;
	return it;
}

static void rlist_free(rlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].path);
		free(l->v[i].target);
	}
	free(l->v);
}

/* Pins of a snapshot without recorded entries. */
static int pin_cb(void *opaque, const char *path, const ulp_version_info *v)
{
	rlist *l = opaque;
	ritem *it = rlist_new(l, path);
	if (!it)
		return -ENOMEM;
	it->n.a.mtime.tv_sec = v->mtime_ns / 1000000000;
	it->n.a.mtime.tv_nsec = v->mtime_ns % 1000000000;
	it->n.version = v->id;
	it->v = *v;
	l->bytes += v->size;
	return 0;
}

static int node_cb(void *opaque, const char *path, const ulp_snapshot_node *n)
{
	rlist *l = opaque;
	ritem *it = rlist_new(l, path);
	if (!it)
		return -ENOMEM;
	it->n = *n;
	it->n.target = NULL;
	if (n->target && !(it->target = strdup(n->target)))
		return -ENOMEM;
	if (S_ISREG(n->a.mode))
		l->bytes += n->a.size;
	return 0;
}

/* Make the parent directories of path (those a subtree snapshot did not
 * record: owned as the root); *parent gets the last one's inode and *name
 * points at the entry's name in path. */
static int make_parents(ulp_store *st, char *path, const ulp_attr *root,
                        uint64_t *parent, const char **name)
{
	uint64_t dir = ULP_ROOT_INO;
	char *p = path;
	for (char *slash; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
		ulp_attr a;
		*slash = 0;
		int rc = ulp_ns_lookup(st, dir, p, &a);
		if (rc == -ENOENT)
			rc = ulp_ns_mkdir(st, dir, p, S_IFDIR | 0755, root->uid,
			                  root->gid, &a);
		*slash = '/';
		if (rc < 0)
			return rc;
		if (!S_ISDIR(a.mode))
			return -ENOTDIR;
		dir = a.ino;
	}
	*parent = dir;
	*name = p;
	return 0;
}

/* The snapshot's content into live file ino: 1 written, 0 already
 * current. */
static int put_content(cli_env *env, uint64_t ino, const ulp_version_info *v,
                       uint8_t *buf, uint64_t *done, uint64_t total)
{
	ulp_store *st = env->st;
	ulp_version_info cur;
	uint64_t cid = 0;
	ulp_file *f = NULL;

	if (ulp_ns_version(st, ino, &cid) == 0 && cid &&
	    ulp_version_get(st, cid, &cur) == 0 && cur.size == v->size &&
	    memcmp(cur.hash, v->hash, 16) == 0) {
		*done += v->size;
		return 0;
	}
	int rc = ulp_file_open(st, ino, O_WRONLY | O_TRUNC, &f, NULL);
	for (uint64_t off = 0; rc == 0 && off < v->size;) {
		size_t n = v->size - off < PIECE ? (size_t)(v->size - off)
		                                 : PIECE;
		ssize_t got = ulp_version_read(st, v->id, buf, n, off);
		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		ssize_t w = ulp_file_write(f, buf, (size_t)got, (off_t)off);
		if (w != got) {
			rc = w < 0 ? (int)w : -EIO;
			break;
		}
		off += (uint64_t)got;
		*done += (uint64_t)got;
		env->sink->progress(env->sink->opaque, "restore", *done, total);
	}
	if (f) {
		int frc = ulp_file_flush(f);
		ulp_file_release(f);
		if (rc == 0)
			rc = frc;
	}
	return rc < 0 ? rc : 1;
}

/* The live inode's extended attributes made the snapshot's. */
static int put_xattrs(cli_env *env, const char *snap, const ritem *it)
{
	ulp_store *st = env->st;
	char *names = malloc(ULP_XATTR_INODE_MAX);
	char *value = malloc(ULP_XATTR_SIZE_MAX);
	ssize_t n = names && value ? ulp_xattr_list(st, it->live, names,
	                                            ULP_XATTR_INODE_MAX)
	                           : -ENOMEM;
	int rc = n < 0 ? (int)n : 0;

	/* names holds the list as it was: removing does not change it. */
	for (ssize_t i = 0; rc == 0 && i < n;
	     i += (ssize_t)strlen(names + i) + 1)
		if (ulp_snapshot_xattr_get(st, snap, it->n.a.ino, names + i,
		                           NULL, 0) == -ENODATA)
			rc = ulp_xattr_remove(st, it->live, names + i);
	n = rc < 0 ? rc
	           : ulp_snapshot_xattr_list(st, snap, it->n.a.ino, names,
	                                     ULP_XATTR_INODE_MAX);
	rc = n < 0 ? (int)n : 0;
	for (ssize_t i = 0; rc == 0 && i < n;
	     i += (ssize_t)strlen(names + i) + 1) {
		ssize_t k = ulp_snapshot_xattr_get(st, snap, it->n.a.ino,
		                                   names + i, value,
		                                   ULP_XATTR_SIZE_MAX);
		rc = k < 0 ? (int)k
		           : ulp_xattr_set(st, it->live, names + i, value,
		                           (size_t)k, 0);
	}
	free(names);
	free(value);
	return rc;
}

/* Owner, then mode (a chown clears set-id bits), then times. */
static int put_attrs(cli_env *env, const ritem *it, int times)
{
	ulp_attr out;
	int rc = ulp_ns_setattr(env->st, it->live, &it->n.a,
	                        ULP_SET_UID | ULP_SET_GID, &out);
	if (rc == 0 && !S_ISLNK(it->n.a.mode))
		rc = ulp_ns_setattr(env->st, it->live, &it->n.a, ULP_SET_MODE,
		                    &out);
	if (rc == 0 && times)
		rc = ulp_ns_setattr(env->st, it->live, &it->n.a,
		                    ULP_SET_ATIME | ULP_SET_MTIME, &out);
	return rc;
}

/* Whether live node a is what the snapshot has at its name (a regular
 * file's content and every node's attributes aside). */
static int same_node(ulp_store *st, const ulp_attr *a, const ritem *it)
{
	const ulp_attr *s = &it->n.a;
	char t[4096];
	if ((a->mode & S_IFMT) != (s->mode & S_IFMT))
		return 0;
	if (S_ISLNK(s->mode))
		return ulp_ns_readlink(st, a->ino, t, sizeof(t)) == 0 &&
		       strcmp(t, it->target ? it->target : "") == 0;
	if (S_ISCHR(s->mode) || S_ISBLK(s->mode))
		return a->rdev == s->rdev;
	return 1;
}

/* The entry of it at (parent, name) made what the snapshot has, where
 * that can be done without losing another file: 0 or -errno. */
static int put_entry(cli_env *env, ritem *it, const ritem *first,
                     uint64_t parent, const char *name, int *created)
{
	ulp_store *st = env->st;
	const ulp_attr *s = &it->n.a;
	ulp_attr a;
	int rc = ulp_ns_lookup(st, parent, name, &a);

	if (rc == 0 && same_node(st, &a, it))
		goto found;
	if (rc == 0) {
		/* Another kind (or target, or device) of node of the same
		 * name: only nodes without content are replaced. */
		if (S_ISDIR(a.mode) || S_ISREG(a.mode) || S_ISDIR(s->mode) ||
		    S_ISREG(s->mode))
			return -EEXIST;
		rc = ulp_ns_unlink(st, parent, name);
		if (rc == 0)
			rc = -ENOENT;
	}
	if (rc != -ENOENT)
		return rc;
	*created = 1;
	if (first)
		rc = ulp_ns_link(st, first->live, parent, name, &a);
	else if (S_ISDIR(s->mode))
		rc = ulp_ns_mkdir(st, parent, name, s->mode, s->uid, s->gid,
		                  &a);
	else if (S_ISREG(s->mode))
		rc = ulp_ns_create(st, parent, name, s->mode, s->uid, s->gid,
		                   &a);
	else if (S_ISLNK(s->mode))
		rc = ulp_ns_symlink(st, parent, name, it->target ?: "", s->uid,
		                    s->gid, &a);
	else
		rc = ulp_ns_mknod(st, parent, name, s->mode, s->rdev, s->uid,
		                  s->gid, &a);
found:
	if (rc == 0)
		it->live = a.ino;
	return rc;
}

/* The first entry before i of the same recorded inode (a hard link). */
static const ritem *first_link(const rlist *l, size_t i)
{
	const ritem *it = &l->v[i];
	if (!it->n.recorded || S_ISDIR(it->n.a.mode) || it->n.a.nlink < 2)
		return NULL;
	for (size_t j = 0; j < i; j++)
		if (l->v[j].n.a.ino == it->n.a.ino && l->v[j].live)
			return &l->v[j];
	return NULL;
}

/* Bring entry i back: 1 a file's content written, 0 otherwise. */
static int restore_one(cli_env *env, const char *snap, rlist *l, size_t i,
                       uint8_t *buf, uint64_t *done)
{
	ritem *it = &l->v[i];
	const ritem *first = first_link(l, i);
	uint64_t parent = 0;
	const char *name = NULL;
	ulp_attr root;
	int created = 0, wrote = 0;
	int rc = ulp_ns_getattr(env->st, ULP_ROOT_INO, &root);

	if (rc == 0 && !it->n.recorded) {
		/* A pin only: a file as the helper makes them. */
		it->n.a.mode = S_IFREG | 0644;
		it->n.a.uid = root.uid;
		it->n.a.gid = root.gid;
	}
	if (rc == 0 && !it->path[0])
		it->live = ULP_ROOT_INO;
	else if (rc == 0)
		rc = make_parents(env->st, it->path, &root, &parent, &name);
	if (rc == 0 && it->path[0])
		rc = put_entry(env, it, first, parent, name, &created);
	if (rc == 0 && S_ISREG(it->n.a.mode) &&
	    !(first && first->live == it->live)) {
		if (!it->v.id)
			rc = ulp_version_get(env->st, it->n.version, &it->v);
		if (rc == 0)
			rc = wrote = put_content(env, it->live, &it->v, buf,
			                         done, l->bytes);
	}
	if (rc >= 0 && it->n.recorded)
		rc = put_xattrs(env, snap, it);
	/* A directory's times once its entries are back (restore_dirs). */
	if (rc >= 0 && it->n.recorded)
		rc = put_attrs(env, it, !S_ISDIR(it->n.a.mode));
	else if (rc >= 0) {
		ulp_attr out;
		rc = ulp_ns_setattr(env->st, it->live, &it->n.a, ULP_SET_MTIME,
		                    &out);
	}
	/* The kernel may hold the old pages (kept for committed files) and
	 * attributes, or a negative entry for a new name. */
	if (it->live)
		ulp_fs_invalidate_inode(env->fs, it->live);
	if (created)
		ulp_fs_invalidate_entry(env->fs, parent, name);
	return rc < 0 ? rc : wrote;
}

/* Directories' times, deepest first (their entries changed them). */
static void restore_dirs(cli_env *env, rlist *l, int *ret)
{
	for (size_t i = l->n; i-- > 0;) {
		ritem *it = &l->v[i];
		ulp_attr out;
		if (!it->live || !it->n.recorded || !S_ISDIR(it->n.a.mode))
			continue;
		int rc = ulp_ns_setattr(env->st, it->live, &it->n.a,
		                        ULP_SET_ATIME | ULP_SET_MTIME, &out);
		if (rc < 0) {
			cli_errf(env, "%s: %s", it->path[0] ? it->path : ".",
			         strerror(-rc));
			*ret = CLI_FAIL;
		}
		ulp_fs_invalidate_inode(env->fs, it->live);
	}
}

int cli_op_restore(cli_env *env, json_t *req)
{
	const char *snap = json_string_value(json_object_get(req, "snapshot"));
	rlist l = { 0 };
	uint64_t done = 0, restored = 0, files = 0;
	int ret = CLI_OK, rc;
	uint8_t *buf = malloc(PIECE);

	if (!buf || !snap) {
		free(buf);
		cli_errf(env, "restore: %s",
		         snap ? strerror(ENOMEM) : "no snapshot named");
		return snap ? CLI_FAIL : CLI_USAGE;
	}
	rc = ulp_snapshot_nodes(env->st, snap, node_cb, &l);
	if (rc == 0 && l.n == 0)
		rc = ulp_snapshot_items(env->st, snap, "", pin_cb, &l);
	if (rc < 0) {
		cli_errf(env, "snapshot %s: %s", snap,
		         rc == -ENOENT ? "no such snapshot" : strerror(-rc));
		ret = CLI_FAIL;
	}
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		int r = restore_one(env, snap, &l, i, buf, &done);
		if (r < 0) {
			cli_errf(env, "%s: %s",
			         l.v[i].path[0] ? l.v[i].path : ".",
			         r == -EEXIST ? "exists as another kind of file"
			                      : strerror(-r));
			ret = CLI_FAIL;
		} else {
			restored += (uint64_t)r;
		}
		files += S_ISREG(l.v[i].n.a.mode) && !first_link(&l, i);
	}
	if (rc == 0) {
		restore_dirs(env, &l, &ret);
		env->sink->progress(env->sink->opaque, "restore", l.bytes,
		                    l.bytes);
		/* Return once the restored files are committed versions. */
		rc = cli_env_sync(env);
		if (rc < 0) {
			cli_errf(env, "sync: %s", strerror(-rc));
			ret = CLI_FAIL;
		}
		cli_outf(env,
		         "snapshot %s: %" PRIu64 " files restored, %" PRIu64
		         " already current\n",
		         snap, restored, files - restored);
	}
	rlist_free(&l);
	free(buf);
	return ret;
}
