/*
 * fs_io.c - how writers' data reaches the staging file: FUSE passthrough
 * over libfuse 3.14's custom I/O hooks, direct_io, or the page cache.
 *
 * libfuse 3.14 has no passthrough API, so the daemon speaks that part of
 * the protocol itself through fuse_session_custom_io(): the read hook sees
 * every request (the kernel's INIT flags, and each request's unique id),
 * the writev hook sees every reply.  The INIT reply is amended to accept
 * FUSE_PASSTHROUGH (with max_stack_depth) and FUSE_DIRECT_IO_ALLOW_MMAP
 * only when the kernel offered them; right after it, a BACKING_OPEN of
 * /dev/null probes whether this daemon may register backing files at all
 * (CAP_SYS_ADMIN).  An open served by passthrough registers the inode's
 * staging file with FUSE_DEV_IOC_BACKING_OPEN, and its reply, recognised by
 * the request's unique id, gets FOPEN_PASSTHROUGH and the backing id.  A
 * worker thread reads a request, runs its handler and writes the reply, so
 * the id of the request being served is thread-local.
 *
 * The INIT reply also accepts FUSE_HANDLE_KILLPRIV_V2 when offered: the
 * daemon clears set-user-ID and set-group-ID bits itself (fs_ops.c,
 * ulp_fs_kill_suidgid), told by flags in the WRITE, SETATTR and OPEN
 * requests that libfuse 3.14 drops, so the read hook notes them for the
 * thread's request.  In return the kernel marks inodes S_NOSEC and stops
 * asking for security.capability (a GETXATTR round trip) before every
 * write, passthrough writes included.  Passthrough writes never reach the
 * daemon, so a file with S_ISUID or S_ISGID gets no passthrough writer.
 * The daemon counts the requests it reads, by opcode (ulpfs stats).
 *
 * The kernel's rules (fs/fuse/iomode.c) shape the choice per open: while
 * an inode has a passthrough open, every open of it must be passthrough to
 * the same backing file; a passthrough open fails while the inode has
 * opens that use the page cache (a mmapped direct_io file does); a file
 * not opened for passthrough cannot be mmapped while the inode has a
 * backing file.  So the opens of each inode are counted here, passthrough
 * and other, and a writer of an inode with other opens gets direct_io.
 * The store keeps a registered staging file past its commit for as long
 * as the kernel holds it (store/backing.c), so a later writer of the inode
 * writes that same file: passthrough readers see its writes, as they
 * would on a local filesystem.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_internal.h"

/* Debian 12's <linux/fuse.h> is protocol 7.38; these came with 7.39 and
 * 7.40 (Linux 6.6 and 6.9), as in the kernel's include/uapi/linux/fuse.h.
 * In 7.38's fuse_init_out, max_stack_depth is unused[0]; in fuse_open_out,
 * backing_id is padding. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
#ifndef FUSE_PASSTHROUGH
#define FUSE_PASSTHROUGH (1ULL << 37)
#endif
#ifndef FOPEN_PASSTHROUGH
#define FOPEN_PASSTHROUGH (1 << 7)
#endif
#ifndef FUSE_DEV_IOC_BACKING_OPEN
struct fuse_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define FUSE_DEV_IOC_BACKING_OPEN \
	_IOW(FUSE_DEV_IOC_MAGIC, 1, struct fuse_backing_map)
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(FUSE_DEV_IOC_MAGIC, 2, uint32_t)
#endif
/* Backing files may sit on a stacked filesystem themselves (a store on
 * overlayfs, as in containers): allow the kernel's maximum. */
#define PT_STACK_DEPTH 2

/* The request this thread serves, and the passthrough its reply gets. */
static __thread uint64_t tls_unique;
/* Whether the kernel asked to kill set-user-ID and set-group-ID bits with
 * it (KILLPRIV_V2 flags that libfuse 3.14 drops). */
static __thread int tls_kill;
static __thread uint64_t tls_pt_unique;
static __thread int32_t tls_pt_id;

