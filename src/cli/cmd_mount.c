/*
 * cmd_mount.c - `ulpfs mount` and `ulpfs umount`.
 *
 * mount forks before anything starts a thread.  The child opens (creating
 * if need be) the store, mounts, detaches from the terminal (setsid, stdio
 * to /dev/null, stderr to STORE/daemon.log, cwd /) and only then tells the
 * parent "ready" through a pipe; the parent exits 0 then, or prints the
 * child's error and exits 1.  So when `ulpfs mount` returns, the mount is
 * usable.  On SIGTERM, SIGINT, SIGHUP or an unmount the daemon leaves its
 * loop, unmounts, and closes the store, which drains the encode queue.
 *
 * umount finds the store behind a mount point in /proc/self/mountinfo
 * (fstype fuse.ulpfs, source = the store's absolute path), unmounts it,
 * then waits for the daemon to exit by taking STORE/lock, which the store
 * holds (flock) while it is open: once umount returns, every file written
 * is encoded and committed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/ctl.h"
#include "fs/fs.h"
#include "mount_s3.h"
#include "store/store.h"

#define MAX_FUSE_OPTS 64

typedef struct mount_args {
	ulp_store_opts sopts;
	ulp_fs_config cfg;
	const char *fuse_opts[MAX_FUSE_OPTS + 1];
	size_t nfuse;
	char *optcopies[MAX_FUSE_OPTS]; /* strdup'ed -o arguments */
	size_t ncopies;
	int foreground;
	mount_s3 s3; /* s3://BUCKET/PREFIX stores */
} mount_args;

static void mount_usage(FILE *f)
{
	fputs("usage: ulpfs mount [-f] [-o OPTION[,OPTION...]] STORE "
	      "MOUNTPOINT\n"
	      "Mount the ulpfs store STORE (a directory, created when missing "
	      "or empty)\n"
	      "on MOUNTPOINT.  Returns once the mount is ready; the daemon "
	      "logs to\n"
	      "STORE/daemon.log.  Stop it with 'ulpfs umount MOUNTPOINT'.\n\n"
	      "  -f              stay in the foreground (log to stderr; Ctrl-C "
	      "unmounts)\n"
	      "  -o OPTIONS      comma-separated options, -o may be repeated:\n"
	      "     cache=SIZE          decoded-chunk cache (default 256M; at\n"
	      "                         least 2 x (keyframe + 1) chunks)\n"
	      "     encoders=N          encoder threads (default: one per "
	      "CPU)\n"
	      "     keyframe=K          a keyframe every K versions (default "
	      "16)\n"
	      "     side=0|1            code fp32 master weights given the "
	      "bf16 weights\n"
	      "                         saved beside them (default 1)\n"
	      "     settle=MS           wait after the last close before "
	      "encoding\n"
	      "                         (default 500 ms)\n"
	      "     staging_limit=SIZE  staged bytes before writers wait\n"
	      "                         (default: half the free space)\n"
	      "     plain_newest=SIZE|auto|off  keep the newest version of "
	      "each file\n"
	      "                         plain (read at the disk's speed), "
	      "up to SIZE\n"
	      "                         bytes; auto: a quarter of the free "
	      "space (default off)\n"
	      "     attr_timeout=SEC    kernel attribute cache (default 1)\n"
	      "     entry_timeout=SEC   kernel name cache (default 1)\n"
	      "     max_threads=N       FUSE request threads (default 64)\n"
	      "     write_mode=MODE     auto (default), passthrough, direct "
	      "or cached:\n"
	      "                         how writes reach the staging files\n"
	      "     allow_other         let other users in (implies "
	      "default_permissions)\n"
	      "     default_permissions the kernel checks file modes\n"
	      "     and the generic FUSE options ro, rw, [no]suid, [no]dev, "
	      "[no]exec,\n"
	      "     sync, async, dirsync, atime, noatime, auto_unmount, "
	      "allow_root,\n"
	      "     debug, max_read=N, max_write=N, max_readahead=N,\n"
	      "     max_background=N, congestion_threshold=N, and libfuse's "
	      "[no_]splice_*,\n"
	      "     [no_]auto_inval_data, readdirplus=yes|no|auto, "
	      "[no_]async_dio,\n"
	      "     sync_read, async_read, no_remote_[posix_]lock, "
	      "no_remote_flock.\n"
	      "SIZE takes a K, M or G suffix.  Hard links are not supported "
	      "(EPERM).\n\n"
	      "STORE may be s3://BUCKET[/PREFIX]: objects and catalog "
	      "snapshots live in\n"
	      "the bucket (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... or "
	      "~/.aws), staging\n"
	      "and a cache of objects in a local directory:\n"
	      "     cache_dir=DIR       (default "
	      "/var/cache/ulpfs/BUCKET/PREFIX)\n"
	      "     object_cache=SIZE   objects kept in DIR (default 4G)\n"
	      "     publish_interval=S  catalog published every S seconds "
	      "(default 60)\n"
	      "     upload_delay=S      objects wait S seconds before their "
	      "upload (default\n"
	      "                         300; 0: each version commits once "
	      "in the bucket)\n"
	      "     ro                  read-only: no lease, nothing written\n",
	      f);
}

