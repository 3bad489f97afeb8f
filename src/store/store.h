/*
 * store.h - the ulpfs store: namespace, versions, staging and objects.
 *
 * A store is a directory:
 *   STORE/catalog.db   SQLite (WAL): inodes, directory entries, versions,
 *                      snapshots (schema versioned, migrated on open)
 *   STORE/objects/     immutable encoded versions: written to a temporary
 *                      name, fsynced, renamed (libulp objects)
 *   STORE/staging/     plain bytes of files open for writing or waiting to
 *                      be encoded, one file per inode
 *   STORE/lock         flock()ed by the one process that has it open
 *
 * The filesystem layer (src/fs) calls only this API.  Every function that
 * changes the namespace is one SQLite transaction.  Functions return 0 or a
 * negative errno (-ENOENT, -EEXIST, -ENOTEMPTY, -ENOSPC, -EIO, ...), which
 * the FUSE layer passes back as is.  All functions are thread-safe.
 *
 * Data life cycle of a regular file:
 *   open for writing -> its bytes live in staging/<ino> (a plain file; a
 *   committed file opened without O_TRUNC is copied up on demand: the
 *   bytes not written since come from its version), reads and
 *   writes go straight to it -> after the last writable handle is released
 *   and a settle delay has passed (so a rename can land first), an encoder
 *   thread encodes it standalone, writes and fsyncs the object, commits
 *   the version in one transaction, and only then removes the staging
 *   file.  Until then reads come from staging.  A closed content about to
 *   be replaced (O_TRUNC, rename over it) is committed first.
 *   In the background, the version it succeeds (its predecessor: the
 *   file's previous version, else one of the same path, tensor layout or
 *   file name) is coded again against it: the newest version of a lineage
 *   reads without a chain, and every keyframe_every-th stays standalone.
 */
#ifndef ULP_STORE_H
#define ULP_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "ulpfs/ulp.h" /* ulp_stats */

#define ULP_ROOT_INO 1

typedef struct ulp_store ulp_store;

typedef struct ulp_store_opts {
	uint64_t cache_bytes;     /* decoded-chunk cache (default 256 MiB) */
	unsigned encoder_threads; /* default: number of CPUs */
	unsigned keyframe_every;  /* a keyframe every K versions (default 16) */
	unsigned settle_ms;       /* delay between last close and encoding
	                             (default 500) */
	uint64_t staging_limit;   /* bytes of staging (allocated, as du counts)
	                             before writers wait (default: 50% of the
	                             backing free space) */
	/* objects also kept elsewhere (store/remote.h); NULL: local only */
	const struct ulp_remote *remote;
	/* code no file given another file of its checkpoint (side.h; 0:
	 * optimizer.pt's fp32 master weights are coded given the bf16
	 * weights of the model.safetensors beside it) */
	int no_side;
	/* bytes the plain newest versions may take (plain.h):
	 * ULP_PLAIN_OFF codes every version at commit, ULP_PLAIN_AUTO
	 * bounds them by a quarter of the store filesystem's free space and
	 * their own; 0: the default (ULP_PLAIN_DEFAULT) */
	uint64_t plain_newest;
} ulp_store_opts;
#define ULP_PLAIN_OFF UINT64_MAX
#define ULP_PLAIN_AUTO (UINT64_MAX - 1)
#define ULP_PLAIN_DEFAULT ULP_PLAIN_OFF

/* Fill defaults for zero fields. */
void ulp_store_opts_default(ulp_store_opts *o);
/* 1 when a live (or ghost) version still names object name, 0 when none
 * does, or a negative errno: what a remote's orphan sweep asks. */
int ulp_store_object_live(ulp_store *st, const char *name);
/* The store's keyframe_every (a remote bounds its own chains by it). */
unsigned ulp_store_keyframe_every(ulp_store *st);
/* Code version vid again against version base into a new object in
 * objects/ that no row names (delta_api.c): fsynced, never passed to the
 * remote's put hook, its decoded hash checked against the version's.  A version coded given a side (side.h) is coded given it
 * again, and *side says the side the object's chunks read (0: none; the
 * object may name one none reads).  Whoever asked owns it (uploads it,
 * unlinks it); the next open removes it if a crash leaves it.  0 with
 * name, *stored and *side, or -errno (-ENOENT: either version deleted). */
