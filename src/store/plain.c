/*
 * plain.c - the plain newest version.  A written file commits without
 * being encoded: its staging file is fsynced and hard-linked into
 * objects/ under a new object name, and the version row names that file
 * with plain = 1.  Order: staging file durable -> link durable -> the
 * commit's transaction -> staging name removed.  A crash before the
 * transaction leaves an object no row names (removed at the next open) and
 * the file still staged (encoded again); after it, a staging file of an
 * inode the catalog no longer calls staged (removed at the next open).
 * The link is a second name of the same inode, so nothing may write the
 * staging file once it is linked: a writer coming meanwhile cancels the
 * encode (queue.c) and the commit, seeing the new generation, unlinks it.
 *
 * When a successor commits, gc.c codes the plain version against it (or
 * standalone, every keyframe_every) and removes the plain file, as any
 * flip removes the object it replaces.  The space plain files take is
 * bounded (ulp_store_opts.plain_newest); past it the least recently
 * written are coded standalone the same way.
 */
#include "store/plain.h"
#include "store/objects.h"
#include "store/versions.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

int ulp_plain_wanted(ulp_store *st, const ulp_inode *in, uint64_t size,
                     int overlay)
{
	ULP_MU_HELD(st);
	return st->opts.plain_newest != ULP_PLAIN_OFF && !st->opts.remote &&
	       size && !overlay && !in->bk_held && !in->bk_kept;
}

int ulp_plain_link(ulp_store *st, const ulp_inode *in, int fd,
                   char name[ULP_OBJ_NAME_LEN], uint64_t *disk)
{
	char stg[32];
	struct stat sb;

	if (fsync(fd) < 0 || fstat(fd, &sb) < 0)
		return -errno;
	*disk = (uint64_t)sb.st_blocks * 512;
	ulp_stage_name(in->ino, stg);
	for (int tries = 0;; tries++) {
		ulp_obj_newname(name);
		if (linkat(st->stg_fd, stg, st->obj_fd, name, 0) == 0)
			break;
		if (errno != EEXIST || tries == 8)
			return -errno;
	}
	if (fsync(st->obj_fd) < 0) {
		int rc = -errno;
		unlinkat(st->obj_fd, name, 0);
		return rc;
	}
	return 0;
}

/* Plain files not yet on their way out (a flip marked, which removes
 * them once done): what the bound weighs. */
static const char Q_PLAIN_BYTES[] = "SELECT coalesce(sum(stored), 0) FROM "
				    "versions WHERE plain = 1 AND state = 0"
				    " AND flip IS NULL";
static const char Q_PLAIN_KEPT[] = "SELECT id, stored FROM versions"
				   " WHERE plain = 1 AND state = 0"
				   " AND flip IS NULL ORDER BY id";
static const char Q_PLAIN_CODE[] = "UPDATE versions SET flip = 0 WHERE id = ?";

int ulp_plain_bytes(ulp_store *st, uint64_t *out)
{
	ULP_MU_HELD(st);
	int64_t n = 0;
	int rc = ulp_cat_int(st->cat, &n, Q_PLAIN_BYTES, "");
	*out = n > 0 ? (uint64_t)n : 0;
	return rc < 0 ? rc : 0;
}

/* The bound on plain bytes: the option's, or for ULP_PLAIN_AUTO a
 * quarter of what the store's filesystem could hold of them (its free
 * space and the plain files themselves). */
static uint64_t plain_bound(ulp_store *st, uint64_t plain)
{
	struct statvfs sv;

	if (st->opts.plain_newest != ULP_PLAIN_AUTO)
		return st->opts.plain_newest;
	if (fstatvfs(st->obj_fd, &sv) < 0)
		return 0;
	return ((uint64_t)sv.f_bavail * sv.f_frsize + plain) / 4;
}

int ulp_plain_bound_txn(ulp_store *st)
{
	ULP_MU_HELD(st);
	uint64_t plain, bound;
	int rc = ulp_plain_bytes(st, &plain);

	if (rc < 0)
		return rc;
	bound = plain_bound(st, plain);
	if (plain <= bound)
		return 0;
	/* the oldest first; those already marked are on their way out */
	uint64_t over = plain - bound, *ids = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_PLAIN_KEPT, "");
	while (over && (rc = ulp_cat_step(st->cat, s)) == 1) {
		uint64_t stored = (uint64_t)sqlite3_column_int64(s, 1);
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			uint64_t *p = realloc(ids, cap * sizeof *p);
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			ids = p;
		}
		ids[n++] = (uint64_t)sqlite3_column_int64(s, 0);
		over -= stored < over ? stored : over;
	}
	ulp_cat_done(s);
	for (size_t i = 0; rc >= 0 && i < n; i++)
		rc = ulp_cat_exec(st->cat, Q_PLAIN_CODE, "u", ids[i]);
	free(ids);
	if (rc >= 0 && n)
		ulp_gc_note_work(st);
	return rc < 0 ? rc : 0;
}

int ulp_plain_open(ulp_store *st, uint64_t vid)
{
	ulp_version_info v;

	pthread_mutex_lock(&st->mu);
	int rc = ulp_version_get_locked(st, vid, &v);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	if (!v.plain || v.state == ULP_VERSION_DELETED)
		return -ENOENT;
	/* removed by a flip meanwhile: -ENOENT as well */
	int fd = openat(st->obj_fd, v.object, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void ulp_plain_crash_point(unsigned n, unsigned stage)
{
	const char *e = getenv("ULPFS_TEST_CRASH_COMMIT");
	unsigned cn, cs;

	if (e && sscanf(e, "%u:%u", &cn, &cs) == 2 && cn == n && cs == stage)
		raise(SIGKILL);
}
