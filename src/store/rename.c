/*
 * rename.c - POSIX rename, RENAME_NOREPLACE, RENAME_EXCHANGE and
 * RENAME_WHITEOUT, in one transaction.
 *
 * Paths and history: a rename removes the source path (and, for a
 * directory, every path below it), so history kept under those paths is
 * released; the current versions of the moved files are not (they are
 * current).  A replaced target file loses its name but its path lives on:
 * its versions stay as history of that path.
 */
#include "store/store_core.h"
#include "store/inode.h"
#include "store/staging.h"
#include "store/writers.h"
#include "store/objects.h"
#include "store/versions.h"
#include "store/reserve.h"

#include "store/ns_internal.h"

/* Whether dir is anc or lies below it. */
static int is_within(ulp_store *st, uint64_t dir, uint64_t anc)
{
	for (unsigned depth = 0; depth < 65536; depth++) {
		if (dir == anc)
			return 1;
		if (dir == ULP_ROOT_INO)
			return 0;
		int rc = ulp_cat_entry_of(st->cat, dir, &dir, NULL);
		if (rc < 0)
			return rc;
	}
	return -ELOOP;
}

static const char Q_MOVE[] = "UPDATE dirents SET parent = ?, name = ? WHERE "
			     "parent = ? AND name = ?";
static const char Q_SETINO[] = "UPDATE dirents SET ino = ? WHERE parent = ? "
			       "AND name = ?";
static const char Q_CTIME[] = "UPDATE inodes SET ctime = ? WHERE ino = ?";

static int exchange(ulp_store *st, uint64_t parent, const char *name,
                    uint64_t newparent, const char *newname,
                    const ulp_cat_inode *s, const ulp_cat_inode *d, int64_t now)
{
	int rc;

	/* ino is UNIQUE: park one side on a value no inode has. */
	rc = ulp_cat_exec(st->cat, Q_SETINO, "ius", -(int64_t)s->ino, parent,
	                  name);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_SETINO, "uus", s->ino, newparent,
		                  newname);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_SETINO, "uus", d->ino, parent,
		                  name);
	int sd = s->kind == ULP_KIND_DIR, dd = d->kind == ULP_KIND_DIR;
	if (rc == 0)
		rc = ulp_cat_touch_dir(st->cat, parent, now,
		                       parent != newparent ? dd - sd : 0);
	if (rc == 0 && newparent != parent)
		rc = ulp_cat_touch_dir(st->cat, newparent, now, sd - dd);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_CTIME, "iu", now, s->ino);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_CTIME, "iu", now, d->ino);
	return rc;
}

/* Checks that need no transaction: 0 (go on), 1 (nothing to do), -errno. */
static int check(ulp_store *st, uint64_t parent, const char *name,
                 uint64_t newparent, const char *newname, unsigned flags,
                 ulp_cat_inode *s, ulp_cat_inode *d, int *have_dst)
{
	ulp_cat_inode prow;
	uint64_t sino, dino;
	int rc;

	rc = ulp_ns_dir_row(st, parent, &prow);
	if (rc == 0)
		rc = ulp_ns_dir_row(st, newparent, &prow);
	if (rc == 0)
		rc = ulp_cat_lookup(st->cat, parent, name, &sino);
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, sino, s);
	if (rc < 0)
		return rc;
	rc = ulp_cat_lookup(st->cat, newparent, newname, &dino);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	*have_dst = rc == 0;
	if (*have_dst && (rc = ulp_cat_inode_get(st->cat, dino, d)) < 0)
		return rc;
	if ((flags & ULP_RENAME_EXCHANGE) && !*have_dst)
		return -ENOENT;
	if ((flags & ULP_RENAME_NOREPLACE) && *have_dst)
		return -EEXIST;
	if (*have_dst && dino == sino)
		return 1; /* the same file: nothing to do */
	if (s->kind == ULP_KIND_DIR) {
		rc = is_within(st, newparent, sino);
		if (rc != 0)
			return rc < 0 ? rc : -EINVAL;
	}
	if ((flags & ULP_RENAME_EXCHANGE) && d->kind == ULP_KIND_DIR) {
		rc = is_within(st, parent, dino);
		if (rc != 0)
			return rc < 0 ? rc : -EINVAL;
	}
	if (!*have_dst || (flags & ULP_RENAME_EXCHANGE))
		return 0;
	if (s->kind == ULP_KIND_DIR && d->kind != ULP_KIND_DIR)
		return -ENOTDIR;
	if (s->kind != ULP_KIND_DIR && d->kind == ULP_KIND_DIR)
		return -EISDIR;
	if (d->kind == ULP_KIND_DIR) {
		rc = ulp_cat_dir_empty(st->cat, dino);
		if (rc <= 0)
			return rc < 0 ? rc : -ENOTEMPTY;
	}
	return 0;
}