int ulp_store_encode_delta(ulp_store *st, uint64_t vid, uint64_t base,
                           char name[33], uint64_t *stored, uint64_t *side);

/* Open (creating when the directory is empty or missing) and recover: staged
 * files without a committed version are re-queued, objects no version
 * references are removed, the catalog is checked.  Fails with -EBUSY when
 * another process holds the store, -ENOTEMPTY when dir is a non-empty
 * directory that is not a store, -EPROTO when its catalog was written by a
 * newer ulpfs (or is not a ulpfs catalog), -EIO when the check fails. */
int ulp_store_open(const char *dir, const ulp_store_opts *opts,
                   ulp_store **out);
/* Drain the encode queue (every closed file committed), then close.  Every
 * ulp_file must have been released.  A file whose encoding fails (say, no
 * space for its object) stays staged and is queued again by the next open. */
void ulp_store_close(ulp_store *st);
/* The store's thread pool (encoder_threads threads), for work of the same
 * process that must share its threads: background work goes to its low
 * lane (ulp_pool_submit_low), so that it never holds back a commit. */
ulp_pool *ulp_store_pool(ulp_store *st);
/* Wait until every file closed so far is committed (files still open for
 * writing are not waited for; the settle delay is skipped).  Returns 0, or
 * the error of a file whose encoding failed (it stays staged and is
 * retried). */
int ulp_store_sync(ulp_store *st);

/* ------------------------------------------------------------ namespace */

typedef struct ulp_attr {
	uint64_t ino;
	mode_t mode; /* type and permission bits */
	uint32_t nlink;
	uid_t uid;
	gid_t gid;
	uint64_t size;
	struct timespec atime, mtime, ctime;
	uint64_t rdev; /* device number of a character or block device */
} ulp_attr;

int ulp_ns_lookup(ulp_store *st, uint64_t parent, const char *name,
                  ulp_attr *out);
int ulp_ns_getattr(ulp_store *st, uint64_t ino, ulp_attr *out);

/* Create a regular file (its content starts empty in staging and is
 * queued, so a file never opened for writing is committed empty), a
 * directory or a symlink; the parent's mtime and ctime are updated.  Names
 * longer than 255 bytes: -ENAMETOOLONG; ".", ".." or with a '/': -EINVAL. */
int ulp_ns_create(ulp_store *st, uint64_t parent, const char *name, mode_t mode,
                  uid_t uid, gid_t gid, ulp_attr *out);
int ulp_ns_mkdir(ulp_store *st, uint64_t parent, const char *name, mode_t mode,
                 uid_t uid, gid_t gid, ulp_attr *out);
int ulp_ns_symlink(ulp_store *st, uint64_t parent, const char *name,
                   const char *target, uid_t uid, gid_t gid, ulp_attr *out);
/* A special file: mode's type is S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK
 * (S_IFREG makes an empty regular file, as ulp_ns_create); rdev is kept
 * for devices.  Metadata only: the kernel serves their opens itself.
 * Other types: -EINVAL. */
int ulp_ns_mknod(ulp_store *st, uint64_t parent, const char *name, mode_t mode,
                 uint64_t rdev, uid_t uid, gid_t gid, ulp_attr *out);
/* The target, NUL-terminated, truncated to size - 1 bytes: 0 or -errno
 * (-EINVAL: not a symlink). */
int ulp_ns_readlink(ulp_store *st, uint64_t ino, char *buf, size_t size);

/* A hard link: a new name newparent/newname for ino (not a directory:
 * -EPERM), nlink and ctime of ino and the directory's times updated.  The
 * versions of a file belong to the inode, whichever name writes it; they
 * are recorded under its oldest name's path (ulp_ns_path), which moves to
 * the next name when that one goes. */
int ulp_ns_link(ulp_store *st, uint64_t ino, uint64_t newparent,
                const char *newname, ulp_attr *out);
/* An unlinked file that is open stays readable and writable through its
 * handles (getattr gives nlink 0) until the last one is released. */
int ulp_ns_unlink(ulp_store *st, uint64_t parent, const char *name);
int ulp_ns_rmdir(ulp_store *st, uint64_t parent, const char *name);

