/*
 * fs_session.c - the FUSE session: operation table, connection setup,
 * mount options, the multithreaded loop and unmounting.
 *
 * Capabilities (see init): no writeback cache (the kernel would delay
 * writes and merge them, hiding ENOSPC and I/O errors from the writer and
 * making the store's "last close" ambiguous); atomic O_TRUNC (the store
 * need not copy up a committed file that is about to be emptied); cached
 * symlinks (a symlink's target never changes); no splice (the store takes
 * memory buffers, so splicing would only add a copy; the I/O hooks of the
 * write modes, fs_io.c, read and write memory buffers); no "handle killpriv"
 * v1 (fs_io.c takes v2, where the kernel offers it, in every mode but
 * write_mode=cached, where the kernel clears set-user-ID bits itself with
 * a setattr).  Requests
 * carry up to 1 MiB (FUSE_MAX_PAGES).  POSIX ACLs with default_permissions
 * (fs_xattr.c).  lseek answers SEEK_DATA/SEEK_HOLE from the staging
 * file's holes (fs_file.c).  copy_file_range is served by the daemon
 * (fs_copy.c).  POSIX locks and flock are not implemented: libfuse
 * answers ENOSYS, after which the kernel stops asking (they are local to
 * this machine).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_internal.h"

#define DEFAULT_TIMEOUT 1.0
#define DEFAULT_MAX_THREADS 64

/* ------------------------------------------------------------- logging */

/* libfuse reports errors (bad mount point, fusermount3 failures) through
 * its log function.  While ulp_fs_mount runs they are collected for its
 * error message instead of being printed; afterwards they go to stderr
 * (the daemon's log). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[512];
static int log_capture;

static void fs_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (level > FUSE_LOG_ERR) {
		fputs(msg, stderr);
		return;
	}
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = 0;
	pthread_mutex_lock(&log_mu);
	int capture = log_capture;
	if (capture) {
		size_t used = strlen(log_buf);
		snprintf(log_buf + used, sizeof(log_buf) - used, "%s%s",
		         used ? "; " : "", msg);
	}
	pthread_mutex_unlock(&log_mu);
	if (!capture)
		fprintf(stderr, "ulpfs: %s\n", msg);
}

static void log_start(void)
{
	pthread_mutex_lock(&log_mu);
	log_buf[0] = 0;
	log_capture = 1;
	pthread_mutex_unlock(&log_mu);
}

/* Stop collecting; the messages (or fallback) into out. */
static void log_stop(char *out, size_t outlen, const char *fallback)
{
	pthread_mutex_lock(&log_mu);
	if (out && outlen)
		snprintf(out, outlen, "%s", log_buf[0] ? log_buf : fallback);
	log_buf[0] = 0;
	log_capture = 0;
	pthread_mutex_unlock(&log_mu);
}

