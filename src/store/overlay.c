/*
 * overlay.c - the extents of a copy-up on demand, and their file beside
 * the staging file (see overlay.h).
 *
 * Saved form (little-endian): "ULPFSCU1", u64 base, u64 limit, u64 n,
 * n x (u64 lo, u64 hi), u64 XXH3-64 of everything before it.
 */
#include "store/store_core.h"

#include "store/overlay.h"

#include <xxhash.h>

#define OV_MAGIC "ULPFSCU1"
/* Bounds what a damaged file can make load allocate. */
#define OV_MAX_EXTENTS (1u << 24)

typedef struct ov_ext {
	uint64_t lo, hi;
} ov_ext;

struct ulp_overlay {
	pthread_mutex_t mu;
	uint64_t base, limit;
	ov_ext *v; /* sorted, disjoint, not adjacent */
	size_t n, cap;
	int dirty; /* changed since the last save */
};

ulp_overlay *ulp_overlay_new(uint64_t base, uint64_t limit)
{
	ulp_overlay *ov = calloc(1, sizeof *ov);

	if (!ov)
		return NULL;
	pthread_mutex_init(&ov->mu, NULL);
	ov->base = base;
	ov->limit = limit;
	ov->dirty = 1;
	return ov;
}

void ulp_overlay_free(ulp_overlay *ov)
{
	if (!ov)
		return;
	pthread_mutex_destroy(&ov->mu);
	free(ov->v);
	free(ov);
}

uint64_t ulp_overlay_base(ulp_overlay *ov)
{
	return ov->base; /* set at creation, never changed */
}

/* The first extent that ends at or after off (n when none). */
static size_t first_from(const ulp_overlay *ov, uint64_t off)
{
	size_t lo = 0, hi = ov->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ov->v[mid].hi < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ulp_overlay_add(ulp_overlay *ov, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return 0;
	pthread_mutex_lock(&ov->mu);
	/* Extents [i, j) touch [lo, hi) and merge with it. */
	size_t i = first_from(ov, lo), j = i;
	while (j < ov->n && ov->v[j].lo <= hi)
		j++;
	if (i == j && ov->n == ov->cap) {
		size_t cap = ov->cap ? 2 * ov->cap : 8;
		ov_ext *v = realloc(ov->v, cap * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&ov->mu);
			return -ENOMEM;
		}
		ov->v = v;
		ov->cap = cap;
	}
	if (i < j) {
		if (ov->v[i].lo < lo)
			lo = ov->v[i].lo;
		if (ov->v[j - 1].hi > hi)
			hi = ov->v[j - 1].hi;
	}
	/* One slot for the merged extent where [i, j) were. */
	size_t keep = i == j ? 0 : j - i - 1;
	if (i == j)
		memmove(ov->v + i + 1, ov->v + i, (ov->n - i) * sizeof *ov->v);
	else if (keep)
		memmove(ov->v + i + 1, ov->v + j, (ov->n - j) * sizeof *ov->v);
	ov->n = i == j ? ov->n + 1 : ov->n - keep;
	ov->v[i].lo = lo;
	ov->v[i].hi = hi;
	ov->dirty = 1;
	pthread_mutex_unlock(&ov->mu);
	return 0;
}

void ulp_overlay_truncate(ulp_overlay *ov, uint64_t size)
{
	pthread_mutex_lock(&ov->mu);
	if (size < ov->limit)
		ov->limit = size;
	while (ov->n && ov->v[ov->n - 1].lo >= size)
		ov->n--;
	if (ov->n && ov->v[ov->n - 1].hi > size)
		ov->v[ov->n - 1].hi = size;
	ov->dirty = 1;
	pthread_mutex_unlock(&ov->mu);
}

int ulp_overlay_lookup(ulp_overlay *ov, uint64_t off, uint64_t max,
                       uint64_t *len)
{
	int kind;

	pthread_mutex_lock(&ov->mu);
	size_t i = first_from(ov, off);
	/* an extent ending exactly at off does not hold it */
	if (i < ov->n && ov->v[i].hi == off)
		i++;
	if (i < ov->n && ov->v[i].lo <= off) {
		kind = ULP_OV_STAGED;
		*len = ov->v[i].hi - off;
	} else {
		uint64_t next = i < ov->n ? ov->v[i].lo : UINT64_MAX;
		if (off < ov->limit) {
			kind = ULP_OV_BASE;
			*len = (next < ov->limit ? next : ov->limit) - off;
		} else {
			kind = ULP_OV_ZERO;
			*len = next - off;
		}
	}
	pthread_mutex_unlock(&ov->mu);
	if (*len > max)
		*len = max;
	return kind;
}

int ulp_overlay_complete(ulp_overlay *ov, uint64_t size)
{
	pthread_mutex_lock(&ov->mu);
	int all = size == 0 ||
	          (ov->n == 1 && ov->v[0].lo == 0 && ov->v[0].hi >= size);
	pthread_mutex_unlock(&ov->mu);
	return all;
}

