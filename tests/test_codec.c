/*
 * test_codec.c - unit tests of the public codec API of libulp: plans,
 * chunk encoding and decoding, ulp_encode_file() and reading objects.
 *
 * The inputs are synthetic safetensors-like files with hand-built tensor
 * maps (tests/test_util.h): every float dtype, odd element counts, an I64
 * tensor, a zero-size tensor, tensors whose size is not a multiple of the
 * element size and junk between tensors.  Version 2 of a file walks its
 * floats by a few ULPs, drops a tensor, adds one, moves one and rewrites
 * the header; version 3 does it again and shrinks the file.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <xxhash.h>
#include <zstd.h>

#include "codec_internal.h"
#include "test_util.h"

/* ------------------------------------------------------------ inputs */

#define K(n) ((n) * (uint64_t)k)

static size_t specs_v1(tu_tspec *s, uint64_t k)
{
	size_t n = 0;
	s[n++] = (tu_tspec){ "embed.weight", ULP_DT_BF16, K(2 * 3001), 0 };
	s[n++] = (tu_tspec){ "layer0.q", ULP_DT_F32, K(4 * 2049), 13 };
	s[n++] = (tu_tspec){ "layer0.k", ULP_DT_F16, K(2 * 1023), 0 };
	s[n++] = (tu_tspec){ "layer0.norm", ULP_DT_F64, K(8 * 257), 7 };
	s[n++] = (tu_tspec){ "f8a", ULP_DT_F8E4M3, K(3001), 0 };
	s[n++] = (tu_tspec){ "f8b", ULP_DT_F8E5M2, K(2999), 5 };
	s[n++] = (tu_tspec){ "removed", ULP_DT_F16, K(2 * 500), 0 };
	s[n++] = (tu_tspec){ "steps", ULP_DT_GENERIC, K(8 * 33), 0 };
	s[n++] = (tu_tspec){ "empty", ULP_DT_F32, 0, 3 };
	s[n++] = (tu_tspec){ "odd", ULP_DT_F32, K(4 * 100) + 3, 0 };
	s[n++] = (tu_tspec){ "tail.bf16", ULP_DT_BF16, K(2 * 777) + 1, 1 };
	s[n++] = (tu_tspec){ "moved", ULP_DT_F32, K(4 * 1500), 11 };
	return n;
}

/* v2: "moved" first, "removed" gone, "added" new. */
static size_t specs_v2(tu_tspec *s, uint64_t k)
{
	size_t n = 0;
	s[n++] = (tu_tspec){ "moved", ULP_DT_F32, K(4 * 1500), 0 };
	s[n++] = (tu_tspec){ "embed.weight", ULP_DT_BF16, K(2 * 3001), 0 };
	s[n++] = (tu_tspec){ "layer0.q", ULP_DT_F32, K(4 * 2049), 13 };
	s[n++] = (tu_tspec){ "added", ULP_DT_F32, K(4 * 2400), 2 };
	s[n++] = (tu_tspec){ "layer0.k", ULP_DT_F16, K(2 * 1023), 0 };
	s[n++] = (tu_tspec){ "layer0.norm", ULP_DT_F64, K(8 * 257), 7 };
	s[n++] = (tu_tspec){ "f8a", ULP_DT_F8E4M3, K(3001), 0 };
	s[n++] = (tu_tspec){ "f8b", ULP_DT_F8E5M2, K(2999), 5 };
	s[n++] = (tu_tspec){ "steps", ULP_DT_GENERIC, K(8 * 33), 0 };
	s[n++] = (tu_tspec){ "empty", ULP_DT_F32, 0, 3 };
	s[n++] = (tu_tspec){ "odd", ULP_DT_F32, K(4 * 100) + 3, 0 };
	s[n++] = (tu_tspec){ "tail.bf16", ULP_DT_BF16, K(2 * 777) + 1, 1 };
	return n;
}

/* v3: smaller, "layer0.q" gone, "embed.weight" last. */
static size_t specs_v3(tu_tspec *s, uint64_t k)
{
	size_t n = 0;
	s[n++] = (tu_tspec){ "moved", ULP_DT_F32, K(4 * 1500), 0 };
	s[n++] = (tu_tspec){ "added", ULP_DT_F32, K(4 * 2400), 9 };
	s[n++] = (tu_tspec){ "layer0.k", ULP_DT_F16, K(2 * 1023), 0 };
	s[n++] = (tu_tspec){ "layer0.norm", ULP_DT_F64, K(8 * 257), 7 };
	s[n++] = (tu_tspec){ "f8a", ULP_DT_F8E4M3, K(3001), 0 };
	s[n++] = (tu_tspec){ "f8b", ULP_DT_F8E5M2, K(2999), 5 };
	s[n++] = (tu_tspec){ "steps", ULP_DT_GENERIC, K(8 * 33), 0 };
	s[n++] = (tu_tspec){ "empty", ULP_DT_F32, 0, 3 };
	s[n++] = (tu_tspec){ "odd", ULP_DT_F32, K(4 * 100) + 3, 0 };
	s[n++] = (tu_tspec){ "tail.bf16", ULP_DT_BF16, K(2 * 777) + 1, 1 };
	s[n++] = (tu_tspec){ "embed.weight", ULP_DT_BF16, K(2 * 3001), 4 };
	return n;
}

static void build_versions(tu_file v[3], uint64_t k, uint64_t seed)
{
	tu_tspec s[16];
	tu_rng r;
	tu_rng_init(&r, seed);
	tu_file_build(&v[0], s, specs_v1(s, k), NULL, &r, 10);
	tu_file_build(&v[1], s, specs_v2(s, k), &v[0], &r, 3);
	tu_file_build(&v[2], s, specs_v3(s, k), &v[1], &r, 17);
	cr_assert(v[2].size < v[1].size, "v3 should be smaller than v2");
}

static void free_versions(tu_file v[3])
{
	for (int i = 0; i < 3; i++)
		tu_file_free(&v[i]);
}

static ulp_object *open_buf(const tu_buf *o, tu_mem *m)
{
	ulp_object *obj = NULL;
	*m = tu_mem_of(o->p, o->len);
	TU_OK(ulp_object_open(tu_mem_read, m, o->len, &obj), "open");
	return obj;
}

static ulp_plan *plan_for(const tu_file *cur, const tu_file *ref,
                          uint32_t chunk_size)
{
	static const ulp_tensor_map none = { ULP_FMT_UNKNOWN, 0, NULL };
	ulp_params p = { 0 };
	ulp_plan *pl = NULL;
	p.chunk_size = chunk_size;
	TU_OK(ulp_plan_build(cur->map.n ? &cur->map : NULL, cur->size,
	                     ref ? (ref->map.n ? &ref->map : &none) : NULL,
	                     ref ? ref->size : 0, &p, &pl),
	      "plan");
	return pl;
}

/* Object-level invariants: chunk table agrees with the plan, stored sizes
 * add up to the object size, chunk_at is consistent. */
static void check_layout(const tu_buf *o, const tu_file *cur,
                         const tu_file *ref, uint32_t chunk_size)
{
	tu_mem m;
	ulp_object *obj = open_buf(o, &m);
	ulp_plan *pl = plan_for(cur, ref, chunk_size);
	size_t n = ulp_object_chunk_count(obj);
	TU_ASSERT(n == ulp_plan_chunk_count(pl), "%zu chunks, plan has %zu", n,
	          ulp_plan_chunk_count(pl));
	TU_ASSERT(ulp_plan_size(pl) == cur->size, "plan size");
	uint64_t stored = 0, next = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t off, poff;
		uint32_t len, plen;
		ulp_object_chunk_range(obj, i, &off, &len);
		ulp_plan_chunk_range(pl, i, &poff, &plen);
		TU_ASSERT(off == poff && len == plen && off == next && len > 0,
		          "chunk %zu: [%" PRIu64 ", +%u) plan [%" PRIu64 ", "
		          "+%u)",
		          i, off, len, poff, plen);
		TU_ASSERT(ulp_object_chunk_at(obj, off) == i &&
		                  ulp_object_chunk_at(obj, off + len - 1) == i,
		          "chunk_at around chunk %zu", i);
		if (!ref)
			TU_ASSERT(!ulp_object_chunk_needs_ref(obj, i),
			          "standalone object, chunk %zu needs ref", i);
		stored += ulp_object_chunk_stored(obj, i);
		next = off + len;
	}
	TU_ASSERT(next == cur->size, "chunks cover %" PRIu64 " bytes", next);
	TU_ASSERT(stored + ULP_OBJ_HEADER_SIZE + ULP_OBJ_INDEX_ENTRY * n +
	                          ULP_OBJ_TRAILER_SIZE ==
	                  o->len,
	          "stored bytes %" PRIu64 " do not add up to %zu", stored,
	          o->len);
	ulp_plan_free(pl);
	ulp_object_close(obj);
}

/* --------------------------------------------------- round trips */

static void versions_roundtrip(uint32_t chunk_size, uint64_t k, uint64_t seed)
{
	tu_file v[3];
	tu_buf o[3];
	ulp_stats st[3];
	build_versions(v, k, seed);
	tu_encode_ok(&v[0], NULL, chunk_size, 2, &o[0], &st[0]);
	tu_encode_ok(&v[1], &v[0], chunk_size, 2, &o[1], &st[1]);
	tu_encode_ok(&v[2], &v[1], chunk_size, 2, &o[2], &st[2]);
	for (int i = 0; i < 3; i++) {
		tu_check_object(o[i].p, o[i].len, &v[i], i ? &v[i - 1] : NULL);
		check_layout(&o[i], &v[i], i ? &v[i - 1] : NULL, chunk_size);
	}
	/* the deltas are much smaller than the standalone object */
	TU_ASSERT(o[1].len * 2 < o[0].len && o[2].len * 2 < o[0].len,
	          "chunk %u: objects %zu, %zu, %zu bytes", chunk_size, o[0].len,
	          o[1].len, o[2].len);
	TU_ASSERT(st[0].chunks_delta == 0 && st[1].chunks_delta > 0 &&
	                  st[2].chunks_delta > 0,
	          "chunks_delta %" PRIu64 " %" PRIu64 " %" PRIu64,
	          st[0].chunks_delta, st[1].chunks_delta, st[2].chunks_delta);
	for (int i = 0; i < 3; i++) {
		tu_mem m;
		ulp_object *obj = open_buf(&o[i], &m);
		uint64_t nch = ulp_object_chunk_count(obj);
		TU_ASSERT(st[i].chunks_copy + st[i].chunks_delta +
		                          st[i].chunks_standalone ==
		                  nch,
		          "v%d: chunk kinds do not add up to %" PRIu64, i + 1,
		          nch);
		uint64_t in = 0;
		for (int d = 0; d < ULP_DT_COUNT; d++)
			in += st[i].dt[d].bytes_in;
		TU_ASSERT(in == v[i].size,
		          "v%d: bytes_in %" PRIu64 " of %" PRIu64, i + 1, in,
		          v[i].size);
		int any_ref = 0;
		for (size_t c = 0; c < nch; c++)
			any_ref |= ulp_object_chunk_needs_ref(obj, c);
		TU_ASSERT(any_ref == (i > 0), "v%d: needs_ref %d", i + 1,
		          any_ref);
		ulp_object_close(obj);
		tu_buf_free(&o[i]);
	}
	free_versions(v);
}

/* A large piece shorter than its bound keeps its place: its length is a
 * varint padded to the gap, which reads back as the length; a small one
 * moves behind the shortest varint, and one past its bound behind a
 * longer one. */