static void umount_usage(FILE *f)
{
	fputs("usage: ulpfs umount MOUNTPOINT\n"
	      "Unmount a ulpfs mount and wait until its daemon has encoded "
	      "every file\n"
	      "and closed the store.  MOUNTPOINT may also be the store "
	      "directory.\n",
	      f);
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 86400)
		return -1;
	*out = v;
	return 0;
}

/* One comma-separated -o argument (modified in place). */
static int parse_option_list(mount_args *ma, char *list)
{
	char *save = NULL;
	for (char *o = strtok_r(list, ",", &save); o;
	     o = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(o, '=');
		const char *v = eq ? eq + 1 : NULL;
		size_t klen = eq ? (size_t)(eq - o) : strlen(o);
		unsigned u;
#define KEY(k) (klen == sizeof(k) - 1 && strncmp(o, k, klen) == 0)
		int s3 = mount_s3_option(&ma->s3, o);
		if (s3 < 0)
			return -1;
		if (s3 > 0) {
			continue;
		} else if (KEY("cache") && v) {
			if (cli_parse_size(v, &ma->sopts.cache_bytes) < 0)
				goto bad_value;
		} else if (KEY("encoders") && v) {
			if (cli_parse_uint(v, 1024, &u) < 0 || u == 0)
				goto bad_value;
			ma->sopts.encoder_threads = u;
		} else if (KEY("keyframe") && v) {
			if (cli_parse_uint(v, 1u << 20, &u) < 0 || u == 0)
				goto bad_value;
			ma->sopts.keyframe_every = u;
		} else if (KEY("side") && v) {
			if (cli_parse_uint(v, 1, &u) < 0)
				goto bad_value;
			ma->sopts.no_side = !u;
		} else if (KEY("settle") && v) {
			if (cli_parse_uint(v, 3600u * 1000, &u) < 0)
				goto bad_value;
			/* 0 in ulp_store_opts means "the default". */
			ma->sopts.settle_ms = u ? u : 1;
		} else if (KEY("staging_limit") && v) {
			if (cli_parse_size(v, &ma->sopts.staging_limit) < 0 ||
			    ma->sopts.staging_limit == 0)
				goto bad_value;
		} else if (KEY("plain_newest") && v) {
			uint64_t b = 0;
			if (strcmp(v, "off") == 0)
				b = ULP_PLAIN_OFF;
			else if (strcmp(v, "auto") == 0)
				b = ULP_PLAIN_AUTO;
			else if (cli_parse_size(v, &b) < 0)
				goto bad_value;
			ma->sopts.plain_newest = b ? b : ULP_PLAIN_OFF;
		} else if (KEY("attr_timeout") && v) {
			if (parse_seconds(v, &ma->cfg.attr_timeout) < 0)
				goto bad_value;
		} else if (KEY("entry_timeout") && v) {
			if (parse_seconds(v, &ma->cfg.entry_timeout) < 0)
				goto bad_value;
		} else if (KEY("max_threads") && v) {
			if (cli_parse_uint(v, 10000, &u) < 0 || u == 0)
				goto bad_value;
			ma->cfg.max_threads = u;
		} else if (KEY("write_mode") && v) {
			if (ulp_fs_write_mode_parse(v, &ma->cfg.write_mode) < 0)
				goto bad_value;
		} else if (strcmp(o, "allow_other") == 0) {
			ma->cfg.allow_other = 1;
		} else if (strcmp(o, "default_permissions") == 0) {
			ma->cfg.default_permissions = 1;
		} else {
			const char *why;
			if (!ulp_fs_option_ok(o, &why)) {
				cli_err("mount option '%s' %s", o, why);
				return -1;
			}
			if (ma->nfuse >= MAX_FUSE_OPTS) {
				cli_err("too many mount options");
				return -1;
			}
			ma->fuse_opts[ma->nfuse++] = o;
		}
		continue;
bad_value:
		cli_err("mount option '%s': invalid value", o);
		return -1;
#undef KEY
	}
	return 0;
}