#define ULP_RENAME_NOREPLACE 1u
#define ULP_RENAME_EXCHANGE 2u
#define ULP_RENAME_WHITEOUT 4u
/* POSIX rename: replaces an existing target (a file, or an empty directory
 * by a directory: -EISDIR, -ENOTDIR, -ENOTEMPTY otherwise), moves whole
 * directories, refuses to move a directory into itself (-EINVAL).
 * NOREPLACE: -EEXIST if the target exists; EXCHANGE swaps two entries;
 * WHITEOUT (overlayfs) leaves a whiteout, a character device 0:0 owned by
 * uid:gid, at the old name in the same transaction (not with EXCHANGE). */
int ulp_ns_rename_as(ulp_store *st, uint64_t parent, const char *name,
                     uint64_t newparent, const char *newname, unsigned flags,
                     uid_t uid, gid_t gid);
/* The same, without WHITEOUT. */
int ulp_ns_rename(ulp_store *st, uint64_t parent, const char *name,
                  uint64_t newparent, const char *newname, unsigned flags);

/* setattr: the fields named by mask (ULP_SET_*) are applied.  ULP_SET_SIZE
 * truncates or extends (copying a committed file up to staging first). */
#define ULP_SET_MODE 1u
#define ULP_SET_UID 2u
#define ULP_SET_GID 4u
#define ULP_SET_SIZE 8u
#define ULP_SET_ATIME 16u
#define ULP_SET_MTIME 32u
#define ULP_SET_ATIME_NOW 64u
#define ULP_SET_MTIME_NOW 128u
/* What a write, truncate or chown by an unprivileged caller does to the
 * set-user-ID and set-group-ID bits of a node other than a directory
 * (a chown clears those of special files too), atomically with the
 * rest: clear S_ISUID; clear S_ISGID where S_IXGRP is set (without it,
 * S_ISGID marks mandatory locking); clear S_ISGID in any case.  Nothing is
 * written when no bit is cleared and nothing else is set. */
#define ULP_SET_KILL_SUID 256u
#define ULP_SET_KILL_SGIDX 512u
#define ULP_SET_KILL_SGID 1024u
#define ULP_SET_KILLS \
	(ULP_SET_KILL_SUID | ULP_SET_KILL_SGIDX | ULP_SET_KILL_SGID)
int ulp_ns_setattr(ulp_store *st, uint64_t ino, const ulp_attr *attr,
                   unsigned mask, ulp_attr *out);

/* Directory listing from offset off (0 = start; each entry gives the next
 * offset).  "." and ".." come first (next offsets 1 and 2); the offset of
 * an entry stays valid while others are added and removed.  The callback
 * returns non-zero to stop (buffer full): that entry was not taken, resume
 * from the next_off of the one before it. */
typedef int (*ulp_dirent_fn)(void *opaque, const char *name,
                             const ulp_attr *attr, uint64_t next_off);
int ulp_ns_readdir(ulp_store *st, uint64_t ino, uint64_t off, ulp_dirent_fn fn,
                   void *opaque);

/* Space of the backing filesystem, for statfs. */
int ulp_store_statfs(ulp_store *st, struct statvfs *out);

/* ------------------------------------------------------------ xattrs
 * (xattr.c, acl.c)
 *
 * Extended attributes of an inode, in the catalog: names "user.*",
 * "trusted.*", "security.*" and the POSIX ACLs ULP_ACL_ACCESS and
 * ULP_ACL_DEFAULT (in the kernel's xattr form); other names -EOPNOTSUPP,
 * names over 255 bytes -ERANGE, values over 64 KiB -E2BIG, more than
 * ULP_XATTR_INODE_MAX bytes on one inode -ENOSPC.  A change sets ctime in
 * the same transaction; an inode's attributes go with its row.  A new
 * inode inherits its directory's default ACL (ulp_ns_create, mkdir,
 * mknod), which masks its mode as on Linux. */
#define ULP_ACL_ACCESS "system.posix_acl_access"
#define ULP_ACL_DEFAULT "system.posix_acl_default"
#define ULP_XATTR_NAME_MAX 255
#define ULP_XATTR_SIZE_MAX 65536
#define ULP_XATTR_INODE_MAX 65536
#define ULP_XATTR_CREATE 1u  /* -EEXIST if it exists */
#define ULP_XATTR_REPLACE 2u /* -ENODATA if it does not */
int ulp_xattr_set(ulp_store *st, uint64_t ino, const char *name,
                  const void *value, size_t size, unsigned flags);