Test(codec, length_gaps_pad_or_move)
{
	const uint64_t bounds[] = { 0, 1, 127, 128, (1u << 21) + 5, 1u << 28 };
	const size_t lens[] = { 0,    1,     100,   127,     128,
		                4000, 65535, 65536, 1u << 20 };
	for (size_t b = 0; b < sizeof(bounds) / sizeof(*bounds); b++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(*lens); l++) {
			ulp_buf out = { 0 };
			cr_assert_eq(ulp_buf_reserve(&out, 3), ULP_OK);
			memcpy(out.p, "abc", 3);
			out.len = 3;
			size_t gap = ulp_buf_open_gap(&out, bounds[b]);
			uint8_t vi[ULP_VARINT_MAX];
			cr_assert_eq(gap, ulp_varint_put(vi, bounds[b]));
			cr_assert_eq(ulp_buf_reserve(&out, out.len + lens[l]),
			             ULP_OK);
			for (size_t i = 0; i < lens[l]; i++)
				out.p[out.len + i] = (uint8_t)(i * 7 + l);
			out.len += lens[l];
			cr_assert_eq(ulp_buf_close_gap(&out, 3, gap), ULP_OK);
			size_t vn = ulp_varint_put(vi, lens[l]);
			size_t want = vn < gap && lens[l] >= ULP_GAP_PAD_MIN
			                      ? gap
			                      : vn;
			cr_assert_eq(out.len, 3 + want + lens[l],
			             "bound %zu len %zu", b, l);
			const uint8_t *p = out.p + 3;
			uint64_t v;
			cr_assert_eq(ulp_varint_get(&p, out.p + out.len, &v),
			             ULP_OK);
			cr_assert_eq(v, lens[l]);
			cr_assert_eq((size_t)(p - out.p), 3 + want);
			cr_assert_eq(memcmp(out.p, "abc", 3), 0);
			for (size_t i = 0; i < lens[l]; i++)
				cr_assert_eq(p[i], (uint8_t)(i * 7 + l));
			ulp_buf_free(&out);
		}
	}
}

Test(codec, versions_default_chunks)
{
	versions_roundtrip(0, 1, 0xc0dec001ull);
}

Test(codec, versions_min_chunks)
{
	versions_roundtrip(ULP_CHUNK_SIZE_MIN, 1, 0xc0dec002ull);
}

Test(codec, versions_chunks_4099)
{
	versions_roundtrip(4099, 1, 0xc0dec003ull);
}

Test(codec, versions_chunks_65537)
{
	versions_roundtrip(65537, 6, 0xc0dec004ull);
}

/* Whole float elements of each dtype in a file, and those of them whose
 * tensor has a match (same name and size) in ref. */
static void float_elems(const tu_file *cur, const tu_file *ref,
                        uint64_t all[ULP_DT_COUNT],
                        uint64_t matched[ULP_DT_COUNT])
{
	memset(all, 0, sizeof(uint64_t) * ULP_DT_COUNT);
	memset(matched, 0, sizeof(uint64_t) * ULP_DT_COUNT);
	for (size_t i = 0; i < cur->map.n; i++) {
		const ulp_tensor *t = &cur->map.v[i];
		if (t->dtype == ULP_DT_GENERIC)
			continue;
		uint64_t e = t->nbytes / ulp_dtype_size(t->dtype);
		all[t->dtype] += e;
		const ulp_tensor *m = ref ? tu_find(&ref->map, t->name) : NULL;
		if (m && m->nbytes == t->nbytes)
			matched[t->dtype] += e;
	}
}

Test(codec, stats_follow_tensor_matching)
{
	/* One chunk: every matched tensor is delta coded, every unmatched
	 * one ("added") standalone; the stats count exactly those. */
	tu_file v[3];
	tu_buf o;
	ulp_stats st;
	build_versions(v, 1, 0xc0dec010ull);
	tu_encode_ok(&v[1], &v[0], 0, 1, &o, &st);
	uint64_t all[ULP_DT_COUNT], matched[ULP_DT_COUNT], fbytes = 0;
	float_elems(&v[1], &v[0], all, matched);
	for (int d = 1; d < ULP_DT_COUNT; d++) {
		TU_ASSERT(st.dt[d].elems == all[d] &&
		                  st.dt[d].delta_elems == matched[d],
		          "%s: elems %" PRIu64 "/%" PRIu64 " delta %" PRIu64
		          "/%" PRIu64,
		          ulp_dtype_name(d), st.dt[d].elems, all[d],
		          st.dt[d].delta_elems, matched[d]);
		TU_ASSERT(st.dt[d].ref_elems == matched[d],
		          "%s: ref_elems %" PRIu64 ", %" PRIu64 " matched",
		          ulp_dtype_name(d), st.dt[d].ref_elems, matched[d]);
		TU_ASSERT(st.dt[d].bytes_in == all[d] * ulp_dtype_size(d),
		          "%s: bytes_in", ulp_dtype_name(d));
		TU_ASSERT(all[d] == 0 || st.dt[d].model_bits > 0,
		          "%s: model_bits", ulp_dtype_name(d));
		TU_ASSERT(st.dt[d].delta_noctx_bits == 0 &&
		                  st.dt[d].delta_ctx_bits == 0 &&
		                  st.dt[d].delta_prevk_bits == 0,
		          "alternative models computed without model_stats");
		fbytes += st.dt[d].bytes_in;
	}
	TU_ASSERT(all[ULP_DT_F32] > matched[ULP_DT_F32], "an F32 tensor added");
	TU_ASSERT(st.dt[0].bytes_in == v[1].size - fbytes, "generic bytes_in");
	TU_ASSERT(st.chunks_delta == 1, "chunks_delta %" PRIu64,
	          st.chunks_delta);
	tu_buf_free(&o);

	/* model_stats: the alternative entropies are filled in */
	tu_sink sink = { 0 };
	tu_mem rm = tu_mem_of(v[0].data, v[0].size);
	ulp_encode_job job;
	memset(&job, 0, sizeof(job));
	job.cur = v[1].data;
	job.cur_size = v[1].size;
	job.cur_map = &v[1].map;
	job.has_ref = 1;
	job.ref_size = v[0].size;
	job.ref_map = &v[0].map;
	job.ref_hash = v[0].hash;
	job.ref_read = tu_mem_read;
	job.ref_opaque = &rm;
	job.params.model_stats = 1;
	job.nthreads = 1;
	job.write = tu_sink_write;
	job.write_opaque = &sink;
	TU_OK(ulp_encode_file(&job, &st, NULL, NULL), "model_stats encode");
	for (int d = 1; d < ULP_DT_COUNT; d++) {
		const ulp_dtype_stats *x = &st.dt[d];
		double eps = 1e-6 * x->delta_noctx_bits + 1e-6;
		TU_ASSERT(x->delta_noctx_bits > 0 && x->delta_ctx_bits > 0 &&
		                  x->delta_prevk_bits > 0,
		          "%s: alternative model entropies missing",
		          ulp_dtype_name(d));
		TU_ASSERT(x->delta_prevk_bits <= x->delta_ctx_bits + eps &&
		                  x->delta_ctx_bits <=
		                          x->delta_noctx_bits + eps,
		          "%s: entropies prev-k %.0f ctx %.0f no-ctx %.0f",
		          ulp_dtype_name(d), x->delta_prevk_bits,
		          x->delta_ctx_bits, x->delta_noctx_bits);
	}
	tu_check_object(sink.b.p, sink.b.len, &v[1], &v[0]);
	tu_buf_free(&sink.b);
	free_versions(v);
}

/* Plan structure: runs tile every chunk, float runs are whole elements,
 * matched tensors point at their reference tensor (by name, wherever it
 * moved), unmatched ones have no reference, generic runs use the
 * reference bytes at the same offset. */
static void check_plan(const tu_file *cur, const tu_file *ref,
                       uint32_t chunk_size)
{
	ulp_plan *pl = plan_for(cur, ref, chunk_size);
	ulp_params rp;
	ulp_params in = { 0 };
	in.chunk_size = chunk_size;
	ulp_params_resolve(&in, &rp);
	uint64_t pos = 0;
	TU_ASSERT(pl->has_ref == (ref != NULL), "has_ref");
	for (size_t c = 0; c < pl->nchunks; c++) {
		const ulp_chunk_plan *ch = &pl->chunks[c];
		TU_ASSERT(ch->off == pos && ch->len > 0 &&
		                  ch->len <= rp.chunk_size && ch->nruns > 0,
		          "chunk %zu: off %" PRIu64 " len %u (size %u)", c,
		          ch->off, ch->len, rp.chunk_size);
		uint64_t sum = 0;
		for (uint32_t k = 0; k < ch->nruns; k++) {
			const ulp_run *r = &pl->runs[ch->first_run + k];
			uint64_t at = pos + sum;
			TU_ASSERT(r->len > 0, "empty run");
			const ulp_tensor *t = NULL;
			for (size_t i = 0; i < cur->map.n; i++)
				if (at >= cur->map.v[i].offset &&
				    at < cur->map.v[i].offset +
				                    cur->map.v[i].nbytes)
					t = &cur->map.v[i];
			if (r->dtype != ULP_DT_GENERIC) {
				unsigned w = ulp_dtype_size(r->dtype);
				TU_ASSERT(t && t->dtype == r->dtype,
				          "float run at %" PRIu64 " outside a "
				          "tensor of "
				          "its type",
				          at);
				uint64_t whole = t->nbytes / w * w;
				TU_ASSERT(r->len % w == 0 &&
				                  (at - t->offset) % w == 0 &&
				                  at + r->len <=
				                          t->offset + whole,
				          "float run [%" PRIu64 ", +%" PRIu64
				          ") of %s not whole elements",
				          at, r->len, t->name);
				const ulp_tensor *m =
					ref ? tu_find(&ref->map, t->name)
					    : NULL;
				if (m && m->nbytes != t->nbytes)
					m = NULL;
				TU_ASSERT(r->has_ref == (m != NULL),
				          "run of %s: has_ref %d", t->name,
				          r->has_ref);
				if (m)
					TU_ASSERT(r->ref_off - m->offset ==
					                  at - t->offset,
					          "run of %s points at ref "
					          "%" PRIu64 ", tensor at "
					          "%" PRIu64,
					          t->name, r->ref_off,
					          m->offset);
			} else {
				/* gaps and headers: the reference bytes at the
				 * same offset; bytes of a tensor (I64, odd
				 * tails): behind its matched tensor, else at
				 * the same offset */
				uint64_t exp = at;
				if (t) {
					const ulp_tensor *m =
						ref ? tu_find(&ref->map,
					                      t->name)
						    : NULL;
					if (m && m->nbytes != t->nbytes)
						m = NULL;
					exp = (m ? m->offset : t->offset) +
					      (at - t->offset);
				}
				int want = ref && exp < ref->size;
				TU_ASSERT(r->has_ref == want,
				          "generic run at %" PRIu64 ": has_ref "
				          "%d, want "
				          "%d",
				          at, r->has_ref, want);
				if (want)
					TU_ASSERT(r->ref_off == exp,
					          "generic run at %" PRIu64
					          " coded against %" PRIu64
					          ", want %" PRIu64,
					          at, r->ref_off, exp);
			}
			sum += r->len;
		}
		TU_ASSERT(sum == ch->len,
		          "runs of chunk %zu cover %" PRIu64 " of %u bytes", c,
		          sum, ch->len);
		pos += ch->len;
	}
	TU_ASSERT(pos == cur->size, "plan covers %" PRIu64 " bytes", pos);
	ulp_plan_free(pl);
}

