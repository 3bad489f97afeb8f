/*
 * reserve.c - a few MiB kept allocated in STORE/reserve so that deleting
 * stays possible when the backing filesystem is full.
 *
 * A deletion writes to the catalog (its WAL) before it frees anything; on
 * a full disk that write fails with ENOSPC, and a full store could never
 * be emptied again.  The namespace operations that free space (unlink,
 * rmdir, rename, truncate) give the reserve back and retry once when their
 * transaction fails with ENOSPC; it is allocated again as soon as there is
 * room.  All with st->mu held.
 */
#include "store/reserve.h"

#define RESERVE_NAME "reserve"
#define RESERVE_BYTES (4u << 20)

void ulp_reserve_restore(ulp_store *st)
{
	ULP_MU_HELD(st);
	int fd, e;

	if (st->reserve_present || st->dir_fd < 0)
		return;
	fd = openat(st->dir_fd, RESERVE_NAME, O_WRONLY | O_CREAT | O_CLOEXEC,
	            0600);
	if (fd < 0)
		return;
	e = posix_fallocate(fd, 0, RESERVE_BYTES);
	close(fd);
	if (e == 0)
		st->reserve_present = 1;
	else
		unlinkat(st->dir_fd, RESERVE_NAME, 0);
}

int ulp_reserve_release(ulp_store *st)
{
	ULP_MU_HELD(st);
	if (!st->reserve_present)
		return 0;
	st->reserve_present = 0;
	return unlinkat(st->dir_fd, RESERVE_NAME, 0) == 0;
}

int ulp_ns_retry_nospc(ulp_store *st, int rc, int *tried)
{
	if (rc != -ENOSPC || *tried)
		return 0;
	*tried = 1;
	return ulp_reserve_release(st);
}