/* An inode with open files: passthrough, or other (cached, direct_io). */
struct ulp_io_node {
	uint64_t ino;
	int32_t backing; /* while npt > 0 */
	int bfd;         /* the backing (staging) file, while npt > 0 */
	dev_t bdev;
	ino_t bino;
	unsigned npt, nother;
	int plain; /* bfd is a plain newest version's file (read only) */
	/* A chmod set S_ISUID or S_ISGID while passthrough opens were
	 * open: the staging file's times and size then (ulp_fs_io_sxid). */
	int sxid;
	struct stat sxid_st;
	struct ulp_io_node *next;
};

static const char *const mode_names[] = { "auto", "passthrough", "direct",
	                                  "cached" };

int ulp_fs_write_mode_parse(const char *s, ulp_fs_write_mode *out)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*out = (ulp_fs_write_mode)i;
			return 0;
		}
	return -1;
}

const char *ulp_fs_write_mode_active(ulp_fs *fs)
{
	return fs->io_mode_str;
}

static void set_mode(ulp_fs *fs, ulp_fs_write_mode m, const char *why)
{
	fs->io_mode = m;
	if (why)
		snprintf(fs->io_mode_str, sizeof(fs->io_mode_str),
		         "%s (passthrough refused: %s)", mode_names[m], why);
	else
		snprintf(fs->io_mode_str, sizeof(fs->io_mode_str), "%s",
		         mode_names[m]);
}

/* ---------------------------------------------------------- the hooks */

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ulp_fs *fs = userdata;
	ssize_t n = read(fd, buf, len);
	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return n;
	const struct fuse_in_header *h = buf;
	const void *arg = h + 1;
	size_t alen = (size_t)n - sizeof(*h);
	tls_unique = h->unique;
	tls_kill = 0;
	__atomic_fetch_add(
		&fs->io_requests[h->opcode < ULP_FS_NOPCODES ? h->opcode : 0],
		1, __ATOMIC_RELAXED);
	if (h->opcode == FUSE_WRITE &&
	    alen >= offsetof(struct fuse_write_in, write_flags) + 4)
		tls_kill = (((const struct fuse_write_in *)arg)->write_flags &
		            FUSE_WRITE_KILL_SUIDGID) != 0;
	else if (h->opcode == FUSE_SETATTR &&
	         alen >= sizeof(struct fuse_setattr_in))
		tls_kill = (((const struct fuse_setattr_in *)arg)->valid &
		            FATTR_KILL_SUIDGID) != 0;
	else if (h->opcode == FUSE_OPEN && alen >= sizeof(struct fuse_open_in))
		tls_kill = (((const struct fuse_open_in *)arg)->open_flags &
		            FUSE_OPEN_KILL_SUIDGID) != 0;
	if (h->opcode == FUSE_INIT &&
	    (size_t)n >= sizeof(*h) + offsetof(struct fuse_init_in, flags2)) {
		const struct fuse_init_in *in = (const void *)(h + 1);
		uint64_t fl = in->flags;
		if ((fl & FUSE_INIT_EXT) &&
		    (size_t)n >= sizeof(*h) + sizeof(*in))
			fl |= (uint64_t)in->flags2 << 32;
		fs->io_kernel_flags = fl;
		fs->io_init_unique = h->unique;
		fs->io_init_seen = 1;
	}
	return n;
}

/* Accept what the kernel offered and this mode wants; 1 if passthrough
 * was accepted. */
