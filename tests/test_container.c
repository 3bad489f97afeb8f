/*
 * test_container.c - unit tests of the object container of libulp:
 * corruption and truncation detection, versioning, forged but
 * checksum-valid objects, writer misuse and I/O error propagation.
 *
 * Objects are opened from exact-size heap copies through a bounds-checked
 * reader, so the sanitizer build also proves that no corruption makes the
 * reader touch memory outside the object.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include "codec_internal.h"
#include "rans.h"
#include "test_util.h"

/* A small two-version file: F32 and BF16 tensors that walk (delta), an
 * F16 tensor that is new in cur (standalone), an I64 tensor and junk
 * (generic), cut into a few 4 KiB chunks. */
typedef struct fixture {
	tu_file ref, cur;
	tu_buf obj;
} fixture;

static void fixture_make(fixture *fx, uint64_t seed)
{
	tu_tspec s[5];
	tu_rng r;
	tu_rng_init(&r, seed);
	s[0] = (tu_tspec){ "a", ULP_DT_F32, 4 * 1200, 0 };
	s[1] = (tu_tspec){ "b", ULP_DT_BF16, 2 * 1500, 9 };
	s[2] = (tu_tspec){ "c.old", ULP_DT_F16, 2 * 300, 0 };
	s[3] = (tu_tspec){ "steps", ULP_DT_GENERIC, 8 * 40, 3 };
	tu_file_build(&fx->ref, s, 4, NULL, &r, 0);
	s[2].name = "c.new";
	tu_file_build(&fx->cur, s, 4, &fx->ref, &r, 5);
	tu_encode_ok(&fx->cur, &fx->ref, ULP_CHUNK_SIZE_MIN, 1, &fx->obj, NULL);
	tu_check_object(fx->obj.p, fx->obj.len, &fx->cur, &fx->ref);
}

static void fixture_free(fixture *fx)
{
	tu_file_free(&fx->ref);
	tu_file_free(&fx->cur);
	tu_buf_free(&fx->obj);
}

/* Where the index starts (from the trailer). */
static uint64_t index_off(const uint8_t *o, size_t len)
{
	return ulp_le64(o + len - ULP_OBJ_TRAILER_SIZE + 16);
}

static uint64_t chunk_count(const uint8_t *o, size_t len)
{
	return ulp_le64(o + len - ULP_OBJ_TRAILER_SIZE + 8);
}

/* Open o[0..len) from an exact-size copy; on success decode everything
 * and compare.  Returns the open error, or the decode error, or ULP_OK
 * (after checking the bytes: an accepted object is a correct one). */
typedef struct try_res {
	int open_rc, read_rc;
} try_res;

/* in_mem: opened by ulp_object_open_mem over the exact-size copy, so
 * that the payloads are decoded in place (and ASan sees any read past
 * the object). */
static try_res try_object_at(const uint8_t *o, size_t len, const fixture *fx,
                             ulp_dctx *d, int with_ref, int in_mem)
{
	try_res res = { 0, 0 };
	uint8_t *copy = tu_dup(o, len);
	tu_mem m = tu_mem_of(copy, len);
	tu_mem rm = tu_mem_of(fx->ref.data, fx->ref.size);
	ulp_object *obj = NULL;
	res.open_rc = in_mem ? ulp_object_open_mem(copy, len, &obj)
	                     : ulp_object_open(tu_mem_read, &m, len, &obj);
	if (res.open_rc == ULP_OK) {
		uint64_t size = ulp_object_size(obj);
		uint8_t *out = tu_xmalloc(size);
		res.read_rc = ulp_object_read(d, obj, 0, out, size,
		                              with_ref ? tu_mem_read : NULL,
		                              with_ref ? &rm : NULL);
		if (res.read_rc == ULP_OK) {
			TU_ASSERT(size == fx->cur.size,
			          "accepted object of %" PRIu64 " bytes", size);
			TU_MEMEQ(out, fx->cur.data, size,
			         "object accepted with wrong bytes");
		}
		free(out);
		ulp_object_close(obj);
	} else {
		TU_ASSERT(obj == NULL, "failed open left an object");
	}
	TU_ASSERT(m.oob == 0 && rm.oob == 0,
	          "out-of-bounds read (object %lu, reference %lu)", m.oob,
	          rm.oob);
	free(copy);
	return res;
}

static try_res try_object(const uint8_t *o, size_t len, const fixture *fx,
                          ulp_dctx *d, int with_ref)
{
	return try_object_at(o, len, fx, d, with_ref, 0);
}

/* Flip each byte of fx's object with each of masks[0..nmasks) and check
 * that open or decode reports it, with the SIMD kernels off and on.
 * With pay_check 0 the payload checksum is not checked and the object is
 * decoded in place, so every corrupt payload reaches the decoder straight
 * from the object's bytes: the sanitizer build then proves it
 * memory-safe on them, and the decoded bytes' checksum must still catch
 * each one that changes the decoded bytes. */
static void check_every_byte(const fixture *fx, const uint8_t *masks,
                             size_t nmasks, int pay_check)
{
	const uint8_t *o = fx->obj.p;
	const size_t len = fx->obj.len;
	const uint64_t idx = index_off(o, len);
	ulp_dctx *d = ulp_dctx_new();
	ulp_dctx_set_payload_check(d, pay_check);
	uint8_t *c = tu_xmalloc(len);
	unsigned at_open = 0, at_decode = 0, benign = 0;
	for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++) {
		int old = ulp_rans_set_simd(simd);
		for (size_t pos = 0; pos < len; pos++)
			for (size_t k = 0; k < nmasks; k++) {
				int in_payload = pos >= ULP_OBJ_HEADER_SIZE &&
				                 pos < idx;
				if (in_payload && pos % TU_SWEEP_STRIDE)
					continue;
				memcpy(c, o, len);
				c[pos] ^= masks[k];
				try_res t = try_object_at(c, len, fx, d, 1,
				                          !pay_check);
				if (!in_payload) {
					/* header, index and trailer are verified by
				 * ulp_object_open */
					TU_ASSERT(t.open_rc != ULP_OK,
					          "byte %zu ^ %02x "
					          "(header/index/trailer) "
					          "not detected at open",
					          pos, masks[k]);
					int version_field = pos >= 7 &&
					                    pos < 16;
					TU_ASSERT(
						t.open_rc == ULP_ERR_CORRUPT ||
							(version_field &&
					                 t.open_rc ==
					                         ULP_ERR_VERSION),
						"byte %zu ^ %02x: open rc %d "
						"(%s)",
						pos, masks[k], t.open_rc,
						ulp_strerror(t.open_rc));
					at_open++;
				} else {
					/* payloads are verified when decoded */
					TU_OK(t.open_rc,
					      "payload byte %zu ^ %02x", pos,
					      masks[k]);
					/* Unchecked, a few bits the decoder
					 * does not depend on decode to the
					 * same bytes (try_object compared
					 * them): those are harmless. */
					if (!pay_check && t.read_rc == ULP_OK)
						benign++;
					else
						TU_RC(t.read_rc,
						      ULP_ERR_CORRUPT,
						      "payload byte %zu ^ "
						      "%02x",
						      pos, masks[k]);
					at_decode++;
				}
			}
		ulp_rans_set_simd(old);
	}
	TU_ASSERT(at_open > 0 && at_decode > 0, "open %u decode %u", at_open,
	          at_decode);
	/* harmless flips are rare: a handful of bits per chunk */
	TU_ASSERT(benign * 100 <= at_decode, "%u of %u payload flips decoded",
	          benign, at_decode);
	/* the dctx is still fine after all those failures */
	try_res t = try_object(o, len, fx, d, 1);
	TU_ASSERT(t.open_rc == ULP_OK && t.read_rc == ULP_OK, "control");
	free(c);
	ulp_dctx_free(d);
}

