/*
 * fs_internal.h - shared state of the FUSE operations (src/fs only).
 */
#ifndef ULP_FS_INTERNAL_H
#define ULP_FS_INTERNAL_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs/fs.h"

/* Largest name of a directory entry (as on the usual local filesystems). */
#define ULP_FS_NAME_MAX 255
/* st_blksize reported to applications: stdio, Python and cp size their
 * buffers by it, and one FUSE request per MiB keeps the overhead low. */
#define ULP_FS_BLKSIZE (1u << 20)
/* Largest request the kernel may send (with FUSE_MAX_PAGES, 256 pages). */
#define ULP_FS_MAX_WRITE (1u << 20)

/* The control directory (fs_ctl.c, fs_snap.c): synthetic node ids have
 * the top bit set; the store's inode numbers and version ids stay below
 * 2^61.  Only ulp_fs_node (fs_node.c) reads the kind bits. */
#define ULP_CTL_NAME ".ulpfs"
#define ULP_CTL_BIT (1ull << 63)
#define ULP_CTL_K_VDIR (1ull << 62)  /* versions/ mirror of a live inode */
#define ULP_CTL_K_VFILE (1ull << 61) /* one version, by version id */
#define ULP_CTL_PAYLOAD ((1ull << 61) - 1)
/* An entry of .ulpfs/snapshots/NAME/...: both kind bits, payload an
 * index into ulp_fs.sdirs (1-based). */
#define ULP_CTL_K_SDIR (ULP_CTL_K_VDIR | ULP_CTL_K_VFILE)
#define ULP_CTL_KINDS ULP_CTL_K_SDIR
#define ULP_CTL_ROOT (ULP_CTL_BIT | 1)      /* .ulpfs */
#define ULP_CTL_VERSIONS (ULP_CTL_BIT | 2)  /* .ulpfs/versions */
#define ULP_CTL_SNAPSHOTS (ULP_CTL_BIT | 3) /* .ulpfs/snapshots */
#define ULP_CTL_SDIR_OF(i) (ULP_CTL_BIT | ULP_CTL_K_SDIR | (i))
#define ULP_CTL_VDIR_OF(ino) (ULP_CTL_BIT | ULP_CTL_K_VDIR | (ino))
#define ULP_CTL_VFILE_OF(id) (ULP_CTL_BIT | ULP_CTL_K_VFILE | (id))

#define ULP_IO_BUCKETS 256
/* Opcodes counted one by one (FUSE_STATX is 52). */
#define ULP_FS_NOPCODES 64
/* How an open file's reads and writes travel. */
enum {
	ULP_IO_CACHED = 0, /* requests from the page cache */
	ULP_IO_DIRECT = 1, /* direct_io: a request per read(2)/write(2) */
	ULP_IO_PT = 2,     /* FUSE passthrough to the staging file */
};
struct ulp_io_node;

/* An open regular file: fuse_file_info->fh points to one.  They are kept
 * in a list so that handles the kernel never released (the daemon was
 * signalled while files were open) are released at unmount, which queues
 * their data for encoding. */
typedef struct ulp_fs_handle {
	ulp_file *file;    /* NULL for a version in the control directory */
	uint64_t version;  /* that version's id */
	ulp_readahead *ra; /* that version's read-ahead (may be NULL) */
	int flushed;       /* flushed (closed by the caller), release pending */
	uint64_t ino;      /* for ulp_fs_io_close */
	int io;            /* ULP_IO_*: how the kernel does its I/O */
	struct ulp_fs_handle *prev, *next;
} ulp_fs_handle;

static inline ulp_fs_handle *ulp_fs_handle_of(const struct fuse_file_info *fi)
{
	return (ulp_fs_handle *)(uintptr_t)fi->fh;
}

struct ulp_fs {
	ulp_store *st;
	struct fuse_session *se;
	struct fuse_conn_info_opts *conn_opts;
	double attr_timeout, entry_timeout;
	unsigned max_threads;
	unsigned max_read; /* -o max_read=N (libfuse wants it again in init) */
	/* default_permissions: init asks for POSIX ACLs (posix_acl when the
	 * kernel agreed; the daemon then applies the umask, fs_xattr.c). */
	int want_acl, posix_acl;
	int mounted;
	char *mountpoint;

	/* fs_io.c: the write mode asked for and in force, what the kernel
	 * offered in INIT, the inodes with open files. */
	ulp_fs_write_mode io_want, io_mode;
	char io_mode_str[128];
	uint64_t io_kernel_flags, io_init_unique;
	int io_init_seen, io_init_done, io_allow_mmap;
	/* FUSE_HANDLE_KILLPRIV_V2 accepted: set-user-ID bits are ours to
	 * kill */
	int io_killpriv;
	/* requests read, by opcode (0: any beyond the table) */
	uint64_t io_requests[ULP_FS_NOPCODES];
	pthread_mutex_t io_mu;
	struct ulp_io_node *io_nodes[ULP_IO_BUCKETS];

	pthread_mutex_t handles_mu;
	ulp_fs_handle handles; /* list head (circular) */
	/* close(2) returns after FLUSH; RELEASE, which queues the file for
	 * encoding, follows asynchronously.  sync waits for these. */
	unsigned nflushed;
	pthread_cond_t released_cv;

