/*
 * objects.c - object files in STORE/objects: named by 128 random bits,
 * written to a temporary name, fsynced, renamed, the directory fsynced;
 * removed only after the catalog no longer needs them.
 */
#include "store/objects.h"
#include "store/reader.h"
#include "store/cache.h"
#include "store/remote.h"

#include <dirent.h>
#include <sys/random.h>

void ulp_obj_newname(char name[ULP_OBJ_NAME_LEN])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t r[16];
	size_t got = 0;

	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n > 0) {
			got += (size_t)n;
		} else if (n < 0 && errno != EINTR) {
			/* No entropy source: time and address mixing still
			 * make a clash with a live object improbable, and
			 * publish refuses to replace one. */
			uint64_t t = (uint64_t)ulp_now_ns() ^
			             (uint64_t)(uintptr_t)name;
			for (; got < sizeof r; got++) {
				t = t * 6364136223846793005ull +
				    1442695040888963407ull;
				r[got] = (uint8_t)(t >> 56);
			}
		}
	}
	for (int i = 0; i < 16; i++) {
		name[2 * i] = hex[r[i] >> 4];
		name[2 * i + 1] = hex[r[i] & 15];
	}
	name[32] = '\0';
}

int ulp_obj_tmp_open(ulp_store *st, char tmp[32])
{
	for (int tries = 0; tries < 16; tries++) {
		char n[ULP_OBJ_NAME_LEN];
		ulp_obj_newname(n);
		snprintf(tmp, 32, "%s%.16s", ULP_TMP_PREFIX, n);
		int fd = openat(st->obj_fd, tmp,
		                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd < 0 ? -errno : fd;
	}
	return -EEXIST;
}

int ulp_obj_publish(ulp_store *st, int fd, const char *tmp, const char *name,
                    int remote)
{
	int rc = 0;

	if (fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	/* RENAME_NOREPLACE where the filesystem has it: never clobber. */
	if (rc == 0 && renameat2(st->obj_fd, tmp, st->obj_fd, name,
	                         RENAME_NOREPLACE) < 0) {
		if (errno == EINVAL || errno == ENOSYS) {
			if (faccessat(st->obj_fd, name, F_OK, 0) == 0)
				rc = -EEXIST;
			else if (renameat(st->obj_fd, tmp, st->obj_fd, name) <
			         0)
				rc = -errno;
		} else {
			rc = -errno;
		}
	}
	if (rc == 0 && fsync(st->obj_fd) < 0)
		rc = -errno;
	/* A remote copy first: the version commits only once it is there. */
	if (rc == 0 && remote && st->opts.remote && st->opts.remote->put)
		rc = st->opts.remote->put(st->opts.remote->ctx, st->obj_fd,
		                          name);
	if (rc < 0) {
		unlinkat(st->obj_fd, tmp, 0);
		if (rc != -EEXIST)
			unlinkat(st->obj_fd, name, 0);
	}
	return rc;
}

void ulp_obj_abandon(ulp_store *st, int fd, const char *tmp)
{
	close(fd);
	unlinkat(st->obj_fd, tmp, 0);
}

void ulp_obj_unlink(ulp_store *st, const char *name)
{
	if (!name || !*name)
		return;
	unlinkat(st->obj_fd, name, 0);
	if (st->opts.remote && st->opts.remote->removed)
		st->opts.remote->removed(st->opts.remote->ctx, name);
}

void ulp_obj_reap(ulp_store *st, ulp_obj_list *dead)
{
	for (size_t i = 0; i < dead->n; i++) {
		ulp_reader_forget(st, dead->v[i].vid);
		ulp_cache_drop_version(st->cache, dead->v[i].vid);
		ulp_obj_unlink(st, dead->v[i].name);
	}
	ulp_obj_list_free(dead);
}

static int is_object_name(const char *n)
{
	size_t i;

	for (i = 0; n[i]; i++)
		if (!((n[i] >= '0' && n[i] <= '9') ||
		      (n[i] >= 'a' && n[i] <= 'f')))
			return 0;
	return i == 32;
}

static const char LIVE_Q[] = "SELECT 1 FROM versions WHERE object = ? AND "
			     "state <> 2 LIMIT 1";

int ulp_obj_live(ulp_store *st, const char *name)
{
	ULP_MU_HELD(st);
	int64_t one;
	if (!is_object_name(name))
		return 0;
	int rc = ulp_cat_int(st->cat, &one, LIVE_Q, "s", name);
	return rc < 0 ? rc : rc > 0;
}

int ulp_obj_recover(ulp_store *st)
{
	static const char *const Q = LIVE_Q;
	DIR *d;
	struct dirent *e;
	int rc = ulp_dir_list(st->obj_fd, &d);

	if (rc < 0)
		return rc;
	while ((e = readdir(d)) != NULL) {
		int64_t one;
		if (strncmp(e->d_name, ULP_TMP_PREFIX,
		            strlen(ULP_TMP_PREFIX)) == 0) {
			unlinkat(st->obj_fd, e->d_name, 0);
			continue;
		}
		if (!is_object_name(e->d_name))
			continue;
		rc = ulp_cat_int(st->cat, &one, Q, "s", e->d_name);
		if (rc < 0)
			break;
		if (rc == 0)
			unlinkat(st->obj_fd, e->d_name, 0);
		rc = 0;
	}
	closedir(d);
	return rc;
}
