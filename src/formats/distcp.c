/*
 * distcp.c - parser for PyTorch Distributed Checkpoint (DCP) data files.
 *
 * A __{rank}_{n}.distcp file is many torch.save zip archives back to back,
 * one per saved item, each with offsets relative to its own start.  Each
 * archive's end is its end-of-central-directory record: a candidate
 * signature counts only if the directory it describes ends exactly there
 * and the strict torch zip parser accepts the archive it bounds, and the
 * next archive must start right after it.
 *
 * The zip record names ("archive/data/0") repeat in every archive, so the
 * storages are renamed for matching across checkpoints:
 * "<type>/<bytes>/<k>", the k-th storage of that type and size in the
 * file.  DCP writes a rank's items largest first in a stable order, so
 * the same tensor keeps its name when items of other sizes come or go and
 * offsets move.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"

#define SIG_EOCD "PK\x05\x06"
#define SIG_LOCAL "PK\x03\x04"
#define SIG_LOC64 0x07064b50u
#define EOCD_LEN 22u
#define LOC64_LEN 20u
#define EOCD64_LEN 56u
#define SIG_EOCD64 0x06064b50u

typedef struct dc_item {
	ulp_tensor t; /* name unused; shape points into the archive's map */
	size_t order; /* position in the file */
	size_t k;     /* occurrence among items of its type and size */
} dc_item;

typedef struct dc_vec {
	dc_item *v;
	size_t n, cap;
	ulp_tensor_map *maps; /* one per archive, owning the shapes */
	size_t nmaps, mcap;
} dc_vec;

/* Whether the EOCD at e can close an archive that starts at p: its
 * directory ends right at it, or right at the ZIP64 records before it. */
static int eocd_fits(const uint8_t *d, uint64_t size, uint64_t p, uint64_t e,
                     uint64_t *end)
{
	uint64_t clen, cd_size, cd_off;

	if (!ulp_fmt_in_range(e, EOCD_LEN, size))
		return 0;
	clen = ulp_fmt_le16(d + e + 20);
	cd_size = ulp_fmt_le32(d + e + 12);
	cd_off = ulp_fmt_le32(d + e + 16);
	if (!ulp_fmt_in_range(e, EOCD_LEN + clen, size))
		return 0;
	*end = e + EOCD_LEN + clen;
	if (e - p >= LOC64_LEN &&
	    ulp_fmt_le32(d + e - LOC64_LEN) == SIG_LOC64) {
		/* The ZIP64 end record, where the locator says (relative to
		 * p), must end at the locator and close the directory. */
		uint64_t loc = e - LOC64_LEN, off = ulp_fmt_le64(d + loc + 8);

		if (off > loc - p || loc - p - off < EOCD64_LEN)
			return 0;
		off += p;
		return ulp_fmt_le32(d + off) == SIG_EOCD64 &&
		       off + 12 + ulp_fmt_le64(d + off + 4) == loc &&
		       ulp_fmt_le64(d + off + 40) +
		                       ulp_fmt_le64(d + off + 48) ==
		               off - p;
	}
	return cd_off + cd_size == e - p;
}

/* The end of the archive starting at p, its tensors in *sub. */
static int next_archive(const uint8_t *d, uint64_t size, uint64_t p,
                        uint64_t *end, ulp_tensor_map *sub)
{
	uint64_t from = p;

	for (;;) {
		const uint8_t *hit = NULL;
		uint64_t e;
		int rc;

		if (size - from >= 4)
			hit = memmem(d + from, (size_t)(size - from), SIG_EOCD,
			             4);
		if (!hit)
			return ULP_ERR_PARSE;
		e = (uint64_t)(hit - d);
		from = e + 1;
		if (!eocd_fits(d, size, p, e, end))
			continue;
		if (*end < size &&
		    (size - *end < 4 || memcmp(d + *end, SIG_LOCAL, 4) != 0))
			continue;
		rc = ulp_torchzip_parse(d + p, *end - p, sub);
		if (rc != ULP_ERR_PARSE)
			return rc;
	}
}