static int patch_init(ulp_fs *fs, struct iovec *iov, int count)
{
	if (count < 2 || iov[1].iov_len < sizeof(struct fuse_init_out))
		return 0;
	struct fuse_init_out *out = iov[1].iov_base;
	uint64_t k = fs->io_kernel_flags, add = 0;
	/* The daemon kills set-user-ID and set-group-ID bits itself
	 * (fs_ops.c, ulp_fs_kill_suidgid): the kernel then sets SB_NOSEC, and
	 * stops asking for security.capability before every write of an
	 * inode (a GETXATTR round trip per passthrough write). */
	if (k & FUSE_HANDLE_KILLPRIV_V2) {
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
		fs->io_killpriv = 1;
	}
	if (!(k & FUSE_INIT_EXT))
		return 0;
	if (k & FUSE_DIRECT_IO_ALLOW_MMAP)
		add |= FUSE_DIRECT_IO_ALLOW_MMAP;
	/* The kernel refuses passthrough together with writeback caching
	 * (never asked for here; checked all the same). */
	int pt = fs->io_want == ULP_FS_WRITE_AUTO ||
	         fs->io_want == ULP_FS_WRITE_PASSTHROUGH;
	if (pt && (k & FUSE_PASSTHROUGH) &&
	    !(out->flags & FUSE_WRITEBACK_CACHE)) {
		add |= FUSE_PASSTHROUGH;
		out->unused[0] = PT_STACK_DEPTH; /* max_stack_depth */
	} else {
		pt = 0;
	}
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= (uint32_t)(add >> 32);
	fs->io_allow_mmap = (add & FUSE_DIRECT_IO_ALLOW_MMAP) != 0;
	return pt;
}

/* Whether this daemon may register staging files as backing files
 * (CAP_SYS_ADMIN; a regular file; a filesystem not stacked too deep),
 * tried once on an unnamed file beside them; 0 or -errno. */
static int probe_backing(ulp_fs *fs)
{
	int fd = ulp_store_staging_tmpfd(fs->st);
	if (fd < 0)
		return fd;
	int id = ulp_fs_backing_open(fs, fd);
	close(fd);
	if (id < 0)
		return id;
	ulp_fs_backing_close(fs, id);
	return 0;
}

static void finish_init(ulp_fs *fs, int pt_accepted)
{
	char why[96];
	int want = fs->io_want;
	if (want == ULP_FS_WRITE_DIRECT || want == ULP_FS_WRITE_CACHED) {
		set_mode(fs, want, NULL);
	} else if (!(fs->io_kernel_flags & FUSE_PASSTHROUGH) || !pt_accepted) {
		set_mode(fs, ULP_FS_WRITE_DIRECT,
		         "the kernel does not offer it (Linux 6.9+ with "
		         "CONFIG_FUSE_PASSTHROUGH)");
	} else {
		int rc = probe_backing(fs);
		if (rc == 0) {
			set_mode(fs, ULP_FS_WRITE_PASSTHROUGH, NULL);
		} else {
			snprintf(why, sizeof(why), "%s%s", strerror(-rc),
			         rc == -EPERM ? " (needs CAP_SYS_ADMIN)" : "");
			set_mode(fs, ULP_FS_WRITE_DIRECT, why);
		}
	}
	fprintf(stderr, "ulpfs: %swrite mode: %s%s\n",
	        want == ULP_FS_WRITE_PASSTHROUGH &&
	                        fs->io_mode != ULP_FS_WRITE_PASSTHROUGH
	                ? "warning: "
	                : "",
	        fs->io_mode_str,
	        want == ULP_FS_WRITE_PASSTHROUGH &&
	                        fs->io_mode != ULP_FS_WRITE_PASSTHROUGH
	                ? ", although write_mode=passthrough was asked for"
	                : "");
}

static void patch_open(struct iovec *iov, int count, int32_t id)
{
	/* open and create replies both end with fuse_open_out */
	struct iovec *last = &iov[count - 1];
	if (count < 2 || last->iov_len < sizeof(struct fuse_open_out))
		return;
	struct fuse_open_out *o =
		(void *)((char *)last->iov_base + last->iov_len -
	                 sizeof(struct fuse_open_out));
	/* the kernel allows no page-cache flags beside passthrough */
	o->open_flags &= ~(uint32_t)(FOPEN_KEEP_CACHE | FOPEN_DIRECT_IO);
	o->open_flags |= FOPEN_PASSTHROUGH;
	o->padding = (uint32_t)id; /* backing_id */
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	ulp_fs *fs = userdata;
	const struct fuse_out_header *o =
		count > 0 && iov[0].iov_len >= sizeof(*o) ? iov[0].iov_base
							  : NULL;
	int init = 0, pt = 0;
	if (o && tls_pt_id > 0 && o->unique == tls_pt_unique) {
		if (o->error == 0)
			patch_open(iov, count, tls_pt_id);
		tls_pt_id = 0;
	} else if (o && fs->io_init_seen && !fs->io_init_done &&
	           o->unique == fs->io_init_unique) {
		init = 1;
		fs->io_init_done = 1;
		if (o->error == 0)
			pt = patch_init(fs, iov, count);
	}
	ssize_t n = writev(fd, iov, count);
	int e = errno;
	/* The kernel has taken the INIT reply when writev returns. */
	if (init)
		finish_init(fs, pt && n >= 0);
	errno = e;
	return n;
}

