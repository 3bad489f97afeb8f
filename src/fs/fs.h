/*
 * fs.h - the ulpfs FUSE filesystem (low-level libfuse 3 API) over a store.
 *
 * This header is free of FUSE types so that the command-line helper can use
 * it without libfuse's headers.  The life of a mount:
 *
 *   ulp_store_open()  ->  ulp_fs_mount()  ->  ulp_fs_run()  ->
 *   ulp_fs_unmount()  ->  ulp_store_close()
 *
 * ulp_fs_run() returns when the filesystem is unmounted (fusermount3 -u,
 * umount) or the process gets SIGTERM, SIGINT or SIGHUP.  Those signals
 * must be blocked in every thread but the one that calls ulp_fs_run(), or
 * the loop may not notice them: call ulp_fs_block_signals() before
 * ulp_store_open() starts the store's threads; ulp_fs_run() unblocks them
 * in its own thread.
 *
 * Inode numbers are the store's.  Attributes and directory entries are
 * cached by the kernel for cfg->attr_timeout / cfg->entry_timeout seconds
 * (default 1 s): changes made through the mount are seen at once, changes
 * made to the store by other means (the helper) within that time.
 */
#ifndef ULP_FS_H
#define ULP_FS_H

#include <stddef.h>
#include <sys/statvfs.h> /* store.h uses struct statvfs */

#include "store/store.h"

typedef struct ulp_fs ulp_fs;

/* How writers' data reaches the staging file (-o write_mode=...).
 * passthrough: the kernel writes the staging file itself (FUSE
 * passthrough, Linux 6.9+ with CAP_SYS_ADMIN); direct: direct_io opens,
 * one request per write, no page cache; cached: the page cache, one
 * request per page run.  auto is passthrough where the kernel grants it,
 * else direct.  A forced passthrough the kernel refuses falls back to
 * direct as auto does, and says so in the log and in ulp_fs_write_mode. */
typedef enum ulp_fs_write_mode {
	ULP_FS_WRITE_AUTO = 0,
	ULP_FS_WRITE_PASSTHROUGH,
	ULP_FS_WRITE_DIRECT,
	ULP_FS_WRITE_CACHED,
} ulp_fs_write_mode;

/* "auto", "passthrough", "direct", "cached" -> *out; -1 if unknown. */
int ulp_fs_write_mode_parse(const char *s, ulp_fs_write_mode *out);

typedef struct ulp_fs_config {
	const char *mountpoint;  /* absolute path of an existing directory */
	const char *fsname;      /* the mount's source (the store's path) */
	double attr_timeout;     /* seconds; < 0 means the default (1 s) */
	double entry_timeout;    /* seconds; < 0 means the default (1 s) */
	unsigned max_threads;    /* FUSE worker threads; 0: default (64) */
	int allow_other;         /* -o allow_other (implies permissions) */
	int default_permissions; /* the kernel checks access modes */
	int debug;               /* libfuse request tracing on stderr */
	ulp_fs_write_mode write_mode;
	/* Further generic FUSE options, each accepted by ulp_fs_option_ok(),
	 * NULL-terminated; may be NULL. */
	const char *const *fuse_opts;
} ulp_fs_config;

/* Zero and fill in the defaults. */
void ulp_fs_config_default(ulp_fs_config *cfg);

/* Whether the generic FUSE mount option opt ("noatime", "max_read=N") may
 * be passed through to libfuse.  Returns 1 if so; 0 if not, with *why set
 * to a reason. */
int ulp_fs_option_ok(const char *opt, const char **why);

/* Block SIGTERM, SIGINT and SIGHUP in the calling thread (and the threads
 * it creates from now on). */
void ulp_fs_block_signals(void);

/* Create the FUSE session over st and mount it on cfg->mountpoint.  On
 * failure returns a negative errno and writes a message (without the
 * mount point) into err. */
int ulp_fs_mount(ulp_store *st, const ulp_fs_config *cfg, ulp_fs **out,
                 char *err, size_t errlen);

/* Serve requests with a pool of threads until unmounted or signalled.
 * Returns 0, or the signal number that ended the loop, or -errno. */
int ulp_fs_run(ulp_fs *fs);

/* Unmount (if still mounted), release every file handle the kernel did not
 * release (so their data is queued for encoding) and free fs.  The store
 * stays open: close it afterwards with ulp_store_close(). */
void ulp_fs_unmount(ulp_fs *fs);

/* The write mode in force: "passthrough", "direct", "cached", or, before
 * the kernel's INIT, what was asked for; with a reason appended when the
 * kernel refused passthrough ("direct (passthrough refused: ...)").  The
 * string lives as long as fs. */
const char *ulp_fs_write_mode_active(ulp_fs *fs);
/* The requests the daemon has read from the kernel since the mount, by
 * opcode: fn(opaque, name, count) for each opcode seen (opcodes the table
 * does not name are summed as "other").  -ENOTSUP in write_mode=cached,
 * where libfuse reads them itself. */
typedef void (*ulp_fs_request_fn)(void *opaque, const char *op, uint64_t n);
int ulp_fs_requests(ulp_fs *fs, ulp_fs_request_fn fn, void *opaque);

/* Wait (at most timeout_ms) until every handle whose descriptor was
 * closed has been released, i.e. its file queued for encoding: close(2)
 * returns before the kernel's asynchronous RELEASE arrives.  0, or
 * -ETIMEDOUT when a closed handle is still unreleased (a dup'ed
 * descriptor may keep it open). */
int ulp_fs_wait_released(ulp_fs *fs, unsigned timeout_ms);
/* Tell the kernel that what it cached of an inode (attributes, pages) or
 * of a name in a directory is stale: the helper changed the store behind
 * the mount's back (restore, prune).  Never call from a FUSE request
 * handler.  fs may be NULL (no-op). */
void ulp_fs_invalidate_inode(ulp_fs *fs, uint64_t ino);
void ulp_fs_invalidate_entry(ulp_fs *fs, uint64_t parent, const char *name);
/* The same for .ulpfs/snapshots/NAME (a snapshot was deleted). */
void ulp_fs_invalidate_snapshot(ulp_fs *fs, const char *name);

#endif /* ULP_FS_H */