Test(container, every_single_byte_corruption_is_detected)
{
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	fixture fx;
	fixture_make(&fx, 0xc047a001ull);
	TU_ASSERT(chunk_count(fx.obj.p, fx.obj.len) >= 3,
	          "want a few chunks, got %" PRIu64,
	          chunk_count(fx.obj.p, fx.obj.len));
	check_every_byte(&fx, masks, sizeof(masks), 1);
	check_every_byte(&fx, masks, sizeof(masks), 0);
	fixture_free(&fx);
}

/* The same with streams long enough for 32-lane rANS blocks (bf16 and
 * fp32 deltas, one fp16 keyframe tensor), through both kernels. */
Test(container, every_single_byte_corruption_is_detected_wide)
{
	static const uint8_t masks[] = { 0x01 };
	fixture fx;
	tu_tspec s[3];
	tu_rng r;
	tu_rng_init(&r, 0xc047a00aull);
	s[0] = (tu_tspec){ "w", ULP_DT_BF16, 2 * 20000, 0 };
	s[1] = (tu_tspec){ "m", ULP_DT_F32, 4 * 17000, 8 };
	s[2] = (tu_tspec){ "h.old", ULP_DT_F16, 2 * 17000, 0 };
	tu_file_build(&fx.ref, s, 3, NULL, &r, 0);
	s[2].name = "h.new";
	tu_file_build(&fx.cur, s, 3, &fx.ref, &r, 5);
	tu_encode_ok(&fx.cur, &fx.ref, 256u << 10, 1, &fx.obj, NULL);
	tu_check_object(fx.obj.p, fx.obj.len, &fx.cur, &fx.ref);
	check_every_byte(&fx, masks, sizeof(masks), 1);
	check_every_byte(&fx, masks, sizeof(masks), 0);
	fixture_free(&fx);
}

Test(container, every_truncation_fails_at_open)
{
	fixture fx;
	fixture_make(&fx, 0xc047a002ull);
	ulp_dctx *d = ulp_dctx_new();
	for (size_t l = 0; l < fx.obj.len; l++) {
		try_res t = try_object(fx.obj.p, l, &fx, d, 1);
		TU_RC(t.open_rc, ULP_ERR_CORRUPT,
		      "object of %zu truncated to %zu", fx.obj.len, l);
	}
	/* extra bytes at the end, or a missing first byte */
	tu_buf ext = { 0 };
	tu_buf_put(&ext, fx.obj.p, fx.obj.len);
	for (int k = 1; k <= 40; k++) {
		uint8_t z = (uint8_t)k;
		tu_buf_put(&ext, &z, 1);
		try_res t = try_object(ext.p, ext.len, &fx, d, 1);
		TU_RC(t.open_rc, ULP_ERR_CORRUPT, "%d bytes appended", k);
	}
	try_res t = try_object(fx.obj.p + 1, fx.obj.len - 1, &fx, d, 1);
	TU_RC(t.open_rc, ULP_ERR_CORRUPT, "first byte missing");
	tu_buf_free(&ext);
	ulp_dctx_free(d);
	fixture_free(&fx);
}

/* ---------------------------------------- forged, checksum-valid objects */

static void reseal_header(uint8_t *o)
{
	ulp_put64(o + 40, XXH3_64bits(o, 40));
}

/* Recompute every checksum of a (possibly edited) object whose index
 * holds n entries at idx (the layout of the object it was copied from,
 * whatever its edited trailer now says): payload hashes from the index's
 * stored lengths, the index hash, the trailer hash and the header hash.
 * The decoded-bytes hashes are left alone. */
static void reseal_all(uint8_t *o, size_t len, uint64_t n, uint64_t idx)
{
	uint8_t *t = o + len - ULP_OBJ_TRAILER_SIZE;
	uint64_t pos = ULP_OBJ_HEADER_SIZE;
	cr_assert(idx + n * ULP_OBJ_INDEX_ENTRY <= len);
	for (uint64_t i = 0; i < n; i++) {
		uint8_t *e = o + idx + i * ULP_OBJ_INDEX_ENTRY;
		uint32_t sl = ulp_le32(e + 4);
		if (pos + sl <= idx)
			ulp_put64(e + 24, XXH3_64bits(o + pos, sl));
		pos += sl;
	}
	ulp_put64(t + 40, XXH3_64bits(o + idx, n * ULP_OBJ_INDEX_ENTRY));
	ulp_put64(t + 56, XXH3_64bits(t, 56));
	reseal_header(o);
}

