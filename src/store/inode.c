/*
 * inode.c - the table of in-memory inodes (files that are open, staged or
 * being encoded) and the end of a file's life.
 */
#include "store/inode.h"
#include "store/staging.h"
#include "store/queue.h"
#include "store/objects.h"
#include "store/versions.h"
#include "store/reserve.h"

#include "store/overlay.h"

#include <sys/stat.h>

/* In-memory inodes, hashed by number (under st->mu). */
struct ulp_itab {
	ulp_inode **slots; /* NULL until the first inode */
	size_t size, count;
};

int ulp_inode_table_new(ulp_store *st)
{
	st->itab = calloc(1, sizeof *st->itab);
	if (!st->itab)
		return -ENOMEM;
	st->inode_put = ulp_inode_put;
	return 0;
}

static size_t hslot(const ulp_store *st, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 20) & (st->itab->size - 1);
}

ulp_inode *ulp_inode_find(ulp_store *st, uint64_t ino)
{
	ULP_MU_HELD(st);
	if (!st->itab->slots)
		return NULL;
	for (ulp_inode *in = st->itab->slots[hslot(st, ino)]; in;
	     in = in->hnext)
		if (in->ino == ino)
			return in;
	return NULL;
}

static int table_grow(ulp_store *st)
{
	size_t n = st->itab->size ? st->itab->size * 2 : 256;
	ulp_inode **nt = calloc(n, sizeof *nt), **old = st->itab->slots;
	size_t on = st->itab->size;

	if (!nt)
		return -ENOMEM;
	st->itab->slots = nt;
	st->itab->size = n;
	for (size_t i = 0; i < on; i++) {
		ulp_inode *in = old[i], *next;
		for (; in; in = next) {
			next = in->hnext;
			size_t k = hslot(st, in->ino);
			in->hnext = nt[k];
			nt[k] = in;
		}
	}
	free(old);
	return 0;
}

static void unhash(ulp_store *st, ulp_inode *in)
{
	ulp_inode **pp = &st->itab->slots[hslot(st, in->ino)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == in) {
			*pp = in->hnext;
			st->itab->count--;
			return;
		}
	}
}

static void inode_free(ulp_inode *in)
{
	ulp_overlay_free(in->ov);
	if (in->fd >= 0)
		close(in->fd);
	pthread_rwlock_destroy(&in->data);
	ulp_qentry_free(in);
#ifndef NDEBUG
	/* A later use fails its assertion, unless the memory was reused
	 * (volatile: a store just before free is otherwise dropped). */
	*(volatile unsigned *)&in->live = 0;
#endif
	free(in);
}

/* The map of a copy-up on demand left by a crash, or when none was saved
 * (a crash before the first close), one that shows the version through
 * everywhere: what was written and never closed is lost, the committed
 * version stands. */
static int adopt_overlay(ulp_store *st, ulp_inode *in, uint64_t version)
{
	ulp_version_info v;
	int rc = ulp_overlay_load(st->stg_fd, in->ino, &in->ov);

	if (rc == 0 && ulp_overlay_base(in->ov) == version)
		return 0;
	if (rc == -EINVAL || rc == 0)
		fprintf(stderr,
		        "ulpfs: inode %llu: its copy-up map is damaged or "
		        "stale:"
		        " the bytes written since its last commit are "
		        "dropped\n",
		        (unsigned long long)in->ino);
	else if (rc != -ENOENT)
		return rc;
	ulp_overlay_free(in->ov);
	in->ov = NULL;
	rc = ulp_version_get_locked(st, version, &v);
	if (rc < 0)
		return rc;
	if (ftruncate(in->fd, 0) < 0 || ftruncate(in->fd, (off_t)v.size) < 0)
		return -errno;
	in->ov = ulp_overlay_new(version, v.size);
	return in->ov ? 0 : -ENOMEM;
}

/* Open the staging file of an inode the catalog says is staged but that
 * has no in-memory state (recovery). */