int ulp_fs_io_install(ulp_fs *fs)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
	};
	set_mode(fs, fs->io_want, NULL);
	if (fs->io_want == ULP_FS_WRITE_CACHED)
		return 0; /* libfuse's own I/O, as before */
	int rc = fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
	return rc < 0 ? rc : 0;
}

int ulp_fs_backing_open(ulp_fs *fs, int fd)
{
	struct fuse_backing_map map = { .fd = fd };
	int id =
		ioctl(fuse_session_fd(fs->se), FUSE_DEV_IOC_BACKING_OPEN, &map);
	return id < 0 ? -errno : id > 0 ? id : -EIO;
}

void ulp_fs_backing_close(ulp_fs *fs, int id)
{
	uint32_t u = (uint32_t)id;
	int rc = ioctl(fuse_session_fd(fs->se), FUSE_DEV_IOC_BACKING_CLOSE, &u);
	/* After the unmount the kernel has dropped them all. */
	if (rc < 0 && fs->mounted)
		fprintf(stderr, "ulpfs: closing backing file %d: %s\n", id,
		        strerror(errno));
}

/* ------------------------------------------------- per-inode io modes */

/* The node of ino (io_mu held), created if make. */
static struct ulp_io_node *node_get(ulp_fs *fs, uint64_t ino, int make)
{
	struct ulp_io_node **b = &fs->io_nodes[ino % ULP_IO_BUCKETS], *n;
	for (n = *b; n; n = n->next)
		if (n->ino == ino)
			return n;
	if (!make || !(n = calloc(1, sizeof(*n))))
		return NULL;
	n->ino = ino;
	n->next = *b;
	*b = n;
	return n;
}

/* Drop n when nothing is counted on it any more (io_mu held). */
static void node_put(ulp_fs *fs, struct ulp_io_node *n)
{
	if (n->npt || n->nother)
		return;
	struct ulp_io_node **p = &fs->io_nodes[n->ino % ULP_IO_BUCKETS];
	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
	free(n);
}

/* Register f's staging file as the backing of n (io_mu held). */
static int backing_new(ulp_fs *fs, struct ulp_io_node *n, ulp_file *f)
{
	struct stat sb;
	int fd = ulp_file_staging_fd(f);
	if (fd < 0)
		return fd;
	int id = fstat(fd, &sb) < 0 ? -errno : ulp_fs_backing_open(fs, fd);
	if (id < 0) {
		close(fd);
		return id;
	}
	ulp_file_backing_hold(f);
	n->backing = id;
	n->bfd = fd;
	n->bdev = sb.st_dev;
	n->bino = sb.st_ino;
	return 0;
}

/* Whether f's staging file is n's backing file: always, as the store
 * keeps it for the kernel; else (it could not) the writer is refused
 * rather than failing in the kernel. */
static int backing_same(const struct ulp_io_node *n, ulp_file *f)
{
	struct stat sb;
	int fd = ulp_file_staging_fd(f), same;
	if (fd < 0)
		return 0;
	same = fstat(fd, &sb) == 0 && sb.st_dev == n->bdev &&
	       sb.st_ino == n->bino;
	close(fd);
	return same;
}

/* The plain file of f's version for a reader (-1: none), when the kernel
 * can read it; where it cannot, that is said once. */
