/*
 * namespace.c - lookup, getattr, create, mkdir, symlink, readlink,
 * unlink, rmdir and readdir; each change is one catalog transaction.
 * (rename and setattr are in rename.c and setattr.c.)
 */
#include "store/store_core.h"
#include "store/inode.h"
#include "store/staging.h"
#include "store/queue.h"
#include "store/objects.h"
#include "store/versions.h"
#include "store/reserve.h"

#include "store/ns_internal.h"

int ulp_ns_check_name(const char *name)
{
	size_t n;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	n = strlen(name);
	if (n > ULP_NAME_MAX)
		return -ENAMETOOLONG;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	return 0;
}

void ulp_ns_attr_of(ulp_store *st, const ulp_cat_inode *r, ulp_attr *a)
{
	ulp_inode *in = r->kind == ULP_KIND_FILE ? ulp_inode_find(st, r->ino)
	                                         : NULL;

	memset(a, 0, sizeof *a);
	a->ino = r->ino;
	a->mode = (mode_t)r->mode;
	a->nlink = r->nlink;
	a->uid = (uid_t)r->uid;
	a->gid = (gid_t)r->gid;
	a->size = r->size;
	a->rdev = r->rdev;
	int64_t at = r->atime, mt = r->mtime, ct = r->ctime;
	if (in) {
		if (in->staged && in->npt)
			ulp_stage_sync_backing(st, in);
		if (in->staged)
			a->size = in->size;
		if (in->times_dirty) {
			mt = in->mtime;
			ct = in->ctime;
		}
		if (in->unlinked)
			a->nlink = 0;
	}
	a->atime.tv_sec = at / 1000000000;
	a->atime.tv_nsec = at % 1000000000;
	a->mtime.tv_sec = mt / 1000000000;
	a->mtime.tv_nsec = mt % 1000000000;
	a->ctime.tv_sec = ct / 1000000000;
	a->ctime.tv_nsec = ct % 1000000000;
}

int ulp_ns_dir_row(ulp_store *st, uint64_t ino, ulp_cat_inode *row)
{
	int rc = ulp_cat_inode_get(st->cat, ino, row);

	if (rc == 0 && row->kind != ULP_KIND_DIR)
		rc = -ENOTDIR;
	return rc;
}

