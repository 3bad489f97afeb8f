/*
 * private.c - a store is private to the user its daemon runs as: the
 * store directory and every directory in it 0700, its files (catalog and
 * WAL, objects, staged bytes, logs) 0600, whatever the umask.  New ones
 * are created so; a store made by an older ulpfs, or loosened by hand, is
 * tightened when it is opened, and the log says what changed.
 */
#include "store/recover.h"

#include <sys/stat.h>

/* Deep enough for every directory a store holds (objects/, staging/,
 * a bucket cache's stale-N/ and what they hold). */
#define MAX_DEPTH 4

typedef struct tighten {
	const char *store;
	unsigned long files, dirs;
} tighten;

/* Tighten fd (a directory when dir) to 0700 or 0600 if looser. */
static int tighten_fd(tighten *t, int fd, int dir, const char *name)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!(sb.st_mode & 077))
		return 0;
	if (fchmod(fd, sb.st_mode & (dir ? 0700 : 0600)) < 0) {
		int e = errno;
		fprintf(stderr,
		        "ulpfs: %s/%s: mode %04o could not be tightened: %s\n",
		        t->store, name, (unsigned)(sb.st_mode & 07777),
		        strerror(e));
		return -e;
	}
	if (dir)
		t->dirs++;
	else
		t->files++;
	return 1;
}

/* Tighten what directory fd holds; descend into what was loose. */
static int tighten_below(tighten *t, int fd, int depth)
{
	DIR *d;
	struct dirent *e;
	int rc = ulp_dir_list(fd, &d);
	if (rc < 0)
		return rc;
	while (rc >= 0 && (e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat sb;
		if (fstatat(fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !(S_ISDIR(sb.st_mode) || S_ISREG(sb.st_mode)))
			continue; /* gone meanwhile, a socket, a link */
		int dir = S_ISDIR(sb.st_mode);
		if (!dir && !(sb.st_mode & 077))
			continue;
		int cfd = openat(fd, e->d_name,
		                 O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
		                         O_NONBLOCK | (dir ? O_DIRECTORY : 0));
		if (cfd < 0)
			continue;
		int r = tighten_fd(t, cfd, dir, e->d_name);
		if (dir && r > 0 && depth < MAX_DEPTH)
			r = tighten_below(t, cfd, depth + 1);
		close(cfd);
		if (r < 0 && r != -EPERM)
			rc = r;
	}
	closedir(d);
	return rc < 0 ? rc : 0;
}

int ulp_private_open(ulp_store *st)
{
	tighten t = { .store = st->dir };
	int rc = tighten_fd(&t, st->dir_fd, 1, ".");
	if (rc >= 0)
		rc = tighten_below(&t, st->dir_fd, 1);
	if (rc == -EPERM)
		rc = 0; /* not ours to change: said above, and mounted still */
	if (t.files || t.dirs)
		fprintf(stderr,
		        "ulpfs: %s: tightened %lu directories to 0700 and %lu "
		        "files to 0600: a store is private to the user its "
		        "daemon runs as\n",
		        st->dir, t.dirs, t.files);
	return rc;
}