Test(container, future_versions)
{
	fixture fx;
	fixture_make(&fx, 0xc047a003ull);
	ulp_dctx *d = ulp_dctx_new();
	uint8_t *c = tu_xmalloc(fx.obj.len);
	const size_t len = fx.obj.len;

	/* resealing an unchanged header is a no-op */
	memcpy(c, fx.obj.p, len);
	reseal_header(c);
	TU_MEMEQ(c, fx.obj.p, len, "reseal changed the header");
	reseal_all(c, len, chunk_count(c, len), index_off(c, len));
	TU_MEMEQ(c, fx.obj.p, len, "reseal changed the object");

	struct {
		size_t off;
		uint8_t val;
		int want;
		const char *what;
	} cases[] = {
		{ 8, ULP_OBJ_FORMAT + 1, ULP_ERR_VERSION, "the next format" },
		{ 8, 0, ULP_ERR_VERSION, "format 0" },
		{ 9, 1, ULP_ERR_VERSION, "format 257" },
		{ 7, '2', ULP_ERR_VERSION, "magic ULPFSOB2" },
		{ 10, 9, ULP_ERR_VERSION, "unknown header flag" },
		{ 10, 5, ULP_ERR_CORRUPT, "side flag without its section" },
		{ 11, 0x80, ULP_ERR_VERSION, "unknown header flag (high)" },
		{ 12, 1, ULP_ERR_VERSION, "reserved header word" },
		{ 15, 1, ULP_ERR_VERSION, "reserved header word (high)" },
		{ 0, 'X', ULP_ERR_CORRUPT, "magic XLPFSOB1" },
		{ 6, 'X', ULP_ERR_CORRUPT, "magic ULPFSOX1" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(c, fx.obj.p, len);
		c[cases[i].off] = cases[i].val;
		reseal_header(c);
		try_res t = try_object(c, len, &fx, d, 1);
		TU_RC(t.open_rc, cases[i].want, "%s", cases[i].what);
	}
	/* has_ref cleared: the index says chunks need a reference */
	memcpy(c, fx.obj.p, len);
	c[10] = 0;
	reseal_header(c);
	TU_RC(try_object(c, len, &fx, d, 1).open_rc, ULP_ERR_CORRUPT,
	      "has_ref cleared");
	free(c);
	ulp_dctx_free(d);
	fixture_free(&fx);
}

Test(container, forged_index_and_trailer)
{
	fixture fx;
	fixture_make(&fx, 0xc047a004ull);
	ulp_dctx *d = ulp_dctx_new();
	const size_t len = fx.obj.len;
	uint8_t *c = tu_xmalloc(len);
	const uint64_t idx = index_off(fx.obj.p, len);
	const uint64_t n = chunk_count(fx.obj.p, len);
	const size_t tr = len - ULP_OBJ_TRAILER_SIZE;
	cr_assert(n >= 3);
#define ENTRY(i) (c + idx + (i)*ULP_OBJ_INDEX_ENTRY)
#define FORGE(what, want_open, want_read, ...)                          \
	do {                                                            \
		memcpy(c, fx.obj.p, len);                               \
		__VA_ARGS__;                                            \
		reseal_all(c, len, n, idx);                             \
		try_res t_ = try_object(c, len, &fx, d, 1);             \
		TU_RC(t_.open_rc, want_open, "%s: open", what);         \
		if (t_.open_rc == ULP_OK)                               \
			TU_RC(t_.read_rc, want_read, "%s: read", what); \
	} while (0)

	FORGE("unknown index flag", ULP_ERR_CORRUPT, 0,
	      ulp_put32(ENTRY(1) + 8, ulp_le32(ENTRY(1) + 8) | 2));
	FORGE("reserved index word", ULP_ERR_CORRUPT, 0,
	      ulp_put32(ENTRY(0) + 12, 1));
	FORGE("chunk of length 0", ULP_ERR_CORRUPT, 0, ulp_put32(ENTRY(1), 0));
	FORGE("chunk longer than the maximum", ULP_ERR_CORRUPT, 0,
	      ulp_put32(ENTRY(0), ULP_CHUNK_SIZE_MAX + 1);
	      ulp_put64(c + tr, ulp_le64(c + tr) + ULP_CHUNK_SIZE_MAX + 1 -
	                                ulp_le32(fx.obj.p + idx)));
	FORGE("lengths do not add up to the size", ULP_ERR_CORRUPT, 0,
	      ulp_put32(ENTRY(2), ulp_le32(ENTRY(2)) + 1));
	FORGE("size does not match the lengths", ULP_ERR_CORRUPT, 0,
	      ulp_put64(c + tr, ulp_le64(c + tr) - 1));
	FORGE("stored lengths do not reach the index", ULP_ERR_CORRUPT, 0,
	      ulp_put32(ENTRY(2) + 4, ulp_le32(ENTRY(2) + 4) - 1));
	FORGE("chunk count too large", ULP_ERR_CORRUPT, 0,
	      ulp_put64(c + tr + 8, n + 1));
	FORGE("chunk count too small", ULP_ERR_CORRUPT, 0,
	      ulp_put64(c + tr + 8, n - 1));
	FORGE("huge chunk count", ULP_ERR_CORRUPT, 0,
	      ulp_put64(c + tr + 8, UINT64_MAX / 16));
	/* n * 32 wraps around to the real index size: must be caught
	 * before anything is allocated for n chunks */
	FORGE("chunk count wrapping the index size", ULP_ERR_CORRUPT, 0,
	      ulp_put64(c + tr + 8, n + (1ull << 59)));
	FORGE("index offset moved", ULP_ERR_CORRUPT, 0,
	      ulp_put64(c + tr + 16, idx - 1));
	FORGE("end magic", ULP_ERR_CORRUPT, 0, c[tr + 48] = 'u');
	/* consistent totals, wrong boundaries: found at decode time */
	FORGE("logical lengths shifted between chunks", ULP_OK, ULP_ERR_CORRUPT,
	      ulp_put32(ENTRY(0), ulp_le32(ENTRY(0)) + 1);
	      ulp_put32(ENTRY(1), ulp_le32(ENTRY(1)) - 1));
	FORGE("stored lengths shifted between chunks", ULP_OK, ULP_ERR_CORRUPT,
	      ulp_put32(ENTRY(0) + 4, ulp_le32(ENTRY(0) + 4) + 1);
	      ulp_put32(ENTRY(1) + 4, ulp_le32(ENTRY(1) + 4) - 1));
	FORGE("empty payload for a chunk", ULP_OK, ULP_ERR_CORRUPT,
	      ulp_put32(ENTRY(1) + 4,
	                ulp_le32(ENTRY(1) + 4) + ulp_le32(ENTRY(0) + 4));
	      ulp_put32(ENTRY(0) + 4, 0));
	FORGE("decoded hash of a chunk", ULP_OK, ULP_ERR_CORRUPT,
	      ENTRY(1)[16] ^= 1);
	FORGE("file hash (not checked by decoding)", ULP_OK, ULP_OK,
	      c[tr + 24] ^= 1);
#undef FORGE
#undef ENTRY
	free(c);
	ulp_dctx_free(d);
	fixture_free(&fx);
}

Test(container, forged_payloads_never_crash_or_lie)
{
	/* Every payload byte changed and every checksum recomputed: the
	 * chunk decoder itself must cope, answering CORRUPT (or, without
	 * the reference, REF) and never wrong bytes. */
	fixture fx;
	fixture_make(&fx, 0xc047a005ull);
	ulp_dctx *d = ulp_dctx_new();
	const size_t len = fx.obj.len;
	const uint64_t idx = index_off(fx.obj.p, len);
	uint8_t *c = tu_xmalloc(len);
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	unsigned rejected = 0, total = 0;
	for (uint64_t pos = ULP_OBJ_HEADER_SIZE; pos < idx; pos++)
		for (size_t k = 0; k < sizeof(masks); k++) {
			memcpy(c, fx.obj.p, len);
			c[pos] ^= masks[k];
			reseal_all(c, len, chunk_count(fx.obj.p, len), idx);
			for (int with_ref = 1; with_ref >= 0; with_ref--) {
				try_res t =
					try_object(c, len, &fx, d, with_ref);
				TU_OK(t.open_rc, "payload byte %" PRIu64, pos);
				TU_ASSERT(t.read_rc == ULP_OK ||
				                  t.read_rc ==
				                          ULP_ERR_CORRUPT ||
				                  (!with_ref &&
				                   t.read_rc == ULP_ERR_REF),
				          "payload byte %" PRIu64 " ^ %02x: rc "
				          "%d (%s)",
				          pos, masks[k], t.read_rc,
				          ulp_strerror(t.read_rc));
				if (with_ref) {
					rejected += t.read_rc != ULP_OK;
					total++;
				}
			}
		}
	/* a change that decodes to the same bytes is possible (e.g. in
	 * unused padding bits) but must be rare */
	TU_ASSERT(rejected * 100 >= total * 95, "%u of %u rejected", rejected,
	          total);
	free(c);
	ulp_dctx_free(d);
	fixture_free(&fx);
}

/* An object of one chunk of L logical bytes (whose decoded hash is that of
 * data) with a hand-made payload, written through ulp_writer (which only
 * reads the runs list), opened and decoded.  A payload the writer refuses
 * counts as failing to open with ULP_ERR_CORRUPT. */
static try_res try_payload(const uint8_t *pay, size_t plen, uint32_t L,
                           const uint8_t *data, const uint8_t *refdata,
                           uint64_t refsize)
{
	try_res res = { 0, 0 };
	tu_sink sink = { 0 };
	ulp_writer *w = NULL;
	uint8_t rh[16], fh[16];
	ulp_hash128(data, L, fh);
	if (refdata)
		ulp_hash128(refdata, refsize, rh);
	TU_OK(ulp_writer_new(tu_sink_write, &sink, refdata ? rh : NULL, refsize,
	                     &w),
	      "writer");
	int rc = ulp_writer_add_chunk(w, 0, L, pay, plen, XXH3_64bits(data, L));
	if (rc) {
		/* the writer already refused it (its runs list is unreadable) */
		TU_RC(rc, ULP_ERR_ARG, "add forged chunk");
		ulp_writer_free(w);
		tu_buf_free(&sink.b);
		res.open_rc = ULP_ERR_CORRUPT;
		return res;
	}
	TU_OK(ulp_writer_finish(w, fh, NULL), "finish");
	ulp_writer_free(w);
	uint8_t *copy = tu_dup(sink.b.p, sink.b.len);
	tu_mem m = tu_mem_of(copy, sink.b.len);
	tu_mem rm = tu_mem_of(refdata, refsize);
	ulp_object *obj = NULL;
	res.open_rc = ulp_object_open(tu_mem_read, &m, sink.b.len, &obj);
	if (!res.open_rc) {
		ulp_dctx *d = ulp_dctx_new();
		uint8_t *out = tu_xmalloc(L);
		res.read_rc = ulp_object_read(d, obj, 0, out, L,
		                              refdata ? tu_mem_read : NULL,
		                              refdata ? &rm : NULL);
		if (!res.read_rc)
			TU_MEMEQ(out, data, L, "forged payload accepted");
		free(out);
		ulp_dctx_free(d);
		ulp_object_close(obj);
	}
	TU_ASSERT(m.oob == 0 && rm.oob == 0, "out-of-bounds read");
	free(copy);
	tu_buf_free(&sink.b);
	return res;
}

/* ulp_writer_add_chunk_hashed writes what ulp_writer_add_chunk does when
 * given the payload's hash, and the reader refuses the chunk when the
 * hash it was given is not the payload's. */
static int object_of_payload(const uint8_t *pay, size_t plen,
                             const uint8_t *data, uint32_t L, int hashed,
                             uint64_t enc_hash, tu_sink *sink)
{
	ulp_writer *w = NULL;
	uint8_t fh[16];
	ulp_hash128(data, L, fh);
	TU_OK(ulp_writer_new(tu_sink_write, sink, NULL, 0, &w), "writer");
	uint64_t dh = XXH3_64bits(data, L);
	TU_OK(hashed ? ulp_writer_add_chunk_hashed(w, 0, L, pay, plen, dh,
	                                           enc_hash)
	             : ulp_writer_add_chunk(w, 0, L, pay, plen, dh),
	      "add");
	TU_OK(ulp_writer_finish(w, fh, NULL), "finish");
	ulp_writer_free(w);
	tu_mem m = tu_mem_of(sink->b.p, sink->b.len);
	ulp_object *obj = NULL;
	int rc = ulp_object_open(tu_mem_read, &m, sink->b.len, &obj);
	if (!rc) {
		ulp_dctx *d = ulp_dctx_new();
		uint8_t out[8];
		rc = ulp_object_read(d, obj, 0, out, L, NULL, NULL);
		if (!rc)
			TU_MEMEQ(out, data, L, "read back");
		ulp_dctx_free(d);
		ulp_object_close(obj);
	}
	return rc;
}

Test(container, writer_takes_the_payload_hash)
{
	const uint8_t data[8] = { 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 };
	/* one F32 run of 2 elements, stored RAW (as hand_made_payloads) */
	const uint8_t pay[14] = { 1, 1,    8,    ULP_DT_F32, 9, 0, 0,
		                  0, 0x80, 0x3f, 0,          0, 0, 0x40 };
	const size_t plen = sizeof(pay);
	tu_sink a = { 0 }, b = { 0 }, c = { 0 };
	TU_OK(object_of_payload(pay, plen, data, 8, 0, 0, &a), "unhashed");
	TU_OK(object_of_payload(pay, plen, data, 8, 1, XXH3_64bits(pay, plen),
	                        &b),
	      "hashed");
	TU_ASSERT(a.b.len == b.b.len && memcmp(a.b.p, b.b.p, a.b.len) == 0,
	          "the two objects differ");
	TU_RC(object_of_payload(pay, plen, data, 8, 1,
	                        XXH3_64bits(pay, plen) ^ 1, &c),
	      ULP_ERR_CORRUPT, "a wrong payload hash");
	tu_buf_free(&a.b);
	tu_buf_free(&b.b);
	tu_buf_free(&c.b);
}

Test(container, hand_made_payloads)
{
	const uint8_t data[16] = { 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40,
		                   1, 2, 3,    4,    5, 6, 7, 8 };
	const uint8_t F32 = ULP_DT_F32, REF = 0x80;
	struct {
		const char *what;
		uint32_t L;
		int with_ref;
		int want; /* ULP_OK or ULP_ERR_CORRUPT (open or read) */
		size_t plen;
		uint8_t p[40];
	} cases[] = {
		/* control: one F32 run of 2 elements, stored RAW */
		{ "valid RAW F32 run",
		  8,
		  0,
		  ULP_OK,
		  14,
		  { 1, 1, 8, F32, 9, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 } },
		/* control: one generic run, RAW */
		{ "valid RAW generic run",
		  8,
		  0,
		  ULP_OK,
		  14,
		  { 1, 1, 8, 0, 9, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 } },
		/* control: F32 run against the reference at 8, IDENTICAL */
		{ "valid IDENTICAL F32 run",
		  8,
		  1,
		  ULP_OK,
		  7,
		  { 1, 1, 8, F32 | REF, 8, 1, 2 } },
		{ "float run not whole elements",
		  7,
		  0,
		  ULP_ERR_CORRUPT,
		  10,
		  { 1, 1, 7, F32, 5, 0, 0, 0, 0x80, 0x3f } },
		{ "zero-length run",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  16,
		  { 1, 2, 0, 0, 8, F32, 9, 0, 0, 0, 0x80, 0x3f, 0, 0, 0,
		    0x40 } },
		{ "unknown dtype",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  14,
		  { 1, 1, 8, ULP_DT_COUNT, 9, 0, 0, 0, 0x80, 0x3f, 0, 0, 0,
		    0x40 } },
		{ "runs shorter than the chunk",
		  16,
		  0,
		  ULP_ERR_CORRUPT,
		  14,
		  { 1, 1, 8, F32, 9, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 } },
		{ "runs longer than the chunk",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  18,
		  { 1, 1, 12, F32, 13, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 1, 2,
		    3, 4 } },
		{ "float run past the reference",
		  8,
		  1,
		  ULP_ERR_CORRUPT,
		  7,
		  { 1, 1, 8, F32 | REF, 12, 1, 2 } },
		{ "generic run past the reference",
		  8,
		  1,
		  ULP_ERR_CORRUPT,
		  7,
		  { 1, 1, 8, REF, 17, 1, 2 } },
		{ "huge run count",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  18,
		  { 1, 0x80, 0x80, 0x80, 0x80, 0x10, 8, F32, 9, 0, 0, 0, 0x80,
		    0x3f, 0, 0, 0, 0x40 } },
		{ "stream longer than the payload",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  14,
		  { 1, 1, 8, F32, 10, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 } },
		{ "stream missing", 8, 0, ULP_ERR_CORRUPT, 4, { 1, 1, 8, F32 } },
		{ "stream of the wrong length",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  13,
		  { 1, 1, 8, F32, 8, 0, 0, 0, 0x80, 0x3f, 0, 0, 0 } },
		{ "IDENTICAL without a reference run",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  6,
		  { 1, 1, 8, F32, 1, 2 } },
		{ "reference run in an object without reference",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  7,
		  { 1, 1, 8, F32 | REF, 0, 1, 2 } },
		{ "unknown stream coding",
		  8,
		  0,
		  ULP_ERR_CORRUPT,
		  14,
		  { 1, 1, 8, F32, 9, 9, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 } },
		/* generic run, reference partly past its end: only what the
		 * reference has is used as prefix (here all of it) */
		{ "valid generic run against the reference",
		  8,
		  1,
		  ULP_OK,
		  7,
		  { 1, 1, 8, REF, 8, 1, 2 } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* the reference: 16 bytes whose bytes 8..15 are data[0..8) */
		uint8_t ref[16];
		memset(ref, 0x55, 8);
		memcpy(ref + 8, data, 8);
		try_res t = try_payload(cases[i].p, cases[i].plen, cases[i].L,
		                        data, cases[i].with_ref ? ref : NULL,
		                        cases[i].with_ref ? 16 : 0);
		int rc = t.open_rc ? t.open_rc : t.read_rc;
		TU_RC(rc, cases[i].want, "%s (open %d, read %d)", cases[i].what,
		      t.open_rc, t.read_rc);
	}
}

/* ------------------------------------------------------ writer misuse */

Test(container, writer_misuse)
{
	fixture fx;
	fixture_make(&fx, 0xc047a006ull);
	ulp_plan *pl = NULL;
	ulp_params p = { 0 };
	p.chunk_size = ULP_CHUNK_SIZE_MIN;
	TU_OK(ulp_plan_build(&fx.cur.map, fx.cur.size, &fx.ref.map, fx.ref.size,
	                     &p, &pl),
	      "plan");
	const size_t n = ulp_plan_chunk_count(pl);
	cr_assert(n >= 3);
	ulp_cctx *cc = ulp_cctx_new();
	tu_mem rm = tu_mem_of(fx.ref.data, fx.ref.size);
	/* encoded chunks, kept */
	tu_buf *enc = calloc(n, sizeof(tu_buf));
	uint64_t *off = calloc(n, sizeof(uint64_t));
	uint32_t *clen = calloc(n, sizeof(uint32_t));
	uint64_t *dh = calloc(n, sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) {
		const void *e;
		size_t el;
		ulp_plan_chunk_range(pl, i, &off[i], &clen[i]);
		TU_OK(ulp_chunk_encode(cc, pl, i, fx.cur.data + off[i],
		                       tu_mem_read, &rm, &e, &el, NULL),
		      "chunk %zu", i);
		tu_buf_put(&enc[i], e, el);
		dh[i] = XXH3_64bits(fx.cur.data + off[i], clen[i]);
	}

	ulp_writer *w = NULL;
	tu_sink sink = { 0 };
	TU_RC(ulp_writer_new(NULL, &sink, fx.ref.hash, fx.ref.size, &w),
	      ULP_ERR_ARG, "write NULL");
	TU_RC(ulp_writer_new(tu_sink_write, &sink, fx.ref.hash, fx.ref.size,
	                     NULL),
	      ULP_ERR_ARG, "out NULL");
	TU_ASSERT(sink.calls == 0, "writes on failed writer_new");
	TU_OK(ulp_writer_new(tu_sink_write, &sink, fx.ref.hash, fx.ref.size,
	                     &w),
	      "writer");
	unsigned calls = sink.calls;
#define MISUSE(what, o_, l_, e_, el_)                                       \
	do {                                                                \
		TU_RC(ulp_writer_add_chunk(w, o_, l_, e_, el_, 0),          \
		      ULP_ERR_ARG, what);                                   \
		TU_ASSERT(sink.calls == calls, "%s: something was written", \
		          what);                                            \
	} while (0)
	MISUSE("first chunk at offset 1", 1, clen[0], enc[0].p, enc[0].len);
	MISUSE("second chunk first", off[1], clen[1], enc[1].p, enc[1].len);
	MISUSE("empty chunk", 0, 0, enc[0].p, enc[0].len);
	static const uint8_t junk[4] = { 9, 9, 9, 9 };
	MISUSE("not a chunk payload", 0, clen[0], junk, sizeof(junk));
	MISUSE("empty payload", 0, clen[0], enc[0].p, 0);
	TU_OK(ulp_writer_add_chunk(w, off[0], clen[0], enc[0].p, enc[0].len,
	                           dh[0]),
	      "chunk 0");
	calls = sink.calls;
	MISUSE("chunk 0 again", off[0], clen[0], enc[0].p, enc[0].len);
	MISUSE("gap: chunk 2 after 0", off[2], clen[2], enc[2].p, enc[2].len);
	MISUSE("overlap", off[1] - 1, clen[1], enc[1].p, enc[1].len);
	MISUSE("gap of one byte", off[1] + 1, clen[1], enc[1].p, enc[1].len);
#undef MISUSE
	/* after the rejected calls the writer still makes a valid object */
	for (size_t i = 1; i < n; i++)
		TU_OK(ulp_writer_add_chunk(w, off[i], clen[i], enc[i].p,
		                           enc[i].len, dh[i]),
		      "chunk %zu", i);
	uint64_t total = 0;
	TU_OK(ulp_writer_finish(w, fx.cur.hash, &total), "finish");
	TU_ASSERT(total == sink.b.len, "total %" PRIu64 " vs %zu", total,
	          sink.b.len);
	TU_ASSERT(sink.b.len == fx.obj.len, "%zu bytes, encode_file %zu",
	          sink.b.len, fx.obj.len);
	TU_MEMEQ(sink.b.p, fx.obj.p, fx.obj.len, "hand-written object");
	ulp_writer_free(w);
	tu_buf_free(&sink.b);

	/* payloads with a byte too many or too few: the writer cannot tell
	 * (it only reads the runs list), the checksums are right, the
	 * decoder must refuse them */
	for (int delta = -1; delta <= 1; delta += 2) {
		sink = (tu_sink){ 0 };
		TU_OK(ulp_writer_new(tu_sink_write, &sink, fx.ref.hash,
		                     fx.ref.size, &w),
		      "writer");
		for (size_t i = 0; i < n; i++) {
			tu_buf e = { 0 };
			tu_buf_put(&e, enc[i].p, enc[i].len);
			if (i == 1 && delta > 0)
				tu_buf_put(&e, "", 1);
			if (i == 1 && delta < 0)
				e.len--;
			TU_OK(ulp_writer_add_chunk(w, off[i], clen[i], e.p,
			                           e.len, dh[i]),
			      "chunk %zu", i);
			tu_buf_free(&e);
		}
		TU_OK(ulp_writer_finish(w, fx.cur.hash, &total), "finish");
		ulp_writer_free(w);
		ulp_dctx *d = ulp_dctx_new();
		try_res t = try_object(sink.b.p, sink.b.len, &fx, d, 1);
		TU_OK(t.open_rc, "payload %+d byte", delta);
		TU_RC(t.read_rc, ULP_ERR_CORRUPT, "payload %+d byte", delta);
		ulp_dctx_free(d);
		tu_buf_free(&sink.b);
	}

	/* a sink that fails: the writer reports it, then stays failed */
	static const int codes[] = { ULP_ERR_IO, ULP_ERR_NOMEM, 1 };
	for (int k = 0; k < 3; k++) {
		int want = codes[k] > 0 ? ULP_ERR_IO : codes[k];
		sink = (tu_sink){ 0 };
		sink.fail_at = 3; /* header, chunk 0, then chunk 1 fails */
		sink.fail_rc = codes[k];
		TU_OK(ulp_writer_new(tu_sink_write, &sink, fx.ref.hash,
		                     fx.ref.size, &w),
		      "writer");
		TU_OK(ulp_writer_add_chunk(w, off[0], clen[0], enc[0].p,
		                           enc[0].len, dh[0]),
		      "chunk 0");
		TU_RC(ulp_writer_add_chunk(w, off[1], clen[1], enc[1].p,
		                           enc[1].len, dh[1]),
		      want, "failing sink (%d)", codes[k]);
		TU_RC(ulp_writer_add_chunk(w, off[1], clen[1], enc[1].p,
		                           enc[1].len, dh[1]),
		      ULP_ERR_IO, "add after a failed write");
		TU_RC(ulp_writer_finish(w, fx.cur.hash, &total), ULP_ERR_IO,
		      "finish after a failed write");
		TU_ASSERT(sink.calls == 3, "%u writes", sink.calls);
		ulp_writer_free(w);
		tu_buf_free(&sink.b);
		/* the header write itself fails */
		sink = (tu_sink){ 0 };
		sink.fail_at = 1;
		sink.fail_rc = codes[k];
		TU_RC(ulp_writer_new(tu_sink_write, &sink, NULL, 0, &w), want,
		      "header write fails (%d)", codes[k]);
	}

	/* no chunks: a valid empty object; no reference: has_ref 0 */
	sink = (tu_sink){ 0 };
	TU_OK(ulp_writer_new(tu_sink_write, &sink, NULL, 12345, &w), "writer");
	uint8_t h0[16];
	ulp_content_hash(ULP_HASH_TREE, NULL, 0, h0);
	TU_OK(ulp_writer_finish(w, h0, &total), "finish");
	ulp_writer_free(w);
	tu_file empty;
	tu_file_raw(&empty, NULL, 0);
	tu_check_object(sink.b.p, sink.b.len, &empty, NULL);
	tu_file_free(&empty);
	tu_buf_free(&sink.b);

	for (size_t i = 0; i < n; i++)
		tu_buf_free(&enc[i]);
	free(enc);
	free(off);
	free(clen);
	free(dh);
	ulp_cctx_free(cc);
	ulp_plan_free(pl);
	fixture_free(&fx);
}

/* -------------------------------------------------------- read errors */

Test(container, read_errors_propagate)
{
	fixture fx;
	fixture_make(&fx, 0xc047a007ull);
	const size_t len = fx.obj.len;
	const uint64_t idx = index_off(fx.obj.p, len);
	ulp_object *obj = NULL;
	tu_mem m = tu_mem_of(fx.obj.p, len);
	TU_RC(ulp_object_open(NULL, &m, len, &obj), ULP_ERR_ARG, "read NULL");
	TU_RC(ulp_object_open(tu_mem_read, &m, len, NULL), ULP_ERR_ARG,
	      "out NULL");

	static const int codes[] = { ULP_ERR_IO, ULP_ERR_NOMEM, ULP_ERR_REF,
		                     2 };
	for (int k = 0; k < 4; k++) {
		int want = codes[k] > 0 ? ULP_ERR_IO : codes[k];
		m.fail_rc = codes[k];
		/* header, trailer, index */
		const uint64_t at[3] = { 0, len - 1, idx };
		for (int i = 0; i < 3; i++) {
			m.fail_lo = at[i];
			m.fail_hi = at[i] + 1;
			obj = NULL;
			TU_RC(ulp_object_open(tu_mem_read, &m, len, &obj), want,
			      "read of byte %" PRIu64 " fails (%d)", at[i],
			      codes[k]);
			TU_ASSERT(obj == NULL, "failed open left an object");
		}
		/* a payload byte of chunk 1 */
		m.fail_lo = m.fail_hi = 0;
		TU_OK(ulp_object_open(tu_mem_read, &m, len, &obj), "open");
		uint64_t coff;
		uint32_t clen;
		ulp_object_chunk_range(obj, 1, &coff, &clen);
		uint64_t p1 =
			ULP_OBJ_HEADER_SIZE + ulp_object_chunk_stored(obj, 0);
		m.fail_lo = p1 + ulp_object_chunk_stored(obj, 1) / 2;
		m.fail_hi = m.fail_lo + 1;
		ulp_dctx *d = ulp_dctx_new();
		tu_mem rm = tu_mem_of(fx.ref.data, fx.ref.size);
		uint8_t *buf = tu_xmalloc(fx.cur.size);
		TU_OK(ulp_chunk_decode(d, obj, 0, tu_mem_read, &rm, buf), "chun"
		                                                          "k "
		                                                          "0");
		TU_RC(ulp_chunk_decode(d, obj, 1, tu_mem_read, &rm, buf), want,
		      "chunk 1 (%d)", codes[k]);
		TU_RC(ulp_object_read(d, obj, 0, buf, fx.cur.size, tu_mem_read,
		                      &rm),
		      want, "whole object (%d)", codes[k]);
		TU_RC(ulp_object_read(d, obj, coff + clen / 2, buf, 1,
		                      tu_mem_read, &rm),
		      want, "one byte of chunk 1 (%d)", codes[k]);
		/* the failure cleared: everything decodes */
		m.fail_lo = m.fail_hi = 0;
		TU_OK(ulp_object_read(d, obj, 0, buf, fx.cur.size, tu_mem_read,
		                      &rm),
		      "whole object after the failure");
		TU_MEMEQ(buf, fx.cur.data, fx.cur.size, "after the failure");
		free(buf);
		ulp_dctx_free(d);
		ulp_object_close(obj);
	}
	fixture_free(&fx);
}

Test(container, object_accessors)
{
	fixture fx;
	fixture_make(&fx, 0xc047a008ull);
	tu_mem m = tu_mem_of(fx.obj.p, fx.obj.len);
	ulp_object *obj = NULL;
	TU_OK(ulp_object_open(tu_mem_read, &m, fx.obj.len, &obj), "open");
	TU_ASSERT(ulp_object_has_ref(obj) == 1, "has_ref");
	TU_ASSERT(ulp_object_ref_size(obj) == fx.ref.size, "ref_size");
	TU_ASSERT(memcmp(ulp_object_ref_hash(obj), fx.ref.hash, 16) == 0, "ref_"
	                                                                  "has"
	                                                                  "h");
	TU_ASSERT(memcmp(ulp_object_file_hash(obj), fx.cur.hash, 16) == 0, "fil"
	                                                                   "e_"
	                                                                   "has"
	                                                                   "h");
	TU_ASSERT(ulp_object_size(obj) == fx.cur.size, "size");
	size_t n = ulp_object_chunk_count(obj);
	TU_ASSERT(n == chunk_count(fx.obj.p, fx.obj.len), "chunk count");
	/* the header is the documented layout */
	TU_ASSERT(memcmp(fx.obj.p, ULP_OBJ_MAGIC, 8) == 0, "magic");
	TU_ASSERT(ulp_le16(fx.obj.p + 8) == ULP_OBJ_FORMAT, "format");
	TU_ASSERT(ulp_le64(fx.obj.p + 16) == fx.ref.size, "header ref_size");
	TU_ASSERT(memcmp(fx.obj.p + 24, fx.ref.hash, 16) == 0, "header "
	                                                       "ref_hash");
	TU_ASSERT(memcmp(fx.obj.p + fx.obj.len - 16, ULP_OBJ_END_MAGIC, 8) == 0,
	          "end magic");
	char hex[33];
	ulp_hash128_hex(fx.cur.hash, hex);
	TU_ASSERT(strlen(hex) == 32 && strspn(hex, "0123456789abcdef") == 32,
	          "hex %s", hex);
	ulp_object_close(obj);
	/* error strings exist for every code */
	for (int e = ULP_OK; e >= ULP_ERR_PARSE; e--)
		TU_ASSERT(ulp_strerror(e) && strcmp(ulp_strerror(e), "unknown "
		                                                     "error"),
		          "no string for %d", e);
	fixture_free(&fx);
}

/* --------------------------------------------------- older formats */

static uint8_t *read_data_file(const char *name, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", ULP_TEST_DATA, name);
	FILE *f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	cr_assert(fseek(f, 0, SEEK_END) == 0);
	long n = ftell(f);
	cr_assert(n > 0 && fseek(f, 0, SEEK_SET) == 0);
	uint8_t *p = tu_xmalloc((size_t)n);
	cr_assert(fread(p, 1, (size_t)n, f) == (size_t)n, "short read %s",
	          path);
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* Decode the whole committed object name (against ref[0..ref_len) when
 * given) and check the XXH3-128 of the result against want_hex, which
 * tests/data/format1/make_objects.sh's inputs had. */
static uint8_t *decode_data_object(const char *name, const uint8_t *ref,
                                   size_t ref_len, const char *want_hex,
                                   size_t *out_len)
{
	size_t olen;
	uint8_t *o = read_data_file(name, &olen);
	tu_mem om = tu_mem_of(o, olen);
	tu_mem rm = tu_mem_of(ref, ref_len);
	ulp_object *obj = NULL;
	TU_OK(ulp_object_open(tu_mem_read, &om, olen, &obj), "open %s", name);
	TU_ASSERT(ulp_object_has_ref(obj) == (ref != NULL), "%s: has_ref",
	          name);
	uint64_t n = ulp_object_size(obj);
	uint8_t *out = tu_xmalloc(n ? n : 1);
	ulp_dctx *d = ulp_dctx_new();
	cr_assert(d);
	TU_OK(ulp_object_read(d, obj, 0, out, n, ref ? tu_mem_read : NULL,
	                      ref ? &rm : NULL),
	      "decode %s", name);
	uint8_t h[16];
	char hex[33];
	ulp_hash128(out, n, h);
	ulp_hash128_hex(h, hex);
	TU_ASSERT(strcmp(hex, want_hex) == 0, "%s decodes to %s, want %s", name,
	          hex, want_hex);
	ulp_dctx_free(d);
	ulp_object_close(obj);
	free(o);
	*out_len = n;
	return out;
}

/* Objects written by the format-1 encoder (four-way rANS): keyframe bf16,
 * fp32 and fp16 tensors, and deltas against it in one and in many chunks. */
Test(container, format1_objects_still_decode)
{
	size_t n0, n1;
	uint8_t *v0 = decode_data_object("format1/v0.ulp", NULL, 0,
	                                 "125b5fd41d0414ef7704b3611d7f8123",
	                                 &n0);
	uint8_t *v1 = decode_data_object("format1/v1.ulp", v0, n0,
	                                 "571370e3e66b17001468800bebdd9988",
	                                 &n1);
	free(v1);
	v1 = decode_data_object("format1/v1-16k.ulp", v0, n0,
	                        "571370e3e66b17001468800bebdd9988", &n1);
	free(v1);
	free(v0);
}

/* The objects v0, v1 and v1-16k of tests/data/DIR (format1's inputs)
 * decode, are of format fmt with content hashes of kind, and their
 * reference hashes are v0's of that kind. */
static void data_objects_verify(const char *dir, unsigned fmt, int kind)
{
	static const char *const base[] = { "v0.ulp", "v1.ulp", "v1-16k.ulp" };
	static const char *const hex[] = { "125b5fd41d0414ef7704b3611d7f8123",
		                           "571370e3e66b17001468800bebdd9988",
		                           "571370e3e66b17001468800bebdd9988" };
	char name[3][64];
	size_t n0, n;
	for (int k = 0; k < 3; k++)
		snprintf(name[k], sizeof(name[k]), "%s/%s", dir, base[k]);
	uint8_t *v0 = decode_data_object(name[0], NULL, 0, hex[0], &n0);
	for (int k = 0; k < 3; k++) {
		uint8_t *v = k ? decode_data_object(name[k], v0, n0, hex[k], &n)
		               : v0;
		size_t olen;
		uint8_t *o = read_data_file(name[k], &olen);
		tu_mem om = tu_mem_of(o, olen);
		ulp_object *obj = NULL;
		uint8_t h[16];
		TU_OK(ulp_object_open(tu_mem_read, &om, olen, &obj), "open");
		TU_ASSERT(o[8] == fmt && o[9] == 0, "%s: format %u", name[k],
		          o[8] | o[9] << 8);
		TU_ASSERT(ulp_object_hash_kind(obj) == kind, "%s: kind %d",
		          name[k], ulp_object_hash_kind(obj));
		TU_OK(ulp_content_hash(kind, v, k ? n : n0, h), "hash");
		TU_ASSERT(memcmp(h, ulp_object_file_hash(obj), 16) == 0,
		          "%s: file hash is not the %d kind's", name[k], kind);
		if (k) {
			TU_OK(ulp_content_hash(kind, v0, n0, h), "hash");
			TU_ASSERT(memcmp(h, ulp_object_ref_hash(obj), 16) == 0,
			          "%s: reference hash", name[k]);
			free(v);
		}
		ulp_object_close(obj);
		free(o);
	}
	free(v0);
}

/* Objects written by the format-3 encoder (main before the escaped
 * symbols of format 4's delta blocks): tree hashes. */
Test(container, format3_objects_still_verify)
{
	data_objects_verify("format3", 3, ULP_HASH_TREE);
}

/* Objects written by the format-4 encoder (main before format 5's fused
 * standalone symbols): keyframe streams of two rANS symbols an element. */
Test(container, format4_objects_still_verify)
{
	data_objects_verify("format4", 4, ULP_HASH_TREE);
}

/* Objects written by the format-5 encoder (main before format 6's 64-lane
 * rANS blocks): blocks of at most 32 lanes. */
Test(container, format5_objects_still_verify)
{
	data_objects_verify("format5", 5, ULP_HASH_TREE);
}

/* Objects written by the format-2 encoder: the file hash is the whole-file
 * XXH3-128 (format 3 has the tree hash), and the delta's reference hash
 * is the reference's XXH3-128.  They decode, say which kind they have,
 * and their hashes are that kind's. */
Test(container, format2_objects_still_verify)
{
	data_objects_verify("format2", 2, ULP_HASH_FLAT);
}