/* The value's length; with size 0 only that, else -ERANGE when it does
 * not fit; -ENODATA when there is none. */
ssize_t ulp_xattr_get(ulp_store *st, uint64_t ino, const char *name, void *buf,
                      size_t size);
/* The names, each NUL-terminated, sorted; size 0 and -ERANGE as get. */
ssize_t ulp_xattr_list(ulp_store *st, uint64_t ino, char *buf, size_t size);
/* -ENODATA when there is none. */
int ulp_xattr_remove(ulp_store *st, uint64_t ino, const char *name);
/* 1 when directory dir has a default ACL (new inodes in it take their
 * permissions from it, not from the umask), 0, -errno. */
int ulp_acl_default_of(ulp_store *st, uint64_t dir);

/* ------------------------------------------------------------ file data */

typedef struct ulp_file ulp_file;

/* Open a regular file (-EISDIR for a directory, -EINVAL for a symlink).
 * O_WRONLY/O_RDWR move it to staging (a copy-up of a committed version on
 * demand unless O_TRUNC: nothing is decoded at open, see
 * ulp_file_partial; O_TRUNC also works with O_RDONLY) and cancel a pending
 * or running encode; read-only opens of committed files read through the
 * decoder, of staged files from staging.  With O_APPEND every write lands
 * at the current end, whatever offset it is given.  *keep_cache (may be
 * NULL) tells whether the kernel may keep its page cache (content
 * committed, immutable, at open). */
int ulp_file_open(ulp_store *st, uint64_t ino, int flags, ulp_file **out,
                  int *keep_cache);
/* Read up to size bytes at off; returns the count (0 at EOF) or -errno. */
ssize_t ulp_file_read(ulp_file *f, void *buf, size_t size, off_t off);
/* A read's bytes handed over in place (ulp_file_read_iov,
 * ulp_version_read_iov): count pieces, in order, valid until the sink
 * returns; it returns 0 or -errno. */
typedef int (*ulp_read_sink)(void *opaque, const struct iovec *iov, int count);
/* ulp_file_read without the copy into a caller's buffer: the bytes go to
 * fn (called once, 0 pieces at EOF) from the decoded-chunk cache where
 * they are there, else from scratch (size bytes), which they are read
 * into.  Returns the count or -errno (fn's, once it was called).  No lock
 * is held while fn runs, and nothing of f is used once it is called: fn
 * may release f (a reply lets the kernel release the file at once). */
ssize_t ulp_file_read_iov(ulp_file *f, size_t size, off_t off, void *scratch,
                          ulp_read_sink fn, void *opaque);
/* Write; returns the count or -errno (-ENOSPC when the backing store is
 * full, -EBADF on a read-only handle).  Waits while the staging limit is
 * reached and closed files being encoded will free space. */
ssize_t ulp_file_write(ulp_file *f, const void *buf, size_t size, off_t off);
/* Report a write error of this inode not yet reported to this handle
 * (flush is called on every close), once per handle. */
int ulp_file_flush(ulp_file *f);
/* fsync the staged bytes (committed content is durable already), then as
 * flush. */
int ulp_file_fsync(ulp_file *f, int datasync);
/* Last reference of this handle: after the last writable handle of an
 * inode is released, the file is queued for encoding.  Every handle must
 * be released before ulp_store_close(). */
void ulp_file_release(ulp_file *f);
/* FUSE passthrough.  A new descriptor (O_CLOEXEC) of the staging file of
 * f's inode, for the kernel to use as the backing file; -ENOENT when the
 * content is not staged, -EBUSY when it is partial (ulp_file_partial). */
int ulp_file_staging_fd(ulp_file *f);
/* FUSE passthrough for readers.  A new descriptor (O_RDONLY, O_CLOEXEC)
 * of the plain file of f's inode's current version (the plain newest,
 * plain.h), for the kernel to read; -ENOENT when its content is staged or
 * encoded. */
