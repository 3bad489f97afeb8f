/*
 * util.c - clocks, error translation and whole-buffer I/O for the store.
 */
#include "store/store_core.h"

#include <time.h>
#include <unistd.h>

int64_t ulp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ulp_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ulp_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	int e = pthread_condattr_init(&ca);

	if (e)
		return e;
	e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!e)
		e = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return e;
}

int ulp_errno_of(int e)
{
	switch (e) {
	case ULP_OK:
		return 0;
	case ULP_ERR_NOMEM:
		return -ENOMEM;
	case ULP_ERR_ARG:
		return -EINVAL;
	default:
		return -EIO;
	}
}

int ulp_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ulp_dir_list(int dir_fd, DIR **out)
{
	int fd = dup(dir_fd);

	*out = NULL;
	if (fd < 0)
		return -errno;
	*out = fdopendir(fd);
	if (!*out) {
		int e = errno;
		close(fd);
		return -e;
	}
	/* The duplicate shares dir_fd's offset: start from the top. */
	rewinddir(*out);
	return 0;
}

/* pread or pwrite all len bytes at off (0, -errno; -EIO at EOF). */
static int rw_all(int fd, uint8_t *p, size_t len, uint64_t off, int write)
{
	while (len) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)off)
		                  : pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int ulp_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	return rw_all(fd, buf, len, off, 0);
}

int ulp_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	/* pwrite does not write through the pointer */
	return rw_all(fd, (uint8_t *)(uintptr_t)buf, len, off, 1);
}

int ulp_pwrite_sparse(int fd, const void *data, size_t n, uint64_t off)
{
	const size_t blk = 64u << 10;
	static const uint8_t zero[64u << 10];
	const uint8_t *buf = data;

	for (size_t at = 0; at < n;) {
		size_t len = n - at < blk ? n - at : blk;
		if (len == blk && memcmp(buf + at, zero, blk) == 0) {
			at += len;
			continue;
		}
		/* a run of blocks with data, written at once */
		size_t end = at + len;
		while (end < n &&
		       (n - end < blk || memcmp(buf + end, zero, blk) != 0))
			end += n - end < blk ? n - end : blk;
		int rc = ulp_pwrite_all(fd, buf + at, end - at, off + at);
		if (rc < 0)
			return rc;
		at = end;
	}
	return 0;
}

void ulp_stage_name(uint64_t ino, char buf[32])
{
	snprintf(buf, 32, "%llu", (unsigned long long)ino);
}

int ulp_strv_add(ulp_strv *a, const char *s)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		char **v = realloc(a->v, nc * sizeof *v);
		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = nc;
	}
	if (!(a->v[a->n] = strdup(s ? s : "")))
		return -ENOMEM;
	a->n++;
	return 0;
}

void ulp_strv_free(ulp_strv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}