/* Absolute path of path from its parent's real path and its last
 * component, which is not looked at (it may be missing, or a mount whose
 * daemon died).  NULL with errno set on failure. */
static char *abs_via_parent(const char *path)
{
	char *copy = strdup(path), *parent = NULL, *pr = NULL, *out = NULL;
	if (!copy)
		return NULL;
	size_t n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = 0;
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	if (!slash)
		parent = strdup(".");
	else if (slash == copy)
		parent = strdup("/");
	else
		parent = strndup(copy, (size_t)(slash - copy));
	if (parent)
		pr = realpath(parent, NULL);
	if (pr && (!*base || !strcmp(base, ".") || !strcmp(base, "..")))
		errno = EINVAL;
	else if (pr && asprintf(&out, "%s%s%s", pr, strcmp(pr, "/") ? "/" : "",
	                        base) < 0)
		out = NULL;
	int e = errno;
	free(pr);
	free(parent);
	free(copy);
	errno = e;
	return out;
}

/* Absolute canonical path of path, which need not exist (its parent
 * must). */
static char *abs_path_maybe_missing(const char *path)
{
	char *r = realpath(path, NULL);
	if (r || errno != ENOENT)
		return r;
	return abs_via_parent(path);
}

/* Whether a is b or lies below it (both absolute, canonical). */
static int path_within(const char *a, const char *b)
{
	size_t n = strlen(b);
	if (strcmp(b, "/") == 0)
		return 1;
	return strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '/');
}

/* ------------------------------------------------------------ daemon */

static void dlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dlog(const char *fmt, ...)
{
	char ts[32];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;
	localtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
	fprintf(stderr, "%s ulpfs[%ld]: ", ts, (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* An error before the mount is ready: to the waiting parent, or stderr. */
static void report(int ready_fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void report(int ready_fd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ready_fd >= 0) {
		size_t n = strlen(msg);
		ssize_t w = write(ready_fd, msg, n);
		(void)w;
	} else {
		cli_err("%s", msg);
	}
}

static int detach_stdio(const char *store)
{
	char *log = NULL;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int lfd = -1;
	if (null < 0)
		return -1;
	if (asprintf(&log, "%s/daemon.log", store) >= 0) {
		lfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
		           0600);
		free(log);
	}
	if (dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    dup2(lfd >= 0 ? lfd : null, STDERR_FILENO) < 0)
		return -1;
	close(null);
	if (lfd >= 0)
		close(lfd);
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (chdir("/") < 0)
		return -1;
	return 0;
}

/* STORE/daemon.pid: the daemon's PID, for `ulpfs umount` (which waits for
 * that process to be gone) and for scripts.  Written once the store is
 * open (so that it never makes an empty directory look used), removed at
 * exit; a stale one (kill -9) is overwritten by the next mount. */
static char *pid_path(const char *store)
{
	char *p = NULL;
	return asprintf(&p, "%s/daemon.pid", store) < 0 ? NULL : p;
}

static void pid_write(const char *store)
{
	char *path = pid_path(store), *tmp = NULL;
	if (!path)
		return;
	if (asprintf(&tmp, "%s.tmp", path) >= 0) {
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		              0600);
		FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
		if (!f && fd >= 0)
			close(fd);
		if (f) {
			fprintf(f, "%ld\n", (long)getpid());
			if (fclose(f) == 0 && rename(tmp, path) == 0) {
				free(tmp);
				free(path);
				return;
			}
			unlink(tmp);
		}
		free(tmp);
	}
	dlog("%s: cannot write: %s", path, strerror(errno));
	free(path);
}

/* Only if it is still ours: the store is closed by now, and a new mount
 * may have written its own. */
static void pid_remove(const char *store)
{
	char *path = pid_path(store);
	long pid = 0;
	FILE *f = path ? fopen(path, "re") : NULL;
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
		if (pid == (long)getpid())
			unlink(path);
	}
	free(path);
}