int ulp_file_plain_fd(ulp_file *f);
/* The staging limit for writers that the daemon does not see (FUSE
 * passthrough), asked before choosing passthrough for writable f: waits
 * while the limit is reached (as a write would), then 1 if the staged
 * bytes, what the passthrough writers admitted earlier are still expected
 * to write (beyond what their staging files hold now), and
 * what f is expected to write (the size of the last file closed, at least
 * 1/16 of the limit) fit the limit: f is admitted and counts for that
 * until released or cancelled.  0: the daemon had better see f's writes
 * (direct_io), which wait for the limit one by one. */
int ulp_file_passthrough_admit(ulp_file *f);
/* f was admitted but is not written by passthrough after all. */
void ulp_file_passthrough_cancel(ulp_file *f);
/* 1 while f's content is a copy-up on demand: a committed file opened for
 * writing without O_TRUNC, whose staging file holds only what was written
 * since and has holes where the committed bytes show through.  The kernel
 * must not read that file itself: such opens are served by the daemon. */
int ulp_file_partial(ulp_file *f);
/* From now on the kernel writes f's staging file itself: the store takes
 * size and mtime from that file (getattr, flush, fsync, release).  f must
 * be writable. */
void ulp_file_set_passthrough(ulp_file *f);
/* The kernel took the staging file of f's inode as the backing file of
 * open files (hold), or let go of it (release).  While it holds it, a
 * commit keeps the file, and a later writer writes it again, instead of a
 * new one the kernel could not use (store/backing.c). */
void ulp_file_backing_hold(ulp_file *f);
void ulp_file_backing_release(ulp_file *f);
/* An unnamed, empty file (O_TMPFILE) beside the staging files, to try
 * whether the kernel takes them as backing files; an fd or -errno. */
int ulp_store_staging_tmpfd(ulp_store *st);
/* fallocate(2) on the staging file: mode 0 reserves space (extending the
 * size when off + len is past the end), FALLOC_FL_KEEP_SIZE reserves
 * without extending, FALLOC_FL_PUNCH_HOLE (with KEEP_SIZE) and
 * FALLOC_FL_ZERO_RANGE make the range read as zeros.  Collapse, insert
 * and unshare range: -EOPNOTSUPP.  Needs a writable handle. */
int ulp_file_fallocate(ulp_file *f, int mode, off_t off, off_t len);
/* lseek(2) SEEK_DATA / SEEK_HOLE: the holes of a staged file (and of a
 * copy-up on demand, the version's bytes as data); a committed version
 * is data throughout.  The offset, -ENXIO past the end, -EINVAL for
 * other whences. */
off_t ulp_file_seek(ulp_file *f, off_t off, int whence);
/* copy_file_range(2) of version vid into f by reference: when f is its
 * file's only writer and not written by the kernel (passthrough), the
 * file is empty and staged in full (created, or cut to 0) or a copy by
 * reference of vid that ends at off_out, and the range is at the same
 * offsets (off_in = off_out) from a chunk boundary (ULP_CHUNK_SIZE_DEFAULT),
 * the file becomes (or grows as) a copy-up on demand of vid cut at the
 * last chunk boundary of the range (or vid's end), the bytes before
 * off_out a hole: nothing is copied or decoded, and its commit codes
 * those chunks as identical to vid's (encoder.c; a file with tensors, or
 * a range under half the file, is decoded and coded again there).  The
 * bytes copied (maybe fewer than len: the caller goes on from there), 0
 * when the copy does not qualify (copy the bytes instead), or -errno. */
ssize_t ulp_file_copy_version(ulp_file *f, uint64_t vid, uint64_t off_in,
                              uint64_t off_out, uint64_t len);

/* ------------------------------------------------------------ versions */

/* Every committed content of a file is a version.  Versions of a path are
 * numbered 1, 2, ... (seq); the history of a path is kept while the path
 * exists (until a later prune); a version whose path is gone is deleted,
 * or becomes a ghost while others are coded against it, until the
 * garbage collector has rebased those. */
enum {
	ULP_VERSION_LIVE = 0,
	ULP_VERSION_GHOST = 1,   /* deleted, still referenced */
	ULP_VERSION_DELETED = 2, /* object removed; the row stays */
};

