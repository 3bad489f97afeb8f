/*
 * bench/ptfs.c - a minimal pass-through FUSE filesystem: the FUSE ceiling
 * that bench/write_bench.sh measures ulpfs against.  Every operation is
 * the same call on the backing directory, nothing more (no store, no
 * catalog, no encoding), so what it costs is what FUSE itself costs.
 *
 *   ptfs [--cached] BACKING_DIR MOUNTPOINT [libfuse options]
 *
 * Writers get direct_io as ulpfs's direct mode gives them (write-only,
 * creating or truncating opens), unless --cached.  Built only for the
 * benchmark: make bench/ptfs.
 */
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int root_fd = -1;
static int cached;

/* "/a/b" -> "a/b" relative to root_fd ("." for the root). */
static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

static void *pt_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	return NULL;
}

static int pt_getattr(const char *path, struct stat *st,
                      struct fuse_file_info *fi)
{
	int rc = fi ? fstat((int)fi->fh, st)
	            : fstatat(root_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);
	return rc < 0 ? -errno : 0;
}

static int pt_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
                      off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	int fd = openat(root_fd, rel(path), O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (fill(buf, e->d_name, NULL, 0, 0))
			break;
	closedir(d);
	return 0;
}

static void set_io(struct fuse_file_info *fi, int create)
{
	int acc = fi->flags & O_ACCMODE;
	fi->direct_io = !cached &&
	                (acc == O_WRONLY || create || (fi->flags & O_TRUNC));
}

static int pt_open(const char *path, struct fuse_file_info *fi)
{
	int fd = openat(root_fd, rel(path), fi->flags & ~O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	set_io(fi, 0);
	return 0;
}

static int pt_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = openat(root_fd, rel(path), fi->flags | O_CREAT, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	set_io(fi, 1);
	return 0;
}

static int pt_read(const char *path, char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
	(void)path;
	ssize_t n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int pt_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	(void)path;
	ssize_t n = pwrite((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int pt_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int pt_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	int rc = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	return rc < 0 ? -errno : 0;
}

static int pt_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int rc;
	if (fi) {
		rc = ftruncate((int)fi->fh, size);
	} else {
		int fd = openat(root_fd, rel(path), O_WRONLY);
		if (fd < 0)
			return -errno;
		rc = ftruncate(fd, size);
		close(fd);
	}
	return rc < 0 ? -errno : 0;
}

static int pt_utimens(const char *path, const struct timespec tv[2],
                      struct fuse_file_info *fi)
{
	int rc = fi ? futimens((int)fi->fh, tv)
	            : utimensat(root_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW);
	return rc < 0 ? -errno : 0;
}

static int pt_unlink(const char *path)
{
	return unlinkat(root_fd, rel(path), 0) < 0 ? -errno : 0;
}

static int pt_mkdir(const char *path, mode_t mode)
{
	return mkdirat(root_fd, rel(path), mode) < 0 ? -errno : 0;
}

static int pt_rmdir(const char *path)
{
	return unlinkat(root_fd, rel(path), AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int pt_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags)
		return -EINVAL;
	return renameat(root_fd, rel(from), root_fd, rel(to)) < 0 ? -errno : 0;
}

static int pt_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return fstatvfs(root_fd, st) < 0 ? -errno : 0;
}

static const struct fuse_operations pt_ops = {
	.init = pt_init,
	.getattr = pt_getattr,
	.readdir = pt_readdir,
	.open = pt_open,
	.create = pt_create,
	.read = pt_read,
	.write = pt_write,
	.release = pt_release,
	.fsync = pt_fsync,
	.truncate = pt_truncate,
	.utimens = pt_utimens,
	.unlink = pt_unlink,
	.mkdir = pt_mkdir,
	.rmdir = pt_rmdir,
	.rename = pt_rename,
	.statfs = pt_statfs,
};

int main(int argc, char **argv)
{
	int i = 1;
	if (i < argc && strcmp(argv[i], "--cached") == 0) {
		cached = 1;
		i++;
	}
	if (argc - i < 2) {
		fprintf(stderr, "usage: ptfs [--cached] BACKING_DIR MOUNTPOINT "
		                "[libfuse options]\n");
		return 2;
	}
	root_fd = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		fprintf(stderr, "ptfs: %s: %s\n", argv[i], strerror(errno));
		return 1;
	}
	/* libfuse sees: ptfs MOUNTPOINT [options] */
	argv[i] = argv[0];
	return fuse_main(argc - i, argv + i, &pt_ops, NULL);
}
