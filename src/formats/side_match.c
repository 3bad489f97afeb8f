/*
 * side_match.c - matching the tensors of one file with those of another
 * file of the same checkpoint, so that one is coded given the other.
 *
 * The case that pays: optimizer.pt holding fp32 master weights beside
 * model.safetensors holding their bf16 copy (round-to-nearest of the
 * master: given it, only the master's low 16 bits are left), or an fp32
 * copy (equal: nearly free).  Nothing names which tensor of one file is
 * which of the other: AdamW's state is indexed by parameter order and
 * safetensors sorts by name.  So a candidate is any side tensor of the
 * same element count whose first element agrees, preferring the side's
 * order, and a match is kept only if every sampled element agrees.  A
 * wrong match could only cost ratio (the codec is lossless against any
 * reference, and keeps the smaller of reference and side), never bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"

/* Elements of a candidate compared, spread over the tensor. */
#define SIDE_SAMPLES 64

/* A side tensor by what a candidate must agree with: element count, kind
 * (its transform) and first element. */
typedef struct side_key {
	uint64_t numel;
	uint32_t first; /* bf16 bits, or fp32 bits */
	uint8_t xform;
	size_t idx;
} side_key;

static int key_cmp(const void *a, const void *b)
{
	const side_key *x = a, *y = b;
	if (x->numel != y->numel)
		return x->numel < y->numel ? -1 : 1;
	if (x->xform != y->xform)
		return x->xform < y->xform ? -1 : 1;
	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The bf16 that fp32 bits u round to (to nearest, ties to even, as
 * torch converts); 0x7fc0 for every NaN. */
static uint16_t bf16_round(uint32_t u)
{
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The side element a master element u must equal under xform. */
static uint32_t expected(uint32_t u, unsigned xform)
{
	return xform == ULP_SIDE_WIDEN_BF16 ? bf16_round(u) : u;
}

static int read_u32(ulp_ref_read_fn rd, void *op, uint64_t off, uint32_t *v)
{
	uint8_t b[4];
	if (rd(op, off, b, 4))
		return -1;
	*v = ulp_fmt_le32(b);
	return 0;
}

/* Element i of side tensor t under xform. */
static int read_side(ulp_ref_read_fn rd, void *op, const ulp_tensor *t,
                     unsigned xform, uint64_t i, uint32_t *v)
{
	if (xform == ULP_SIDE_SAME)
		return read_u32(rd, op, t->offset + 4 * i, v);
	uint8_t b[2];
	if (rd(op, t->offset + 2 * i, b, 2))
		return -1;
	*v = ulp_fmt_le16(b);
	return 0;
}

/* Whether every sampled element of cur tensor c (numel n) agrees with side
 * tensor s under xform. */
static int verify(const ulp_tensor *c, ulp_ref_read_fn cur_read,
                  void *cur_opaque, const ulp_tensor *s, unsigned xform,
                  ulp_ref_read_fn side_read, void *side_opaque, uint64_t n)
{
	uint64_t m = n < SIDE_SAMPLES ? n : SIDE_SAMPLES;
	for (uint64_t k = 0; k < m; k++) {
		uint64_t i = m > 1 ? k * (n - 1) / (m - 1) : 0;
		uint32_t u, v;
		if (read_u32(cur_read, cur_opaque, c->offset + 4 * i, &u) ||
		    read_side(side_read, side_opaque, s, xform, i, &v) ||
		    expected(u, xform) != v)
			return 0;
	}
	return 1;
}

/* Keys of side's float tensors that an fp32 tensor can be matched with. */
static size_t side_keys(const ulp_tensor_map *side, ulp_ref_read_fn side_read,
                        void *side_opaque, side_key *keys)
{
	size_t nk = 0;
	for (size_t j = 0; j < side->n; j++) {
		const ulp_tensor *s = &side->v[j];
		side_key k = { 0, 0, 0, j };
		if (s->dtype == ULP_DT_BF16 && s->nbytes >= 2 &&
		    s->nbytes % 2 == 0) {
			k.xform = ULP_SIDE_WIDEN_BF16;
			k.numel = s->nbytes / 2;
		} else if (s->dtype == ULP_DT_F32 && s->nbytes >= 4 &&
		           s->nbytes % 4 == 0) {
			k.xform = ULP_SIDE_SAME;
			k.numel = s->nbytes / 4;
		} else {
			continue;
		}
		if (read_side(side_read, side_opaque, s, k.xform, 0, &k.first))
			continue;
		keys[nk++] = k;
	}
	qsort(keys, nk, sizeof(*keys), key_cmp);
	return nk;
}

/* The first key at or after (numel, xform, first). */
static size_t lower_bound(const side_key *keys, size_t nk, uint64_t numel,
                          unsigned xform, uint32_t first)
{
	side_key probe = { numel, first, (uint8_t)xform, 0 };
	size_t lo = 0, hi = nk;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_cmp(&keys[mid], &probe) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The side tensor matched with fp32 tensor c, or -1: among the unused
 * candidates that verify, the first at or after next in side order, else
 * the first before it; bf16 copies before fp32 ones. */
static long find_one(const ulp_tensor *c, ulp_ref_read_fn cur_read,
                     void *cur_opaque, const ulp_tensor_map *side,
                     ulp_ref_read_fn side_read, void *side_opaque,
                     const side_key *keys, size_t nk, const uint8_t *used,
                     size_t next, uint8_t *xform)
{
	uint64_t n = c->nbytes / 4;
	uint32_t u;
	if (read_u32(cur_read, cur_opaque, c->offset, &u))
		return -1;
	for (unsigned x = ULP_SIDE_XFORMS; x-- > 0;) {
		uint32_t want = expected(u, x);
		size_t lo = lower_bound(keys, nk, n, x, want), hi = lo;
		while (hi < nk && keys[hi].numel == n && keys[hi].xform == x &&
		       keys[hi].first == want)
			hi++;
		/* keys of one value are in side order (key_cmp ends on idx) */
		for (int pass = 0; pass < 2; pass++)
			for (size_t k = lo; k < hi; k++) {
				size_t j = keys[k].idx;
				if (used[j] || (j >= next) != (pass == 0))
					continue;
				if (verify(c, cur_read, cur_opaque, &side->v[j],
				           x, side_read, side_opaque, n)) {
					*xform = (uint8_t)x;
					return (long)j;
				}
			}
	}
	return -1;
}

int ulp_side_match_find(const ulp_tensor_map *cur, ulp_ref_read_fn cur_read,
                        void *cur_opaque, const ulp_tensor_map *side,
                        ulp_ref_read_fn side_read, void *side_opaque,
                        ulp_side_map *out)
{
	side_key *keys = NULL;
	uint8_t *used = NULL;
	size_t next = 0;

	if (!out)
		return ULP_ERR_ARG;
	out->n = 0;
	out->v = NULL;
	if (!cur || !side || !cur->n || !side->n || !cur_read || !side_read)
		return ULP_OK;
	keys = malloc(sizeof(*keys) * side->n);
	used = calloc(side->n, 1);
	out->v = malloc(sizeof(*out->v) * cur->n);
	if (!keys || !used || !out->v) {
		free(keys);
		free(used);
		ulp_side_map_free(out);
		return ULP_ERR_NOMEM;
	}
	size_t nk = side_keys(side, side_read, side_opaque, keys);
	for (size_t i = 0; i < cur->n && nk; i++) {
		const ulp_tensor *c = &cur->v[i];
		uint8_t xform = 0;
		if (c->dtype != ULP_DT_F32 || c->nbytes < 4 || c->nbytes % 4)
			continue;
		long j = find_one(c, cur_read, cur_opaque, side, side_read,
		                  side_opaque, keys, nk, used, next, &xform);
		if (j < 0)
			continue;
		used[j] = 1;
		next = (size_t)j + 1;
		out->v[out->n++] = (ulp_side_match){ c->offset, c->nbytes,
			                             side->v[j].offset, xform,
			                             ULP_DT_F32 };
	}
	free(keys);
	free(used);
	if (!out->n)
		ulp_side_map_free(out);
	return ULP_OK;
}

void ulp_side_map_free(ulp_side_map *m)
{
	if (!m)
		return;
	free(m->v);
	m->v = NULL;
	m->n = 0;
}