typedef struct rn {
	uint64_t parent, newparent;
	const char *name, *newname;
	unsigned flags;
	ulp_cat_inode s, d;
	int have_dst;
	const char *old_path;
	const char *dst_path; /* of a replaced file */
	int64_t now;
	uid_t uid; /* owner of a whiteout */
	gid_t gid;
} rn;

/* The whiteout RENAME_WHITEOUT leaves at the old name: a character device
 * 0:0 with no permission bits, as the kernel's vfs_whiteout makes. */
static int whiteout(ulp_store *st, const rn *r)
{
	ulp_cat_inode w = { .kind = ULP_KIND_SPECIAL,
		            .mode = S_IFCHR,
		            .uid = r->uid,
		            .gid = r->gid,
		            .nlink = 1,
		            .atime = r->now,
		            .mtime = r->now,
		            .ctime = r->now };
	int rc = ulp_cat_inode_insert(st->cat, &w, NULL);
	return rc < 0 ? rc : ulp_cat_link(st->cat, r->parent, r->name, w.ino);
}

/* The rename itself, one transaction (mu held). */
static int rename_txn(ulp_store *st, const rn *r, ulp_obj_list *dead,
                      ulp_inode **held)
{
	const ulp_cat_inode *s = &r->s, *d = &r->d;
	int rc = ulp_cat_begin(st->cat);

	*held = NULL;
	if (rc < 0)
		return rc;
	if (r->flags & ULP_RENAME_EXCHANGE) {
		rc = exchange(st, r->parent, r->name, r->newparent, r->newname,
		              s, d, r->now);
		goto commit;
	}
	int sdir = s->kind == ULP_KIND_DIR;
	int ddir = r->have_dst && d->kind == ULP_KIND_DIR;
	if (r->have_dst)
		rc = ulp_cat_unlink(st->cat, r->newparent, r->newname);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_MOVE, "usus", r->newparent,
		                  r->newname, r->parent, r->name);
	if (rc == 0 && (r->flags & ULP_RENAME_WHITEOUT))
		rc = whiteout(st, r);
	/* The replaced target goes once the source holds its name (so its
	 * current version is seen to keep a path). */
	if (rc == 0 && r->have_dst) {
		rc = ulp_ns_drop_name(st, d, r->dst_path, dead, held);
	}
	if (rc == 0 && r->newparent != r->parent) {
		rc = ulp_cat_touch_dir(st->cat, r->parent, r->now, -sdir);
		if (rc == 0)
			rc = ulp_cat_touch_dir(st->cat, r->newparent, r->now,
			                       sdir - ddir);
	} else if (rc == 0) {
		rc = ulp_cat_touch_dir(st->cat, r->parent, r->now, -ddir);
	}
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_CTIME, "iu", r->now, s->ino);
	/* A hard-linked file keeps its path when another of its names
	 * moved: then neither its versions move nor its history goes. */
	int moved = 0;
	if (rc == 0) {
		char *new_path = NULL;
		rc = ulp_ns_path_alloc(st, s->ino, &new_path);
		moved = rc == 0 && strcmp(new_path, r->old_path) != 0;
		if (moved)
			rc = ulp_versions_repath(st, r->old_path, new_path,
			                         sdir);
		free(new_path);
	}
	if (rc == 0 && moved)
		rc = ulp_versions_release_path(st, r->old_path, sdir, dead);