typedef struct ulp_version_info {
	uint64_t id;      /* unique in the store, never reused */
	uint64_t ino;     /* the inode that wrote it */
	uint64_t seq;     /* 1, 2, ... per path */
	uint64_t size;    /* logical bytes */
	int64_t mtime_ns; /* the file's mtime when committed */
	int64_t created_ns;
	uint8_t hash[16]; /* content hash, either kind (ulp.h; canonical) */
	uint64_t ref;     /* version it is coded against; 0: keyframe */
	uint64_t side;    /* version of another file it is coded given
	                     besides (a checkpoint's model.safetensors for
	                     its optimizer.pt); 0: none */
	uint32_t depth;   /* references between it and a keyframe */
	int keyframe;
	uint64_t stored; /* bytes of its object */
	int state;       /* ULP_VERSION_* */
	uint64_t layout; /* tensor layout hash, 0: none */
	char object[33]; /* object file name in STORE/objects */
	int plain;       /* the object is the plain bytes themselves (the
	                    newest version, served by passthrough) */
} ulp_version_info;

int ulp_version_get(ulp_store *st, uint64_t id, ulp_version_info *out);
/* Versions of path ("a/b", no leading slash; NULL: all versions), oldest
 * first, deleted ones included.  The callback returns non-zero to stop
 * (that value is returned).  path is valid during the call only. */
typedef int (*ulp_version_fn)(void *opaque, const ulp_version_info *v,
                              const char *path);
int ulp_version_list(ulp_store *st, const char *path, ulp_version_fn fn,
                     void *opaque);
/* Versions of every path under directory dir ("" : the whole store),
 * ordered by path then seq; same callback contract. */
int ulp_version_list_under(ulp_store *st, const char *dir, ulp_version_fn fn,
                           void *opaque);
/* Read a live or ghost version: count (0 at its end) or -errno. */
ssize_t ulp_version_read(ulp_store *st, uint64_t id, void *buf, size_t size,
                         uint64_t off);
/* Check the stored bytes of a version's own object against their
 * checksums, whatever the cache holds decoded: 0, -EBADMSG (*bad_chunk:
 * the first chunk that fails) or another -errno.  Reads check only the
 * decoded bytes; a verification runs this as well, so that every object
 * is checked, as its own version, down to bits no decode depends on. */
int ulp_version_check_stored(ulp_store *st, uint64_t id, size_t *bad_chunk);
/* The read-ahead state of one open handle: while its reads are
 * sequential, the chunks that come next are decoded ahead on the store's
 * read-ahead threads.  Handles opened with ulp_file_open have their own;
 * this is for readers of versions.  NULL when out of memory (reads work
 * without).  Freeing cancels the work queued for it. */
typedef struct ulp_readahead ulp_readahead;
ulp_readahead *ulp_readahead_new(ulp_store *st);
void ulp_readahead_free(ulp_readahead *ra);
/* ulp_version_read through a handle's read-ahead state (ra may be NULL). */
ssize_t ulp_version_read_ra(ulp_store *st, ulp_readahead *ra, uint64_t id,
                            void *buf, size_t size, uint64_t off);
/* ulp_version_read_ra handing the bytes to fn in place, as
 * ulp_file_read_iov does. */
ssize_t ulp_version_read_iov(ulp_store *st, ulp_readahead *ra, uint64_t id,
                             size_t size, uint64_t off, void *scratch,
                             ulp_read_sink fn, void *opaque);
/* The committed version of an inode (0 while none or while staged). */
int ulp_ns_version(ulp_store *st, uint64_t ino, uint64_t *version);
/* The path of an inode, "a/b" ("" for the root), NUL-terminated in buf:
 * 0, -ENOENT, -ERANGE (buf too small). */
int ulp_ns_path(ulp_store *st, uint64_t ino, char *buf, size_t size);

/* ------------------------------------------------------------ upkeep */

/* Run the garbage collector until no ghost is left (rebasing what depends
 * on them) and no flip is pending (older versions coded against their
 * successors), converting the forward chains of stores written before
 * reverse chains: 0 or the first error. */
int ulp_store_gc(ulp_store *st);

