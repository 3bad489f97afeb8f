/*
 * plan.c - cutting a file into chunks of runs and matching its tensors to
 * the reference's.
 *
 * Tensors are matched by name, dtype and shape (and byte size), never by
 * offset, so a reference whose header grew or whose tensors moved still
 * lines up.  Bytes outside tensors (headers, pickles, zip records) are
 * coded against the reference's bytes at the same offset, which is where
 * they sit in consecutive checkpoints.
 *
 * A float tensor may also have a side candidate: a tensor of another file
 * of the checkpoint (ulp_side_match_find) that the chunk encoder codes it
 * against when that is smaller than against the reference.
 */
#include <stdlib.h>

#include <xxhash.h>

#include "codec_internal.h"

typedef struct ref_key {
	uint64_t hash;
	size_t idx;
} ref_key;

typedef struct run_vec {
	ulp_run *v;
	size_t n, cap;
} run_vec;

/* Identity of a tensor for matching: name, dtype and shape, chained
 * through the seed so that no separator games can make two keys equal. */
static uint64_t tensor_key(const ulp_tensor *t)
{
	uint64_t h = XXH3_64bits(t->name, strlen(t->name));
	h = XXH3_64bits_withSeed(t->dtype_name,
	                         strnlen(t->dtype_name, sizeof(t->dtype_name)),
	                         h);
	h = XXH3_64bits_withSeed(&t->ndim, sizeof(t->ndim), h);
	if (t->ndim)
		h = XXH3_64bits_withSeed(t->shape, sizeof(uint64_t) * t->ndim,
		                         h);
	return h;
}

static int same_tensor(const ulp_tensor *a, const ulp_tensor *b)
{
	return a->nbytes == b->nbytes && a->ndim == b->ndim &&
	       strcmp(a->name, b->name) == 0 &&
	       strncmp(a->dtype_name, b->dtype_name, sizeof(a->dtype_name)) ==
	               0 &&
	       (!a->ndim ||
	        memcmp(a->shape, b->shape, sizeof(uint64_t) * a->ndim) == 0);
}