Test(codec, plan_invariants)
{
	static const uint32_t sizes[] = { 0,    100,  ULP_CHUNK_SIZE_MIN,
		                          4099, 4104, 65537 };
	tu_file v[3];
	build_versions(v, 3, 0xc0dec011ull);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		check_plan(&v[0], NULL, sizes[i]);
		check_plan(&v[1], &v[0], sizes[i]);
		check_plan(&v[2], &v[1], sizes[i]);
		/* a reference without tensors: generic against generic */
		tu_file raw;
		tu_file_raw(&raw, v[0].data, v[0].size);
		check_plan(&v[1], &raw, sizes[i]);
		tu_file_free(&raw);
	}
	/* chunk sizes are clamped to [MIN, MAX] */
	ulp_plan *a = plan_for(&v[1], &v[0], 1);
	ulp_plan *b = plan_for(&v[1], &v[0], ULP_CHUNK_SIZE_MIN);
	TU_ASSERT(a->params.chunk_size == ULP_CHUNK_SIZE_MIN &&
	                  a->nchunks == b->nchunks,
	          "chunk size below the minimum");
	ulp_plan_free(a);
	ulp_plan_free(b);
	a = plan_for(&v[1], &v[0], UINT32_MAX);
	TU_ASSERT(a->params.chunk_size == ULP_CHUNK_SIZE_MAX && a->nchunks == 1,
	          "chunk size above the maximum");
	ulp_plan_free(a);
	a = plan_for(&v[1], &v[0], 0);
	TU_ASSERT(a->params.chunk_size == ULP_CHUNK_SIZE_DEFAULT, "default");
	ulp_plan_free(a);
	free_versions(v);
}

Test(codec, matching_needs_name_dtype_shape_and_size)
{
	/* Four tensors of 1000 F32 elements.  The reference holds tensors of
	 * the same names: A equal, B with another dtype, C with another
	 * shape, D with the same shape but another byte size (an
	 * inconsistent map: reading it as a match would run past the
	 * reference).  Only A may be delta coded. */
	tu_tspec s[4];
	tu_rng r;
	tu_rng_init(&r, 0xc0dec013ull);
	s[0] = (tu_tspec){ "A", ULP_DT_F32, 4000, 0 };
	s[1] = (tu_tspec){ "B", ULP_DT_BF16, 4000, 0 };
	s[2] = (tu_tspec){ "C", ULP_DT_F32, 4000, 0 };
	s[3] = (tu_tspec){ "D", ULP_DT_F32, 400, 0 };
	tu_file ref, cur;
	tu_file_build(&ref, s, 4, NULL, &r, 0);
	ref.map.v[1].shape[0] = 1000;  /* B: only the dtype differs */
	ulp_tensor *c = &ref.map.v[2]; /* C: shape [10, 100] */
	free(c->shape);
	c->shape = tu_xmalloc(2 * sizeof(uint64_t));
	c->ndim = 2;
	c->shape[0] = 10;
	c->shape[1] = 100;
	ref.map.v[3].shape[0] = 1000; /* D: 400 bytes, shape [1000] */
	s[1] = (tu_tspec){ "B", ULP_DT_F32, 4000, 0 };
	s[3] = (tu_tspec){ "D", ULP_DT_F32, 4000, 0 };
	/* cur's A, B, C walk from the reference's bytes (same sizes), so a
	 * wrong match would not even be costly */
	tu_file_build(&cur, s, 4, &ref, &r, 0);
	ulp_plan *pl = plan_for(&cur, &ref, 0);
	size_t fruns = 0;
	for (size_t i = 0; i < pl->nruns; i++) {
		const ulp_run *run = &pl->runs[i];
		if (run->dtype != ULP_DT_F32)
			continue;
		fruns++;
		int isA = run->ref_off == ref.map.v[0].offset;
		TU_ASSERT(run->has_ref == (fruns == 1) &&
		                  (!run->has_ref || isA),
		          "F32 run %zu: has_ref %d ref_off %" PRIu64, fruns,
		          run->has_ref, run->ref_off);
	}
	TU_ASSERT(fruns == 4, "%zu F32 runs", fruns);
	ulp_plan_free(pl);
	tu_buf o;
	ulp_stats st;
	tu_encode_ok(&cur, &ref, 0, 1, &o, &st);
	TU_ASSERT(st.dt[ULP_DT_F32].delta_elems == 1000 &&
	                  st.dt[ULP_DT_F32].elems == 4000,
	          "F32: %" PRIu64 " of %" PRIu64 " elements delta coded",
	          st.dt[ULP_DT_F32].delta_elems, st.dt[ULP_DT_F32].elems);
	tu_check_object(o.p, o.len, &cur, &ref);
	tu_buf_free(&o);
	tu_file_free(&ref);
	tu_file_free(&cur);
}

Test(codec, large_runs_choose_their_own_coding)
{
	/* Adam-like: two big tensors side by side in one chunk, one that
	 * moved by a few ULPs and one that decorrelated.  Each big float run
	 * has its own stream and coding, so only the first is delta coded;
	 * the small tensor shares a stream and is delta coded too. */
	const uint64_t big = 70000;
	tu_tspec s[3];
	tu_rng r;
	tu_rng_init(&r, 0xc0dec014ull);
	s[0] = (tu_tspec){ "exp_avg", ULP_DT_F32, 4 * big, 0 };
	s[1] = (tu_tspec){ "exp_avg_sq", ULP_DT_F32, 4 * big, 16 };
	s[2] = (tu_tspec){ "small", ULP_DT_F32, 4 * 100, 16 };
	tu_file ref, cur;
	tu_file_build(&ref, s, 3, NULL, &r, 0);
	tu_file_build(&cur, s, 3, &ref, &r, 0);
	/* exp_avg: fresh values (decorrelated) */
	const ulp_tensor *t = tu_find(&cur.map, "exp_avg");
	tu_fill_weights(&r, ulp_dtype_fmt(ULP_DT_F32), cur.data + t->offset,
	                big);
	ulp_content_hash(ULP_HASH_TREE, cur.data, cur.size, cur.hash);
	tu_buf o;
	ulp_stats st;
	tu_encode_ok(&cur, &ref, 0, 1, &o, &st);
	TU_ASSERT(st.dt[ULP_DT_F32].elems == 2 * big + 100 &&
	                  st.dt[ULP_DT_F32].ref_elems == 2 * big + 100,
	          "elems %" PRIu64, st.dt[ULP_DT_F32].elems);
	TU_ASSERT(st.dt[ULP_DT_F32].delta_elems == big + 100,
	          "%" PRIu64 " elements delta coded, want %" PRIu64,
	          st.dt[ULP_DT_F32].delta_elems, big + 100);
	tu_check_object(o.p, o.len, &cur, &ref);
	tu_buf_free(&o);
	tu_file_free(&ref);
	tu_file_free(&cur);
}

Test(codec, random_layouts)
{
	/* Random files: tensor counts, dtypes, sizes (odd tails, empty
	 * tensors), gaps, chunk sizes; the next version drops, adds,
	 * reorders and resizes tensors.  Every plan must be well formed and
	 * every object must decode to the file. */
	static char names[16][8];
	static const ulp_dtype dts[] = { ULP_DT_BF16,   ULP_DT_F16,
		                         ULP_DT_F32,    ULP_DT_F64,
		                         ULP_DT_F8E4M3, ULP_DT_F8E5M2,
		                         ULP_DT_GENERIC };
	tu_rng r;
	tu_rng_init(&r, 0xc0dec015ull);
	for (int k = 0; k < 16; k++)
		snprintf(names[k], sizeof(names[k]), "t%d", k);
	for (int it = 0; it < 24; it++) {
		tu_tspec a[16], b[16];
		size_t na = tu_below(&r, 13), nb = 0;
		for (size_t i = 0; i < na; i++) {
			ulp_dtype dt = dts[tu_below(&r, 7)];
			unsigned w = dt ? ulp_dtype_size(dt) : 8;
			uint64_t ne = tu_chance(&r, 1, 8) ? 0
			                                  : tu_below(&r, 3000);
			a[i] = (tu_tspec){
				names[i], dt,
				ne * w + (tu_chance(&r, 1, 4) ? tu_below(&r, w)
				                              : 0),
				tu_chance(&r, 1, 2) ? tu_below(&r, 50) : 0
			};
		}
		/* next version: keep most, sometimes resize, add new ones,
		 * shuffle a little */
		for (size_t i = 0; i < na; i++) {
			if (tu_chance(&r, 1, 6))
				continue;
			b[nb] = a[i];
			if (tu_chance(&r, 1, 8))
				b[nb].nbytes += ulp_dtype_size(b[nb].dt);
			b[nb].gap = tu_below(&r, 3) ? a[i].gap
			                            : tu_below(&r, 40);
			nb++;
		}
		for (size_t i = na; i < 16 && tu_chance(&r, 1, 2); i++)
			b[nb++] = (tu_tspec){ names[i], dts[tu_below(&r, 6)],
				              4 * tu_below(&r, 2000), 3 };
		for (size_t i = 0; nb > 1 && i < 2; i++) {
			size_t x = tu_below(&r, nb), y = tu_below(&r, nb);
			tu_tspec t = b[x];
			b[x] = b[y];
			b[y] = t;
		}
		tu_file v1, v2;
		tu_file_build(&v1, a, na, NULL, &r, (unsigned)tu_below(&r, 30));
		tu_file_build(&v2, b, nb, &v1, &r, (unsigned)tu_below(&r, 30));
		uint32_t cs =
			ULP_CHUNK_SIZE_MIN + (uint32_t)tu_below(&r, 20000);
		check_plan(&v1, NULL, cs);
		check_plan(&v2, &v1, cs);
		tu_buf o;
		tu_encode_ok(&v1, NULL, cs, 1 + it % 3, &o, NULL);
		tu_check_object(o.p, o.len, &v1, NULL);
		check_layout(&o, &v1, NULL, cs);
		tu_buf_free(&o);
		tu_encode_ok(&v2, &v1, cs, 1 + it % 3, &o, NULL);
		tu_check_object(o.p, o.len, &v2, &v1);
		check_layout(&o, &v2, &v1, cs);
		tu_buf_free(&o);
		tu_file_free(&v1);
		tu_file_free(&v2);
	}
}

Test(codec, plan_rejects_bad_maps)
{
	tu_file v[3];
	ulp_plan *pl = NULL;
	build_versions(v, 1, 0xc0dec012ull);
	ulp_tensor_map *m = &v[0].map;
	/* a tensor past the end of the file */
	TU_RC(ulp_plan_build(m, m->v[m->n - 1].offset + 1, NULL, 0, NULL, &pl),
	      ULP_ERR_ARG, "tensor past the end");
	TU_ASSERT(pl == NULL, "plan left behind");
	/* overlapping tensors */
	uint64_t save = m->v[2].offset;
	m->v[2].offset = m->v[1].offset + 1;
	TU_RC(ulp_plan_build(m, v[0].size, NULL, 0, NULL, &pl), ULP_ERR_ARG,
	      "overlapping tensors");
	m->v[2].offset = save;
	TU_RC(ulp_plan_build(m, v[0].size, NULL, 0, NULL, NULL), ULP_ERR_ARG,
	      "out NULL");
	TU_OK(ulp_plan_build(m, v[0].size, NULL, 0, NULL, &pl), "restored");
	ulp_plan_free(pl);
	free_versions(v);
}