typedef struct ulp_store_stats {
	uint64_t versions[3];  /* by state: live, ghost, deleted */
	uint64_t stored_bytes; /* objects of live and ghost versions */
	uint64_t plain_bytes;  /* of stored_bytes: plain newest versions
	                           (their allocated blocks; plain.h) */
	uint64_t plain_versions;
	uint64_t logical_bytes; /* content of live versions */
	uint64_t staged_bytes;  /* staging: disk space of staged files (their
	                           allocated blocks; holes take none) */
	uint64_t staging_limit;
	uint64_t queued; /* files waiting for or in encoding */
	uint64_t cache_bytes, cache_hits, cache_misses;
	uint64_t commits, discards, rebases; /* since open */
	uint64_t flips; /* since open: previous newest versions coded again
	                   against their successor (reverse deltas) */
	uint64_t cache_decodes; /* chunks decoded (each decode once, however
	                           many readers wanted it at the time) */
	uint64_t cache_waits;   /* reads that waited for a decode under way */
	uint64_t readahead;     /* chunks queued for read-ahead */
} ulp_store_stats;
int ulp_store_stats_get(ulp_store *st, ulp_store_stats *out);
/* What the store's own files take besides the objects, in bytes (file
 * sizes, as `du -b` counts them): STORE/catalog.db with its -wal and
 * -shm files, and STORE/reserve (a fixed few MiB kept allocated so that
 * deleting works on a full disk; 0 while given back). */
typedef struct ulp_store_disk {
	uint64_t catalog_bytes;
	uint64_t reserve_bytes;
} ulp_store_disk;
int ulp_store_disk_get(ulp_store *st, ulp_store_disk *out);

/* ------------------------------------------------------------ history
 * (history.c) */

/* One version of a path by sequence number (seq 0: the newest one that
 * is not deleted); the path is "a/b".  0, -ENOENT. */
int ulp_version_find(ulp_store *st, const char *path, uint64_t seq,
                     ulp_version_info *out);
/* Who may read version vid, as .ulpfs/versions/ shows it: the owner,
 * group and mode its file had when the version was committed, write,
 * set-ID and sticky bits cleared, and the bits of the classes that could
 * not reach the file's path then (vperm.h).  A version committed before
 * the store recorded them shows the current file's (at its inode, else at
 * its path), or the root's owner with 0400.  0 or -errno. */
typedef struct ulp_version_perm {
	uid_t uid;
	gid_t gid;
	mode_t mode; /* permission bits only */
} ulp_version_perm;
int ulp_version_perm_get(ulp_store *st, uint64_t vid, ulp_version_perm *out);
/* The POSIX access ACL of the same view, answered as ulp_xattr_get
 * answers (-ENODATA: none). */
ssize_t ulp_version_acl_get(ulp_store *st, uint64_t vid, void *buf,
                            size_t size);
/* The access ACL of inode ino with every write permission cleared, for a
 * read-only mirror of it; as ulp_xattr_get. */
ssize_t ulp_xattr_acl_readonly(ulp_store *st, uint64_t ino, void *buf,
                               size_t size);
/* A version and the path it was written at (malloc()ed into *path). */
int ulp_version_get_path(ulp_store *st, uint64_t id, ulp_version_info *out,
                         char **path);
/* What stats needs of one version: its file format (ulp_format; from the
 * tensor map kept with it) and the encoder's statistics (zeroed for
 * versions committed before they were recorded: 0 then, else 1). */
int ulp_version_usage(ulp_store *st, uint64_t id, int *format,
                      ulp_stats *stats);
/* Baseline figures of a version: the size another compressor gives its
 * bytes, under a name ("zstd-19": what `zstd -19 FILE` writes), kept in
 * the catalog so that each is computed once.  Content never changes
 * (rebasing changes only the object), so a figure stays valid until the
 * version is deleted, which drops its figures.  get: 0 with *bytes set,
 * -ENOENT when none is kept (or the version is deleted).  put: 0, or
 * -ENOENT when the version is deleted (nothing kept). */
int ulp_version_baseline_get(ulp_store *st, uint64_t id, const char *name,
                             uint64_t *bytes);
int ulp_version_baseline_put(ulp_store *st, uint64_t id, const char *name,
                             uint64_t bytes);
/* Drop old versions of path: keep the newest keep_last, every version
 * whose number is a multiple of keep_every (0: none), the current
 * version of a live file and every pinned one; the rest is released
 * (dependants rebased by the garbage collector).  *dropped counts them.
 * -ENOENT: path has no live versions. */
int ulp_version_prune(ulp_store *st, const char *path, unsigned keep_last,
                      unsigned keep_every, uint64_t *dropped);

/* ------------------------------------------------------------ snapshots
 * (snapshot.c)
 *
 * A snapshot pins versions by path: a pinned version is never released
 * (not by unlink, gc or prune) until every snapshot naming it is gone. */