static int plain_fd(ulp_fs *fs, ulp_file *f, int pt_mode)
{
	static _Atomic int told;
	if (pt_mode)
		return ulp_file_plain_fd(f);
	if (atomic_load(&told))
		return -1;
	int fd = ulp_file_plain_fd(f);
	if (fd >= 0 && !atomic_exchange(&told, 1))
		fprintf(stderr,
		        "ulpfs: plain newest versions are read through the "
		        "daemon: the kernel refused passthrough (%s)\n",
		        fs->io_mode_str);
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Whether fd (-1: none) is n's backing file. */
static int fd_same(const struct ulp_io_node *n, int fd)
{
	struct stat sb;
	return fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == n->bdev &&
	       sb.st_ino == n->bino;
}

/* Register the plain file fd as the backing of n (io_mu held); the
 * first refusal is logged. */
static int backing_plain(ulp_fs *fs, struct ulp_io_node *n, int fd)
{
	static _Atomic int told;
	struct stat sb;
	int id = fstat(fd, &sb) < 0 ? -errno : ulp_fs_backing_open(fs, fd);
	if (id < 0) {
		if (!atomic_exchange(&told, 1))
			fprintf(stderr,
			        "ulpfs: plain newest versions are read through "
			        "the daemon: passthrough refused (%s)\n",
			        strerror(-id));
		return id;
	}
	n->backing = id;
	n->bfd = fd;
	n->bdev = sb.st_dev;
	n->bino = sb.st_ino;
	n->plain = 1;
	return 0;
}

/* Whether ino has a set-user-ID bit, or a set-group-ID bit, that a write
 * may have to kill.  The kernel leaves that to the daemon (KILLPRIV_V2),
 * which never sees passthrough writes: such a file's writers are served by
 * the daemon. */
static int file_sxid(ulp_fs *fs, uint64_t ino)
{
	ulp_attr a;
	return fs->io_killpriv && ulp_ns_getattr(fs->st, ino, &a) == 0 &&
	       (a.mode & (S_ISUID | S_ISGID));
}

int ulp_fs_io_open(ulp_fs *fs, uint64_t ino, ulp_file *f, int create,
                   int keep_cache, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	int wr = acc != O_RDONLY, trunc = create || (fi->flags & O_TRUNC);
	int mode = ULP_IO_CACHED, rc = 0;
	int pt_mode = fs->io_mode == ULP_FS_WRITE_PASSTHROUGH;
	/* Outside io_mu: it may wait for the staging limit.  A writer not
	 * admitted (near the limit) is served by the daemon, whose writes
	 * wait for the limit one by one.  A copy-up on demand's staging file
	 * has holes where the committed bytes show through: the kernel must
	 * not read it itself, so the daemon serves such a file. */
	int admitted = pt_mode && wr && !ulp_file_partial(f) &&
	               !file_sxid(fs, ino) && ulp_file_passthrough_admit(f);

	/* A reader of a plain newest version (store/plain.c) reads its
	 * file in the kernel too. */
	int pfd = !wr && !trunc ? plain_fd(fs, f, pt_mode) : -1;

	fi->direct_io = 0;
	fi->keep_cache = keep_cache ? 1 : 0;
	pthread_mutex_lock(&fs->io_mu);
	struct ulp_io_node *n = node_get(fs, ino, 0);
	/* The RELEASE of a passthrough reader arrives after its close(2)
	 * has returned: an open just after the last reader of a plain file
	 * closed waits a while for it. */
	for (int w = 0;
	     w < 500 && pt_mode && n && n->npt && n->plain && !fd_same(n, pfd);
	     w++) {
		pthread_mutex_unlock(&fs->io_mu);
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
		pthread_mutex_lock(&fs->io_mu);
		n = node_get(fs, ino, 0);
	}
	if (pt_mode && n && n->npt && n->plain && !fd_same(n, pfd)) {
		/* The kernel serves every open of the inode from the plain
		 * file its readers opened, which no writer may write (it is
		 * a committed version), nor can a newer version be read
		 * through it: refused until those readers close. */
		rc = -ETXTBSY;
		goto out;
	} else if (pt_mode && n && n->npt) {
		/* the kernel wants this open on the same backing file,
		 * admitted or not */
		if (wr && !backing_same(n, f)) {
			rc = -ETXTBSY;
			goto out;
		}
		mode = ULP_IO_PT;
	} else if (pfd >= 0 && !(n && n->nother)) {
		if (!n)
			n = node_get(fs, ino, 1);
		rc = n ? backing_plain(fs, n, pfd) : -ENOMEM;
		if (rc == 0) {
			pfd = -1; /* n's now */
			mode = ULP_IO_PT;
		}
		rc = 0; /* else read through the daemon */
	} else if (admitted && !(n && n->nother)) {
		if (!n)
			n = node_get(fs, ino, 1);
		rc = n ? backing_new(fs, n, f) : -ENOMEM;
		if (rc == 0) {
			mode = ULP_IO_PT;
		} else {
			fprintf(stderr,
			        "ulpfs: inode %llu: passthrough refused (%s): "
			        "direct_io\n",
			        (unsigned long long)ino, strerror(-rc));
			rc = 0;
		}
	}
	if (mode == ULP_IO_CACHED && fs->io_mode != ULP_FS_WRITE_CACHED) {
		/* Without the page cache where mmap cannot need it: write-only
		 * opens; new or emptied files, and readers of staged files
		 * (being written), when the kernel lets direct_io files be
		 * mmapped through the cache. */
		if (acc == O_WRONLY ||
		    (fs->io_allow_mmap && (trunc || !keep_cache)))
			mode = ULP_IO_DIRECT;
	}
	if (mode == ULP_IO_PT) {
		n->npt++;
		tls_pt_unique = tls_unique;
		tls_pt_id = n->backing;
		fi->keep_cache = 0;
	} else {
		if (mode == ULP_IO_DIRECT) {
			fi->direct_io = 1;
			fi->keep_cache = 0;
		}
		if (!n)
			n = node_get(fs, ino, 1);
		if (!n) {
			rc = -ENOMEM;
			goto out;
		}
		n->nother++;
	}
out:
	if (n) /* freed if nothing is counted on it (a refused passthrough) */
		node_put(fs, n);
	pthread_mutex_unlock(&fs->io_mu);
	if (pfd >= 0)
		close(pfd);
	if (mode == ULP_IO_PT && wr && rc == 0)
		ulp_file_set_passthrough(f);
	else if (admitted)
		ulp_file_passthrough_cancel(f);
	return rc < 0 ? rc : mode;
}

/* Whether the backing file changed since st was taken (its times are
 * fine-grained once queried: multigrain timestamps). */
static int backing_changed(const struct ulp_io_node *n, const struct stat *st)
{
	struct stat now;
	return fstat(n->bfd, &now) < 0 || now.st_size != st->st_size ||
	       now.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	       now.st_mtim.tv_nsec != st->st_mtim.tv_nsec ||
	       now.st_ctim.tv_sec != st->st_ctim.tv_sec ||
	       now.st_ctim.tv_nsec != st->st_ctim.tv_nsec;
}

void ulp_fs_io_close(ulp_fs *fs, uint64_t ino, ulp_file *f, int mode)
{
	int kill = 0;
	pthread_mutex_lock(&fs->io_mu);
	struct ulp_io_node *n = node_get(fs, ino, 0);
	if (n && mode == ULP_IO_PT && n->npt > 0) {
		/* The kernel let go of the backing file before RELEASE. */
		if (--n->npt == 0) {
			ulp_fs_backing_close(fs, n->backing);
			kill = n->sxid && backing_changed(n, &n->sxid_st);
			n->sxid = 0;
			close(n->bfd);
			if (!n->plain)
				ulp_file_backing_release(f);
			n->plain = 0;
		}
	} else if (n && mode != ULP_IO_PT && n->nother > 0) {
		n->nother--;
	}
	if (n)
		node_put(fs, n);
	pthread_mutex_unlock(&fs->io_mu);
	if (kill) {
		/* Written after the chmod by a writer the daemon cannot name:
		 * kill the bits as for one without CAP_FSETID. */
		ulp_attr in = { .ino = ino }, out;
		int rc = ulp_ns_setattr(fs->st, ino, &in,
		                        ULP_SET_KILL_SUID | ULP_SET_KILL_SGID,
		                        &out);
		if (rc < 0)
			fprintf(stderr,
			        "ulpfs: inode %llu: cannot clear set-user-ID "
			        "bits: %s\n",
			        (unsigned long long)ino, strerror(-rc));
		ulp_fs_invalidate_inode(fs, ino);
	}
}

void ulp_fs_io_sxid(ulp_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->io_mu);
	struct ulp_io_node *n = node_get(fs, ino, 0);
	if (n && n->npt > 0 && !n->sxid)
		n->sxid = fstat(n->bfd, &n->sxid_st) == 0;
	pthread_mutex_unlock(&fs->io_mu);
}