/* Open, mount, serve, clean up.  ready_fd < 0: foreground. */
static int run_daemon(mount_args *ma, const char *store, const char *mnt,
                      int ready_fd)
{
	ulp_store *st = NULL;
	ulp_fs *fs = NULL;
	char err[512];
	int rc;

	/* Before the store starts its threads, so that they inherit it. */
	ulp_fs_block_signals();
	if (mount_s3_open(&ma->s3, &ma->sopts, err, sizeof err) < 0) {
		report(ready_fd, "%s", err);
		return CLI_FAIL;
	}
	rc = ulp_store_open(store, &ma->sopts, &st);
	if (rc < 0) {
		report(ready_fd, "%s: %s", store,
		       rc == -EBUSY ? "in use by another process (already "
		                      "mounted?)"
		       : rc == -ENOTEMPTY
		               ? "neither empty nor a ulpfs store"
		               : cli_store_error(store, rc, err, sizeof err));
		mount_s3_free(&ma->s3);
		return CLI_FAIL;
	}
	mount_s3_attach(&ma->s3, st);
	ma->cfg.mountpoint = mnt;
	ma->cfg.fsname = store;
	ma->fuse_opts[ma->nfuse] = NULL;
	ma->cfg.fuse_opts = ma->fuse_opts;
	rc = ulp_fs_mount(st, &ma->cfg, &fs, err, sizeof(err));
	if (rc < 0) {
		report(ready_fd, "%s: %s", mnt, err);
		mount_s3_detach(&ma->s3);
		ulp_store_close(st);
		mount_s3_free(&ma->s3);
		return CLI_FAIL;
	}
	if (ready_fd >= 0) {
		if (detach_stdio(store) < 0) {
			report(ready_fd, "%s: cannot detach: %s", mnt,
			       strerror(errno));
			ulp_fs_unmount(fs);
			mount_s3_detach(&ma->s3);
			ulp_store_close(st);
			mount_s3_free(&ma->s3);
			return CLI_FAIL;
		}
	}
	dlog("mounted %s on %s", store, mnt);
	/* The helper's commands reach the open store through this. */
	cli_server *srv = NULL;
	rc = cli_server_start(st, fs, store, ma->s3.bucket, &srv);
	if (rc < 0)
		dlog("%s/%s: %s (helper commands will fail while mounted)",
		     store, CLI_CTL_SOCK, strerror(-rc));
	pid_write(store);
	if (ready_fd >= 0) {
		ssize_t w = write(ready_fd, "ready", 5);
		(void)w;
		close(ready_fd);
	} else if (isatty(STDERR_FILENO)) {
		cli_err("%s mounted on %s; Ctrl-C or 'ulpfs umount %s' "
		        "unmounts",
		        store, mnt, mnt);
	}

	rc = ulp_fs_run(fs);
	cli_server_stop(srv); /* before the session it invalidates goes */
	if (rc > 0)
		dlog("signal %d: unmounting %s", rc, mnt);
	else if (rc < 0)
		dlog("session loop failed: %s", strerror(-rc));
	else
		dlog("unmounted %s", mnt);
	ulp_fs_unmount(fs);
	dlog("closing the store (encoding what is queued)");
	mount_s3_detach(&ma->s3);
	ulp_store_close(st);
	dlog("store %s closed", store);
	if (ma->s3.bucket && !ma->s3.read_only) {
		int prc = mount_s3_close(&ma->s3);
		dlog("%s: catalog %s", ma->s3.url,
		     prc ? "NOT published (see above)" : "published");
	}
	mount_s3_free(&ma->s3);
	pid_remove(store);
	return rc < 0 ? CLI_FAIL : CLI_OK;
}

