/*
 * copyup.c - the bytes of a staged file: read from its staging file and,
 * for a copy-up on demand (overlay.h), from the committed version it was
 * opened from; filling the overlay's gaps before the file is encoded.
 */
#include "store/staging.h"
#include "store/reader.h"

#include "store/overlay.h"

#include <sys/stat.h>

/* Bytes filled per step: a few chunks, so that a writer that cancels the
 * encode waits little. */
#define FILL_STEP (4u << 20)

/* pread len bytes of the staging file at off; past its end, zeros. */
static int stage_pread(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	size_t n = 0;

	while (n < len) {
		ssize_t r = pread(fd, buf + n, len - n, (off_t)(off + n));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	memset(buf + n, 0, len - n);
	return 0;
}

ssize_t ulp_stage_read(ulp_store *st, ulp_inode *in, void *buf, size_t size,
                       uint64_t off, ulp_readahead *ra)
{
	uint64_t fsize = in->size;
	uint8_t *b = buf;
	size_t n = 0;

	if (off >= fsize)
		return 0;
	if (size > fsize - off)
		size = (size_t)(fsize - off);
	while (n < size) {
		uint64_t len = size - n;
		int kind =
			in->ov ? ulp_overlay_lookup(in->ov, off + n, len, &len)
			       : ULP_OV_STAGED;
		int rc = 0;
		if (kind == ULP_OV_STAGED) {
			rc = stage_pread(in->fd, b + n, (size_t)len, off + n);
		} else if (kind == ULP_OV_BASE) {
			ssize_t r = ulp_read_version(st,
			                             ulp_overlay_base(in->ov),
			                             b + n, (size_t)len,
			                             off + n, ra);
			if (r < 0)
				rc = (int)r;
			else if ((uint64_t)r < len) /* the limit is inside */
				memset(b + n + r, 0, (size_t)len - (size_t)r);
		} else {
			memset(b + n, 0, (size_t)len);
		}
		if (rc < 0)
			return n ? (ssize_t)n : rc;
		n += (size_t)len;
	}
	return (ssize_t)n;
}

/* Make [off, off + len) of fd read as zeros: a hole, or where the
 * filesystem cannot punch, zeros written. */
static int punch(int fd, uint64_t off, uint64_t len)
{
	static const uint8_t zero[64u << 10];

	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	              (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	for (uint64_t end = off + len; off < end;) {
		size_t n = end - off < sizeof zero ? (size_t)(end - off)
		                                   : sizeof zero;
		int rc = ulp_pwrite_all(fd, zero, n, off);
		if (rc < 0)
			return rc;
		off += n;
	}
	return 0;
}

/* The end of the range of v (n sorted ranges) holding off, or 0. */
static uint64_t range_end(const uint64_t (*v)[2], size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid][1] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo][0] <= off ? v[lo][1] : 0;
}

int ulp_stage_fill(ulp_store *st, ulp_inode *in, ulp_overlay *ov, int fd,
                   uint64_t size, uint64_t gen, const uint64_t (*skip)[2],
                   size_t nskip)
{
	uint8_t *buf = NULL;
	uint64_t off = 0;
	int rc = 0;

	while (rc == 0 && off < size) {
		if (atomic_load(&in->gen) != gen) {
			rc = 1;
			break;
		}
		uint64_t len, end = range_end(skip, nskip, off);
		if (end) { /* left to the encoder, which reads the version */
			off = end;
			continue;
		}
		int kind = ulp_overlay_lookup(ov, off, size - off, &len);
		/* up to the next range skipped */
		for (size_t k = 0; k < nskip; k++)
			if (skip[k][0] > off && skip[k][0] - off < len) {
				len = skip[k][0] - off;
				break;
			}
		if (kind == ULP_OV_BASE) {
			if (len > FILL_STEP)
				len = FILL_STEP;
			if (!buf && !(buf = malloc(FILL_STEP))) {
				rc = -ENOMEM;
				break;
			}
			ssize_t r = ulp_read_version(st, ulp_overlay_base(ov),
			                             buf, (size_t)len, off,
			                             NULL);
			if (r >= 0 && (uint64_t)r < len)
				memset(buf + r, 0, (size_t)(len - (uint64_t)r));
			/* The version's zeros stay holes: a hole first (what
			 * a crash may have left there goes), then the data. */
			rc = r < 0 ? (int)r : punch(fd, off, len);
			if (rc == 0)
				rc = ulp_pwrite_sparse(fd, buf, (size_t)len,
				                       off);
		} else if (kind == ULP_OV_ZERO) {
			/* Zeros: a hole (whatever a crash left there goes). */
			rc = punch(fd, off, len);
		}
		/* Filled before marked: a reader sees the same bytes from
		 * either side. */
		if (rc == 0 && kind != ULP_OV_STAGED)
			rc = ulp_overlay_add(ov, off, off + len);
		off += len;
	}
	free(buf);
	return rc;
}