Test(codec, chunk_api_matches_encode_file)
{
	/* plan + ulp_chunk_encode + writer by hand gives the same bytes and
	 * stats as ulp_encode_file */
	tu_file v[3];
	build_versions(v, 2, 0xc0dec020ull);
	const uint32_t cs = 4099;
	tu_buf want;
	ulp_stats wst;
	tu_encode_ok(&v[1], &v[0], cs, 3, &want, &wst);

	ulp_plan *pl = plan_for(&v[1], &v[0], cs);
	ulp_cctx *cc = ulp_cctx_new();
	tu_sink sink = { 0 };
	tu_mem rm = tu_mem_of(v[0].data, v[0].size);
	ulp_writer *w = NULL;
	ulp_stats acc, one;
	memset(&acc, 0, sizeof(acc));
	TU_OK(ulp_writer_new(tu_sink_write, &sink, v[0].hash, v[0].size, &w),
	      "writer");
	for (size_t i = 0; i < ulp_plan_chunk_count(pl); i++) {
		uint64_t off;
		uint32_t len;
		const void *enc;
		size_t elen;
		ulp_plan_chunk_range(pl, i, &off, &len);
		memset(&one, 0xff, sizeof(one));
		TU_OK(ulp_chunk_encode(cc, pl, i, v[1].data + off, tu_mem_read,
		                       &rm, &enc, &elen, &one),
		      "chunk %zu", i);
		ulp_stats_add(&acc, &one);
		TU_OK(ulp_writer_add_chunk(w, off, len, enc, elen,
		                           XXH3_64bits(v[1].data + off, len)),
		      "add chunk %zu", i);
	}
	uint64_t total = 0;
	TU_OK(ulp_writer_finish(w, v[1].hash, &total), "finish");
	TU_ASSERT(total == sink.b.len, "total %" PRIu64, total);
	TU_ASSERT(sink.b.len == want.len, "by hand %zu bytes, encode_file %zu",
	          sink.b.len, want.len);
	TU_MEMEQ(sink.b.p, want.p, want.len, "object bytes");
	TU_ASSERT(memcmp(&acc, &wst, sizeof(acc)) == 0, "summed stats differ");

	/* misuse of ulp_chunk_encode */
	const void *enc;
	size_t elen;
	size_t n = ulp_plan_chunk_count(pl);
	TU_RC(ulp_chunk_encode(cc, pl, n, v[1].data, tu_mem_read, &rm, &enc,
	                       &elen, NULL),
	      ULP_ERR_ARG, "chunk index past the end");
	TU_RC(ulp_chunk_encode(cc, pl, 0, NULL, tu_mem_read, &rm, &enc, &elen,
	                       NULL),
	      ULP_ERR_ARG, "src NULL");
	TU_RC(ulp_chunk_encode(cc, NULL, 0, v[1].data, tu_mem_read, &rm, &enc,
	                       &elen, NULL),
	      ULP_ERR_ARG, "plan NULL");
	/* a plan with a reference and no ref_read */
	TU_RC(ulp_chunk_encode(cc, pl, 0, v[1].data, NULL, NULL, &enc, &elen,
	                       NULL),
	      ULP_ERR_REF, "ref_read NULL");
	TU_ASSERT(rm.oob == 0, "encoder read past the reference");

	ulp_writer_free(w);
	ulp_cctx_free(cc);
	ulp_plan_free(pl);
	tu_buf_free(&sink.b);
	tu_buf_free(&want);
	free_versions(v);
}

/* ----------------------------------------------------- boundaries */

Test(codec, empty_file)
{
	tu_file e, ref;
	uint8_t junk[100];
	memset(junk, 7, sizeof(junk));
	tu_file_raw(&e, NULL, 0);
	tu_file_raw(&ref, junk, sizeof(junk));
	for (int with_ref = 0; with_ref < 2; with_ref++) {
		tu_buf o;
		ulp_stats st;
		tu_encode_ok(&e, with_ref ? &ref : NULL, 0, 2, &o, &st);
		TU_ASSERT(o.len == ULP_OBJ_HEADER_SIZE + ULP_OBJ_TRAILER_SIZE,
		          "empty object of %zu bytes", o.len);
		tu_mem m;
		ulp_object *obj = open_buf(&o, &m);
		TU_ASSERT(ulp_object_size(obj) == 0 &&
		                  ulp_object_chunk_count(obj) == 0,
		          "size %" PRIu64 ", %zu chunks", ulp_object_size(obj),
		          ulp_object_chunk_count(obj));
		ulp_dctx *d = ulp_dctx_new();
		uint8_t b;
		TU_OK(ulp_object_read(d, obj, 0, &b, 0, NULL, NULL), "read 0");
		TU_RC(ulp_object_read(d, obj, 0, &b, 1, NULL, NULL),
		      ULP_ERR_ARG, "read 1 byte of nothing");
		TU_RC(ulp_chunk_decode(d, obj, 0, NULL, NULL, &b), ULP_ERR_ARG,
		      "chunk 0 of none");
		ulp_dctx_free(d);
		ulp_object_close(obj);
		tu_check_object(o.p, o.len, &e, with_ref ? &ref : NULL);
		tu_buf_free(&o);
	}
	/* cur NULL is allowed for an empty file */
	ulp_encode_job job;
	tu_sink sink = { 0 };
	memset(&job, 0, sizeof(job));
	job.write = tu_sink_write;
	job.write_opaque = &sink;
	job.nthreads = 1;
	TU_OK(ulp_encode_file(&job, NULL, NULL, NULL), "cur NULL, size 0");
	tu_check_object(sink.b.p, sink.b.len, &e, NULL);
	tu_buf_free(&sink.b);
	tu_file_free(&e);
	tu_file_free(&ref);
}

Test(codec, chunk_count_at_boundaries)
{
	/* generic files around one chunk of ULP_CHUNK_SIZE_MIN */
	static const uint64_t sizes[] = { 1,    2,    4095, 4096,        4097,
		                          8191, 8192, 8193, 3 * 4096 + 5 };
	tu_rng r;
	tu_rng_init(&r, 0xc0dec030ull);
	uint8_t *buf = tu_xmalloc(4 * 4096);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		tu_file f;
		/* half text-like, half random */
		for (uint64_t j = 0; j < sizes[i]; j++)
			buf[j] = j % 2 ? (uint8_t)('a' + j % 7)
			               : (uint8_t)tu_next(&r);
		tu_file_raw(&f, buf, sizes[i]);
		tu_buf o;
		tu_encode_ok(&f, NULL, ULP_CHUNK_SIZE_MIN, 2, &o, NULL);
		tu_mem m;
		ulp_object *obj = open_buf(&o, &m);
		size_t want = (size_t)((sizes[i] + 4095) / 4096);
		TU_ASSERT(ulp_object_chunk_count(obj) == want,
		          "%" PRIu64 " bytes: %zu chunks, want %zu", sizes[i],
		          ulp_object_chunk_count(obj), want);
		ulp_object_close(obj);
		tu_check_object(o.p, o.len, &f, NULL);
		tu_buf_free(&o);
		/* default chunk size: one chunk */
		tu_encode_ok(&f, NULL, 0, 1, &o, NULL);
		obj = open_buf(&o, &m);
		TU_ASSERT(ulp_object_chunk_count(obj) == 1, "one chunk");
		ulp_object_close(obj);
		tu_check_object(o.p, o.len, &f, NULL);
		tu_buf_free(&o);
		tu_file_free(&f);
	}
	free(buf);

	/* a float tensor of exactly one chunk, and one element more */
	tu_tspec s[1];
	for (int extra = 0; extra < 2; extra++) {
		tu_file f;
		/* the header's length depends on the numbers in it: adjust
		 * the junk in front of the tensor until the file is exactly
		 * 4096 bytes (+ one element) */
		const uint64_t target = 4096 + 8 * (uint64_t)extra;
		const uint64_t body =
			(4096 - 400) / 8 * 8 + 8 * (uint64_t)extra;
		uint64_t gap = 0;
		for (int it = 0; it < 8; it++) {
			s[0] = (tu_tspec){ "t", ULP_DT_F64, body, gap };
			tu_file_build(&f, s, 1, NULL, &r, 0);
			if (f.size == target)
				break;
			gap += target - f.size;
			tu_file_free(&f);
		}
		TU_ASSERT(f.size == 4096 + 8 * (uint64_t)extra, "size %" PRIu64,
		          f.size);
		tu_buf o;
		tu_encode_ok(&f, NULL, ULP_CHUNK_SIZE_MIN, 1, &o, NULL);
		tu_mem m;
		ulp_object *obj = open_buf(&o, &m);
		TU_ASSERT(ulp_object_chunk_count(obj) == 1u + extra,
		          "%zu chunks", ulp_object_chunk_count(obj));
		ulp_object_close(obj);
		tu_check_object(o.p, o.len, &f, NULL);
		tu_buf_free(&o);
		tu_file_free(&f);
	}
}

Test(codec, generic_against_shared_reference)
{
	/* 1 MiB of incompressible bytes; the new version changes a few
	 * bytes and inserts 100: with the reference as zstd prefix the
	 * object must be far smaller than zstd of the file alone. */
	const size_t n = 1u << 20;
	tu_rng r;
	tu_rng_init(&r, 0xc0dec040ull);
	uint8_t *a = tu_xmalloc(n), *b = tu_xmalloc(n + 100);
	tu_fill(&r, a, n);
	memcpy(b, a, n / 2);
	tu_fill(&r, b + n / 2, 100);
	memcpy(b + n / 2 + 100, a + n / 2, n - n / 2);
	for (int i = 0; i < 50; i++)
		b[tu_below(&r, n + 100)] ^= 0x40;
	tu_file ref, cur;
	tu_file_raw(&ref, a, n);
	tu_file_raw(&cur, b, n + 100);

	size_t zb = ZSTD_compressBound(cur.size);
	uint8_t *z = tu_xmalloc(zb);
	size_t zs = ZSTD_compress(z, zb, cur.data, cur.size, 3);
	cr_assert(!ZSTD_isError(zs));

	static const uint32_t sizes[] = { 0, 65537 };
	for (int i = 0; i < 2; i++) {
		tu_buf o;
		ulp_stats st;
		tu_encode_ok(&cur, &ref, sizes[i], 2, &o, &st);
		TU_ASSERT(o.len * 20 < zs,
		          "chunk %u: object %zu bytes, zstd -3 alone %zu",
		          sizes[i], o.len, zs);
		TU_ASSERT(st.dt[0].bytes_in == cur.size, "all generic");
		tu_check_object(o.p, o.len, &cur, &ref);
		check_layout(&o, &cur, &ref, sizes[i]);
		tu_buf_free(&o);
	}
	/* without the reference it cannot compress */
	tu_buf o;
	tu_encode_ok(&cur, NULL, 0, 2, &o, NULL);
	TU_ASSERT(o.len > cur.size, "random bytes compressed to %zu", o.len);
	tu_check_object(o.p, o.len, &cur, NULL);
	tu_buf_free(&o);
	free(z);
	free(a);
	free(b);
	tu_file_free(&ref);
	tu_file_free(&cur);
}

/* ---------------------------------------------------- random access */