/* Pin the current committed version of every file (npaths 0) or of every
 * file in the given subtrees (paths "a/b"; "" is the root).  Files with
 * no committed version are skipped (sync first).  -EEXIST: the name is
 * taken; -EINVAL: a bad name (empty, '/', leading '.', > 255 bytes);
 * -ENOENT: a path does not exist.  *nitems (may be NULL) counts pins. */
int ulp_snapshot_create(ulp_store *st, const char *name,
                        const char *const *paths, size_t npaths,
                        uint64_t *nitems);
/* Delete; versions it alone kept are released.  -ENOENT. */
int ulp_snapshot_delete(ulp_store *st, const char *name);
typedef struct ulp_snapshot_info {
	uint64_t id;
	int64_t created_ns;
	uint64_t items, logical_bytes, stored_bytes;
} ulp_snapshot_info;
typedef int (*ulp_snapshot_fn)(void *opaque, const char *name,
                               const ulp_snapshot_info *info);
/* Every snapshot, oldest first (fn returns non-zero to stop). */
int ulp_snapshot_list(ulp_store *st, ulp_snapshot_fn fn, void *opaque);
int ulp_snapshot_get(ulp_store *st, const char *name, ulp_snapshot_info *out);
/* The items of a snapshot below prefix ("" for all; a file path for just
 * that file), sorted by path. */
typedef int (*ulp_snapshot_item_fn)(void *opaque, const char *path,
                                    const ulp_version_info *v);
int ulp_snapshot_items(ulp_store *st, const char *name, const char *prefix,
                       ulp_snapshot_item_fn fn, void *opaque);
/* What path is in snapshot name: 1 a file (*vid set), 2 a directory (a
 * prefix of pinned paths; "" is the snapshot's root), -ENOENT. */
int ulp_snapshot_lookup(ulp_store *st, const char *name, const char *path,
                        uint64_t *vid);

/* An entry of a snapshot as it was when the snapshot was taken: the
 * attributes of its inode (a.ino: the inode's number then, which its hard
 * links in the snapshot share; a.nlink: its names in the snapshot) and, for
 * a regular file, its pinned version.  recorded 0: nothing was recorded
 * (a snapshot taken before catalog schema 6, or a directory above a pinned
 * subtree): only a.mode's type (S_IFREG with version, or S_IFDIR) is set.
 * target: a symlink's, in ulp_snapshot_nodes only.  live: for a directory
 * not recorded, the live directory at the same path (0: none), whose
 * attributes its read-only view takes. */
typedef struct ulp_snapshot_node {
	ulp_attr a;
	uint64_t version;
	int recorded;
	const char *target;
	uint64_t live;
} ulp_snapshot_node;
/* Entry path ("" the snapshot's root) of snapshot name: 0 or -ENOENT. */
int ulp_snapshot_node_get(ulp_store *st, const char *name, const char *path,
                          ulp_snapshot_node *out);
typedef int (*ulp_snapshot_name_fn)(void *opaque, const char *name);
/* The names directly below directory path, sorted (fn returns non-zero to
 * stop; a negative value is returned). */
int ulp_snapshot_children(ulp_store *st, const char *name, const char *path,
                          ulp_snapshot_name_fn fn, void *opaque);
/* A symlink's target, as ulp_ns_readlink. */
int ulp_snapshot_readlink(ulp_store *st, const char *name, const char *path,
                          char *buf, size_t size);
/* The extended attributes inode ino (a.ino of a recorded entry) had when
 * the snapshot was taken, as ulp_xattr_get and ulp_xattr_list. */
ssize_t ulp_snapshot_xattr_get(ulp_store *st, const char *name, uint64_t ino,
                               const char *xname, void *buf, size_t size);
ssize_t ulp_snapshot_xattr_list(ulp_store *st, const char *name, uint64_t ino,
                                char *buf, size_t size);
typedef int (*ulp_snapshot_node_fn)(void *opaque, const char *path,
                                    const ulp_snapshot_node *n);
/* Every recorded entry of a snapshot, parents before children. */
int ulp_snapshot_nodes(ulp_store *st, const char *name, ulp_snapshot_node_fn fn,
                       void *opaque);

#endif /* ULP_STORE_H */