int ulp_overlay_pristine(ulp_overlay *ov, uint64_t size)
{
	pthread_mutex_lock(&ov->mu);
	int none = ov->n == 0 && ov->limit >= size;
	pthread_mutex_unlock(&ov->mu);
	return none;
}

int ulp_overlay_extend(ulp_overlay *ov, uint64_t from, uint64_t to)
{
	pthread_mutex_lock(&ov->mu);
	int rc = ov->limit == from && to > from ? 0 : -EINVAL;
	if (rc == 0) {
		ov->limit = to;
		ov->dirty = 1;
	}
	pthread_mutex_unlock(&ov->mu);
	return rc;
}

/* ------------------------------------------------------------ saving */

void ulp_overlay_name(uint64_t ino, char buf[40])
{
	snprintf(buf, 40, "%llu%s", (unsigned long long)ino,
	         ULP_OVERLAY_SUFFIX);
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int ulp_overlay_save(ulp_overlay *ov, int stg_fd, uint64_t ino, int durable)
{
	char name[40], tmp[64];
	int rc = 0;

	pthread_mutex_lock(&ov->mu);
	if (!ov->dirty && !durable) {
		pthread_mutex_unlock(&ov->mu);
		return 0;
	}
	size_t len = 40 + 16 * ov->n;
	uint8_t *b = malloc(len);
	if (!b) {
		pthread_mutex_unlock(&ov->mu);
		return -ENOMEM;
	}
	memcpy(b, OV_MAGIC, 8);
	put64(b + 8, ov->base);
	put64(b + 16, ov->limit);
	put64(b + 24, ov->n);
	for (size_t i = 0; i < ov->n; i++) {
		put64(b + 32 + 16 * i, ov->v[i].lo);
		put64(b + 40 + 16 * i, ov->v[i].hi);
	}
	put64(b + len - 8, XXH3_64bits(b, len - 8));
	ov->dirty = 0;
	pthread_mutex_unlock(&ov->mu);

	ulp_overlay_name(ino, name);
	/* A dot name: a crash leaves a temporary that the next open
	 * removes. */
	snprintf(tmp, sizeof tmp, "%scu-%llu", ULP_TMP_PREFIX,
	         (unsigned long long)ino);
	int fd = openat(stg_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	                0600);
	if (fd < 0)
		rc = -errno;
	if (rc == 0)
		rc = ulp_write_all(fd, b, len);
	if (rc == 0 && durable && fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc == 0 && renameat(stg_fd, tmp, stg_fd, name) < 0)
		rc = -errno;
	if (rc == 0 && durable && fsync(stg_fd) < 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(stg_fd, tmp, 0);
		pthread_mutex_lock(&ov->mu);
		ov->dirty = 1;
		pthread_mutex_unlock(&ov->mu);
	}
	free(b);
	return rc;
}

int ulp_overlay_load(int stg_fd, uint64_t ino, ulp_overlay **out)
{
	char name[40];
	uint8_t h[32];
	struct stat sb;
	int rc = 0;

	*out = NULL;
	ulp_overlay_name(ino, name);
	int fd = openat(stg_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	else if (sb.st_size < 40 || (rc = ulp_pread_all(fd, h, 32, 0)) < 0)
		rc = rc ? rc : -EINVAL;
	uint64_t n = rc ? 0 : get64(h + 24);
	if (rc == 0 && (memcmp(h, OV_MAGIC, 8) != 0 || n > OV_MAX_EXTENTS ||
	                (uint64_t)sb.st_size != 40 + 16 * n))
		rc = -EINVAL;
	uint8_t *b = rc ? NULL : malloc((size_t)sb.st_size);
	if (rc == 0 && !b)
		rc = -ENOMEM;
	if (rc == 0)
		rc = ulp_pread_all(fd, b, (size_t)sb.st_size, 0);
	close(fd);
	size_t len = (size_t)sb.st_size;
	if (rc == 0 && get64(b + len - 8) != XXH3_64bits(b, len - 8))
		rc = -EINVAL;
	ulp_overlay *ov = NULL;
	if (rc == 0 && !(ov = ulp_overlay_new(get64(b + 8), get64(b + 16))))
		rc = -ENOMEM;
	for (uint64_t i = 0; rc == 0 && i < n; i++) {
		uint64_t lo = get64(b + 32 + 16 * i),
			 hi = get64(b + 40 + 16 * i);
		/* sorted and disjoint, or damaged */
		if (lo >= hi || (i && lo <= ov->v[ov->n - 1].hi))
			rc = -EINVAL;
		else
			rc = ulp_overlay_add(ov, lo, hi);
	}
	free(b);
	if (rc < 0) {
		ulp_overlay_free(ov);
		return rc;
	}
	ov->dirty = 0;
	*out = ov;
	return 0;
}

void ulp_overlay_unlink(int stg_fd, uint64_t ino)
{
	char name[40];

	ulp_overlay_name(ino, name);
	unlinkat(stg_fd, name, 0);
}