Test(codec, partial_reads)
{
	tu_file v[3];
	build_versions(v, 2, 0xc0dec050ull);
	tu_buf o;
	tu_encode_ok(&v[1], &v[0], 4099, 2, &o, NULL);
	tu_mem m, rm = tu_mem_of(v[0].data, v[0].size);
	ulp_object *obj = open_buf(&o, &m);
	ulp_dctx *d = ulp_dctx_new();
	const uint64_t size = v[1].size;
	uint8_t *buf = tu_xmalloc(size + 1);
	tu_rng r;
	tu_rng_init(&r, 0xc0dec051ull);
	size_t nch = ulp_object_chunk_count(obj);
	TU_ASSERT(nch > 8, "want many chunks, got %zu", nch);

	/* around every chunk boundary: single bytes and short spans */
	for (size_t i = 1; i < nch; i++) {
		uint64_t off;
		uint32_t len;
		ulp_object_chunk_range(obj, i, &off, &len);
		for (uint64_t a = off - 1; a <= off; a++) {
			TU_OK(ulp_object_read(d, obj, a, buf, 1, tu_mem_read,
			                      &rm),
			      "byte %" PRIu64, a);
			TU_ASSERT(buf[0] == v[1].data[a], "byte %" PRIu64, a);
		}
		TU_OK(ulp_object_read(d, obj, off - 3, buf, 7, tu_mem_read,
		                      &rm),
		      "span across chunk %zu", i);
		TU_MEMEQ(buf, v[1].data + off - 3, 7, "span across chunk %zu",
		         i);
	}
	/* last byte, first byte, everything, nothing at the end */
	TU_OK(ulp_object_read(d, obj, size - 1, buf, 1, tu_mem_read, &rm), "las"
	                                                                   "t");
	TU_ASSERT(buf[0] == v[1].data[size - 1], "last byte");
	TU_OK(ulp_object_read(d, obj, 0, buf, 1, tu_mem_read, &rm), "first");
	TU_ASSERT(buf[0] == v[1].data[0], "first byte");
	TU_OK(ulp_object_read(d, obj, 0, buf, size, tu_mem_read, &rm), "all");
	TU_MEMEQ(buf, v[1].data, size, "all");
	TU_OK(ulp_object_read(d, obj, size, buf, 0, tu_mem_read, &rm), "empty "
	                                                               "read "
	                                                               "at the "
	                                                               "end");
	/* random ranges, some spanning several chunks */
	for (int t = 0; t < 300; t++) {
		uint64_t off = tu_below(&r, size);
		uint64_t max = size - off;
		uint64_t len =
			1 + tu_below(&r, max < 3 * 4099 ? max : 3 * 4099);
		memset(buf, 0xee, len);
		TU_OK(ulp_object_read(d, obj, off, buf, len, tu_mem_read, &rm),
		      "read [%" PRIu64 ", +%" PRIu64 ")", off, len);
		TU_MEMEQ(buf, v[1].data + off, len,
		         "read [%" PRIu64 ", +%" PRIu64 ")", off, len);
		size_t c = ulp_object_chunk_at(obj, off);
		uint64_t co;
		uint32_t cl;
		ulp_object_chunk_range(obj, c, &co, &cl);
		TU_ASSERT(co <= off && off < co + cl, "chunk_at(%" PRIu64 ")",
		          off);
	}
	/* ranges outside the object */
	TU_RC(ulp_object_read(d, obj, size + 1, buf, 0, tu_mem_read, &rm),
	      ULP_ERR_ARG, "offset past the end");
	TU_RC(ulp_object_read(d, obj, size - 1, buf, 2, tu_mem_read, &rm),
	      ULP_ERR_ARG, "range past the end");
	TU_RC(ulp_object_read(d, obj, 0, NULL, 1, tu_mem_read, &rm),
	      ULP_ERR_ARG, "dst NULL");
	TU_RC(ulp_object_read(NULL, obj, 0, buf, 1, tu_mem_read, &rm),
	      ULP_ERR_ARG, "dctx NULL");
	TU_ASSERT(rm.oob == 0 && m.oob == 0, "out-of-bounds reads");
	free(buf);
	ulp_dctx_free(d);
	ulp_object_close(obj);
	tu_buf_free(&o);
	free_versions(v);
}

/* ------------------------------------------------------ unchanged */

Test(codec, unchanged_file_is_tiny)
{
	tu_tspec s[4];
	tu_rng r;
	tu_rng_init(&r, 0xc0dec060ull);
	s[0] = (tu_tspec){ "w", ULP_DT_BF16, 2 * 300000, 0 };
	s[1] = (tu_tspec){ "b", ULP_DT_F32, 4 * 60000, 50000 };
	s[2] = (tu_tspec){ "step", ULP_DT_GENERIC, 8 * 10000, 0 };
	tu_file f;
	tu_file_build(&f, s, 3, NULL, &r, 0);
	tu_buf o;
	ulp_stats st;
	tu_encode_ok(&f, &f, 65536, 2, &o, &st);
	tu_mem m;
	ulp_object *obj = open_buf(&o, &m);
	size_t n = ulp_object_chunk_count(obj);
	TU_ASSERT(n >= 15, "%zu chunks", n);
	TU_ASSERT(st.chunks_copy == n && st.chunks_delta == 0 &&
	                  st.chunks_standalone == 0,
	          "copy %" PRIu64 " delta %" PRIu64 " standalone %" PRIu64 " of"
	          " %"
	          "zu",
	          st.chunks_copy, st.chunks_delta, st.chunks_standalone, n);
	/* an index entry (32 bytes) and a runs list with one-byte streams
	 * per chunk: nothing else */
	for (size_t i = 0; i < n; i++)
		TU_ASSERT(ulp_object_chunk_stored(obj, i) <= 32,
		          "copied chunk %zu stores %u bytes", i,
		          ulp_object_chunk_stored(obj, i));
	TU_ASSERT(o.len < 200 + 64 * n, "object %zu bytes for %zu chunks",
	          o.len, n);
	TU_ASSERT(o.len * 500 < f.size, "object %zu bytes for %" PRIu64, o.len,
	          f.size);
	ulp_object_close(obj);
	tu_check_object(o.p, o.len, &f, &f);
	tu_buf_free(&o);
	tu_file_free(&f);

	/* the synthetic checkpoint against itself, at two chunk sizes */
	tu_file v[3];
	build_versions(v, 2, 0xc0dec061ull);
	static const uint32_t sizes[] = { 0, 4099 };
	for (int i = 0; i < 2; i++) {
		tu_encode_ok(&v[1], &v[1], sizes[i], 2, &o, &st);
		obj = open_buf(&o, &m);
		n = ulp_object_chunk_count(obj);
		TU_ASSERT(st.chunks_copy == n, "copy %" PRIu64 " of %zu",
		          st.chunks_copy, n);
		for (int d = 1; d < ULP_DT_COUNT; d++)
			TU_ASSERT(st.dt[d].delta_elems == st.dt[d].elems,
			          "%s not all identical", ulp_dtype_name(d));
		ulp_object_close(obj);
		tu_check_object(o.p, o.len, &v[1], &v[1]);
		tu_buf_free(&o);
	}
	free_versions(v);
}

/* -------------------------------------------------------- threads */

/* The object bytes (and so the checksums in them) do not depend on the
 * thread count: for a delta and for a keyframe (no reference). */
Test(codec, thread_counts_give_identical_objects)
{
	tu_file v[3];
	build_versions(v, 3, 0xc0dec070ull);
	static const uint32_t sizes[] = { 4099, 65537 };
	for (int s = 0; s < 2; s++)
		for (int key = 0; key < 2; key++) {
			const tu_file *ref = key ? NULL : &v[0];
			tu_buf base;
			tu_encode_ok(&v[1], ref, sizes[s], 1, &base, NULL);
			static const unsigned th[] = { 2, 4, 0, 7 };
			for (int t = 0; t < 4; t++) {
				tu_buf o;
				tu_encode_ok(&v[1], ref, sizes[s], th[t], &o,
				             NULL);
				TU_ASSERT(o.len == base.len,
				          "%u threads, keyframe %d: %zu bytes, "
				          "1 thread %zu",
				          th[t], key, o.len, base.len);
				TU_MEMEQ(o.p, base.p, base.len,
				         "%u threads, keyframe %d", th[t], key);
				tu_buf_free(&o);
			}
			tu_check_object(base.p, base.len, &v[1], ref);
			tu_buf_free(&base);
		}
	free_versions(v);
}

/* job.cur_read: the new file pulled chunk by chunk (gc's rebase decodes a
 * version straight into the encoder) gives the object cur gives, reads
 * every byte once and never past the file, and its errors come back. */
Test(codec, pulled_input_gives_identical_objects)
{
	tu_file v[3];
	build_versions(v, 2, 0xc0dec072ull);
	tu_mem rm = tu_mem_of(v[0].data, v[0].size);
	static const unsigned th[] = { 1, 3 };
	for (int t = 0; t < 2; t++) {
		tu_buf base;
		tu_encode_ok(&v[1], &v[0], 4099, th[t], &base, NULL);
		tu_sink sink = { 0 };
		tu_mem cm = tu_mem_of(v[1].data, v[1].size);
		ulp_encode_job job = tu_job(&v[1], &v[0], &rm, th[t]);
		job.params.chunk_size = 4099;
		job.write = tu_sink_write;
		job.write_opaque = &sink;
		job.cur_read = tu_mem_read;
		job.cur_opaque = &cm;
		TU_RC(ulp_encode_file(&job, NULL, NULL, NULL), ULP_ERR_ARG,
		      "cur and cur_read both given");
		job.cur = NULL;
		uint8_t hash[16];
		TU_OK(ulp_encode_file(&job, NULL, hash, NULL), "%u threads",
		      th[t]);
		TU_MEMEQ(hash, v[1].hash, 16, "hash of the pulled bytes");
		TU_ASSERT(sink.b.len == base.len, "%zu bytes, from cur %zu",
		          sink.b.len, base.len);
		TU_MEMEQ(sink.b.p, base.p, base.len, "%u threads", th[t]);
		TU_ASSERT(cm.oob == 0, "read past the file");
		tu_mem om;
		ulp_object *obj = open_buf(&base, &om);
		TU_ASSERT(cm.calls == ulp_object_chunk_count(obj),
		          "%lu reads for %zu chunks", cm.calls,
		          ulp_object_chunk_count(obj));
		ulp_object_close(obj);
		cm.fail_lo = v[1].size / 2;
		cm.fail_hi = cm.fail_lo + 1;
		cm.fail_rc = ULP_ERR_NOMEM;
		sink.b.len = 0;
		TU_RC(ulp_encode_file(&job, NULL, NULL, NULL), ULP_ERR_NOMEM,
		      "cur_read fails, %u threads", th[t]);
		tu_buf_free(&sink.b);
		tu_buf_free(&base);
	}
	free_versions(v);
}

/* ---------------------------------------------------- thread pool */

static void count_job(void *arg)
{
	__atomic_add_fetch((unsigned long *)arg, 1, __ATOMIC_RELAXED);
}

Test(codec, pool_runs_every_job_once)
{
	unsigned long count = 0;
	ulp_pool *pool = ulp_pool_new(3);
	cr_assert(pool);
	cr_assert_eq(ulp_pool_threads(pool), 3);
	ulp_pool_group *g = ulp_pool_group_new(pool);
	cr_assert(g);
	for (int i = 0; i < 1000; i++)
		TU_OK(ulp_pool_submit(g, count_job, &count), "submit %d", i);
	ulp_pool_group_wait(g);
	cr_assert_eq(count, 1000);
	cr_assert_eq(ulp_pool_group_pending(g), 0);
	ulp_pool_group_free(g);
	ulp_pool_free(pool);
}

/* The low lane: jobs that record the order they ran in; the first low
 * job holds the one worker until the rest are queued. */
typedef struct lane_log {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int started, release;
	int order[64], n;
} lane_log;

typedef struct lane_job {
	lane_log *log;
	int id;
} lane_job;

static void lane_run(void *arg)
{
	lane_job *j = arg;
	lane_log *l = j->log;

	pthread_mutex_lock(&l->mu);
	if (j->id == 0) {
		l->started = 1;
		pthread_cond_broadcast(&l->cv);
		while (!l->release)
			pthread_cond_wait(&l->cv, &l->mu);
	}
	l->order[l->n++] = j->id;
	pthread_mutex_unlock(&l->mu);
}