static int adopt_staging(ulp_store *st, ulp_inode *in, const ulp_cat_inode *row)
{
	char name[32];
	struct stat sb;

	ulp_stage_name(in->ino, name);
	in->fd = openat(st->stg_fd, name, O_RDWR | O_CLOEXEC);
	if (in->fd < 0 && errno == ENOENT && !row->version)
		in->fd = openat(st->stg_fd, name, O_RDWR | O_CREAT | O_CLOEXEC,
		                0600);
	if (in->fd < 0) {
		if (errno != ENOENT)
			return -errno;
		/* The staged copy is gone: the committed version stands. */
		in->staged = 0;
		return ulp_cat_inode_content(st->cat, in->ino, row->version, 0,
		                             row->size, row->mtime, row->ctime);
	}
	if (row->staged == ULP_STAGED_OVERLAY && row->version) {
		int rc = adopt_overlay(st, in, row->version);
		if (rc < 0)
			return rc;
	}
	if (fstat(in->fd, &sb) < 0)
		return -errno;
	in->staged = 1;
	ulp_stage_set_size(st, in, (uint64_t)sb.st_size);
	in->mtime =
		(int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
	in->ctime = in->mtime;
	in->times_dirty = 1;
	return 0;
}

int ulp_inode_get(ulp_store *st, uint64_t ino, ulp_inode **out)
{
	ULP_MU_HELD(st);
	ulp_inode *in = ulp_inode_find(st, ino);
	ulp_cat_inode row;
	int rc;

	if (in) {
		in->refs++;
		*out = in;
		return 0;
	}
	rc = ulp_cat_inode_get(st->cat, ino, &row);
	if (rc < 0)
		return rc;
	if (row.kind == ULP_KIND_DIR)
		return -EISDIR;
	if (row.kind != ULP_KIND_FILE)
		return -EINVAL;
	if (row.nlink == 0)
		return -ENOENT; /* an orphan left by a crash */
	if (st->itab->count + 1 > st->itab->size && (rc = table_grow(st)) < 0)
		return rc;
	in = calloc(1, sizeof *in);
	if (!in)
		return -ENOMEM;
	/* Writer-preferring: a steady stream of reads must not starve a
	 * commit or a copy-up (no thread takes it twice). */
	pthread_rwlockattr_t ra;
	int e = pthread_rwlockattr_init(&ra);
	if (!e)
		e = pthread_rwlockattr_setkind_np(
			&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!e)
		e = pthread_rwlock_init(&in->data, &ra);
	pthread_rwlockattr_destroy(&ra);
	if (e) {
		free(in);
		return -ENOMEM;
	}
	if (ulp_qentry_new(in) < 0) {
		pthread_rwlock_destroy(&in->data);
		free(in);
		return -ENOMEM;
	}
	in->ino = ino;
#ifndef NDEBUG
	in->live = ULP_INODE_LIVE;
#endif
	in->fd = -1;
	in->refs = 1;
	in->version = row.version;
	in->size = row.size;
	if (row.staged && (rc = adopt_staging(st, in, &row)) < 0) {
		inode_free(in);
		return rc;
	}
	size_t k = hslot(st, ino);
	in->hnext = st->itab->slots[k];
	st->itab->slots[k] = in;
	st->itab->count++;
	*out = in;
	return 0;
}

int ulp_inode_destroy_row(ulp_store *st, uint64_t ino, ulp_obj_list *dead)
{
	ULP_MU_HELD(st);
	ulp_cat_inode row;
	int rc = ulp_cat_inode_get(st->cat, ino, &row);

	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	rc = ulp_cat_inode_delete(st->cat, ino);
	if (rc == 0 && row.version)
		rc = ulp_versions_retire(st, row.version, dead);
	return rc;
}

/* The last ref of an unlinked file: drop its staging, row and version.
 * Its nlink 0 is committed already, so the staged bytes may go first
 * (freeing space the transaction may need); a crash in between leaves an
 * orphan row that the next open sweeps. */
static void destroy(ulp_store *st, ulp_inode *in)
{
	ulp_obj_list dead = { 0 };
	int rc, tried = 0;

	if (in->staged)
		ulp_stage_drop(st, in);
	do {
		rc = ulp_cat_begin(st->cat);
		if (rc == 0)
			rc = ulp_inode_destroy_row(st, in->ino, &dead);
		if (rc == 0)
			rc = ulp_cat_commit(st->cat);
		if (rc < 0) {
			ulp_cat_rollback(st->cat);
			ulp_obj_list_free(&dead);
		}
	} while (ulp_ns_retry_nospc(st, rc, &tried));
	ulp_obj_reap(st, &dead);
	if (tried)
		ulp_reserve_restore(st);
}

void ulp_inode_put(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	if (--in->refs > 0)
		return;
	/* Kept for a backing file that no open file holds any more (the
	 * handles hold refs, and release the backing first). */
	if (in->bk_kept && !in->unlinked)
		ulp_stage_drop(st, in);
	if (in->staged && !in->unlinked) {
		/* Staged data always has an encode coming. */
		ulp_queue_add(st, in, (int64_t)st->opts.settle_ms * 1000000);
		return;
	}
	unhash(st, in);
	if (in->unlinked)
		destroy(st, in);
	inode_free(in);
}

void ulp_inode_table_free(ulp_store *st)
{
	if (!st->itab)
		return;
	for (size_t i = 0; i < st->itab->size; i++) {
		ulp_inode *in = st->itab->slots[i], *next;
		for (; in; in = next) {
			next = in->hnext;
			inode_free(in);
		}
	}
	free(st->itab->slots);
	free(st->itab);
	st->itab = NULL;
}
