/*
 * backing.c - staging files that the kernel writes itself (FUSE
 * passthrough): size and mtime taken back from the file, since such writes
 * never pass through ulp_file_write; staging files kept past their commit
 * while the kernel still uses them; a file to probe the kernel with.
 *
 * The kernel serves every open of an inode from one backing file for as
 * long as any passthrough open of it lasts: a reader that opened beside a
 * writer keeps the writer's staging file after its commit, and so does
 * every later open.  Deleting that file at the commit would leave later
 * writers a staging file the kernel cannot use (it refuses a second
 * backing file), and truncates that readers never see.  So the staging
 * file is kept (renamed .held-<ino>, which recovery removes and which does
 * not count as uncommitted) until the kernel lets go of it; a writer that
 * comes meanwhile takes it back as its staging file, exactly as a local
 * filesystem writes the one inode its readers have open.
 */
#include "store/staging.h"

#include <sys/stat.h>

static int64_t mtime_ns(const struct stat *sb)
{
	return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

void ulp_stage_mark_backing(ulp_inode *in)
{
	struct stat sb;

	if (in->fd >= 0 && fstat(in->fd, &sb) == 0)
		in->bk_mtime = mtime_ns(&sb);
}

void ulp_stage_sync_backing(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	struct stat sb;

	if (!in->staged || in->fd < 0 || fstat(in->fd, &sb) < 0)
		return;
	if ((uint64_t)sb.st_size != in->size)
		in->size = (uint64_t)sb.st_size;
	ulp_stage_account(st, in); /* blocks written in place count too */
	/* Only a change of the file's own mtime is a write: a utimens on
	 * the inode since then stays. */
	int64_t mt = mtime_ns(&sb);
	if (mt != in->bk_mtime) {
		in->bk_mtime = mt;
		in->mtime = in->ctime = mt;
		in->times_dirty = 1;
	}
}

static void held_name(uint64_t ino, char buf[40])
{
	snprintf(buf, 40, ".held-%llu", (unsigned long long)ino);
}

void ulp_stage_kept_name(const ulp_inode *in, char buf[40])
{
	if (in->bk_kept == ULP_BK_RENAMED)
		held_name(in->ino, buf);
	else
		ulp_stage_name(in->ino, buf);
}

int ulp_stage_keep_backing(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	char from[32], to[40];

	if (!in->bk_held)
		return 0;
	ulp_stage_name(in->ino, from);
	held_name(in->ino, to);
	/* Failing, it keeps its name: only tests that count staging/
	 * would tell (recovery removes it either way: the row is not
	 * staged). */
	in->bk_kept = renameat(st->stg_fd, from, st->stg_fd, to) == 0
	                      ? ULP_BK_RENAMED
	                      : ULP_BK_NAMED;
	return 1;
}

int ulp_stage_reclaim(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	char from[40], to[32];
	int rc;

	if (!in->bk_kept)
		return 0;
	ulp_stage_kept_name(in, from);
	ulp_stage_name(in->ino, to);
	if (in->bk_kept == ULP_BK_RENAMED &&
	    renameat(st->stg_fd, from, st->stg_fd, to) < 0)
		return -errno;
	in->bk_kept = ULP_BK_NONE;
	/* Staged again: recovery must find it (as a copy-up does). */
	ulp_cat_inode row;
	rc = ulp_cat_inode_get(st->cat, in->ino, &row);
	if (rc == 0)
		rc = ulp_cat_inode_content(st->cat, in->ino, row.version, 1,
		                           in->size, row.mtime, row.ctime);
	return rc;
}

int ulp_stage_tmpfd(ulp_store *st)
{
	int fd = openat(st->stg_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}