Test(codec, pool_low_lane_waits_for_normal_jobs)
{
	enum { NLOW = 20, NNORM = 5 }; /* ids: low 0..19, normal 100.. */
	lane_log l = { .mu = PTHREAD_MUTEX_INITIALIZER,
		       .cv = PTHREAD_COND_INITIALIZER };
	lane_job jobs[NLOW + NNORM];
	ulp_pool *pool = ulp_pool_new(1);
	cr_assert(pool);
	ulp_pool_group *g = ulp_pool_group_new(pool);
	cr_assert(g);
	jobs[0] = (lane_job){ &l, 0 };
	TU_OK(ulp_pool_submit_low(g, lane_run, &jobs[0]), "low 0");
	pthread_mutex_lock(&l.mu);
	while (!l.started)
		pthread_cond_wait(&l.cv, &l.mu);
	pthread_mutex_unlock(&l.mu);
	/* The worker is inside low job 0: the rest queue up behind it. */
	for (int i = 1; i < NLOW; i++) {
		jobs[i] = (lane_job){ &l, i };
		TU_OK(ulp_pool_submit_low(g, lane_run, &jobs[i]), "low %d", i);
	}
	for (int i = 0; i < NNORM; i++) {
		jobs[NLOW + i] = (lane_job){ &l, 100 + i };
		TU_OK(ulp_pool_submit(g, lane_run, &jobs[NLOW + i]), "n %d", i);
	}
	pthread_mutex_lock(&l.mu);
	l.release = 1;
	pthread_cond_broadcast(&l.cv);
	/* Not ulp_pool_group_wait: a helping waiter would run jobs beside
	 * the worker, and the order would be two threads'. */
	while (l.n < NLOW + NNORM) {
		pthread_mutex_unlock(&l.mu);
		sched_yield();
		pthread_mutex_lock(&l.mu);
	}
	pthread_mutex_unlock(&l.mu);
	ulp_pool_group_free(g);
	ulp_pool_free(pool);
	/* The running low job is not preempted; then every normal job, in
	 * order, before the queued low ones, in order. */
	cr_assert_eq(l.order[0], 0);
	for (int i = 0; i < NNORM; i++)
		cr_assert_eq(l.order[1 + i], 100 + i, "position %d", 1 + i);
	for (int i = 1; i < NLOW; i++)
		cr_assert_eq(l.order[NNORM + i], i, "position %d", NNORM + i);
}

/* One encode of several chunks with several workers, as a job of the
 * pool it encodes on (a store's encoder). */
typedef struct nest_arg {
	const tu_file *cur, *ref;
	ulp_pool *pool;
	tu_sink sink;
	tu_mem rm;
	int rc;
} nest_arg;

static void nested_encode(void *arg)
{
	nest_arg *a = arg;
	ulp_encode_job job = tu_job(a->cur, a->ref, &a->rm, 3);
	job.params.chunk_size = 4099;
	job.pool = a->pool;
	job.write = tu_sink_write;
	job.write_opaque = &a->sink;
	a->rc = ulp_encode_file(&job, NULL, NULL, NULL);
}

/* Decodes of a whole object, as read-ahead does, in another group. */
typedef struct ra_arg {
	const tu_buf *obj;
	const tu_file *want, *ref;
	int ok;
} ra_arg;

static void readahead_decode(void *arg)
{
	ra_arg *a = arg;
	tu_mem om = tu_mem_of(a->obj->p, a->obj->len);
	tu_mem rm = tu_mem_of(a->ref->data, a->ref->size);
	ulp_object *obj = NULL;
	ulp_dctx *d = ulp_dctx_new();
	uint8_t *out = malloc(a->want->size);
	a->ok = d && out &&
	        ulp_object_open(tu_mem_read, &om, a->obj->len, &obj) == 0 &&
	        ulp_object_read(d, obj, 0, out, a->want->size, tu_mem_read,
	                        &rm) == 0 &&
	        memcmp(out, a->want->data, a->want->size) == 0;
	ulp_object_close(obj);
	ulp_dctx_free(d);
	free(out);
}

/* The nested wait: encodes with 3 workers each, running as jobs of a pool
 * of 1 or 2 threads that they encode on, alongside decodes; every worker
 * thread can be taken by an encode waiting for its chunks.  Without the
 * waiters running their own queued chunks this deadlocks (the timeout
 * fails it). */
Test(codec, pool_nested_encodes_do_not_deadlock, .timeout = 120)
{
	tu_file v[3];
	build_versions(v, 2, 0xc0dec074ull);
	tu_buf want;
	tu_encode_ok(&v[1], &v[0], 4099, 1, &want, NULL);
	enum { NE = 4, NR = 4 };
	for (unsigned t = 1; t <= 2; t++) {
		ulp_pool *pool = ulp_pool_new(t);
		cr_assert(pool);
		ulp_pool_group *ge = ulp_pool_group_new(pool);
		ulp_pool_group *gr = ulp_pool_group_new(pool);
		cr_assert(ge && gr);
		nest_arg ea[NE];
		ra_arg ra[NR];
		for (int i = 0; i < NE; i++) {
			memset(&ea[i], 0, sizeof ea[i]);
			ea[i].cur = &v[1];
			ea[i].ref = &v[0];
			ea[i].pool = pool;
			ea[i].rm = tu_mem_of(v[0].data, v[0].size);
			ea[i].rc = -1;
			TU_OK(ulp_pool_submit(ge, nested_encode, &ea[i]), "e");
			if (i < NR) {
				ra[i] = (ra_arg){ &want, &v[1], &v[0], 0 };
				TU_OK(ulp_pool_submit(gr, readahead_decode,
				                      &ra[i]),
				      "r");
			}
		}
		ulp_pool_group_free(ge);
		ulp_pool_group_free(gr);
		for (int i = 0; i < NE; i++) {
			TU_OK(ea[i].rc, "pool of %u, encode %d", t, i);
			TU_ASSERT(ea[i].sink.b.len == want.len,
			          "pool of %u: %zu bytes, want %zu", t,
			          ea[i].sink.b.len, want.len);
			TU_MEMEQ(ea[i].sink.b.p, want.p, want.len,
			         "pool of %u, encode %d", t, i);
			tu_buf_free(&ea[i].sink.b);
		}
		for (int i = 0; i < NR; i++)
			TU_ASSERT(ra[i].ok, "pool of %u, decode %d", t, i);
		ulp_pool_free(pool);
	}
	tu_buf_free(&want);
	free_versions(v);
}

Test(codec, reused_contexts)
{
	/* job.cctx: caller-owned contexts, reused across files, give the
	 * same objects as fresh ones; the slots' buffers they keep from one
	 * file to the next (ulp_cctx_spare_give) pass from default-size
	 * chunks with one thread to small ones with three, and back */
	tu_file v[3];
	build_versions(v, 2, 0xc0dec072ull);
	enum { NC = 3 };
	ulp_cctx *cc[NC];
	for (int i = 0; i < NC; i++)
		cc[i] = ulp_cctx_new();
	static const uint32_t sizes[] = { 0, 4099, 0 };
	for (int k = 0; k < 3; k++)
		for (int f = 1; f < 3; f++) {
			tu_buf want;
			tu_encode_ok(&v[f], &v[f - 1], sizes[k], 1, &want,
			             NULL);
			for (int rep = 0; rep < 2; rep++) {
				tu_sink sink = { 0 };
				tu_mem rm =
					tu_mem_of(v[f - 1].data, v[f - 1].size);
				ulp_encode_job job;
				memset(&job, 0, sizeof(job));
				job.cur = v[f].data;
				job.cur_size = v[f].size;
				job.cur_map = &v[f].map;
				job.has_ref = 1;
				job.ref_size = v[f - 1].size;
				job.ref_map = &v[f - 1].map;
				job.ref_hash = v[f - 1].hash;
				job.ref_read = tu_mem_read;
				job.ref_opaque = &rm;
				job.params.chunk_size = sizes[k];
				job.nthreads = sizes[k] ? NC : 1;
				job.cctx = cc;
				job.write = tu_sink_write;
				job.write_opaque = &sink;
				TU_OK(ulp_encode_file(&job, NULL, NULL, NULL),
				      "v%d, pass %d", f + 1, rep);
				TU_ASSERT(sink.b.len == want.len,
				          "v%d: %zu vs %zu bytes", f + 1,
				          sink.b.len, want.len);
				TU_MEMEQ(sink.b.p, want.p, want.len,
				         "v%d, pass %d", f + 1, rep);
				if (rep == 1) {
					job.nthreads = 0;
					TU_RC(ulp_encode_file(&job, NULL, NULL,
					                      NULL),
					      ULP_ERR_ARG,
					      "cctx with nthreads 0");
				}
				tu_buf_free(&sink.b);
			}
			tu_buf_free(&want);
		}
	for (int i = 0; i < NC; i++)
		ulp_cctx_free(cc[i]);
	free_versions(v);
}

typedef struct pd_arg {
	const ulp_object *obj;
	tu_mem *ref;
	const tu_file *want;
	unsigned tid, nth;
	int rc;         /* first error */
	long bad_chunk; /* first chunk with wrong bytes, or -1 */
	unsigned decoded;
} pd_arg;

static void *pd_worker(void *p)
{
	pd_arg *a = p;
	ulp_dctx *d = ulp_dctx_new();
	size_t n = ulp_object_chunk_count(a->obj);
	uint8_t *buf = malloc(65537 + 16);
	tu_rng r = { 0x9d000000ull + a->tid };
	if (!d || !buf) {
		a->rc = ULP_ERR_NOMEM;
		goto out;
	}
	for (int pass = 0; pass < 3; pass++)
		for (size_t j = 0; j < n; j++) {
			size_t i = pass % 2 ? n - 1 - j : j;
			if (i % a->nth != (a->tid + pass) % a->nth)
				continue;
			uint64_t off;
			uint32_t len;
			ulp_object_chunk_range(a->obj, i, &off, &len);
			int rc = ulp_chunk_decode(d, a->obj, i, tu_mem_read,
			                          a->ref, buf);
			if (rc && !a->rc)
				a->rc = rc;
			if (!rc && memcmp(buf, a->want->data + off, len) &&
			    a->bad_chunk < 0)
				a->bad_chunk = (long)i;
			a->decoded++;
		}
	/* and some random ranges through ulp_object_read */
	for (int t = 0; t < 30; t++) {
		uint64_t size = a->want->size;
		uint64_t off = tu_below(&r, size);
		uint64_t len = 1 + tu_below(&r, size - off < 65537 ? size - off
		                                                   : 65537);
		int rc = ulp_object_read(d, a->obj, off, buf, len, tu_mem_read,
		                         a->ref);
		if (rc && !a->rc)
			a->rc = rc;
		if (!rc && memcmp(buf, a->want->data + off, len) &&
		    a->bad_chunk < 0)
			a->bad_chunk = 1000000 + t;
	}
out:
	free(buf);
	ulp_dctx_free(d);
	return NULL;
}