/* ---------------------------------------------------------- connection */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	ulp_fs *fs = userdata;
	conn->want &=
		~(uint64_t)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
	                    FUSE_CAP_SPLICE_MOVE | FUSE_CAP_HANDLE_KILLPRIV);
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* The kernel enforces ACLs; it leaves the umask to the daemon, which
	 * must not apply it where a default ACL is inherited. */
	fs->posix_acl = fs->want_acl && (conn->capable & FUSE_CAP_POSIX_ACL) &&
	                (conn->capable & FUSE_CAP_DONT_MASK);
	if (fs->posix_acl)
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	/* libfuse lowers this to what its buffers and the kernel allow. */
	conn->max_write = ULP_FS_MAX_WRITE;
	if (fs->max_read)
		conn->max_read = fs->max_read;
	if (fs->conn_opts)
		fuse_apply_conn_info_opts(fs->conn_opts, conn);
	/* The custom I/O hooks (fs_io.c) read and write memory buffers:
	 * libfuse would not splice through them. */
	if (fs->io_want != ULP_FS_WRITE_CACHED)
		conn->want &= ~(uint64_t)(FUSE_CAP_SPLICE_READ |
		                          FUSE_CAP_SPLICE_WRITE |
		                          FUSE_CAP_SPLICE_MOVE);
	/* Never, whatever the options said (ulp_fs_option_ok refuses it). */
	conn->want &= ~(uint64_t)FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= conn->capable;
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = ulp_fs_op_lookup,
	.forget = ulp_fs_op_forget,
	.forget_multi = ulp_fs_op_forget_multi,
	.getattr = ulp_fs_op_getattr,
	.setattr = ulp_fs_op_setattr,
	.readlink = ulp_fs_op_readlink,
	.mknod = ulp_fs_op_mknod,
	.mkdir = ulp_fs_op_mkdir,
	.unlink = ulp_fs_op_unlink,
	.rmdir = ulp_fs_op_rmdir,
	.symlink = ulp_fs_op_symlink,
	.rename = ulp_fs_op_rename,
	.link = ulp_fs_op_link,
	.open = ulp_fs_op_open,
	.create = ulp_fs_op_create,
	.read = ulp_fs_op_read,
	.write_buf = ulp_fs_op_write_buf,
	.flush = ulp_fs_op_flush,
	.release = ulp_fs_op_release,
	.fsync = ulp_fs_op_fsync,
	.fallocate = ulp_fs_op_fallocate,
	.lseek = ulp_fs_op_lseek,
	.copy_file_range = ulp_fs_op_copy_file_range,
	.opendir = ulp_fs_op_opendir,
	.readdir = ulp_fs_op_readdir,
	.readdirplus = ulp_fs_op_readdirplus,
	.releasedir = ulp_fs_op_releasedir,
	.fsyncdir = ulp_fs_op_fsyncdir,
	.statfs = ulp_fs_op_statfs,
	.setxattr = ulp_fs_op_setxattr,
	.getxattr = ulp_fs_op_getxattr,
	.listxattr = ulp_fs_op_listxattr,
	.removexattr = ulp_fs_op_removexattr,
};

/* ------------------------------------------------------------- options */

/* Generic FUSE options passed through.  Mount flags, and libfuse's
 * connection tuning.  Not: writeback_cache (see above), fsname/subtype
 * (set by ulpfs), blkdev/blksize (block-device mounts), SELinux contexts. */
static const char *const pass_flags[] = {
	"ro",
	"rw",
	"suid",
	"nosuid",
	"dev",
	"nodev",
	"exec",
	"noexec",
	"async",
	"sync",
	"dirsync",
	"atime",
	"noatime",
	"auto_unmount",
	"allow_root",
	"debug",
	"async_read",
	"sync_read",
	"atomic_o_trunc",
	"no_remote_lock",
	"no_remote_flock",
	"no_remote_posix_lock",
	"splice_read",
	"no_splice_read",
	"splice_write",
	"no_splice_write",
	"splice_move",
	"no_splice_move",
	"auto_inval_data",
	"no_auto_inval_data",
	"readdirplus=yes",
	"readdirplus=no",
	"readdirplus=auto",
	"async_dio",
	"no_async_dio",
	"no_writeback_cache",
	NULL,
};
static const char *const pass_numeric[] = {
	"max_read=",
	"max_write=",
	"max_readahead=",
	"max_background=",
	"congestion_threshold=",
	NULL,
};

int ulp_fs_option_ok(const char *opt, const char **why)
{
	*why = NULL;
	for (size_t i = 0; pass_flags[i]; i++)
		if (strcmp(opt, pass_flags[i]) == 0)
			return 1;
	for (size_t i = 0; pass_numeric[i]; i++) {
		size_t n = strlen(pass_numeric[i]);
		if (strncmp(opt, pass_numeric[i], n) == 0) {
			const char *v = opt + n;
			char *end;
			unsigned long x;
			if (*v < '0' || *v > '9' ||
			    ((void)(x = strtoul(v, &end, 10)), *end) ||
			    x > 0xffffffffUL) {
				*why = "needs a number";
				return 0;
			}
			return 1;
		}
	}
	if (strcmp(opt, "writeback_cache") == 0)
		*why = "would delay writes and hide their errors";
	else if (strncmp(opt, "fsname=", 7) == 0 ||
	         strncmp(opt, "subtype=", 8) == 0)
		*why = "is set by ulpfs";
	else
		*why = "is not a known mount option";
	return 0;
}