int ulp_stage_zero(int fd, off_t off, off_t len, uint64_t size)
{
	struct stat sb;

	if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off,
	              len) < 0) {
		if (errno != EOPNOTSUPP)
			return -errno;
		/* tmpfs has no ZERO_RANGE: a hole reads as zeros too. */
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		              off, len) < 0)
			return -errno;
	}
	if (fstat(fd, &sb) < 0)
		return -errno;
	if ((uint64_t)sb.st_size < size && ftruncate(fd, (off_t)size) < 0)
		return -errno;
	return 0;
}

/* The next data (SEEK_DATA) or hole (SEEK_HOLE) at or after off in the
 * staging file, within [off, end): its offset, or end when none. */
static uint64_t stage_next(int fd, uint64_t off, uint64_t end, int whence)
{
	off_t r = lseek(fd, (off_t)off, whence);

	return r < 0 || (uint64_t)r > end ? end : (uint64_t)r;
}

off_t ulp_stage_seek(ulp_inode *in, uint64_t off, int whence)
{
	uint64_t size = in->size;

	while (off < size) {
		uint64_t len = size - off;
		int kind = in->ov ? ulp_overlay_lookup(in->ov, off, len, &len)
		                  : ULP_OV_STAGED;
		uint64_t end = off + len;
		if (kind == ULP_OV_STAGED) {
			uint64_t at = stage_next(in->fd, off, end, whence);
			if (at < end)
				return (off_t)at;
		} else if ((kind == ULP_OV_BASE) == (whence == SEEK_DATA)) {
			return (off_t)off; /* a version is data throughout */
		}
		off = end;
	}
	/* Past the last data there is the hole at the end of the file. */
	return whence == SEEK_HOLE ? (off_t)size : -ENXIO;
}

/* Append [lo, hi) to the malloc()ed array *v of *n ranges (room for
 * *cap); on failure it is freed and emptied: 0 or -ENOMEM. */
static int range_push(uint64_t (**v)[2], size_t *n, size_t *cap, uint64_t lo,
                      uint64_t hi)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		void *p = realloc(*v, c * sizeof **v);
		if (!p) {
			free(*v);
			*v = NULL;
			*n = *cap = 0;
			return -ENOMEM;
		}
		*v = p;
		*cap = c;
	}
	(*v)[*n][0] = lo;
	(*v)[*n][1] = hi;
	(*n)++;
	return 0;
}

/* Holes shorter than this hold no chunk worth skipping. */
#define HOLE_MIN (64u << 10)

int ulp_stage_holes(int fd, uint64_t size, uint64_t (**out)[2], size_t *n)
{
	uint64_t(*v)[2] = NULL;
	size_t cap = 0;
	uint64_t off = 0;

	*out = NULL;
	*n = 0;
	while (off < size) {
		off_t h = lseek(fd, (off_t)off, SEEK_HOLE);
		if (h < 0 || (uint64_t)h >= size)
			break; /* no hole left (or none known: all data) */
		off_t d = lseek(fd, h, SEEK_DATA);
		uint64_t end = d < 0 || (uint64_t)d > size ? size : (uint64_t)d;
		if (end - (uint64_t)h >= HOLE_MIN &&
		    range_push(&v, n, &cap, (uint64_t)h, end) < 0)
			return -ENOMEM;
		off = end;
	}
	*out = v;
	return 0;
}

/* The index of the chunk of plan (n chunks) holding off < the plan's
 * size. */