static int keep_archive(dc_vec *dv, ulp_tensor_map *sub, uint64_t base)
{
	if (dv->nmaps == dv->mcap) {
		size_t cap = dv->mcap ? dv->mcap * 2 : 16;
		ulp_tensor_map *m = realloc(dv->maps, cap * sizeof *m);
		if (!m) {
			ulp_tensor_map_free(sub);
			return ULP_ERR_NOMEM;
		}
		dv->maps = m;
		dv->mcap = cap;
	}
	dv->maps[dv->nmaps++] = *sub;
	for (size_t i = 0; i < sub->n; i++) {
		if (dv->n == dv->cap) {
			size_t cap = dv->cap ? dv->cap * 2 : 64;
			dc_item *v = realloc(dv->v, cap * sizeof *v);
			if (!v)
				return ULP_ERR_NOMEM;
			dv->v = v;
			dv->cap = cap;
		}
		dc_item *it = &dv->v[dv->n];
		it->t = sub->v[i];
		it->t.offset += base;
		it->order = dv->n++;
	}
	return ULP_OK;
}

static int cmp_kind(const void *a, const void *b)
{
	const dc_item *x = a, *y = b;
	int c = strcmp(x->t.dtype_name, y->t.dtype_name);

	if (c)
		return c;
	if (x->t.nbytes != y->t.nbytes)
		return x->t.nbytes < y->t.nbytes ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int build(dc_vec *dv, uint64_t size, ulp_tensor_map *out)
{
	char name[64];
	int rc;

	qsort(dv->v, dv->n, sizeof *dv->v, cmp_kind);
	for (size_t i = 0; i < dv->n; i++) {
		const ulp_tensor *a = i ? &dv->v[i - 1].t : NULL;
		const ulp_tensor *b = &dv->v[i].t;

		dv->v[i].k = a && a->nbytes == b->nbytes &&
		                             strcmp(a->dtype_name,
		                                    b->dtype_name) == 0
		                     ? dv->v[i - 1].k + 1
		                     : 0;
	}
	rc = ulp_fmt_map_reserve(out, dv->n);
	for (size_t i = 0; i < dv->n && rc == ULP_OK; i++) {
		const ulp_tensor *t = &dv->v[i].t;
		int len = snprintf(name, sizeof name, "%s/%llu/%zu",
		                   t->dtype_name, (unsigned long long)t->nbytes,
		                   dv->v[i].k);

		rc = ulp_fmt_map_push(out, name, (size_t)len, t->dtype_name,
		                      t->dtype, t->offset, t->nbytes, t->ndim,
		                      t->shape);
	}
	if (rc == ULP_OK)
		rc = ulp_fmt_map_finalize(out, size);
	return rc;
}

int ulp_distcp_parse(const uint8_t *data, uint64_t size, ulp_tensor_map *out)
{
	dc_vec dv = { 0 };
	uint64_t p = 0;
	int rc = ULP_OK;

	if (!out || (!data && size > 0))
		return ULP_ERR_ARG;
	memset(out, 0, sizeof *out);
	if (size < 4 || memcmp(data, SIG_LOCAL, 4) != 0)
		return ULP_ERR_PARSE;
	while (p < size && rc == ULP_OK) {
		ulp_tensor_map sub;
		uint64_t end;

		rc = next_archive(data, size, p, &end, &sub);
		if (rc == ULP_OK)
			rc = keep_archive(&dv, &sub, p);
		else
			break;
		p = end;
	}
	if (rc == ULP_OK)
		rc = build(&dv, size, out);
	for (size_t i = 0; i < dv.nmaps; i++)
		ulp_tensor_map_free(&dv.maps[i]);
	free(dv.maps);
	free(dv.v);
	if (rc != ULP_OK) {
		ulp_tensor_map_free(out);
		return rc;
	}
	out->format = ULP_FMT_DISTCP;
	return ULP_OK;
}
