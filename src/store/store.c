/*
 * store.c - the steps of opening a store that store_api.c composes:
 * creating its directories, taking its lock, recovering from a crash.
 */
#include "store/store_core.h"
#include "store/recover.h"
#include "store/inode.h"
#include "store/objects.h"
#include "store/versions.h"
#include "store/reserve.h"

#include "store/overlay.h"

#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* Whether dir holds anything but what a store (being created) may. */
static int foreign_content(int dir_fd)
{
	DIR *d;
	struct dirent *e;
	int found = 0, rc = ulp_dir_list(dir_fd, &d);

	if (rc < 0)
		return rc;
	while ((e = readdir(d)) != NULL) {
		const char *n = e->d_name;
		if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, "lock") &&
		    strcmp(n, "objects") && strcmp(n, "staging") &&
		    strcmp(n, "reserve") && strncmp(n, "catalog.db", 10))
			found = 1;
	}
	closedir(d);
	return found;
}

int ulp_dirs_open(ulp_store *st)
{
	int rc;

	if (mkdir(st->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	st->dir_fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dir_fd < 0)
		return -errno;
	if (faccessat(st->dir_fd, "catalog.db", F_OK, 0) < 0) {
		rc = foreign_content(st->dir_fd);
		if (rc != 0)
			return rc < 0 ? rc : -ENOTEMPTY; /* not a store */
	}
	st->lock_fd =
		openat(st->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (st->lock_fd < 0)
		return -errno;
	if (flock(st->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	rc = ulp_private_open(st);
	if (rc < 0)
		return rc;
	/* SQLite would create it 0644 less the umask, and its WAL alike */
	rc = openat(st->dir_fd, "catalog.db", O_RDWR | O_CREAT | O_CLOEXEC,
	            0600);
	if (rc < 0)
		return -errno;
	close(rc);
	if (mkdirat(st->dir_fd, "objects", 0700) < 0 && errno != EEXIST)
		return -errno;
	if (mkdirat(st->dir_fd, "staging", 0700) < 0 && errno != EEXIST)
		return -errno;
	st->obj_fd = openat(st->dir_fd, "objects",
	                    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->obj_fd < 0)
		return -errno;
	st->stg_fd = openat(st->dir_fd, "staging",
	                    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return st->stg_fd < 0 ? -errno : 0;
}

int ulp_sync_init(ulp_store *st)
{
	pthread_mutexattr_t ma;
	int e = pthread_mutexattr_init(&ma);

#ifndef NDEBUG
	/* ULP_MU_HELD (store_core.h) relies on it. */
	if (!e)
		e = pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
#endif
	if (!e) {
		e = pthread_mutex_init(&st->mu, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	if (!e)
		e = ulp_cond_init_mono(&st->done_cv);
	return -e;
}

/* ------------------------------------------------------------ recovery */

static int collect_inos(ulp_store *st, const char *sql, uint64_t **out,
                        size_t *n)
{
	size_t cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	sqlite3_stmt *s = ulp_cat_q(st->cat, sql, "");
	while ((rc = ulp_cat_step(st->cat, s)) == 1) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			uint64_t *v = realloc(*out, cap * sizeof *v);
			if (!v) {
				ulp_cat_done(s);
				return -ENOMEM;
			}
			*out = v;
		}
		(*out)[(*n)++] = (uint64_t)sqlite3_column_int64(s, 0);
	}
	return rc;
}

/* Files unlinked while open when the daemon died. */
static int sweep_orphans(ulp_store *st)
{
	static const char Q[] = "SELECT ino FROM inodes WHERE kind = 1 AND "
				"nlink = 0";
	uint64_t *inos;
	size_t n;
	int rc = collect_inos(st, Q, &inos, &n);

	for (size_t i = 0; i < n && rc == 0; i++) {
		ulp_obj_list dead = { 0 };
		char name[32];

		rc = ulp_cat_begin(st->cat);
		if (rc == 0)
			rc = ulp_inode_destroy_row(st, inos[i], &dead);
		if (rc == 0)
			rc = ulp_cat_commit(st->cat);
		else
			ulp_cat_rollback(st->cat);
		ulp_stage_name(inos[i], name);
		if (rc == 0)
			unlinkat(st->stg_fd, name, 0);
		else
			dead.n = 0;
		ulp_obj_reap(st, &dead);
	}
	free(inos);
	return rc;
}

/* Remove staging files that belong to no staged file, then queue every
 * staged file again. */
static int requeue_staged(ulp_store *st)
{
	static const char Q[] = "SELECT ino FROM inodes WHERE staged <> 0 AND "
				"kind = 1"
				" AND nlink > 0";
	DIR *d;
	struct dirent *e;
	int rc = ulp_dir_list(st->stg_fd, &d);

	if (rc < 0)
		return rc;
	while ((e = readdir(d)) != NULL) {
		const char *n = e->d_name;
		char *end;
		ulp_cat_inode row;

		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
			continue;
		if (n[0] == '.') { /* .rebase-* and other temporaries */
			unlinkat(st->stg_fd, n, 0);
			continue;
		}
		errno = 0;
		unsigned long long ino = strtoull(n, &end, 10);
		int map = strcmp(end, ULP_OVERLAY_SUFFIX) == 0;
		if ((*end && !map) || errno || !ino)
			continue; /* not ours */
		rc = ulp_cat_inode_get(st->cat, ino, &row);
		if (rc == -ENOENT ||
		    (rc == 0 &&
		     (!row.staged || !row.nlink || row.kind != ULP_KIND_FILE ||
		      (map && row.staged != ULP_STAGED_OVERLAY)))) {
			/* Copy-up or create that never committed, or a
			 * commit whose staging (or copy-up map) was not
			 * removed yet. */
			unlinkat(st->stg_fd, n, 0);
			rc = 0;
		}
		if (rc < 0)
			break;
	}
	closedir(d);
	if (rc < 0)
		return rc;

	uint64_t *inos;
	size_t n;
	rc = collect_inos(st, Q, &inos, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		ulp_inode *in;
		/* Adopts staging/<ino> (or, if it vanished, falls back to
		 * the committed version); the put queues it. */
		rc = ulp_inode_get(st, inos[i], &in);
		if (rc == 0)
			ulp_inode_put(st, in);
	}
	free(inos);
	return rc;
}

static int settle_ghosts(ulp_store *st)
{
	ulp_obj_list dead = { 0 };
	int rc = ulp_cat_begin(st->cat);

	if (rc == 0)
		rc = ulp_versions_settle(st, &dead);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	else
		ulp_cat_rollback(st->cat);
	if (rc < 0)
		dead.n = 0;
	ulp_obj_reap(st, &dead);
	return rc;
}

int ulp_recover(ulp_store *st)
{
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = sweep_orphans(st);
	if (rc == 0)
		rc = requeue_staged(st);
	if (rc == 0)
		rc = settle_ghosts(st);
	if (rc == 0)
		rc = ulp_obj_recover(st);
	ulp_reserve_restore(st);
	pthread_mutex_unlock(&st->mu);
	return rc;
}
