/*
 * backing.c - staging files that the kernel writes itself (FUSE
 * passthrough): size and mtime taken back from the file, since such writes
 * never pass through ulp_file_write, and a file to probe the kernel with.
 */
#include "store/store_internal.h"

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

int ulp_store_staging_tmpfd(ulp_store *st)
{
	int fd = openat(st->stg_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}