static size_t chunk_of(const ulp_plan *plan, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (hi - lo > 1) { /* the last chunk starting at or before off */
		size_t mid = lo + (hi - lo) / 2;
		uint64_t at;
		uint32_t len;
		ulp_plan_chunk_range(plan, mid, &at, &len);
		if (at <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* [*lo, *hi) shrunk to the whole chunks of plan inside it (*lo >= *hi:
 * none). */
static void whole_chunks(const ulp_plan *plan, uint64_t *lo, uint64_t *hi)
{
	size_t n = ulp_plan_chunk_count(plan);
	uint64_t size = ulp_plan_size(plan), at;
	uint32_t len;

	if (*lo < size) {
		ulp_plan_chunk_range(plan, chunk_of(plan, n, *lo), &at, &len);
		if (at < *lo)
			*lo = at + len;
	}
	if (*hi < size) {
		ulp_plan_chunk_range(plan, chunk_of(plan, n, *hi), &at, &len);
		*hi = at;
	}
}

int ulp_stage_unchanged(ulp_store *st, ulp_overlay *ov, uint64_t size,
                        const ulp_version_info *base, const ulp_plan *plan,
                        uint64_t (**out)[2], size_t *n)
{
	uint64_t(*v)[2] = NULL;
	size_t cap = 0;
	uint64_t total = 0;

	*out = NULL;
	*n = 0;
	/* A delta against the base only while the chain stays within
	 * keyframe_every; the rest of the time a keyframe, as always. */
	if (base->id != ulp_overlay_base(ov) ||
	    base->state != ULP_VERSION_LIVE ||
	    base->depth + 2 > st->opts.keyframe_every)
		return 0;
	for (uint64_t off = 0, len; off < size; off += len) {
		if (ulp_overlay_lookup(ov, off, size - off, &len) !=
		    ULP_OV_BASE)
			continue;
		uint64_t lo = off, hi = off + len;
		if (plan)
			whole_chunks(plan, &lo, &hi);
		if (lo >= hi)
			continue;
		if (range_push(&v, n, &cap, lo, hi) < 0)
			return -ENOMEM;
		total += hi - lo;
	}
	/* Mostly rewritten: a keyframe reads faster and costs about the
	 * same. */
	if (total < size / 2) {
		free(v);
		*n = 0;
		return 0;
	}
	*out = v;
	return 0;
}

/* The tensor (of map's, sorted by offset) whose bytes hold off, or
 * NULL. */
static const ulp_tensor *tensor_at(const ulp_tensor_map *map, uint64_t off)
{
	size_t lo = 0, hi = map->n;

	while (lo < hi) { /* the first tensor ending after off */
		size_t mid = lo + (hi - lo) / 2;
		if (map->v[mid].offset + map->v[mid].nbytes <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < map->n && map->v[lo].offset <= off ? &map->v[lo] : NULL;
}

/* Whether a byte of [0, end) of a copy-up of size bytes is not its
 * base's. */
static int written_below(ulp_overlay *ov, uint64_t size, uint64_t end)
{
	for (uint64_t off = 0, len; off < size && off < end; off += len)
		if (ulp_overlay_lookup(ov, off, size - off, &len) !=
		    ULP_OV_BASE)
			return 1;
	return 0;
}

int ulp_stage_same_map(ulp_overlay *ov, uint64_t size, uint64_t base_size,
                       const ulp_tensor_map *map)
{
	/* A safetensors parse reads the header before the data, and needs
	 * the tensors inside the file: a file grown (appended to) keeps
	 * them. */
	if (map->format == ULP_FMT_SAFETENSORS)
		return map->n && size >= base_size &&
		       !written_below(ov, size, map->v[0].offset);
	/* A zip's records are everywhere around the tensors, and its end
	 * record ends the file. */
	if (size != base_size)
		return 0;
	for (uint64_t off = 0, len; off < size; off += len) {
		if (ulp_overlay_lookup(ov, off, size - off, &len) ==
		    ULP_OV_BASE)
			continue;
		/* Tensors may follow each other without a gap. */
		for (uint64_t at = off; at < off + len;) {
			const ulp_tensor *t = tensor_at(map, at);
			if (!t)
				return 0;
			at = t->offset + t->nbytes;
		}
	}
	return 1;
}