Test(codec, parallel_decode_shared_object)
{
	tu_file v[3];
	build_versions(v, 4, 0xc0dec071ull);
	tu_buf o;
	tu_encode_ok(&v[1], &v[0], 4099, 2, &o, NULL);
	tu_mem m, rm = tu_mem_of(v[0].data, v[0].size);
	ulp_object *obj = open_buf(&o, &m);
	enum { NTH = 4 };
	pthread_t th[NTH];
	pd_arg args[NTH];
	for (unsigned t = 0; t < NTH; t++) {
		args[t] = (pd_arg){ obj, &rm, &v[1], t, NTH, 0, -1, 0 };
		cr_assert(pthread_create(&th[t], NULL, pd_worker, &args[t]) ==
		          0);
	}
	unsigned total = 0;
	for (unsigned t = 0; t < NTH; t++) {
		pthread_join(th[t], NULL);
		TU_OK(args[t].rc, "thread %u", t);
		TU_ASSERT(args[t].bad_chunk < 0,
		          "thread %u: wrong bytes in %ld", t,
		          args[t].bad_chunk);
		total += args[t].decoded;
	}
	TU_ASSERT(total == 3 * ulp_object_chunk_count(obj), "decoded %u",
	          total);
	TU_ASSERT(rm.oob == 0 && m.oob == 0, "out-of-bounds reads");
	ulp_object_close(obj);
	tu_buf_free(&o);
	free_versions(v);
}

/* ------------------------------------------------------ references */

/* A reference reader that serves p[0..size) and zeros beyond (a longer
 * file that differs). */
static int zero_pad_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	tu_mem *m = opaque;
	memset(buf, 0, len);
	if (off < m->size)
		memcpy(buf, m->p + off,
		       len < m->size - off ? len : (size_t)(m->size - off));
	return 0;
}

/* Decode every chunk of o against a reference: a chunk may fail with
 * ULP_ERR_CORRUPT but must never return wrong bytes.  Returns the
 * number of chunks that failed. */
static size_t decode_chunks_refs(const tu_buf *o, const tu_file *want,
                                 const ulp_refs *refs)
{
	tu_mem m;
	ulp_object *obj = open_buf(o, &m);
	ulp_dctx *d = ulp_dctx_new();
	size_t n = ulp_object_chunk_count(obj), failed = 0;
	uint8_t *buf = tu_xmalloc(want->size);
	for (size_t i = 0; i < n; i++) {
		uint64_t off;
		uint32_t len;
		ulp_object_chunk_range(obj, i, &off, &len);
		int rc = ulp_chunk_decode_refs(d, obj, i, refs, buf);
		if (rc) {
			TU_RC(rc, ULP_ERR_CORRUPT, "chunk %zu, wrong reference",
			      i);
			failed++;
		} else {
			TU_MEMEQ(buf, want->data + off, len,
			         "chunk %zu decoded OK against a wrong "
			         "reference",
			         i);
		}
	}
	if (failed) {
		int rc = ulp_object_read(d, obj, 0, buf, want->size,
		                         refs->ref_read, refs->ref_opaque);
		TU_RC(rc, ULP_ERR_CORRUPT, "whole object, wrong reference");
	}
	free(buf);
	ulp_dctx_free(d);
	ulp_object_close(obj);
	return failed;
}

static size_t decode_chunks_wrong_ref(const tu_buf *o, const tu_file *want,
                                      ulp_ref_read_fn fn, void *opaque)
{
	const ulp_refs refs = { .ref_read = fn, .ref_opaque = opaque };
	return decode_chunks_refs(o, want, &refs);
}

Test(codec, wrong_reference_never_gives_wrong_bytes)
{
	tu_file v[3];
	build_versions(v, 1, 0xc0dec080ull);
	static const uint32_t sizes[] = { 0, 4099 };
	for (int s = 0; s < 2; s++) {
		tu_buf o;
		tu_encode_ok(&v[1], &v[0], sizes[s], 2, &o, NULL);
		/* v2 instead of v1 (different size, zero padded) */
		tu_mem w2 = tu_mem_of(v[1].data, v[1].size);
		TU_ASSERT(decode_chunks_wrong_ref(&o, &v[1], zero_pad_read,
		                                  &w2) > 0,
		          "v2 accepted as its own reference");
		/* v1 with one element of each matched tensor changed */
		uint8_t *bad = tu_dup(v[0].data, v[0].size);
		for (size_t i = 0; i < v[0].map.n; i++) {
			const ulp_tensor *t = &v[0].map.v[i];
			if (t->nbytes)
				bad[t->offset + t->nbytes / 2] ^= 0x10;
		}
		tu_mem wb = tu_mem_of(bad, v[0].size);
		size_t f = decode_chunks_wrong_ref(&o, &v[1], tu_mem_read, &wb);
		TU_ASSERT(f > 0, "modified reference accepted");
		TU_ASSERT(wb.oob == 0, "read past the reference");
		/* one byte of the header changed */
		memcpy(bad, v[0].data, v[0].size);
		bad[9] ^= 1;
		f = decode_chunks_wrong_ref(&o, &v[1], tu_mem_read, &wb);
		TU_ASSERT(f == 1,
		          "header byte of the reference: %zu chunks "
		          "failed",
		          f);
		free(bad);
		tu_buf_free(&o);
	}
	/* random single-byte changes of the reference */
	tu_rng r;
	tu_rng_init(&r, 0xc0dec081ull);
	tu_buf o;
	tu_encode_ok(&v[1], &v[0], 4099, 2, &o, NULL);
	uint8_t *bad = tu_dup(v[0].data, v[0].size);
	tu_mem wb = tu_mem_of(bad, v[0].size);
	unsigned detected = 0;
	for (int t = 0; t < 150; t++) {
		uint64_t at = tu_below(&r, v[0].size);
		bad[at] ^= (uint8_t)(1 + tu_below(&r, 255));
		detected += decode_chunks_wrong_ref(&o, &v[1], tu_mem_read,
		                                    &wb) > 0;
		bad[at] = v[0].data[at];
	}
	TU_ASSERT(detected > 100, "only %u of 150 changes detected", detected);
	free(bad);
	tu_buf_free(&o);
	free_versions(v);
}

/* A reference held in memory, counting the times it is mapped; with
 * none_from set, offsets from there on are refused (NULL). */
typedef struct map_ref {
	tu_mem m;
	uint64_t none_from;
	unsigned long maps;
} map_ref;

static const void *map_ref_map(void *opaque, uint64_t off, size_t len)
{
	map_ref *r = opaque;
	if (off >= r->none_from || off > r->m.size || len > r->m.size - off)
		return NULL;
	r->maps++;
	return r->m.p + off;
}

static int map_ref_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	return tu_mem_read(&((map_ref *)opaque)->m, off, buf, len);
}

/* Every chunk of o decoded with the reference mapped (ulp_refs.ref_map)
 * where r allows, read elsewhere (decode_chunks_refs). */
static size_t decode_chunks_mapped(const tu_buf *o, const tu_file *want,
                                   map_ref *r)
{
	const ulp_refs refs = { .ref_read = map_ref_read,
		                .ref_map = map_ref_map,
		                .ref_opaque = r };
	return decode_chunks_refs(o, want, &refs);
}

/* The reference read in place decodes as the copied one, a map that
 * refuses falls back to reading, and a wrong mapped reference is
 * caught like a wrong read one. */
Test(codec, reference_read_in_place)
{
	tu_file v[3];
	build_versions(v, 1, 0xc0dec090ull);
	static const uint32_t sizes[] = { 0, 4099 };
	for (int s = 0; s < 2; s++) {
		tu_buf o;
		tu_encode_ok(&v[1], &v[0], sizes[s], 2, &o, NULL);
		map_ref r = { tu_mem_of(v[0].data, v[0].size), UINT64_MAX, 0 };
		TU_ASSERT(decode_chunks_mapped(&o, &v[1], &r) == 0,
		          "chunk size %u", sizes[s]);
		TU_ASSERT(r.maps > 0, "chunk size %u: never mapped", sizes[s]);
		/* refused from the middle on: read there */
		map_ref half = { tu_mem_of(v[0].data, v[0].size), v[0].size / 2,
			         0 };
		TU_ASSERT(decode_chunks_mapped(&o, &v[1], &half) == 0, "half "
		                                                       "mappe"
		                                                       "d");
		TU_ASSERT(half.maps < r.maps && half.m.calls > r.m.calls,
		          "half mapped: %lu maps, %lu reads", half.maps,
		          half.m.calls);
		/* one element of each matched tensor changed */
		uint8_t *bad = tu_dup(v[0].data, v[0].size);
		for (size_t i = 0; i < v[0].map.n; i++) {
			const ulp_tensor *t = &v[0].map.v[i];
			if (t->nbytes)
				bad[t->offset + t->nbytes / 2] ^= 0x10;
		}
		map_ref wb = { tu_mem_of(bad, v[0].size), UINT64_MAX, 0 };
		TU_ASSERT(decode_chunks_mapped(&o, &v[1], &wb) > 0, "modified "
		                                                    "mapped "
		                                                    "reference "
		                                                    "accepted");
		free(bad);
		tu_buf_free(&o);
	}
	free_versions(v);
}

Test(codec, missing_reference_reader)
{
	tu_file v[3];
	build_versions(v, 2, 0xc0dec082ull);
	tu_buf o;
	tu_encode_ok(&v[1], &v[0], 4099, 2, &o, NULL);
	tu_mem m;
	ulp_object *obj = open_buf(&o, &m);
	ulp_dctx *d = ulp_dctx_new();
	uint8_t *buf = tu_xmalloc(v[1].size);
	size_t needs = 0, nch = ulp_object_chunk_count(obj);
	for (size_t i = 0; i < nch; i++) {
		uint64_t off;
		uint32_t len;
		ulp_object_chunk_range(obj, i, &off, &len);
		int rc = ulp_chunk_decode(d, obj, i, NULL, NULL, buf);
		if (ulp_object_chunk_needs_ref(obj, i)) {
			TU_RC(rc, ULP_ERR_REF, "chunk %zu without reference",
			      i);
			needs++;
		} else {
			TU_OK(rc, "chunk %zu needs no reference", i);
			TU_MEMEQ(buf, v[1].data + off, len, "chunk %zu", i);
		}
	}
	TU_ASSERT(needs > 0 && needs < nch, "%zu of %zu chunks need the ref",
	          needs, nch);
	TU_RC(ulp_object_read(d, obj, 0, buf, v[1].size, NULL, NULL),
	      ULP_ERR_REF, "whole object without reference");
	free(buf);
	ulp_dctx_free(d);
	ulp_object_close(obj);
	tu_buf_free(&o);
	free_versions(v);
}

Test(codec, reference_read_errors_propagate)
{
	tu_file v[3];
	build_versions(v, 1, 0xc0dec083ull);
	static const int codes[] = { ULP_ERR_IO, ULP_ERR_NOMEM, ULP_ERR_REF,
		                     5 };
	for (int c = 0; c < 4; c++) {
		int want = codes[c] > 0 ? ULP_ERR_IO : codes[c];
		/* encoding */
		tu_sink sink = { 0 };
		tu_mem rm = tu_mem_of(v[0].data, v[0].size);
		rm.fail_lo = 0;
		rm.fail_hi = v[0].size;
		rm.fail_rc = codes[c];
		for (unsigned th = 1; th <= 3; th += 2) {
			sink.b.len = 0;
			TU_RC(tu_encode(&v[1], &v[0], 4099, th, &sink, NULL,
			                &rm),
			      want, "encode, ref_read returns %d", codes[c]);
		}
		/* decoding */
		tu_buf o;
		tu_encode_ok(&v[1], &v[0], 4099, 2, &o, NULL);
		tu_mem m;
		ulp_object *obj = open_buf(&o, &m);
		ulp_dctx *d = ulp_dctx_new();
		uint8_t *buf = tu_xmalloc(v[1].size);
		TU_RC(ulp_object_read(d, obj, 0, buf, v[1].size, tu_mem_read,
		                      &rm),
		      want, "decode, ref_read returns %d", codes[c]);
		ulp_dctx_free(d);
		ulp_object_close(obj);
		free(buf);
		tu_buf_free(&o);
		tu_buf_free(&sink.b);
	}
	free_versions(v);
}