commit:
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	if (rc < 0) {
		ulp_cat_rollback(st->cat);
		ulp_obj_list_free(dead);
		*held = NULL;
	}
	return rc;
}

/* The file a rename is about to replace keeps its closed, not yet
 * committed content as a version (mu held; dropped while encoding). */
static int preserve_target(ulp_store *st, uint64_t parent, const char *name,
                           uint64_t newparent, const char *newname)
{
	uint64_t sino = 0, dino = 0;
	ulp_inode *in;

	if (ulp_cat_lookup(st->cat, newparent, newname, &dino) < 0 ||
	    ulp_cat_lookup(st->cat, parent, name, &sino) < 0 || sino == dino)
		return 0; /* check() reports what is wrong */
	in = ulp_inode_find(st, dino);
	if (!in || !in->staged || in->qstate == ULP_Q_NONE)
		return 0;
	in->refs++;
	int rc = ulp_stage_preserve(st, in);
	ulp_inode_put(st, in);
	return rc;
}

int ulp_ns_rename(ulp_store *st, uint64_t parent, const char *name,
                  uint64_t newparent, const char *newname, unsigned flags)
{
	if (flags & ULP_RENAME_WHITEOUT)
		return -EINVAL;
	return ulp_ns_rename_as(st, parent, name, newparent, newname, flags, 0,
	                        0);
}

int ulp_ns_rename_as(ulp_store *st, uint64_t parent, const char *name,
                     uint64_t newparent, const char *newname, unsigned flags,
                     uid_t uid, gid_t gid)
{
	ulp_obj_list dead = { 0 };
	ulp_inode *held = NULL;
	char *old_path = NULL, *dst_path = NULL;
	rn r = { .parent = parent,
		 .newparent = newparent,
		 .name = name,
		 .newname = newname,
		 .flags = flags,
		 .uid = uid,
		 .gid = gid };
	int rc, tried = 0;

	if (flags & ~(ULP_RENAME_NOREPLACE | ULP_RENAME_EXCHANGE |
	              ULP_RENAME_WHITEOUT) ||
	    ((flags & ULP_RENAME_EXCHANGE) &&
	     (flags & (ULP_RENAME_NOREPLACE | ULP_RENAME_WHITEOUT))))
		return -EINVAL;
	if (name && strlen(name) > ULP_NAME_MAX)
		return -ENAMETOOLONG;
	rc = ulp_ns_check_name(newname);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	if (!(flags & ULP_RENAME_EXCHANGE))
		rc = preserve_target(st, parent, name, newparent, newname);
	if (rc == 0)
		rc = check(st, parent, name, newparent, newname, flags, &r.s,
		           &r.d, &r.have_dst);
	if (rc == 0 && !(flags & ULP_RENAME_EXCHANGE))
		rc = ulp_ns_path_alloc(st, r.s.ino, &old_path);
	if (rc == 0 && r.have_dst && !(flags & ULP_RENAME_EXCHANGE) &&
	    r.d.kind == ULP_KIND_FILE)
		rc = ulp_ns_path_alloc(st, r.d.ino, &dst_path);
	if (rc != 0)
		goto out;
	r.old_path = old_path;
	r.dst_path = dst_path;
	r.now = ulp_now_ns();
	do {
		rc = rename_txn(st, &r, &dead, &held);
	} while (ulp_ns_retry_nospc(st, rc, &tried));
	if (rc == 0) {
		/* Keep the in-memory times of open files in step. */
		ulp_inode *m = ulp_inode_find(st, r.s.ino);
		if (m && m->times_dirty)
			m->ctime = r.now;
		if ((flags & ULP_RENAME_EXCHANGE) &&
		    (m = ulp_inode_find(st, r.d.ino)) && m->times_dirty)
			m->ctime = r.now;
	}
	ulp_ns_unlinked_done(st, held);
	ulp_obj_reap(st, &dead);
	if (rc == 0 && tried)
		ulp_reserve_restore(st);
out:
	pthread_mutex_unlock(&st->mu);
	free(old_path);
	free(dst_path);
	return rc < 0 ? rc : 0;
}