	/* Entries of .ulpfs/snapshots seen so far: (snapshot, inode number
	 * when it was taken) each, so that hard links share a node id, or
	 * (snapshot, path) where nothing was recorded; path: one of its
	 * names.  A node id names one by index, so they live as long as the
	 * mount; a hash of the keys (heads: 1-based indices, 0 ends a
	 * chain) finds them (fs_snap.c). */
	pthread_mutex_t sdirs_mu;
	struct ulp_sdir {
		char *snap, *path;
		uint64_t sino;
		size_t next;
	} * sdirs;
	size_t nsdirs, capsdirs;
	size_t *sdir_heads, nheads;
};

static inline ulp_fs *ulp_fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* A store result (0 or -errno) as a positive errno for fuse_reply_err;
 * anything out of range becomes EIO. */
static inline int ulp_fs_errno(long rc)
{
	return (rc < 0 && rc > -4096) ? (int)-rc : EIO;
}

/* The fuse_lowlevel_ops entries.  Those that name a node dispatch on its
 * kind (fs_node.c, fs_node.h); the rest are in fs_ops.c (forget, statfs,
 * directory handles) and fs_file.c (file handles' data). */
void ulp_fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ulp_fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ulp_fs_op_forget_multi(fuse_req_t req, size_t count,
                            struct fuse_forget_data *forgets);
void ulp_fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi);
void ulp_fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                       int to_set, struct fuse_file_info *fi);
void ulp_fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void ulp_fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, dev_t rdev);
void ulp_fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode);
void ulp_fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ulp_fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ulp_fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                       const char *name);
void ulp_fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname,
                      unsigned int flags);
void ulp_fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                    const char *newname);
void ulp_fs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void ulp_fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi);
void ulp_fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi);
void ulp_fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                           off_t off, struct fuse_file_info *fi);
void ulp_fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi);
void ulp_fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                        struct fuse_file_info *fi);

void ulp_fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode, struct fuse_file_info *fi);
void ulp_fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ulp_fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void ulp_fs_op_write_buf(fuse_req_t req, fuse_ino_t ino,
                         struct fuse_bufvec *bufv, off_t off,
                         struct fuse_file_info *fi);
void ulp_fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ulp_fs_op_release(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi);
void ulp_fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                     struct fuse_file_info *fi);
void ulp_fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                         off_t length, struct fuse_file_info *fi);
void ulp_fs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi);
/* fs_copy.c */
void ulp_fs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                               struct fuse_file_info *fi_in, fuse_ino_t ino_out,
                               off_t off_out, struct fuse_file_info *fi_out,
                               size_t len, int flags);

void ulp_fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        const char *value, size_t size, int flags);
void ulp_fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        size_t size);
void ulp_fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void ulp_fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/* Owner and mode of a new node in parent (fs_ops.c): the caller's uid,
 * the caller's gid or the directory's (set-group-ID), the umask unless a
 * default ACL replaces it.  0 or -errno (-ENOTDIR). */
int ulp_fs_new_owner(fuse_req_t req, fuse_ino_t parent, mode_t *mode,
                     uid_t *uid, gid_t *gid);

/* Free the control directory's snapshot directory table (unmount;
 * fs_snap.c). */
void ulp_ctl_free(ulp_fs *fs);

/* Write modes (fs_io.c).  Install the I/O hooks on the mounted session
 * (0 or -errno). */
int ulp_fs_io_install(ulp_fs *fs);
/* Choose how the kernel serves the open of ino about to be replied to
 * (f the store's handle; create: from create; keep_cache: what the store
 * allows), set fi's flags, and for passthrough arrange the reply's backing
 * id.  Returns ULP_IO_*, to hand to ulp_fs_io_close when the handle goes,
 * or -errno. */
int ulp_fs_io_open(ulp_fs *fs, uint64_t ino, ulp_file *f, int create,
                   int keep_cache, struct fuse_file_info *fi);
/* The handle of f opened with io (ULP_IO_*) is released. */
void ulp_fs_io_close(ulp_fs *fs, uint64_t ino, ulp_file *f, int io);
/* A chmod has set S_ISUID or S_ISGID on ino: if it has passthrough opens,
 * whose writes the daemon does not see, the bits are cleared when the last
 * of them closes if the file was written after the chmod (as a write by a
 * caller without CAP_FSETID would have). */
void ulp_fs_io_sxid(ulp_fs *fs, uint64_t ino);
/* Whether the request this thread serves asked the daemon to kill
 * set-user-ID and set-group-ID bits (KILLPRIV_V2: a write, truncate or
 * O_TRUNC open by a caller without CAP_FSETID; any chown). */
int ulp_fs_io_kill_asked(void);
/* Kill them on ino as for that request (fs_ops.c; chown: it is one):
 * S_ISUID, S_ISGID where group-executable or where the caller is not in
 * the file's group.  0 or -errno. */
int ulp_fs_kill_suidgid(fuse_req_t req, uint64_t ino, int chown);
/* Whether ino has passthrough opens (its data bypasses the daemon). */
int ulp_fs_io_passthrough(ulp_fs *fs, uint64_t ino);
/* Register fd as a backing file: its id, or -errno. */
int ulp_fs_backing_open(ulp_fs *fs, int fd);
void ulp_fs_backing_close(ulp_fs *fs, int id);
void ulp_fs_io_free(ulp_fs *fs);

/* Release every handle still open (at unmount). */
void ulp_fs_release_all(ulp_fs *fs);

/* Per-thread scratch buffers, freed when the thread exits. */
int ulp_fs_tls_init(void);
void *ulp_fs_tls_buf(size_t size);

#endif /* ULP_FS_INTERNAL_H */