/* Append ",opt" to *s (a malloc'ed string), escaping ',' and '\' as
 * libfuse's option parser expects. */
static int opt_append(char **s, const char *opt)
{
	size_t n = *s ? strlen(*s) : 0, m = strlen(opt);
	char *p = realloc(*s, n + 2 * m + 2);
	if (!p)
		return -1;
	*s = p;
	p += n;
	if (n)
		*p++ = ',';
	for (; *opt; opt++) {
		if (*opt == ',' || *opt == '\\')
			*p++ = '\\';
		*p++ = *opt;
	}
	*p = 0;
	return 0;
}

/* --------------------------------------------------------------- mount */

void ulp_fs_config_default(ulp_fs_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->attr_timeout = DEFAULT_TIMEOUT;
	cfg->entry_timeout = DEFAULT_TIMEOUT;
	cfg->max_threads = DEFAULT_MAX_THREADS;
}

static void term_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

void ulp_fs_block_signals(void)
{
	sigset_t set;
	term_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Everything fs owns, after a failed mount or the unmount. */
static void fs_free(ulp_fs *fs)
{
	if (fs->se)
		fuse_session_destroy(fs->se);
	free(fs->conn_opts);
	free(fs->mountpoint);
	pthread_mutex_destroy(&fs->handles_mu);
	pthread_cond_destroy(&fs->released_cv);
	ulp_fs_io_free(fs);
	ulp_ctl_free(fs);
	free(fs);
}

int ulp_fs_mount(ulp_store *st, const ulp_fs_config *cfg, ulp_fs **out,
                 char *err, size_t errlen)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char *opts = NULL, *fsname = NULL;
	const char *why;
	int rc = -ENOMEM;
	ulp_fs *fs;

	*out = NULL;
	snprintf(err, errlen, "out of memory");
	fuse_set_log_func(fs_log);
	if (ulp_fs_tls_init() < 0)
		return -ENOMEM;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	log_start();
	fs->st = st;
	fs->attr_timeout = cfg->attr_timeout >= 0 ? cfg->attr_timeout
	                                          : DEFAULT_TIMEOUT;
	fs->entry_timeout = cfg->entry_timeout >= 0 ? cfg->entry_timeout
	                                            : DEFAULT_TIMEOUT;
	fs->max_threads = cfg->max_threads ? cfg->max_threads
	                                   : DEFAULT_MAX_THREADS;
	fs->io_want = cfg->write_mode;
	pthread_mutex_init(&fs->io_mu, NULL);
	pthread_mutex_init(&fs->handles_mu, NULL);
	pthread_cond_init(&fs->released_cv, NULL);
	pthread_mutex_init(&fs->sdirs_mu, NULL);
	fs->handles.next = fs->handles.prev = &fs->handles;
	fs->mountpoint = strdup(cfg->mountpoint);
	if (!fs->mountpoint)
		goto fail;

	if (asprintf(&fsname, "fsname=%s",
	             cfg->fsname ? cfg->fsname : "ulpfs") < 0) {
		fsname = NULL;
		goto fail;
	}
	/* nosuid,nodev first, so that "-o suid,dev" can still override. */
	if (opt_append(&opts, fsname) || opt_append(&opts, "subtype=ulpfs") ||
	    opt_append(&opts, "nosuid") || opt_append(&opts, "nodev"))
		goto fail;
	if (cfg->allow_other && opt_append(&opts, "allow_other"))
		goto fail;
	if ((cfg->default_permissions || cfg->allow_other) &&
	    opt_append(&opts, "default_permissions"))
		goto fail;
	fs->want_acl = cfg->default_permissions || cfg->allow_other;
	for (size_t i = 0; cfg->fuse_opts && cfg->fuse_opts[i]; i++) {
		if (!ulp_fs_option_ok(cfg->fuse_opts[i], &why)) {
			snprintf(err, errlen, "mount option '%s' %s",
			         cfg->fuse_opts[i], why);
			rc = -EINVAL;
			goto fail;
		}
		if (strncmp(cfg->fuse_opts[i], "max_read=", 9) == 0)
			fs->max_read = (unsigned)strtoul(cfg->fuse_opts[i] + 9,
			                                 NULL, 10);
		/* Values never need escaping: checked above. */
		size_t n = strlen(opts);
		char *p = realloc(opts, n + strlen(cfg->fuse_opts[i]) + 2);
		if (!p)
			goto fail;
		opts = p;
		sprintf(opts + n, ",%s", cfg->fuse_opts[i]);
	}
	if (fuse_opt_add_arg(&args, "ulpfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) ||
	    (cfg->debug && fuse_opt_add_arg(&args, "-d")))
		goto fail;

	fs->conn_opts = fuse_parse_conn_info_opts(&args);
	if (!fs->conn_opts) {
		log_stop(err, errlen, "bad connection options");
		rc = -EINVAL;
		goto fail;
	}
	fs->se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	if (!fs->se) {
		log_stop(err, errlen, "cannot create the FUSE session");
		rc = -EINVAL;
		goto fail;
	}
	if (fuse_session_mount(fs->se, fs->mountpoint) != 0) {
		log_stop(err, errlen, "mount failed");
		rc = -EIO;
		goto fail;
	}
	fs->mounted = 1;
	rc = ulp_fs_io_install(fs);
	if (rc < 0) {
		log_stop(err, errlen, "cannot install the FUSE I/O hooks");
		fuse_session_unmount(fs->se);
		goto fail;
	}
	log_stop(NULL, 0, NULL);
	fuse_opt_free_args(&args);
	free(opts);
	free(fsname);
	*out = fs;
	if (errlen)
		err[0] = 0;
	return 0;

fail:
	log_stop(NULL, 0, NULL); /* err is set by now */
	fuse_opt_free_args(&args);
	free(opts);
	free(fsname);
	fs_free(fs);
	return rc;
}

int ulp_fs_run(ulp_fs *fs)
{
	sigset_t set;
	int rc;
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, fs->max_threads);
	if (fuse_set_signal_handlers(fs->se) != 0) {
		fuse_loop_cfg_destroy(lc);
		return -EIO;
	}
	/* libfuse's workers block these signals; this thread takes them and
	 * its sem_wait() is interrupted, ending the loop. */
	term_signals(&set);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	rc = fuse_session_loop_mt(fs->se, lc);
	/* From here on (draining the encode queue can take a while) another
	 * SIGTERM must not kill the process half way: keep them pending. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	fuse_remove_signal_handlers(fs->se);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

void ulp_fs_unmount(ulp_fs *fs)
{
	if (!fs)
		return;
	if (fs->mounted)
		fuse_session_unmount(fs->se);
	fs->mounted = 0;
	/* No request runs any more: hand what is still open to the store. */
	ulp_fs_release_all(fs);
	fs_free(fs);
}

void ulp_fs_invalidate_inode(ulp_fs *fs, uint64_t ino)
{
	if (fs && fs->se)
		(void)fuse_lowlevel_notify_inval_inode(fs->se, (fuse_ino_t)ino,
		                                       0, 0);
}

void ulp_fs_invalidate_entry(ulp_fs *fs, uint64_t parent, const char *name)
{
	if (fs && fs->se)
		(void)fuse_lowlevel_notify_inval_entry(
			fs->se, (fuse_ino_t)parent, name, strlen(name));
}