/* Names of the opcodes (include/uapi/linux/fuse.h). */
static const char *const op_names[ULP_FS_NOPCODES] = {
	[1] = "LOOKUP",        [2] = "FORGET",         [3] = "GETATTR",
	[4] = "SETATTR",       [5] = "READLINK",       [6] = "SYMLINK",
	[8] = "MKNOD",         [9] = "MKDIR",          [10] = "UNLINK",
	[11] = "RMDIR",        [12] = "RENAME",        [13] = "LINK",
	[14] = "OPEN",         [15] = "READ",          [16] = "WRITE",
	[17] = "STATFS",       [18] = "RELEASE",       [20] = "FSYNC",
	[21] = "SETXATTR",     [22] = "GETXATTR",      [23] = "LISTXATTR",
	[24] = "REMOVEXATTR",  [25] = "FLUSH",         [26] = "INIT",
	[27] = "OPENDIR",      [28] = "READDIR",       [29] = "RELEASEDIR",
	[30] = "FSYNCDIR",     [31] = "GETLK",         [32] = "SETLK",
	[33] = "SETLKW",       [34] = "ACCESS",        [35] = "CREATE",
	[36] = "INTERRUPT",    [37] = "BMAP",          [38] = "DESTROY",
	[39] = "IOCTL",        [40] = "POLL",          [41] = "NOTIFY_REPLY",
	[42] = "BATCH_FORGET", [43] = "FALLOCATE",     [44] = "READDIRPLUS",
	[45] = "RENAME2",      [46] = "LSEEK",         [47] = "COPY_FILE_RANGE",
	[48] = "SETUPMAPPING", [49] = "REMOVEMAPPING", [50] = "SYNCFS",
	[51] = "TMPFILE",      [52] = "STATX",
};

