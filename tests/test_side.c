/*
 * test_side.c - unit tests of side references: an object coded partly
 * against another file of the same checkpoint (fp32 master weights in an
 * optimizer file given the bf16 weights of the model file).
 *
 * Matching (ulp_side_match_find): masters found whatever the order, no
 * match for shapes that differ, values that disagree, or other state.
 * Codec: exact round trips with and without a reference, the side section
 * and index flags, a wrong or missing side refused by name (ULP_ERR_SIDE),
 * a forged side map ignored, and every single-byte corruption detected.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include "codec_internal.h"
#include "test_util.h"

#define NT 4 /* parameters */

/* A checkpoint: model (bf16 weights, sorted by name) and optim (per
 * parameter in parameter order exp_avg, exp_avg_sq, then the fp32
 * masters: "fp32_master_weights" as train.py saves them). */
typedef struct ckpt {
	tu_file model, optim;
} ckpt;

static const char *pname[NT] = { "wte", "h0.attn", "h0.mlp", "ln_f" };
static const uint64_t pnumel[NT] = { 3000, 1500, 1500, 200 };

static uint16_t rne(uint32_t u)
{
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void masters_to_model(ckpt *c)
{
	for (int k = 0; k < NT; k++) {
		char name[64];
		snprintf(name, sizeof(name), "master.%s", pname[k]);
		const ulp_tensor *m = tu_find(&c->optim.map, name);
		const ulp_tensor *b = tu_find(&c->model.map, pname[k]);
		cr_assert(m && b && m->nbytes == 2 * b->nbytes);
		for (uint64_t i = 0; i < pnumel[k]; i++) {
			uint32_t u =
				ulp_le32(c->optim.data + m->offset + 4 * i);
			ulp_put16(c->model.data + b->offset + 2 * i, rne(u));
		}
	}
	ulp_content_hash(ULP_HASH_TREE, c->model.data, c->model.size,
	                 c->model.hash);
}

/* Training moves fp32 masters by far more than the ULP walks of
 * tu_file_build: up to 2^20 ULPs here, which costs a delta more than the
 * 16 bits left given the bf16 copy. */
static void train_masters(ckpt *c, tu_rng *r)
{
	for (int k = 0; k < NT; k++) {
		char name[64];
		snprintf(name, sizeof(name), "master.%s", pname[k]);
		const ulp_tensor *m = tu_find(&c->optim.map, name);
		for (uint64_t i = 0; i < pnumel[k]; i++) {
			uint8_t *p = c->optim.data + m->offset + 4 * i;
			uint64_t o = tu_ord(ulp_le32(p), 32);
			uint64_t d = tu_below(r, 1u << 20);
			o = tu_chance(r, 1, 2) ? o + d : o - d;
			ulp_put32(p, (uint32_t)tu_unord(o, 32));
		}
	}
	ulp_content_hash(ULP_HASH_TREE, c->optim.data, c->optim.size,
	                 c->optim.hash);
}

/* A checkpoint; with prev, the next one of its trajectory. */
static void ckpt_make(ckpt *c, const ckpt *prev, tu_rng *r)
{
	tu_tspec ms[NT], os[3 * NT];
	static char names[3 * NT][64];
	/* safetensors sorts by name: h0.attn, h0.mlp, ln_f, wte */
	static const int by_name[NT] = { 1, 2, 3, 0 };
	for (int k = 0; k < NT; k++)
		ms[k] = (tu_tspec){ pname[by_name[k]], ULP_DT_BF16,
			            2 * pnumel[by_name[k]], 0 };
	for (int k = 0; k < NT; k++) {
		snprintf(names[2 * k], 64, "state.%d.exp_avg", k);
		snprintf(names[2 * k + 1], 64, "state.%d.exp_avg_sq", k);
		snprintf(names[2 * NT + k], 64, "master.%s", pname[k]);
		os[2 * k] = (tu_tspec){ names[2 * k], ULP_DT_F32, 4 * pnumel[k],
			                16 };
		os[2 * k + 1] = (tu_tspec){ names[2 * k + 1], ULP_DT_F32,
			                    4 * pnumel[k], 16 };
		os[2 * NT + k] = (tu_tspec){ names[2 * NT + k], ULP_DT_F32,
			                     4 * pnumel[k], 16 };
	}
	tu_file_build(&c->model, ms, NT, prev ? &prev->model : NULL, r, 0);
	tu_file_build(&c->optim, os, 3 * NT, prev ? &prev->optim : NULL, r, 0);
	if (prev)
		train_masters(c, r);
	masters_to_model(c);
}

static void ckpt_free(ckpt *c)
{
	tu_file_free(&c->model);
	tu_file_free(&c->optim);
}

static void find(const tu_file *cur, const tu_file *side, ulp_side_map *sm)
{
	tu_mem cm = tu_mem_of(cur->data, cur->size);
	tu_mem sdm = tu_mem_of(side->data, side->size);
	TU_OK(ulp_side_match_find(&cur->map, tu_mem_read, &cm, &side->map,
	                          tu_mem_read, &sdm, sm),
	      "match");
	TU_ASSERT(cm.oob == 0 && sdm.oob == 0, "matching read out of bounds");
}

/* The side offset matched with the optimizer tensor name, or ~0. */
static uint64_t matched(const ulp_side_map *sm, const tu_file *cur,
                        const char *name)
{
	const ulp_tensor *t = tu_find(&cur->map, name);
	cr_assert(t);
	for (size_t i = 0; i < sm->n; i++)
		if (sm->v[i].cur_off == t->offset) {
			TU_ASSERT(sm->v[i].len == t->nbytes, "match length");
			return sm->v[i].side_off;
		}
	return ~0ull;
}

static uint64_t model_off(const ckpt *c, const char *name)
{
	const ulp_tensor *t = tu_find(&c->model.map, name);
	cr_assert(t);
	return t->offset;
}

Test(side, masters_match_their_bf16_copies_whatever_the_order)
{
	tu_rng r;
	ckpt c;
	ulp_side_map sm;
	tu_rng_init(&r, 11);
	ckpt_make(&c, NULL, &r);
	find(&c.optim, &c.model, &sm);
	TU_ASSERT(sm.n == NT, "%zu matches, want %d", sm.n, NT);
	for (int k = 0; k < NT; k++) {
		char name[64];
		snprintf(name, sizeof(name), "master.%s", pname[k]);
		TU_ASSERT(matched(&sm, &c.optim, name) ==
		                  model_off(&c, pname[k]),
		          "%s matched elsewhere", name);
		TU_ASSERT(sm.v[k].xform == ULP_SIDE_WIDEN_BF16, "xform");
	}
	/* the moments, of the same shapes, match nothing */
	TU_ASSERT(matched(&sm, &c.optim, "state.0.exp_avg") == ~0ull, "m");
	TU_ASSERT(matched(&sm, &c.optim, "state.1.exp_avg_sq") == ~0ull, "v");
	ulp_side_map_free(&sm);
	TU_ASSERT(sm.n == 0 && sm.v == NULL, "freed map");
	ckpt_free(&c);
}

Test(side, mismatches_give_no_match_never_an_error)
{
	tu_rng r;
	ckpt c;
	ulp_side_map sm;
	tu_rng_init(&r, 12);
	ckpt_make(&c, NULL, &r);

	/* a bf16 copy that disagrees on a sampled element: not that one */
	const ulp_tensor *b = tu_find(&c.model.map, "h0.attn");
	c.model.data[b->offset] ^= 0x40;
	find(&c.optim, &c.model, &sm);
	TU_ASSERT(sm.n == NT - 1, "%zu matches", sm.n);
	TU_ASSERT(matched(&sm, &c.optim, "master.h0.attn") == ~0ull,
	          "h0.attn's master matched another tensor of its shape");
	TU_ASSERT(matched(&sm, &c.optim, "master.h0.mlp") == model_off(&c, "h0."
	                                                                   "ml"
	                                                                   "p"),
	          "its twin lost its match");
	ulp_side_map_free(&sm);
	c.model.data[b->offset] ^= 0x40;

	/* a model whose shapes differ: nothing */
	ckpt d;
	tu_rng_init(&r, 13);
	tu_tspec other[2] = { { "x", ULP_DT_BF16, 2 * 2999, 0 },
		              { "y", ULP_DT_BF16, 2 * 201, 0 } };
	tu_file_build(&d.model, other, 2, NULL, &r, 0);
	find(&c.optim, &d.model, &sm);
	TU_ASSERT(sm.n == 0 && sm.v == NULL, "%zu matches", sm.n);
	tu_file_free(&d.model);

	/* no maps, no readers: nothing, and no error */
	ulp_tensor_map empty = { ULP_FMT_UNKNOWN, 0, NULL };
	TU_OK(ulp_side_match_find(&c.optim.map, tu_mem_read, NULL, &empty,
	                          tu_mem_read, NULL, &sm),
	      "empty side");
	TU_ASSERT(sm.n == 0, "empty side matched");
	TU_OK(ulp_side_match_find(&c.optim.map, NULL, NULL, &c.model.map, NULL,
	                          NULL, &sm),
	      "no readers");
	TU_ASSERT(sm.n == 0, "no readers matched");

	/* unreadable side bytes: no match */
	tu_mem cm = tu_mem_of(c.optim.data, c.optim.size);
	tu_mem sdm = tu_mem_of(c.model.data, c.model.size);
	sdm.fail_lo = 0;
	sdm.fail_hi = c.model.size;
	sdm.fail_rc = ULP_ERR_IO;
	TU_OK(ulp_side_match_find(&c.optim.map, tu_mem_read, &cm, &c.model.map,
	                          tu_mem_read, &sdm, &sm),
	      "unreadable side");
	TU_ASSERT(sm.n == 0, "unreadable side matched");
	ckpt_free(&c);
}

Test(side, fp32_copies_match_as_they_are)
{
	tu_rng r;
	ckpt c;
	ulp_side_map sm;
	tu_rng_init(&r, 14);
	ckpt_make(&c, NULL, &r);
	/* an fp32 "model" file holding the masters themselves */
	tu_file f32;
	const ulp_tensor *m = tu_find(&c.optim.map, "master.h0.mlp");
	tu_tspec s[1] = { { "h0.mlp", ULP_DT_F32, m->nbytes, 0 } };
	tu_file_build(&f32, s, 1, NULL, &r, 0);
	memcpy(f32.data + f32.map.v[0].offset, c.optim.data + m->offset,
	       m->nbytes);
	find(&c.optim, &f32, &sm);
	TU_ASSERT(sm.n == 1, "%zu matches", sm.n);
	TU_ASSERT(sm.v[0].cur_off == m->offset &&
	                  sm.v[0].xform == ULP_SIDE_SAME,
	          "fp32 copy");
	ulp_side_map_free(&sm);
	tu_file_free(&f32);
	ckpt_free(&c);
}

/* ------------------------------------------------------------ codec */

typedef struct side_obj {
	tu_buf obj;
	ulp_stats st;
} side_obj;

/* Encode cur against ref (may be NULL) with side (may be NULL) matched
 * by ulp_side_match_find, or with the given map. */
static void encode_side(const tu_file *cur, const tu_file *ref,
                        const tu_file *side, const ulp_side_map *given,
                        uint32_t chunk, side_obj *out)
{
	tu_mem rm = ref ? tu_mem_of(ref->data, ref->size) : (tu_mem){ 0 };
	tu_mem sdm = side ? tu_mem_of(side->data, side->size) : (tu_mem){ 0 };
	ulp_side_map sm = { 0, NULL };
	tu_sink sink = { 0 };
	ulp_encode_job job = tu_job(cur, ref, &rm, 2);
	if (side && !given)
		find(cur, side, &sm);
	if (side) {
		job.side_hash = side->hash;
		job.side_size = side->size;
		job.side_map = given ? given : &sm;
		job.side_read = tu_mem_read;
		job.side_opaque = &sdm;
	}
	job.params.chunk_size = chunk;
	job.write = tu_sink_write;
	job.write_opaque = &sink;
	uint8_t hash[16];
	TU_OK(ulp_encode_file(&job, &out->st, hash, NULL), "encode");
	TU_ASSERT(memcmp(hash, cur->hash, 16) == 0, "hash");
	TU_ASSERT(rm.oob == 0 && sdm.oob == 0, "encoder read out of bounds");
	ulp_side_map_free(&sm);
	out->obj = sink.b;
}

/* Decode o against ref and side (claimed as side_hash, side_size): the
 * read's code; on ULP_OK the bytes equal want's. */
static int decode_side(const tu_buf *o, const tu_file *want, const tu_file *ref,
                       const tu_file *side, const uint8_t *side_hash,
                       uint64_t side_size)
{
	uint8_t *copy = tu_dup(o->p, o->len);
	tu_mem om = tu_mem_of(copy, o->len);
	tu_mem rm = ref ? tu_mem_of(ref->data, ref->size) : (tu_mem){ 0 };
	tu_mem sdm = side ? tu_mem_of(side->data, side->size) : (tu_mem){ 0 };
	ulp_object *obj = NULL;
	int rc = ulp_object_open(tu_mem_read, &om, o->len, &obj);
	if (rc) {
		free(copy);
		return rc;
	}
	ulp_refs refs = { 0 };
	if (ref) {
		refs.ref_read = tu_mem_read;
		refs.ref_opaque = &rm;
	}
	if (side) {
		refs.side_read = tu_mem_read;
		refs.side_opaque = &sdm;
		refs.side_hash = side_hash;
		refs.side_size = side_size;
	}
	ulp_dctx *d = ulp_dctx_new();
	uint64_t size = ulp_object_size(obj);
	uint8_t *out = tu_xmalloc(size ? size : 1);
	rc = ulp_object_read_refs(d, obj, 0, out, size, &refs);
	if (rc == ULP_OK) {
		TU_ASSERT(size == want->size, "size");
		TU_MEMEQ(out, want->data, size, "decoded with a side");
	}
	TU_ASSERT(om.oob == 0 && rm.oob == 0 && sdm.oob == 0, "decoder read "
	                                                      "out of bounds");
	free(out);
	ulp_dctx_free(d);
	ulp_object_close(obj);
	free(copy);
	return rc;
}

static size_t needs_side_chunks(const tu_buf *o)
{
	tu_mem om = tu_mem_of(o->p, o->len);
	ulp_object *obj = NULL;
	TU_OK(ulp_object_open(tu_mem_read, &om, o->len, &obj), "open");
	size_t n = 0;
	for (size_t i = 0; i < ulp_object_chunk_count(obj); i++)
		n += ulp_object_chunk_needs_side(obj, i);
	ulp_object_close(obj);
	return n;
}

Test(side, round_trips_standalone_and_against_a_reference)
{
	tu_rng r;
	ckpt a, b;
	tu_rng_init(&r, 21);
	ckpt_make(&a, NULL, &r);
	ckpt_make(&b, &a, &r);
	uint64_t masters = 0;
	for (int k = 0; k < NT; k++)
		masters += pnumel[k];

	for (int with_ref = 0; with_ref < 2; with_ref++) {
		const tu_file *ref = with_ref ? &a.optim : NULL;
		side_obj plain, side;
		encode_side(&b.optim, ref, NULL, NULL, ULP_CHUNK_SIZE_MIN,
		            &plain);
		encode_side(&b.optim, ref, &b.model, NULL, ULP_CHUNK_SIZE_MIN,
		            &side);
		TU_ASSERT(side.st.dt[ULP_DT_F32].side_elems == masters,
		          "%" PRIu64 " of %" PRIu64 " coded against the side",
		          side.st.dt[ULP_DT_F32].side_elems, masters);
		TU_ASSERT(side.obj.len < plain.obj.len,
		          "side %zu bytes, without %zu", side.obj.len,
		          plain.obj.len);
		TU_ASSERT(needs_side_chunks(&side.obj) > 0, "no chunk reads "
		                                            "the side");
		TU_ASSERT(side.st.chunks_side == needs_side_chunks(&side.obj),
		          "chunks_side %" PRIu64, side.st.chunks_side);
		TU_ASSERT(needs_side_chunks(&plain.obj) == 0, "plain object "
		                                              "reads a side");
		TU_OK(decode_side(&side.obj, &b.optim, ref, &b.model,
		                  b.model.hash, b.model.size),
		      "round trip");
		TU_OK(decode_side(&plain.obj, &b.optim, ref, NULL, NULL, 0),
		      "plain round trip");

		/* the object names the side it was coded against */
		tu_mem om = tu_mem_of(side.obj.p, side.obj.len);
		ulp_object *obj = NULL;
		TU_OK(ulp_object_open(tu_mem_read, &om, side.obj.len, &obj),
		      "open");
		TU_ASSERT(ulp_object_has_side(obj), "has_side");
		TU_ASSERT(ulp_object_side_size(obj) == b.model.size, "size");
		TU_ASSERT(memcmp(ulp_object_side_hash(obj), b.model.hash, 16) ==
		                  0,
		          "side hash");
		TU_ASSERT(ulp_object_has_ref(obj) == with_ref, "has_ref");
		ulp_object_close(obj);
		tu_buf_free(&plain.obj);
		tu_buf_free(&side.obj);
	}
	ckpt_free(&a);
	ckpt_free(&b);
}

Test(side, a_wrong_or_missing_side_is_refused_by_name)
{
	tu_rng r;
	ckpt a, b;
	side_obj s;
	tu_rng_init(&r, 22);
	ckpt_make(&a, NULL, &r);
	ckpt_make(&b, &a, &r);
	encode_side(&b.optim, NULL, &b.model, NULL, ULP_CHUNK_SIZE_MIN, &s);

	TU_RC(decode_side(&s.obj, &b.optim, NULL, NULL, NULL, 0), ULP_ERR_SIDE,
	      "no side given");
	/* another version of the model file: its hash and size */
	TU_RC(decode_side(&s.obj, &b.optim, NULL, &a.model, a.model.hash,
	                  a.model.size),
	      ULP_ERR_SIDE, "the previous model version");
	TU_RC(decode_side(&s.obj, &b.optim, NULL, &b.model, b.model.hash,
	                  b.model.size + 1),
	      ULP_ERR_SIDE, "wrong size claimed");
	uint8_t h[16];
	memcpy(h, b.model.hash, 16);
	h[3] ^= 1;
	TU_RC(decode_side(&s.obj, &b.optim, NULL, &b.model, h, b.model.size),
	      ULP_ERR_SIDE, "wrong hash claimed");
	/* bytes that lie about their hash decode wrong: the chunk checksum
	 * catches them */
	TU_RC(decode_side(&s.obj, &b.optim, NULL, &a.model, b.model.hash,
	                  b.model.size),
	      ULP_ERR_CORRUPT, "other bytes under the right name");
	TU_ASSERT(strstr(ulp_strerror(ULP_ERR_SIDE), "side") != NULL,
	          "message: %s", ulp_strerror(ULP_ERR_SIDE));
	tu_buf_free(&s.obj);
	ckpt_free(&a);
	ckpt_free(&b);
}

Test(side, the_reference_wins_where_it_codes_smaller)
{
	tu_rng r;
	ckpt a;
	side_obj s;
	tu_rng_init(&r, 23);
	ckpt_make(&a, NULL, &r);
	/* coded against itself: identical beats 16 bits a weight */
	encode_side(&a.optim, &a.optim, &a.model, NULL, ULP_CHUNK_SIZE_MIN, &s);
	TU_ASSERT(s.st.dt[ULP_DT_F32].side_elems == 0, "side chosen over "
	                                               "identical");
	TU_ASSERT(needs_side_chunks(&s.obj) == 0, "a chunk reads the side");
	TU_ASSERT(s.st.chunks_side == 0, "chunks_side %" PRIu64,
	          s.st.chunks_side);
	TU_OK(decode_side(&s.obj, &a.optim, &a.optim, NULL, NULL, 0), "decodes "
	                                                              "without "
	                                                              "the "
	                                                              "side");
	tu_buf_free(&s.obj);
	ckpt_free(&a);
}

Test(side, forged_side_maps_only_cost_the_context)
{
	tu_rng r;
	ckpt a;
	side_obj s;
	tu_rng_init(&r, 24);
	ckpt_make(&a, NULL, &r);
	const ulp_tensor *m = tu_find(&a.optim.map, "master.wte");
	const ulp_tensor *m2 = tu_find(&a.optim.map, "master.h0.attn");
	const ulp_tensor *e = tu_find(&a.optim.map, "state.3.exp_avg");
	ulp_side_match v[4] = {
		/* past the side's end */
		{ m->offset, m->nbytes, a.model.size - 10, ULP_SIDE_WIDEN_BF16,
		  ULP_DT_F32 },
		/* a length that is not the tensor's */
		{ m2->offset, m2->nbytes - 4, 0, ULP_SIDE_WIDEN_BF16,
		  ULP_DT_F32 },
		/* an unknown transform */
		{ e->offset, e->nbytes, 0, 7, ULP_DT_F32 },
	};
	ulp_side_map bad = { 3, v };
	encode_side(&a.optim, NULL, &a.model, &bad, ULP_CHUNK_SIZE_MIN, &s);
	TU_ASSERT(s.st.dt[ULP_DT_F32].side_elems == 0, "forged match used");
	TU_OK(decode_side(&s.obj, &a.optim, NULL, NULL, NULL, 0), "decode");
	tu_buf_free(&s.obj);

	/* a match onto the wrong side tensor is still lossless */
	const ulp_tensor *w = tu_find(&a.model.map, "ln_f");
	ulp_side_match wrong = {
		tu_find(&a.optim.map, "state.3.exp_avg")->offset, 4 * pnumel[3],
		w->offset, ULP_SIDE_WIDEN_BF16, ULP_DT_F32
	};
	ulp_side_map wm = { 1, &wrong };
	encode_side(&a.optim, NULL, &a.model, &wm, ULP_CHUNK_SIZE_MIN, &s);
	TU_OK(decode_side(&s.obj, &a.optim, NULL, &a.model, a.model.hash,
	                  a.model.size),
	      "decode");
	tu_buf_free(&s.obj);
	ckpt_free(&a);
}

Test(side, every_single_byte_corruption_is_detected)
{
	tu_rng r;
	ckpt a, b;
	side_obj s;
	tu_rng_init(&r, 25);
	ckpt_make(&a, NULL, &r);
	ckpt_make(&b, &a, &r);
	encode_side(&b.optim, &a.optim, &b.model, NULL, ULP_CHUNK_SIZE_MIN, &s);
	TU_ASSERT(needs_side_chunks(&s.obj) > 0, "no side chunk");
	TU_OK(decode_side(&s.obj, &b.optim, &a.optim, &b.model, b.model.hash,
	                  b.model.size),
	      "control");
	const uint64_t idx =
		ulp_le64(s.obj.p + s.obj.len - ULP_OBJ_TRAILER_SIZE + 16);
	const size_t payload = ULP_OBJ_HEADER_SIZE + ULP_OBJ_SIDE_SIZE;
	tu_buf c = { 0 };
	static const uint8_t masks[] = { 0x01, 0x80 };
	for (size_t pos = 0; pos < s.obj.len; pos++)
		for (size_t k = 0; k < 2; k++) {
			if (pos >= payload && pos < idx &&
			    pos % TU_SWEEP_STRIDE)
				continue;
			c.len = 0;
			tu_buf_put(&c, s.obj.p, s.obj.len);
			c.p[pos] ^= masks[k];
			int rc = decode_side(&c, &b.optim, &a.optim, &b.model,
			                     b.model.hash, b.model.size);
			TU_ASSERT(rc == ULP_ERR_CORRUPT ||
			                  (pos < ULP_OBJ_HEADER_SIZE &&
			                   rc == ULP_ERR_VERSION),
			          "byte %zu ^ %02x (%s): rc %d (%s)", pos,
			          masks[k],
			          pos < ULP_OBJ_HEADER_SIZE ? "header"
			          : pos < payload           ? "side section"
			          : pos < idx               ? "payload"
			                                    : "index/trailer",
			          rc, ulp_strerror(rc));
		}
	tu_buf_free(&c);
	tu_buf_free(&s.obj);
	ckpt_free(&a);
	ckpt_free(&b);
}

Test(side, decoders_refuse_flags_they_do_not_know)
{
	/* What a decoder from before side files does with such an object:
	 * its header check admits only HAS_REF; this one admits HAS_SIDE and
	 * FLAT_HASH, and no other bit. */
	tu_rng r;
	ckpt a;
	side_obj s;
	tu_rng_init(&r, 26);
	ckpt_make(&a, NULL, &r);
	encode_side(&a.optim, NULL, &a.model, NULL, ULP_CHUNK_SIZE_MIN, &s);
	TU_ASSERT(ulp_le16(s.obj.p + 10) == ULP_OBJ_FLAG_HAS_SIDE, "flags");
	ulp_put16(s.obj.p + 10, ULP_OBJ_FLAG_HAS_SIDE | 8);
	ulp_put64(s.obj.p + 40, XXH3_64bits(s.obj.p, 40));
	TU_RC(decode_side(&s.obj, &a.optim, NULL, &a.model, a.model.hash,
	                  a.model.size),
	      ULP_ERR_VERSION, "unknown flag");
	tu_buf_free(&s.obj);
	ckpt_free(&a);
}