#define FUSE_SUPER_MAGIC 0x65735546

static int wait_ready(pid_t pid, int rfd, const char *mnt, const char *mnt_abs,
                      const char *store)
{
	char buf[1100];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(rfd, buf + n, sizeof(buf) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == sizeof(buf) - 1)
			break;
	}
	buf[n] = 0;
	close(rfd);
	if (strcmp(buf, "ready") == 0) {
		/* The kernel holds this stat until the daemon has answered its
		 * INIT request; if the session failed there, the mount is gone
		 * or dead by now. */
		struct statfs sfs;
		if (statfs(mnt_abs, &sfs) == 0 &&
		    sfs.f_type == FUSE_SUPER_MAGIC)
			return CLI_OK;
		cli_err("%s: the mount failed after it was made (see "
		        "%s/daemon.log)",
		        mnt, store);
		return CLI_FAIL;
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n > 0)
		cli_err("%s", buf);
	else if (WIFSIGNALED(status))
		cli_err("%s: the mount daemon was killed by signal %d", mnt,
		        WTERMSIG(status));
	else
		cli_err("%s: the mount daemon exited (status %d) before the "
		        "mount was ready",
		        mnt, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return CLI_FAIL;
}

int cmd_mount(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "foreground", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	mount_args ma;
	char *store = NULL, *mnt = NULL;
	struct stat sb;
	int c, rc = CLI_USAGE;

	memset(&ma, 0, sizeof(ma));
	ulp_fs_config_default(&ma.cfg);
	optind = 1;
	while ((c = getopt_long(argc, argv, "+fho:", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			ma.foreground = 1;
			break;
		case 'o':
			if (ma.ncopies >= MAX_FUSE_OPTS) {
				cli_err("too many -o options");
				goto out;
			}
			ma.optcopies[ma.ncopies] = strdup(optarg);
			if (!ma.optcopies[ma.ncopies] ||
			    parse_option_list(&ma, ma.optcopies[ma.ncopies++]) <
			            0)
				goto usage_hint;
			break;
		case 'h':
			mount_usage(stdout);
			rc = CLI_OK;
			goto out;
		default:
			goto usage_hint;
		}
	}
	if (argc - optind != 2) {
		cli_err("mount needs STORE and MOUNTPOINT");
		goto usage_hint;
	}

	rc = CLI_FAIL;
	if (ulp_bucket_is_url(argv[optind])) {
		const char *d = mount_s3_store_dir(&ma.s3, argv[optind]);
		store = d ? strdup(d) : NULL;
		if (!store)
			goto out;
	} else {
		store = abs_path_maybe_missing(argv[optind]);
	}
	if (!store) {
		cli_err("%s: %s", argv[optind], strerror(errno));
		goto out;
	}
	if (stat(store, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
		cli_err("%s: not a directory", argv[optind]);
		goto out;
	}
	mnt = realpath(argv[optind + 1], NULL);
	if (!mnt) {
		int e = errno;
		cli_err("%s: %s%s", argv[optind + 1], strerror(e),
		        e == ENOTCONN ? " (a mount whose daemon died? run "
		                        "'ulpfs umount' on it)"
		                      : "");
		goto out;
	}
	if (stat(mnt, &sb) < 0) {
		cli_err("%s: %s", argv[optind + 1], strerror(errno));
		goto out;
	}
	if (!S_ISDIR(sb.st_mode)) {
		cli_err("%s: not a directory", argv[optind + 1]);
		goto out;
	}
	if (path_within(store, mnt) || path_within(mnt, store)) {
		cli_err("%s: the store and the mount point must not contain "
		        "one another",
		        argv[optind + 1]);
		goto out;
	}
	ulp_store_opts_default(&ma.sopts);

	if (ma.foreground) {
		rc = run_daemon(&ma, store, mnt, -1);
		goto out;
	}

	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		cli_err("pipe: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_err("fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		setsid();
		/* If the parent is gone, writing "ready" must not kill us. */
		signal(SIGPIPE, SIG_IGN);
		rc = run_daemon(&ma, store, mnt, pfd[1]);
		goto out;
	}
	close(pfd[1]);
	rc = wait_ready(pid, pfd[0], argv[optind + 1], mnt, store);
	goto out;

usage_hint:
	rc = CLI_USAGE;
	fputs("Try 'ulpfs mount --help'.\n", stderr);
out:
	mount_s3_free(&ma.s3);
	for (size_t i = 0; i < ma.ncopies; i++)
		free(ma.optcopies[i]);
	free(store);
	free(mnt);
	return rc;
}

/* ------------------------------------------------------------ umount */

/* Start time (field 22 of /proc/PID/stat) and state of a process; -1 if
 * there is none. */
static int proc_stat(long pid, unsigned long long *start, char *state)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	/* state, then fields 4-21 skipped, then 22: starttime */
	if (!p || sscanf(p + 1,
	                 " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
	                 "%*s %*s %*s %*s %*s %*s %*s %*s %llu",
	                 state, start) != 2)
		return -1;
	return 0;
}

/* The daemon of a store, from STORE/daemon.pid, if that process runs
 * (and is an ulpfs).  0 if unknown. */
static long daemon_pid(const char *store, unsigned long long *start)
{
	char *path = pid_path(store), comm[64] = "", cpath[64];
	long pid = 0;
	char state;
	FILE *f = path ? fopen(path, "re") : NULL;
	free(path);
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1 || pid <= 0)
		pid = 0;
	fclose(f);
	if (!pid)
		return 0;
	snprintf(cpath, sizeof(cpath), "/proc/%ld/comm", pid);
	f = fopen(cpath, "re");
	if (!f)
		return 0;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	if (!strstr(comm, "ulpfs") || proc_stat(pid, start, &state) < 0 ||
	    state == 'Z')
		return 0;
	return pid;
}

