/*
 * link.c - hard links.
 *
 * An inode may have several directory entries; its oldest entry names it
 * (ulp_cat_entry_of), and that path is where its versions are recorded,
 * so the history belongs to the inode whichever name writes it.  When the
 * naming entry goes (unlink, rename, replaced by a rename), the versions
 * follow to the next oldest name.  The data goes with the last name.
 */
#include "store/store_core.h"
#include "store/inode.h"
#include "store/versions.h"

#include "store/ns_internal.h"

static int link_txn(ulp_store *st, const ulp_cat_inode *row, uint64_t newparent,
                    const char *newname, int64_t now)
{
	static const char Q[] = "UPDATE inodes SET nlink = nlink + 1, ctime = ?"
				" WHERE ino = ?";
	int rc = ulp_cat_begin(st->cat);

	if (rc < 0)
		return rc;
	rc = ulp_cat_link(st->cat, newparent, newname, row->ino);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q, "iu", now, row->ino);
	if (rc == 0)
		rc = ulp_cat_touch_dir(st->cat, newparent, now, 0);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	if (rc < 0)
		ulp_cat_rollback(st->cat);
	return rc;
}

int ulp_ns_link(ulp_store *st, uint64_t ino, uint64_t newparent,
                const char *newname, ulp_attr *out)
{
	ulp_cat_inode row, prow;
	uint64_t other;
	int rc = ulp_ns_check_name(newname);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = ulp_ns_dir_row(st, newparent, &prow);
	if (rc == 0)
		rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc == 0 && row.kind == ULP_KIND_DIR)
		rc = -EPERM; /* as link(2) on Linux */
	if (rc == 0 && row.nlink == 0)
		rc = -ENOENT; /* unlinked, still open */
	if (rc == 0 && row.nlink >= ULP_LINK_MAX)
		rc = -EMLINK;
	if (rc == 0) {
		rc = ulp_cat_lookup(st->cat, newparent, newname, &other);
		rc = rc == -ENOENT ? 0 : rc < 0 ? rc : -EEXIST;
	}
	int64_t now = ulp_now_ns();
	if (rc == 0)
		rc = link_txn(st, &row, newparent, newname, now);
	if (rc == 0) {
		ulp_inode *in = ulp_inode_find(st, ino);
		if (in && in->times_dirty)
			in->ctime = now;
		rc = ulp_cat_inode_get(st->cat, ino, &row);
	}
	if (rc == 0)
		ulp_ns_attr_of(st, &row, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int ulp_ns_drop_name(ulp_store *st, const ulp_cat_inode *row,
                     const char *old_path, ulp_obj_list *dead, ulp_inode **held)
{
	static const char Q[] = "UPDATE inodes SET nlink = nlink - 1, ctime = ?"
				" WHERE ino = ?";
	int64_t now = ulp_now_ns();
	char *path = NULL;
	int rc;

	*held = NULL;
	if (row->kind == ULP_KIND_DIR || row->nlink <= 1) {
		if (row->kind == ULP_KIND_FILE)
			return ulp_ns_drop_file(st, row->ino, dead, held);
		return ulp_cat_inode_delete(st->cat, row->ino);
	}
	rc = ulp_cat_exec(st->cat, Q, "iu", now, row->ino);
	ulp_inode *in = ulp_inode_find(st, row->ino);
	if (rc == 0 && in && in->times_dirty)
		in->ctime = now;
	if (rc == 0 && row->kind == ULP_KIND_FILE && old_path) {
		rc = ulp_ns_path_alloc(st, row->ino, &path);
		if (rc == 0 && strcmp(path, old_path) != 0)
			rc = ulp_versions_repath(st, old_path, path, 0);
	}
	free(path);
	return rc;
}

const char *ulp_ns_history_path(ulp_store *st, const char *path, char **buf)
{
	ULP_MU_HELD(st);
	uint64_t ino;
	ulp_cat_inode row;

	*buf = NULL;
	if (ulp_ns_resolve(st, path, &ino) < 0)
		return path;
	if (ulp_cat_inode_get(st->cat, ino, &row) < 0 ||
	    row.kind != ULP_KIND_FILE || row.nlink < 2 ||
	    ulp_ns_path_alloc(st, ino, buf) < 0)
		return path;
	return *buf;
}