static int key_cmp(const void *a, const void *b)
{
	const ref_key *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static const ulp_tensor *find_ref(const ulp_tensor_map *ref,
                                  const ref_key *keys, const ulp_tensor *t)
{
	uint64_t h = tensor_key(t);
	size_t lo = 0, hi = ref->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (keys[mid].hash < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < ref->n && keys[lo].hash == h; lo++)
		if (same_tensor(&ref->v[keys[lo].idx], t))
			return &ref->v[keys[lo].idx];
	return NULL;
}

/* A reference tensor can only be used if it lies inside the reference. */
static int ref_usable(const ulp_tensor *t, uint64_t ref_size)
{
	return t->offset <= ref_size && t->nbytes <= ref_size - t->offset;
}

static int push(run_vec *rv, ulp_run r)
{
	if (rv->n == rv->cap) {
		size_t ncap = rv->cap ? rv->cap * 2 : 64;
		ulp_run *v = realloc(rv->v, sizeof(ulp_run) * ncap);
		if (!v)
			return ULP_ERR_NOMEM;
		rv->v = v;
		rv->cap = ncap;
	}
	rv->v[rv->n++] = r;
	return ULP_OK;
}

/* A generic segment coded against the reference's bytes at ref_off. */
static ulp_run generic_seg(uint64_t len, uint64_t ref_off, int has_ref,
                           uint64_t ref_size)
{
	ulp_run r = { .len = len, .dtype = ULP_DT_GENERIC };
	if (has_ref && ref_off < ref_size) {
		r.has_ref = 1;
		r.ref_off = ref_off;
	}
	return r;
}

/* The side match of the whole elements [off, off + len) of a tensor of
 * dtype dt, if side has a usable one (a match that does not fit is
 * ignored: it only costs the context).  *next walks side in order. */
static const ulp_side_match *side_for(const ulp_side_map *side, size_t *next,
                                      uint64_t off, uint64_t len, ulp_dtype dt,
                                      uint64_t side_size)
{
	while (side && *next < side->n && side->v[*next].cur_off < off)
		(*next)++;
	if (!side || *next >= side->n)
		return NULL;
	const ulp_side_match *m = &side->v[*next];
	if (m->cur_off != off || m->len != len || m->dtype != dt || !len ||
	    m->xform >= ULP_SIDE_XFORMS ||
	    (m->xform == ULP_SIDE_WIDEN_BF16 && dt != ULP_DT_F32) ||
	    m->side_off > side_size ||
	    ulp_side_len(len, m->xform) > side_size - m->side_off)
		return NULL;
	return m;
}

/* Whole-file segments: one per tensor and per gap between tensors. */
static int segments(const ulp_tensor_map *cur, uint64_t size,
                    const ulp_tensor_map *ref, const ref_key *keys, int has_ref,
                    uint64_t ref_size, const ulp_side_map *side,
                    uint64_t side_size, run_vec *seg, int *has_side)
{
	uint64_t pos = 0;
	size_t next_side = 0;
	int rc;
	for (size_t i = 0; cur && i < cur->n; i++) {
		const ulp_tensor *t = &cur->v[i];
		if (t->offset < pos || t->offset > size ||
		    t->nbytes > size - t->offset ||
		    (unsigned)t->dtype >= ULP_DT_COUNT)
			return ULP_ERR_ARG;
		if (t->offset > pos &&
		    (rc = push(seg, generic_seg(t->offset - pos, pos, has_ref,
		                                ref_size))))
			return rc;
		const ulp_tensor *m = has_ref && ref && ref->n
		                              ? find_ref(ref, keys, t)
		                              : NULL;
		if (m && !ref_usable(m, ref_size))
			m = NULL;
		unsigned w = ulp_dtype_size(t->dtype);
		uint64_t whole = t->dtype ? t->nbytes / w * w : 0;
		uint64_t ref_at = m ? m->offset : t->offset;
		if (whole) {
			ulp_run r = { .len = whole,
				      .ref_off = m ? m->offset : 0,
				      .dtype = (uint8_t)t->dtype,
				      .has_ref = m != NULL };
			const ulp_side_match *sm =
				side_for(side, &next_side, t->offset, whole,
			                 t->dtype, side_size);
			if (sm) {
				r.side = 1;
				r.side_off = sm->side_off;
				r.xform = sm->xform;
				*has_side = 1;
			}
			if ((rc = push(seg, r)))
				return rc;
		}
		if (t->nbytes > whole &&
		    (rc = push(seg,
		               generic_seg(t->nbytes - whole, ref_at + whole,
		                           has_ref, ref_size))))
			return rc;
		pos = t->offset + t->nbytes;
	}
	if (pos < size)
		return push(seg,
		            generic_seg(size - pos, pos, has_ref, ref_size));
	return ULP_OK;
}

/* Cut segments into chunks of about chunk_size bytes; float runs are cut
 * at element boundaries. */
static int cut(ulp_plan *pl, const run_vec *seg)
{
	run_vec runs = { 0 };
	size_t ncap = 16, nch = 0;
	ulp_chunk_plan *ch = malloc(sizeof(*ch) * ncap);
	uint64_t off = 0;
	uint32_t fill = 0;
	const uint32_t cs = pl->params.chunk_size;
	int rc = ULP_OK;
	if (!ch)
		return ULP_ERR_NOMEM;
	ch[0] = (ulp_chunk_plan){ 0, 0, 0, 0 };
	for (size_t i = 0; i < seg->n && !rc; i++) {
		ulp_run s = seg->v[i];
		unsigned w = ulp_dtype_size(s.dtype);
		uint64_t done = 0;
		while (done < s.len) {
			uint64_t take = s.len - done;
			if (take > cs - fill)
				take = (cs - fill) / w * w;
			if (take) {
				ulp_run r = s;
				r.len = take;
				r.ref_off = s.ref_off + done;
				r.side_off = s.side_off +
				             ulp_side_len(done, s.xform);
				if (!s.dtype && s.has_ref)
					r = generic_seg(take, s.ref_off + done,
					                1, pl->ref_size);
				if ((rc = push(&runs, r)))
					break;
				ch[nch].nruns++;
				ch[nch].len += (uint32_t)take;
				fill += (uint32_t)take;
				done += take;
				off += take;
			}
			if (fill + w > cs || (take == 0 && fill > 0)) {
				if (nch + 1 == ncap) {
					ulp_chunk_plan *n2 = realloc(
						ch, sizeof(*ch) * ncap * 2);
					if (!n2) {
						rc = ULP_ERR_NOMEM;
						break;
					}
					ch = n2;
					ncap *= 2;
				}
				nch++;
				ch[nch] = (ulp_chunk_plan){ off, 0,
					                    (uint32_t)runs.n,
					                    0 };
				fill = 0;
			}
		}
	}
	if (rc) {
		free(ch);
		free(runs.v);
		return rc;
	}
	if (ch[nch].len)
		nch++;
	pl->chunks = ch;
	pl->nchunks = nch;
	pl->runs = runs.v;
	pl->nruns = runs.n;
	return ULP_OK;
}

int ulp_plan_build(const ulp_tensor_map *cur, uint64_t cur_size,
                   const ulp_tensor_map *ref, uint64_t ref_size,
                   const ulp_params *params, ulp_plan **out)
{
	return ulp_plan_build_side(cur, cur_size, ref, ref_size, NULL, 0,
	                           params, out);
}

int ulp_plan_build_side(const ulp_tensor_map *cur, uint64_t cur_size,
                        const ulp_tensor_map *ref, uint64_t ref_size,
                        const ulp_side_map *side, uint64_t side_size,
                        const ulp_params *params, ulp_plan **out)
{
	ulp_plan *pl;
	ref_key *keys = NULL;
	run_vec seg = { 0 };
	int rc;

	if (!out)
		return ULP_ERR_ARG;
	*out = NULL;
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return ULP_ERR_NOMEM;
	ulp_params_resolve(params, &pl->params);
	pl->size = cur_size;
	pl->has_ref = ref != NULL;
	pl->ref_size = ref ? ref_size : 0;
	if (ref && ref->n) {
		keys = malloc(sizeof(*keys) * ref->n);
		if (!keys) {
			rc = ULP_ERR_NOMEM;
			goto fail;
		}
		for (size_t i = 0; i < ref->n; i++)
			keys[i] = (ref_key){ tensor_key(&ref->v[i]), i };
		qsort(keys, ref->n, sizeof(*keys), key_cmp);
	}
	pl->side_size = side ? side_size : 0;
	rc = segments(cur, cur_size, ref, keys, pl->has_ref, pl->ref_size, side,
	              pl->side_size, &seg, &pl->has_side);
	if (rc)
		goto fail;
	rc = cut(pl, &seg);
	if (rc)
		goto fail;
	free(seg.v);
	free(keys);
	*out = pl;
	return ULP_OK;
fail:
	free(seg.v);
	free(keys);
	free(pl);
	return rc;
}

void ulp_plan_free(ulp_plan *pl)
{
	if (!pl)
		return;
	free(pl->chunks);
	free(pl->runs);
	free(pl);
}

size_t ulp_plan_chunk_count(const ulp_plan *pl)
{
	return pl->nchunks;
}

void ulp_plan_chunk_range(const ulp_plan *pl, size_t i, uint64_t *off,
                          uint32_t *len)
{
	assert(i < pl->nchunks);
	*off = pl->chunks[i].off;
	*len = pl->chunks[i].len;
}

uint64_t ulp_plan_size(const ulp_plan *pl)
{
	return pl->size;
}