/* Wait (up to 30 s) for a process to exit: it has closed the store, and
 * only its exit remains. */
static void wait_pid_gone(long pid, unsigned long long start)
{
	for (int i = 0; i < 3000; i++) {
		unsigned long long s;
		char state;
		if (proc_stat(pid, &s, &state) < 0 || s != start ||
		    state == 'Z' || state == 'X')
			return;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static int do_unmount(const char *target)
{
	if (geteuid() == 0) {
		if (umount2(target, UMOUNT_NOFOLLOW) == 0)
			return 0;
		cli_err("%s: %s%s", target, strerror(errno),
		        errno == EBUSY ? " (a process uses the mount)" : "");
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_err("fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", target,
		       (char *)NULL);
		fprintf(stderr, "ulpfs: fusermount3: %s\n", strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			cli_err("waitpid: %s", strerror(errno));
			return -1;
		}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	cli_err("%s: fusermount3 -u failed", target);
	return -1;
}

/* After the unmount in this namespace, the kernel ends the daemon's
 * session only once no other mount namespace holds a copy of the mount
 * (one made by unshare -m, a container or a service with PrivateTmp while
 * the store was mounted).  Copies keep being served, as a local
 * filesystem's would; then commit what is closed and say who holds it. */
static void report_holders(const cli_mount_ent *ent, long daemon,
                           const long *pids, int n)
{
	json_t *req = json_pack("{s:s}", "op", "sync");
	int src = CLI_FAIL;
	if (!req || cli_remote(ent->source, req, cli_local_sink(), &src) < 0)
		src = CLI_FAIL;
	json_decref(req);
	char list[256] = "";
	size_t len = 0;
	for (int i = 0; i < n && i < 8 && len < sizeof(list) - 24; i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%ld",
		                        i ? ", " : "", pids[i]);
	char who[40] = "the daemon";
	if (daemon > 0) /* daemon.pid may be unreadable */
		snprintf(who, sizeof(who), "the daemon (PID %ld)", daemon);
	cli_err("%s: unmounted here, but %d other mount namespace%s still "
	        "hold%s a copy of the mount (process%s %s%s), made while it "
	        "was mounted: %s; %s goes on serving %s "
	        "and keeps the store open until %s unmounted there (nsenter "
	        "-t %ld -m umount %s) or those processes exit",
	        ent->target, n, n == 1 ? "" : "s", n == 1 ? "s" : "",
	        n == 1 ? "" : "es", list, n > 8 ? ", ..." : "",
	        src == CLI_OK ? "every file closed so far is committed"
	                      : "committing what is closed failed",
	        who, n == 1 ? "it" : "them", n == 1 ? "it is" : "they are",
	        pids[0], ent->target);
}

/* Wait until the daemon has closed the store (it holds lock until then):
 * 1 closed, 0 not (the mount lives on in another namespace: reported),
 * -1 error (reported). */
static int wait_store_closed(int lfd, const char *lock,
                             const cli_mount_ent *ent, long daemon)
{
	for (unsigned i = 0;; i++) {
		if (flock(lfd, LOCK_SH | LOCK_NB) == 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			cli_err("%s: %s", lock, strerror(errno));
			return -1;
		}
		if (i == 10 && isatty(STDERR_FILENO))
			cli_err("waiting for the daemon to finish encoding "
			        "(%s)...",
			        ent->source);
		/* Encoding what is queued may take minutes; a copy of the
		 * mount elsewhere would keep it open for ever.  Look for one
		 * after three seconds (a namespace that detaches its copies
		 * first has done so by then), then every ten. */
		if (i % 100 == 30 && ent->dev[0]) {
			long pids[8];
			int n = cli_mount_holders(ent->dev, pids, 8);
			if (n > 0) {
				report_holders(ent, daemon, pids, n);
				return 0;
			}
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

int cmd_umount(int argc, char **argv)
{
	cli_mount_ent ent = { 0 };
	char *path = NULL, *lock = NULL;
	int lfd = -1, rc = CLI_FAIL;

	if (argc == 2 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		umount_usage(stdout);
		return CLI_OK;
	}
	if (argc != 2 || argv[1][0] == '-') {
		umount_usage(stderr);
		return CLI_USAGE;
	}
	/* realpath fails with ENOTCONN on a mount whose daemon died, which
	 * must still be unmountable: resolve the parent instead. */
	path = realpath(argv[1], NULL);
	if (!path) {
		int e = errno;
		if (e != ENOENT)
			path = abs_via_parent(argv[1]);
		if (!path) {
			cli_err("%s: %s", argv[1], strerror(e));
			goto out;
		}
	}
	int found = cli_find_mount(path, 0, &ent);
	if (found < 0) {
		cli_err("/proc/self/mountinfo: %s", strerror(errno));
		goto out;
	}
	if (found == 0 || strcmp(ent.fstype, "fuse.ulpfs") != 0) {
		/* The store directory instead of the mount point? */
		cli_mount_ent alt;
		if (cli_find_mount(path, 1, &alt) == 1) {
			cli_mount_ent_free(&ent);
			ent = alt;
		} else if (found == 0) {
			cli_err("%s: not mounted", argv[1]);
			goto out;
		} else {
			cli_err("%s: not a ulpfs mount (it is %s)", argv[1],
			        ent.fstype);
			goto out;
		}
	}

	/* Open the lock first: the daemon holds it until the store is
	 * closed, so it still does when the unmount below returns. */
	if (asprintf(&lock, "%s/lock", ent.source) < 0) {
		lock = NULL;
		cli_err("out of memory");
		goto out;
	}
	lfd = open(lock, O_RDONLY | O_CLOEXEC);
	if (lfd < 0)
		cli_err("%s: %s (cannot wait for the daemon)", lock,
		        strerror(errno));
	unsigned long long start = 0;
	long pid = daemon_pid(ent.source, &start);
	if (do_unmount(ent.target) < 0)
		goto out;
	if (lfd < 0)
		goto out; /* unmounted, but not known to be drained */
	int w = wait_store_closed(lfd, lock, &ent, pid);
	if (w < 0)
		goto out;
	if (w == 0) {
		rc = CLI_FAIL; /* still mounted elsewhere: said why */
		goto out;
	}
	flock(lfd, LOCK_UN);
	if (pid)
		wait_pid_gone(pid, start);
	rc = mount_s3_umount_report(ent.source) < 0 ? CLI_FAIL : CLI_OK;
out:
	if (lfd >= 0)
		close(lfd);
	cli_mount_ent_free(&ent);
	free(lock);
	free(path);
	return rc;
}