int ulp_fs_requests(ulp_fs *fs, ulp_fs_request_fn fn, void *opaque)
{
	if (fs->io_want == ULP_FS_WRITE_CACHED)
		return -ENOTSUP; /* libfuse reads them: not counted */
	uint64_t other = 0;
	for (unsigned i = 0; i < ULP_FS_NOPCODES; i++) {
		uint64_t c =
			__atomic_load_n(&fs->io_requests[i], __ATOMIC_RELAXED);
		if (i == 0 || !op_names[i])
			other += c;
		else if (c)
			fn(opaque, op_names[i], c);
	}
	if (other)
		fn(opaque, "other", other);
	return 0;
}

int ulp_fs_io_kill_asked(void)
{
	return tls_kill;
}

int ulp_fs_io_passthrough(ulp_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->io_mu);
	struct ulp_io_node *n = node_get(fs, ino, 0);
	int pt = n && n->npt;
	pthread_mutex_unlock(&fs->io_mu);
	return pt;
}

void ulp_fs_io_free(ulp_fs *fs)
{
	for (size_t i = 0; i < ULP_IO_BUCKETS; i++)
		while (fs->io_nodes[i]) {
			struct ulp_io_node *n = fs->io_nodes[i];
			fs->io_nodes[i] = n->next;
			if (n->npt)
				close(n->bfd);
			free(n);
		}
	pthread_mutex_destroy(&fs->io_mu);
}