/* ---------------------------------------------------- write errors */

Test(codec, write_errors_propagate)
{
	tu_file v[3];
	build_versions(v, 1, 0xc0dec090ull);
	tu_sink ok = { 0 };
	tu_mem rm = tu_mem_of(v[0].data, v[0].size);
	TU_OK(tu_encode(&v[1], &v[0], 4099, 1, &ok, NULL, &rm), "control");
	unsigned calls = ok.calls;
	TU_ASSERT(calls >= 5, "only %u writes", calls);
	static const int codes[] = { ULP_ERR_IO, ULP_ERR_NOMEM, ULP_ERR_PARSE,
		                     3 };
	for (unsigned k = 1; k <= calls; k++)
		for (unsigned th = 1; th <= 4; th += 3) {
			int code = codes[k % 4];
			tu_sink s = { 0 };
			s.fail_at = k;
			s.fail_rc = code;
			int rc = tu_encode(&v[1], &v[0], 4099, th, &s, NULL,
			                   &rm);
			TU_RC(rc, code > 0 ? ULP_ERR_IO : code,
			      "write %u of %u fails with %d (%u threads)", k,
			      calls, code, th);
			TU_ASSERT(s.calls == k,
			          "%u writes after a failure at %u", s.calls,
			          k);
			tu_buf_free(&s.b);
		}
	tu_buf_free(&ok.b);
	free_versions(v);
}

/* ------------------------------------------------------- arguments */

typedef struct prog {
	uint64_t last, total;
	unsigned calls;
	int monotonic;
} prog;

static void on_progress(void *opaque, uint64_t done, uint64_t total)
{
	prog *p = opaque;
	if (done <= p->last && p->calls)
		p->monotonic = 0;
	p->last = done;
	p->total = total;
	p->calls++;
}

Test(codec, encode_job_arguments_and_progress)
{
	tu_file v[3];
	build_versions(v, 1, 0xc0dec0a0ull);
	tu_sink sink = { 0 };
	tu_mem rm = tu_mem_of(v[0].data, v[0].size);
	ulp_encode_job job;
	memset(&job, 0, sizeof(job));
	job.cur = v[1].data;
	job.cur_size = v[1].size;
	job.cur_map = &v[1].map;
	job.has_ref = 1;
	job.ref_size = v[0].size;
	job.ref_map = &v[0].map;
	job.ref_hash = v[0].hash;
	job.ref_read = tu_mem_read;
	job.ref_opaque = &rm;
	job.params.chunk_size = 4099;
	job.nthreads = 2;
	job.write = tu_sink_write;
	job.write_opaque = &sink;

	TU_RC(ulp_encode_file(NULL, NULL, NULL, NULL), ULP_ERR_ARG, "job NULL");
	ulp_encode_job j2 = job;
	j2.write = NULL;
	TU_RC(ulp_encode_file(&j2, NULL, NULL, NULL), ULP_ERR_ARG,
	      "write NULL");
	j2 = job;
	j2.ref_read = NULL;
	TU_RC(ulp_encode_file(&j2, NULL, NULL, NULL), ULP_ERR_ARG,
	      "has_ref without ref_read");
	j2 = job;
	j2.cur = NULL;
	TU_RC(ulp_encode_file(&j2, NULL, NULL, NULL), ULP_ERR_ARG,
	      "cur NULL with a size");
	j2 = job;
	j2.cur_size = v[1].map.v[v[1].map.n - 1].offset;
	TU_RC(ulp_encode_file(&j2, NULL, NULL, NULL), ULP_ERR_ARG,
	      "tensor map past the end of the file");
	TU_ASSERT(sink.calls == 0, "something was written");

	prog p = { 0, 0, 0, 1 };
	job.progress = on_progress;
	job.progress_opaque = &p;
	uint8_t hash[16];
	uint64_t osize = 0;
	TU_OK(ulp_encode_file(&job, NULL, hash, &osize), "encode");
	tu_mem m;
	ulp_object *obj = open_buf(&sink.b, &m);
	TU_ASSERT(p.calls == ulp_object_chunk_count(obj) && p.monotonic &&
	                  p.last == v[1].size && p.total == v[1].size,
	          "progress: %u calls, last %" PRIu64 ", total %" PRIu64,
	          p.calls, p.last, p.total);
	TU_ASSERT(memcmp(hash, v[1].hash, 16) == 0, "hash_out");
	TU_ASSERT(osize == sink.b.len, "object_size");
	ulp_object_close(obj);

	/* has_ref with no reference map: everything against the reference's
	 * bytes at the same offsets */
	tu_buf_free(&sink.b);
	sink = (tu_sink){ 0 };
	job.ref_map = NULL;
	job.progress = NULL;
	TU_OK(ulp_encode_file(&job, NULL, NULL, NULL), "ref_map NULL");
	tu_check_object(sink.b.p, sink.b.len, &v[1], &v[0]);
	tu_buf_free(&sink.b);
	free_versions(v);
}

/* ulp_encode_file must either refuse a job (ULP_ERR_ARG) or write an
 * object that opens and decodes to the file: never report success for an
 * object nobody can read.  Returns the encode rc. */
static int encode_refused_or_readable(const ulp_encode_job *job,
                                      const tu_file *cur,
                                      ulp_ref_read_fn ref_read,
                                      void *ref_opaque, const char *what)
{
	tu_sink sink = { 0 };
	ulp_encode_job j = *job;
	j.write = tu_sink_write;
	j.write_opaque = &sink;
	int rc = ulp_encode_file(&j, NULL, NULL, NULL);
	if (rc == ULP_OK) {
		tu_mem m = tu_mem_of(sink.b.p, sink.b.len);
		ulp_object *obj = NULL;
		TU_OK(ulp_object_open(tu_mem_read, &m, sink.b.len, &obj),
		      "%s: encode succeeded but the object does not open",
		      what);
		ulp_dctx *d = ulp_dctx_new();
		uint8_t *out = tu_xmalloc(cur->size);
		TU_OK(ulp_object_read(d, obj, 0, out, cur->size, ref_read,
		                      ref_opaque),
		      "%s: encode succeeded but the object does not decode",
		      what);
		TU_MEMEQ(out, cur->data, cur->size, "%s", what);
		free(out);
		ulp_dctx_free(d);
		ulp_object_close(obj);
	} else {
		TU_RC(rc, ULP_ERR_ARG, "%s", what);
	}
	tu_buf_free(&sink.b);
	return rc;
}

static ulp_encode_job job_for(const tu_file *cur, const tu_file *ref,
                              tu_mem *rm)
{
	return tu_job(cur, ref, rm, 2);
}

Test(codec, has_ref_without_ref_hash)
{
	/* has_ref with ref_hash NULL: the object must not claim to need no
	 * reference while its chunks do */
	tu_file v[3];
	build_versions(v, 1, 0xc0dec0c0ull);
	tu_mem rm = tu_mem_of(v[0].data, v[0].size);
	ulp_encode_job job = job_for(&v[1], &v[0], &rm);
	job.ref_hash = NULL;
	encode_refused_or_readable(&job, &v[1], tu_mem_read, &rm,
	                           "has_ref without ref_hash");
	free_versions(v);
}

/* Serves the whole buffer but counts requests past limit. */
typedef struct limit_src {
	tu_mem m;
	uint64_t limit;
	unsigned long past;
	uint64_t max_end;
} limit_src;

static int limit_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	limit_src *l = opaque;
	if (off + len > l->limit) {
		__atomic_add_fetch(&l->past, 1, __ATOMIC_RELAXED);
		if (off + len > l->max_end)
			l->max_end = off + len; /* only with nthreads 1 */
	}
	return tu_mem_read(&l->m, off, buf, len);
}

Test(codec, reference_map_past_reference_size)
{
	/* A reference map whose last tensor ends past ref_size (the map of
	 * a longer file): the codec promises never to ask for reference
	 * bytes past ref_size, and must not write an object it cannot
	 * decode. */
	tu_file v[3];
	build_versions(v, 1, 0xc0dec0c1ull);
	const ulp_tensor *last = &v[0].map.v[v[0].map.n - 1];
	uint64_t rs = last->offset + last->nbytes / 2;
	tu_file shorter;
	tu_file_raw(&shorter, v[0].data, rs);
	shorter.map = v[0].map; /* borrowed: the longer file's map */
	limit_src src = { tu_mem_of(v[0].data, v[0].size), rs, 0, 0 };
	ulp_encode_job job = job_for(&v[1], &shorter, NULL);
	job.ref_read = limit_read;
	job.ref_opaque = &src;
	job.nthreads = 1;
	tu_sink sink = { 0 };
	job.write = tu_sink_write;
	job.write_opaque = &sink;
	int rc = ulp_encode_file(&job, NULL, NULL, NULL);
	TU_ASSERT(src.past == 0,
	          "encoder read reference bytes up to %" PRIu64
	          ", past ref_size %" PRIu64 " (encode rc %d)",
	          src.max_end, rs, rc);
	tu_buf_free(&sink.b);
	/* and the contract on the result */
	tu_mem guard = tu_mem_of(v[0].data, rs);
	job.ref_read = tu_mem_read;
	job.ref_opaque = &guard;
	encode_refused_or_readable(&job, &v[1], tu_mem_read, &guard,
	                           "reference map past ref_size");
	shorter.map = (ulp_tensor_map){ 0 };
	tu_file_free(&shorter);
	free_versions(v);
}

Test(codec, tensor_map_with_invalid_dtype)
{
	/* A hand-built map with a dtype outside ulp_dtype: refused
	 * (ULP_ERR_ARG) or coded some safe way, never undefined behaviour
	 * (the sanitizer build checks). */
	tu_file v[3];
	build_versions(v, 1, 0xc0dec0c2ull);
	for (size_t i = 0; i < v[1].map.n; i++)
		if (v[1].map.v[i].dtype == ULP_DT_F32)
			v[1].map.v[i].dtype = (ulp_dtype)ULP_DT_COUNT;
	ulp_encode_job job = job_for(&v[1], NULL, NULL);
	encode_refused_or_readable(&job, &v[1], NULL, NULL,
	                           "dtype ULP_DT_COUNT in the tensor map");
	free_versions(v);
}

Test(codec, generic_levels)
{
	tu_file v[3];
	build_versions(v, 1, 0xc0dec0b0ull);
	static const int levels[] = { 1, 3, 19, -5 };
	for (int i = 0; i < 4; i++) {
		tu_sink sink = { 0 };
		tu_mem rm = tu_mem_of(v[0].data, v[0].size);
		ulp_encode_job job;
		memset(&job, 0, sizeof(job));
		job.cur = v[1].data;
		job.cur_size = v[1].size;
		job.cur_map = &v[1].map;
		job.has_ref = 1;
		job.ref_size = v[0].size;
		job.ref_map = &v[0].map;
		job.ref_hash = v[0].hash;
		job.ref_read = tu_mem_read;
		job.ref_opaque = &rm;
		job.params.generic_level = levels[i];
		job.nthreads = 1;
		job.write = tu_sink_write;
		job.write_opaque = &sink;
		TU_OK(ulp_encode_file(&job, NULL, NULL, NULL), "level %d",
		      levels[i]);
		tu_check_object(sink.b.p, sink.b.len, &v[1], &v[0]);
		tu_buf_free(&sink.b);
	}
	free_versions(v);
}