int ulp_ns_lookup(ulp_store *st, uint64_t parent, const char *name,
                  ulp_attr *out)
{
	ulp_cat_inode row;
	uint64_t ino;
	int rc;

	if (name && strlen(name) > ULP_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_dir_row(st, parent, &row);
	if (rc == 0 && strcmp(name, ".") == 0) {
		ino = parent;
	} else if (rc == 0 && strcmp(name, "..") == 0) {
		rc = parent == ULP_ROOT_INO
		             ? 0
		             : ulp_cat_entry_of(st->cat, parent, &ino, NULL);
		if (parent == ULP_ROOT_INO)
			ino = ULP_ROOT_INO;
	} else if (rc == 0) {
		rc = ulp_cat_lookup(st->cat, parent, name, &ino);
	}
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0)
		ulp_ns_attr_of(st, &row, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_ns_getattr(ulp_store *st, uint64_t ino, ulp_attr *out)
{
	ulp_cat_inode row;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0 && row.nlink == 0 && row.kind == ULP_KIND_FILE &&
	    !ulp_inode_find(st, ino))
		rc = -ENOENT; /* an orphan of a crash, swept at open */
	if (rc == 0)
		ulp_ns_attr_of(st, &row, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Insert a new inode named parent/name (mu held, no transaction yet). */
static int make_node(ulp_store *st, uint64_t parent, const char *name,
                     ulp_cat_inode *row, const char *target, ulp_attr *out)
{
	ulp_cat_inode prow;
	uint64_t other;
	int fd = -1, rc;

	rc = ulp_ns_dir_row(st, parent, &prow);
	if (rc < 0)
		return rc;
	rc = ulp_cat_lookup(st->cat, parent, name, &other);
	if (rc != -ENOENT)
		return rc < 0 ? rc : -EEXIST;
	rc = ulp_cat_begin(st->cat);
	if (rc < 0)
		return rc;
	rc = ulp_cat_inode_insert(st->cat, row, target);
	if (rc == 0)
		rc = ulp_acl_inherit(st, parent, row);
	if (rc == 0)
		rc = ulp_cat_link(st->cat, parent, name, row->ino);
	if (rc == 0)
		rc = ulp_cat_touch_dir(st->cat, parent, row->ctime,
		                       row->kind == ULP_KIND_DIR);
	/* A new file's staging exists before its row commits: a crash in
	 * between leaves a staging file with no row, removed at open. */
	if (rc == 0 && row->kind == ULP_KIND_FILE) {
		fd = ulp_stage_create(st, row->ino);
		if (fd < 0)
			rc = fd;
	}
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	if (rc < 0) {
		ulp_cat_rollback(st->cat);
		if (fd >= 0) {
			char n[32];
			ulp_stage_name(row->ino, n);
			unlinkat(st->stg_fd, n, 0);
		}
	}
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return rc;
	if (row->kind == ULP_KIND_FILE) {
		/* Queued, so that a file never opened is committed empty, but
		 * not due before the open that usually follows at once (FUSE
		 * create, then open) has taken it off the queue again: on a
		 * loaded machine the settle delay alone could pass in between,
		 * and the empty version committed then would become the
		 * reference of the real content (a keyframe where a delta
		 * against the previous checkpoint was due). */
		ulp_inode *in;
		int64_t settle = (int64_t)st->opts.settle_ms * 1000000;
		if (ulp_inode_get(st, row->ino, &in) == 0) {
			ulp_queue_add(st, in,
			              settle > ULP_CREATE_GRACE_NS
			                      ? settle
			                      : ULP_CREATE_GRACE_NS);
			ulp_inode_put(st, in);
		}
	}
	ulp_ns_attr_of(st, row, out);
	return 0;
}

static void new_row(ulp_cat_inode *row, int kind, mode_t mode, uid_t uid,
                    gid_t gid)
{
	int64_t now = ulp_now_ns();

	memset(row, 0, sizeof *row);
	row->kind = kind;
	row->mode = (uint32_t)mode;
	row->uid = (uint32_t)uid;
	row->gid = (uint32_t)gid;
	row->nlink = kind == ULP_KIND_DIR ? 2 : 1;
	row->atime = row->mtime = row->ctime = now;
	row->staged = kind == ULP_KIND_FILE;
}

/* A new file or directory (kind, with type bits type) named parent/name. */
static int make_plain(ulp_store *st, uint64_t parent, const char *name,
                      int kind, mode_t type, mode_t mode, uid_t uid, gid_t gid,
                      ulp_attr *out)
{
	ulp_cat_inode row;
	int rc = ulp_ns_check_name(name);

	if (rc < 0)
		return rc;
	new_row(&row, kind, type | (mode & 07777), uid, gid);
	pthread_mutex_lock(&st->mu);
	rc = make_node(st, parent, name, &row, NULL, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_ns_create(ulp_store *st, uint64_t parent, const char *name, mode_t mode,
                  uid_t uid, gid_t gid, ulp_attr *out)
{
	return make_plain(st, parent, name, ULP_KIND_FILE, S_IFREG, mode, uid,
	                  gid, out);
}

int ulp_ns_mkdir(ulp_store *st, uint64_t parent, const char *name, mode_t mode,
                 uid_t uid, gid_t gid, ulp_attr *out)
{
	return make_plain(st, parent, name, ULP_KIND_DIR, S_IFDIR, mode, uid,
	                  gid, out);
}

int ulp_ns_mknod(ulp_store *st, uint64_t parent, const char *name, mode_t mode,
                 uint64_t rdev, uid_t uid, gid_t gid, ulp_attr *out)
{
	ulp_cat_inode row;
	int rc;

	switch (mode & S_IFMT) {
	case S_IFREG:
		return ulp_ns_create(st, parent, name, mode, uid, gid, out);
	case S_IFIFO:
	case S_IFSOCK:
		rdev = 0;
		break;
	case S_IFCHR:
	case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	rc = ulp_ns_check_name(name);
	if (rc < 0)
		return rc;
	new_row(&row, ULP_KIND_SPECIAL, mode & (S_IFMT | 07777), uid, gid);
	row.rdev = rdev;
	pthread_mutex_lock(&st->mu);
	rc = make_node(st, parent, name, &row, NULL, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_ns_symlink(ulp_store *st, uint64_t parent, const char *name,
                   const char *target, uid_t uid, gid_t gid, ulp_attr *out)
{
	ulp_cat_inode row;
	int rc = ulp_ns_check_name(name);

	if (rc < 0)
		return rc;
	if (!target || !*target)
		return -ENOENT;
	if (strlen(target) >= ULP_PATH_MAX)
		return -ENAMETOOLONG;
	new_row(&row, ULP_KIND_SYMLINK, S_IFLNK | 0777, uid, gid);
	row.size = strlen(target);
	pthread_mutex_lock(&st->mu);
	rc = make_node(st, parent, name, &row, target, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_ns_target_of(ulp_store *st, sqlite3_stmt *s, char *buf, size_t size)
{
	int rc = ulp_cat_step(st->cat, s);
	if (rc == 1) {
		const char *t = (const char *)sqlite3_column_text(s, 1);
		if (sqlite3_column_int(s, 0) != ULP_KIND_SYMLINK || !t) {
			rc = -EINVAL;
		} else {
			snprintf(buf, size, "%s", t);
			rc = 0;
		}
		ulp_cat_done(s);
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	return rc;
}

int ulp_ns_readlink(ulp_store *st, uint64_t ino, char *buf, size_t size)
{
	static const char Q[] = "SELECT kind, target FROM inodes WHERE ino = ?";
	int rc;

	if (size == 0)
		return -ERANGE;
	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_target_of(st, ulp_cat_q(st->cat, Q, "u", ino), buf, size);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* A file loses its name (unlink, or replaced by a rename; mu held, in the
 * caller's transaction): an open file keeps its row (nlink 0) until the
 * last handle goes, an idle one is destroyed now.  Returns the in-memory
 * inode to finish with ulp_ns_unlinked_done() after the commit. */
int ulp_ns_drop_file(ulp_store *st, uint64_t ino, ulp_obj_list *dead,
                     ulp_inode **held)
{
	ULP_MU_HELD(st);
	static const char Q[] = "UPDATE inodes SET nlink = 0, ctime = ? WHERE "
				"ino = ?";
	ulp_inode *in = ulp_inode_find(st, ino);

	*held = NULL;
	if (!in)
		return ulp_inode_destroy_row(st, ino, dead);
	*held = in;
	return ulp_cat_exec(st->cat, Q, "iu", ulp_now_ns(), ino);
}

void ulp_ns_unlinked_done(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	if (!in)
		return;
	in->unlinked = 1;
	in->refs++;
	ulp_queue_cancel_nowait(st, in);
	ulp_inode_put(st, in);
}

static int unlink_txn(ulp_store *st, uint64_t parent, const char *name,
                      const ulp_cat_inode *row, const char *path,
                      ulp_obj_list *dead, ulp_inode **held)
{
	int rc = ulp_cat_begin(st->cat);

	*held = NULL;
	if (rc == 0)
		rc = ulp_cat_unlink(st->cat, parent, name);
	if (rc == 0)
		rc = ulp_cat_touch_dir(st->cat, parent, ulp_now_ns(), 0);
	if (rc == 0)
		rc = ulp_ns_drop_name(st, row, path, dead, held);
	/* The history of the path goes with the last name (with others
	 * left, it followed the inode to the next one). */
	if (rc == 0 && row->nlink <= 1)
		rc = ulp_versions_release_path(st, path, 0, dead);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	if (rc < 0) {
		ulp_cat_rollback(st->cat);
		ulp_obj_list_free(dead);
		*held = NULL;
	}
	return rc;
}

int ulp_ns_unlink(ulp_store *st, uint64_t parent, const char *name)
{
	ulp_obj_list dead = { 0 };
	ulp_cat_inode row;
	ulp_inode *held = NULL;
	char *path = NULL;
	uint64_t ino;
	int rc, tried = 0;

	if (name && strlen(name) > ULP_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_dir_row(st, parent, &row);
	if (rc == 0)
		rc = ulp_cat_lookup(st->cat, parent, name, &ino);
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0 && row.kind == ULP_KIND_DIR)
		rc = -EISDIR;
	if (rc == 0)
		rc = ulp_ns_path_alloc(st, ino, &path);
	if (rc < 0)
		goto out;
	do {
		rc = unlink_txn(st, parent, name, &row, path, &dead, &held);
	} while (ulp_ns_retry_nospc(st, rc, &tried));
	ulp_ns_unlinked_done(st, held);
	ulp_obj_reap(st, &dead);
	if (rc == 0)
		ulp_reserve_restore(st);
out:
	pthread_mutex_unlock(&st->mu);
	free(path);
	return rc;
}

static int rmdir_txn(ulp_store *st, uint64_t parent, const char *name,
                     uint64_t ino)
{
	int rc = ulp_cat_begin(st->cat);

	if (rc == 0)
		rc = ulp_cat_unlink(st->cat, parent, name);
	if (rc == 0)
		rc = ulp_cat_inode_delete(st->cat, ino);
	if (rc == 0)
		rc = ulp_cat_touch_dir(st->cat, parent, ulp_now_ns(), -1);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	if (rc < 0)
		ulp_cat_rollback(st->cat);
	return rc;
}

int ulp_ns_rmdir(ulp_store *st, uint64_t parent, const char *name)
{
	ulp_cat_inode row;
	uint64_t ino;
	int rc, tried = 0;

	if (name && strcmp(name, ".") == 0)
		return -EINVAL;
	if (name && strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	if (name && strlen(name) > ULP_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_dir_row(st, parent, &row);
	if (rc == 0)
		rc = ulp_cat_lookup(st->cat, parent, name, &ino);
	if (rc == 0)
		rc = ulp_ns_dir_row(st, ino, &row);
	if (rc == 0 && ino == ULP_ROOT_INO)
		rc = -EBUSY;
	if (rc == 0) {
		rc = ulp_cat_dir_empty(st->cat, ino);
		rc = rc < 0 ? rc : rc ? 0 : -ENOTEMPTY;
	}
	if (rc == 0) {
		do {
			rc = rmdir_txn(st, parent, name, ino);
		} while (ulp_ns_retry_nospc(st, rc, &tried));
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* ------------------------------------------------------------ readdir */

#define DIR_BATCH 128

typedef struct dent {
	char *name;
	ulp_attr attr;
	uint64_t next;
} dent;

static const char Q_READDIR[] =
	"SELECT d.id, d.name, i.ino, i.kind, i.mode, i.uid, i.gid, i.nlink,"
	" i.size, i.atime, i.mtime, i.ctime, i.version, i.staged, i.rdev"
	" FROM dirents AS d JOIN inodes AS i ON i.ino = d.ino"
	" WHERE d.parent = ? AND d.id > ? ORDER BY d.id LIMIT ?";

/* Up to DIR_BATCH entries after entry id `after` (mu held). */
static int fetch(ulp_store *st, uint64_t dir, uint64_t after, dent *v,
                 size_t *n)
{
	sqlite3_stmt *s =
		ulp_cat_q(st->cat, Q_READDIR, "uud", dir, after, DIR_BATCH);
	int rc;

	*n = 0;
	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		ulp_cat_inode r;
		const char *name = (const char *)sqlite3_column_text(s, 1);

		r.ino = (uint64_t)sqlite3_column_int64(s, 2);
		r.kind = sqlite3_column_int(s, 3);
		r.mode = (uint32_t)sqlite3_column_int64(s, 4);
		r.uid = (uint32_t)sqlite3_column_int64(s, 5);
		r.gid = (uint32_t)sqlite3_column_int64(s, 6);
		r.nlink = (uint32_t)sqlite3_column_int64(s, 7);
		r.size = (uint64_t)sqlite3_column_int64(s, 8);
		r.atime = sqlite3_column_int64(s, 9);
		r.mtime = sqlite3_column_int64(s, 10);
		r.ctime = sqlite3_column_int64(s, 11);
		r.version = (uint64_t)sqlite3_column_int64(s, 12);
		r.staged = sqlite3_column_int(s, 13);
		r.rdev = (uint64_t)sqlite3_column_int64(s, 14);
		v[*n].name = strdup(name ? name : "");
		if (!v[*n].name) {
			ulp_cat_done(s);
			return -ENOMEM;
		}
		ulp_ns_attr_of(st, &r, &v[*n].attr);
		v[*n].next = (uint64_t)sqlite3_column_int64(s, 0) + 2;
		(*n)++;
	}
	return rc;
}

int ulp_ns_readdir(ulp_store *st, uint64_t ino, uint64_t off, ulp_dirent_fn fn,
                   void *opaque)
{
	dent v[DIR_BATCH];
	ulp_cat_inode self, up;
	ulp_attr sa, ua;
	size_t n = 0;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_dir_row(st, ino, &self);
	uint64_t pino = ULP_ROOT_INO;
	if (rc == 0 && ino != ULP_ROOT_INO)
		rc = ulp_cat_entry_of(st->cat, ino, &pino, NULL);
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, pino, &up);
	if (rc == 0) {
		ulp_ns_attr_of(st, &self, &sa);
		ulp_ns_attr_of(st, &up, &ua);
	}
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	/* Offsets: "." 1, ".." 2, an entry its dirent id + 2 (stable
	 * while other entries come and go). */
	if (off < 1 && fn(opaque, ".", &sa, 1))
		return 0;
	if (off < 2 && fn(opaque, "..", &ua, 2))
		return 0;
	uint64_t after = off > 2 ? off - 2 : 0;
	for (;;) {
		pthread_mutex_lock(&st->mu);
		rc = fetch(st, ino, after, v, &n);
		pthread_mutex_unlock(&st->mu);
		int stop = rc < 0;
		for (size_t i = 0; i < n; i++) {
			if (!stop &&
			    fn(opaque, v[i].name, &v[i].attr, v[i].next))
				stop = 1;
			after = v[i].next - 2;
			free(v[i].name);
		}
		if (stop || n < DIR_BATCH)
			return rc < 0 ? rc : 0;
	}
}
