/*
 * test_rans.c - unit tests of the entropy-coding internals of libulp:
 * the interleaved rANS coder (rans.h), the raw bit writer / reader
 * (bitio.h) and the float stream coder (floatcode.h).
 *
 * Decoders always get exact-size heap copies of their input, so the
 * AddressSanitizer build (test_rans_san) catches any read past the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bitio.h"
#include "codec_internal.h"
#include "floatcode.h"
#include "rans.h"
#include "test_util.h"

/* ================================================================ rANS */

/* The lanes the encoder chooses for n symbols. */
static unsigned rans_lanes_for(size_t n)
{
	return n >= ULP_RANS_WIDE64_MIN ? 64u
	       : n >= ULP_RANS_WIDE_MIN ? 32u
	                                : 4u;
}

/* The lane counts a block can have, in turn: 4, 32, 64. */
static unsigned rans_lanes_next(unsigned lanes)
{
	return lanes == 4 ? 32u : 2 * lanes;
}

static uint32_t *make_hist(const uint8_t *sym, const uint8_t *ctx, size_t n,
                           unsigned nsym, unsigned nctx)
{
	uint32_t *h = calloc((size_t)nsym * nctx, sizeof(uint32_t));
	cr_assert(h);
	for (size_t i = 0; i < n; i++) {
		unsigned c = ctx ? ctx[i] : 0;
		cr_assert(sym[i] < nsym && c < nctx);
		h[(size_t)c * nsym + sym[i]]++;
	}
	return h;
}

/* Encode into a fresh buffer; asserts success and the size bound. */
static ulp_buf rans_enc(ulp_rans_scratch *sc, const uint8_t *sym,
                        const uint8_t *ctx, size_t n, unsigned nsym,
                        unsigned nctx)
{
	ulp_buf out = { 0 };
	uint32_t *h = make_hist(sym, ctx, n, nsym, nctx);
	TU_OK(ulp_rans_encode(sc, sym, ctx, n, nsym, nctx, h, &out),
	      "rans encode n=%zu nsym=%u nctx=%u", n, nsym, nctx);
	TU_ASSERT(out.len <= ulp_rans_bound(n, nsym),
	          "block of %zu bytes exceeds ulp_rans_bound %zu", out.len,
	          ulp_rans_bound(n, nsym));
	free(h);
	return out;
}

/* Decode blk[0..len) from an exact-size copy. */
static int rans_dec(ulp_rans_scratch *sc, const uint8_t *blk, size_t len,
                    const uint8_t *ctx, size_t n, unsigned nsym, uint8_t *sym,
                    size_t *used)
{
	uint8_t *in = tu_dup(blk, len);
	int rc = ulp_rans_decode(sc, in, len, ctx, n, nsym, sym, used);
	free(in);
	return rc;
}

/* The kernel levels this CPU runs, portable (0) first, then AVX2 and
 * AVX-512 where it has them, into lv; returns how many. */
static unsigned simd_levels(int lv[3])
{
	int old = ulp_rans_set_simd(0);
	unsigned n = 0;
	for (int l = 0; l <= ULP_SIMD_AVX512; l++) {
		ulp_rans_set_simd(l);
		if (ulp_rans_simd() == l)
			lv[n++] = l;
	}
	ulp_rans_set_simd(old);
	return n;
}

/* Round trip of one lane count (0: the encoder's choice) with the SIMD
 * kernels on or off; also checks that the decoder reports the block's
 * exact length when more bytes follow it.  Returns the block size. */
static size_t rans_rt_path(const uint8_t *sym, const uint8_t *ctx, size_t n,
                           unsigned nsym, unsigned nctx, unsigned lanes,
                           int simd)
{
	ulp_rans_scratch *es = ulp_rans_scratch_new(),
			 *ds = ulp_rans_scratch_new();
	cr_assert(es && ds);
	ulp_rans_scratch_set_lanes(es, lanes);
	int old = ulp_rans_set_simd(simd);
	ulp_buf b = rans_enc(es, sym, ctx, n, nsym, nctx);
	/* every other encoder kernel writes the same bytes */
	int lv[3];
	for (unsigned k = 0, nlv = simd_levels(lv); k < nlv; k++) {
		ulp_rans_set_simd(lv[k]);
		ulp_buf b2 = rans_enc(es, sym, ctx, n, nsym, nctx);
		TU_ASSERT(b2.len == b.len,
		          "encoder kernels %d, %d: %zu and %zu bytes", simd,
		          lv[k], b.len, b2.len);
		TU_MEMEQ(b2.p, b.p, b.len, "encoder kernels %d and %d", simd,
		         lv[k]);
		ulp_buf_free(&b2);
	}
	ulp_rans_set_simd(simd);
	unsigned got = ulp_rans_block_lanes(b.p, b.len);
	TU_ASSERT(lanes ? got == lanes : got == rans_lanes_for(n),
	          "%u lanes asked, block has %u (n=%zu)", lanes, got, n);
	uint8_t *dec = tu_xmalloc(n);
	size_t used = 0;
	memset(dec, 0xee, n);
	TU_OK(rans_dec(ds, b.p, b.len, ctx, n, nsym, dec, &used),
	      "rans decode n=%zu nsym=%u nctx=%u lanes %u simd %d", n, nsym,
	      nctx, got, simd);
	TU_ASSERT(used == b.len, "used %zu of a %zu-byte block", used, b.len);
	TU_MEMEQ(dec, sym, n, "rans symbols n=%zu nsym=%u lanes %u simd %d", n,
	         nsym, got, simd);

	/* trailing bytes are not part of the block */
	size_t blen = b.len;
	TU_OK(ulp_buf_reserve(&b, blen + 7), "reserve");
	memset(b.p + blen, 0x5a, 7);
	memset(dec, 0xee, n);
	used = 0;
	TU_OK(rans_dec(ds, b.p, blen + 7, ctx, n, nsym, dec, &used), "rans "
	                                                             "decode "
	                                                             "with "
	                                                             "trailing "
	                                                             "bytes");
	TU_ASSERT(used == blen, "used %zu, block is %zu", used, blen);
	TU_MEMEQ(dec, sym, n, "rans symbols with trailing bytes");
	ulp_rans_set_simd(old);

	free(dec);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(es);
	ulp_rans_scratch_free(ds);
	return blen;
}

/* Every code path: the encoder's choice, 4, 32 and 64 lanes forced, each
 * decoded by the portable and (where the CPU has them) the AVX2 and
 * AVX-512 kernels.
 * Returns the size of the block the encoder chose. */
static size_t rans_rt(const uint8_t *sym, const uint8_t *ctx, size_t n,
                      unsigned nsym, unsigned nctx)
{
	size_t blen = rans_rt_path(sym, ctx, n, nsym, nctx, 0, 0);
	for (int simd = 1; simd <= ULP_SIMD_AVX512; simd++)
		rans_rt_path(sym, ctx, n, nsym, nctx, 0, simd);
	for (unsigned lanes = 4; lanes <= 64; lanes = rans_lanes_next(lanes))
		for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++)
			rans_rt_path(sym, ctx, n, nsym, nctx, lanes, simd);
	return blen;
}

/* Contexts cut from 16-bit reference elements (ulp_rans_decode_ref16)
 * decode as the same contexts given in an array, for both lane counts
 * (the AVX-512 kernel computes them for 32-lane blocks, the others take
 * them from a pass) at every level, and the truncated blocks fail. */
Test(rans, contexts_from_16bit_reference)
{
	tu_rng r;
	tu_rng_init(&r, 0x52414e530010ull);
	const size_t n = 3 * 4096 + 21;
	const unsigned nsym = 63, shift = 7, emask = 0xff;
	uint8_t *ref = tu_xmalloc(2 * n), *ctx = tu_xmalloc(n);
	uint8_t *sym = tu_xmalloc(n), *dec = tu_xmalloc(n),
		*scr = tu_xmalloc(n);
	for (size_t i = 0; i < n; i++) {
		/* exponents over the whole byte, most of them near 120 */
		unsigned e = tu_chance(&r, 1, 8)
		                     ? (unsigned)tu_below(&r, 256)
		                     : 116 + (unsigned)tu_below(&r, 8);
		uint16_t v = (uint16_t)(tu_below(&r, 2) << 15 | e << shift |
		                        tu_below(&r, 1u << shift));
		memcpy(ref + 2 * i, &v, 2);
		ctx[i] = (uint8_t)((v >> shift) & emask);
		sym[i] = (uint8_t)((ctx[i] + tu_below(&r, 5)) % nsym);
	}
	for (unsigned lanes = 4; lanes <= 64; lanes = rans_lanes_next(lanes)) {
		ulp_rans_scratch *sc = ulp_rans_scratch_new();
		cr_assert(sc);
		ulp_rans_scratch_set_lanes(sc, lanes);
		ulp_buf b = rans_enc(sc, sym, ctx, n, nsym, 256);
		for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++) {
			int old = ulp_rans_set_simd(simd);
			size_t used = 0;
			memset(dec, 0xee, n);
			TU_OK(ulp_rans_decode_ref16(sc, b.p, b.len, ref, shift,
			                            emask, scr, n, nsym, dec,
			                            &used),
			      "lanes %u simd %d", lanes, simd);
			TU_ASSERT(used == b.len, "used %zu of %zu", used,
			          b.len);
			TU_MEMEQ(dec, sym, n, "lanes %u simd %d", lanes, simd);
			for (size_t len = 0; len < b.len; len += 1 + b.len / 37)
				TU_RC(ulp_rans_decode_ref16(
					      sc, b.p, len, ref, shift, emask,
					      scr, n, nsym, dec, &used),
				      ULP_ERR_CORRUPT, "%zu of %zu bytes", len,
				      b.len);
			ulp_rans_set_simd(old);
		}
		ulp_buf_free(&b);
		ulp_rans_scratch_free(sc);
	}
	free(ref);
	free(ctx);
	free(sym);
	free(dec);
	free(scr);
}

/* A level the CPU cannot run gives the highest it can; levels are
 * ordered, so forcing one never runs a higher one. */
Test(rans, simd_levels)
{
	int old = ulp_rans_set_simd(ULP_SIMD_AVX512);
	int max = ulp_rans_simd();
	TU_ASSERT(max >= ULP_SIMD_NONE && max <= ULP_SIMD_AVX512, "max %d",
	          max);
	int prev = ulp_rans_set_simd(99);
	TU_ASSERT(prev == max && ulp_rans_simd() == max, "too high a level");
	ulp_rans_set_simd(-1);
	TU_ASSERT(ulp_rans_simd() == ULP_SIMD_NONE, "level -1");
	for (int l = ULP_SIMD_NONE; l <= ULP_SIMD_AVX512; l++) {
		ulp_rans_set_simd(l);
		int got = ulp_rans_simd();
		TU_ASSERT(got == (l < max ? l : max), "level %d: %d", l, got);
		/* the gathering decoder only at the AVX-512 level */
		TU_ASSERT(!ulp_rans_gathers() || got == ULP_SIMD_AVX512,
		          "gathers at level %d", got);
		TU_ASSERT(!ulp_rans_gathers_one() || got == ULP_SIMD_AVX512,
		          "one-table gathers at level %d", got);
	}
	ulp_rans_set_simd(old);
}

/* ULPFS_RANS_GATHERS picks the AVX-512 decoder (tests/codec_decoders.sh
 * runs the codec's tests under each): where it is set and the AVX-512
 * level runs, the choice follows it, for blocks with contexts and blocks
 * of one table alike, and survives a change of level. */
Test(rans, gathers_follow_the_environment)
{
	const char *env = getenv("ULPFS_RANS_GATHERS");
	int old = ulp_rans_set_simd(ULP_SIMD_AVX512);
	if (ulp_rans_simd() < ULP_SIMD_AVX512) {
		TU_ASSERT(!ulp_rans_gathers() && !ulp_rans_gathers_one(),
		          "gathers below AVX-512");
	} else if (env && (!strcmp(env, "0") || !strcmp(env, "1"))) {
		ulp_rans_set_simd(ULP_SIMD_AVX2);
		ulp_rans_set_simd(ULP_SIMD_AVX512);
		TU_ASSERT(ulp_rans_gathers() == (env[0] == '1') &&
		                  ulp_rans_gathers_one() == (env[0] == '1'),
		          "ULPFS_RANS_GATHERS=%s: gathers %d, one table %d",
		          env, ulp_rans_gathers(), ulp_rans_gathers_one());
	}
	ulp_rans_set_simd(old);
}

Test(rans, hist_bits)
{
	const uint32_t a[4] = { 1, 1, 0, 0 };
	const uint32_t b[3] = { 2, 2, 4 };
	const uint32_t z[3] = { 0, 0, 0 };
	const uint32_t one[2] = { 0, 1000 };
	cr_assert_float_eq(ulp_hist_bits(a, 4), 2.0, 1e-9);
	cr_assert_float_eq(ulp_hist_bits(b, 3), 12.0, 1e-9);
	cr_assert_float_eq(ulp_hist_bits(z, 3), 0.0, 1e-12);
	cr_assert_float_eq(ulp_hist_bits(one, 2), 0.0, 1e-12);
}

Test(rans, ragged_small_n)
{
	static const size_t ns[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13 };
	static const unsigned nsyms[] = { 1, 2, 17, 65, 256 };
	tu_rng r;
	tu_rng_init(&r, 0x52414e530001ull);
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (size_t b = 0; b < sizeof(nsyms) / sizeof(nsyms[0]); b++) {
			size_t n = ns[a];
			unsigned nsym = nsyms[b];
			uint8_t sym[16], ctx[16];
			for (size_t i = 0; i < n; i++) {
				sym[i] = (uint8_t)tu_below(&r, nsym);
				ctx[i] = (uint8_t)tu_below(&r, 256);
			}
			rans_rt(sym, NULL, n, nsym, 1);
			rans_rt(sym, ctx, n, nsym, 256);
			/* a single context, given explicitly */
			memset(ctx, 0, sizeof(ctx));
			rans_rt(sym, ctx, n, nsym, 1);
		}
}

Test(rans, ragged_own_tables)
{
	/* Own tables (>= ULP_RANS_MIN_OWN_TABLE symbols) with every residue
	 * of n modulo the four ways. */
	tu_rng r;
	tu_rng_init(&r, 0x52414e530002ull);
	for (size_t n = 2 * ULP_RANS_MIN_OWN_TABLE;
	     n < 2 * ULP_RANS_MIN_OWN_TABLE + 8; n++) {
		uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
		for (size_t i = 0; i < n; i++) {
			ctx[i] = (uint8_t)(i & 1 ? 200 : 3);
			sym[i] = (uint8_t)tu_geom(&r, 3, 16);
		}
		rans_rt(sym, ctx, n, 17, 256);
		rans_rt(sym, NULL, n, 17, 1);
		free(sym);
		free(ctx);
	}
}

Test(rans, single_symbol)
{
	/* freq == M: the state never moves and no word is emitted, so the
	 * block size does not depend on n. */
	size_t sizes[3];
	const size_t ns[3] = { 1000, 100000, 1000003 };
	for (int k = 0; k < 3; k++) {
		uint8_t *sym = tu_xmalloc(ns[k]);
		memset(sym, 5, ns[k]);
		sizes[k] = rans_rt(sym, NULL, ns[k], 17, 1);
		/* all in context 9 */
		uint8_t *ctx = tu_xmalloc(ns[k]);
		memset(ctx, 9, ns[k]);
		size_t s2 = rans_rt(sym, ctx, ns[k], 17, 256);
		TU_ASSERT(s2 < 40 + 4 * (64 - 4),
		          "one-symbol block of %zu bytes", s2);
		free(ctx);
		free(sym);
	}
	/* beyond ULP_RANS_WIDE_MIN symbols the block carries 32 states,
	 * beyond ULP_RANS_WIDE64_MIN 64 */
	TU_ASSERT(sizes[0] < 40, "one-symbol block of %zu bytes", sizes[0]);
	TU_ASSERT(sizes[1] == sizes[0] + 4 * (ULP_RANS_LANES - 4) &&
	                  sizes[2] == sizes[1] + 4 * 32,
	          "block size grows with n: %zu %zu %zu", sizes[0], sizes[1],
	          sizes[2]);
	/* nsym 1 */
	uint8_t z[777] = { 0 };
	TU_ASSERT(rans_rt(z, NULL, sizeof(z), 1, 1) < 40, "nsym 1");
}

Test(rans, extremely_skewed)
{
	/* Three rare symbols in about 10^6, at both ends and the middle:
	 * the rare symbol gets freq 1 of 2048. */
	const size_t n = 1000003;
	uint8_t *sym = calloc(n, 1);
	cr_assert(sym);
	sym[0] = sym[n / 2] = sym[n - 1] = 1;
	size_t len = rans_rt(sym, NULL, n, 2, 1);
	/* ideal: n * log2(2048/2047) + 3 * 11 bits = about 110 bytes */
	TU_ASSERT(len < 400, "skewed block of %zu bytes", len);
	/* the same with the rare symbol in a rare (escape) context */
	uint8_t *ctx = calloc(n, 1);
	cr_assert(ctx);
	ctx[n / 2] = 77;
	rans_rt(sym, ctx, n, 2, 256);
	free(ctx);
	free(sym);
}

Test(rans, uniform_256)
{
	const size_t n = 4 * 65536 + 3;
	tu_rng r;
	tu_rng_init(&r, 0x52414e530003ull);
	uint8_t *sym = tu_xmalloc(n);
	tu_fill(&r, sym, n);
	size_t len = rans_rt(sym, NULL, n, 256, 1);
	/* 8 bits per symbol plus a 256-entry table and the states */
	TU_ASSERT(len >= n && len <= n + n / 1000 + 600,
	          "uniform block of %zu bytes for %zu symbols", len, n);
	free(sym);
}

/* Parse the block header: has_esc, nown. */
static void block_header(const uint8_t *b, size_t len, int *has_esc,
                         uint64_t *nown)
{
	const uint8_t *p = b + 1;
	cr_assert(len >= 2);
	*has_esc = b[0] & 1;
	cr_assert_eq(ulp_varint_get(&p, b + len, nown), ULP_OK);
}

/* Escape mode (format 4): tables from the counts of every fourth
 * symbol miss rare ones, which are escaped; every lane count and kernel
 * writes the same bytes and decodes them, a table-less histogram escapes
 * everything, and an escape list that disagrees is corrupt. */
static void esc_rt(const uint8_t *sym, const uint8_t *ctx, size_t n,
                   unsigned nsym, unsigned nctx, const uint32_t *h,
                   int want_esc)
{
	for (unsigned lanes = 4; lanes <= 64; lanes = rans_lanes_next(lanes)) {
		ulp_rans_scratch *sc = ulp_rans_scratch_new();
		cr_assert(sc);
		ulp_rans_scratch_set_lanes(sc, lanes);
		ulp_buf b[3] = { { 0 }, { 0 }, { 0 } };
		size_t nesc[3] = { 0, 0, 0 };
		int lv[3];
		unsigned nlv = simd_levels(lv);
		for (unsigned k = 0; k < nlv; k++) {
			int old = ulp_rans_set_simd(lv[k]);
			TU_OK(ulp_rans_encode_esc(sc, sym, ctx, n, nsym, nctx,
			                          h, &b[k], &nesc[k]),
			      "encode_esc lanes %u simd %d", lanes, lv[k]);
			ulp_rans_set_simd(old);
		}
		for (unsigned k = 1; k < nlv; k++) {
			TU_ASSERT(b[0].len == b[k].len && nesc[0] == nesc[k],
			          "kernels 0, %d: %zu and %zu bytes", lv[k],
			          b[0].len, b[k].len);
			TU_MEMEQ(b[0].p, b[k].p, b[0].len,
			         "kernels' escape blocks, 0 and %d", lv[k]);
		}
		TU_ASSERT(b[0].len <= ulp_rans_bound(n, nsym), "bound");
		TU_ASSERT(ulp_rans_block_escapes(b[0].p, b[0].len) &&
		                  ulp_rans_block_lanes(b[0].p, b[0].len) ==
		                          lanes,
		          "header byte %u", b[0].p[0]);
		TU_ASSERT(want_esc ? nesc[0] > 0 : nesc[0] == 0, "%zu escapes",
		          nesc[0]);
		uint8_t *dec = tu_xmalloc(n);
		for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++) {
			int old = ulp_rans_set_simd(simd);
			size_t used = 0;
			memset(dec, 0xee, n);
			TU_OK(rans_dec(sc, b[0].p, b[0].len, ctx, n, nsym, dec,
			               &used),
			      "decode lanes %u simd %d", lanes, simd);
			TU_ASSERT(used == b[0].len, "used %zu of %zu", used,
			          b[0].len);
			TU_MEMEQ(dec, sym, n,
			         "escaped symbols lanes %u simd %d", lanes,
			         simd);
			for (size_t len = 0; len < b[0].len;
			     len += 1 + b[0].len / 61)
				TU_RC(rans_dec(sc, b[0].p, len, ctx, n, nsym,
				               dec, &used),
				      ULP_ERR_CORRUPT, "%zu of %zu bytes", len,
				      b[0].len);
			ulp_rans_set_simd(old);
		}
		if (nesc[0]) {
			/* the escape list sits before the 4 x lanes bytes of
			 * the final states and the words: find it as the
			 * decoder does, then break its first byte */
			ulp_rans_dec d;
			uint8_t *in = tu_dup(b[0].p, b[0].len);
			TU_OK(ulp_rans_dec_begin(sc, in, b[0].len, nsym, &d),
			      "begin");
			TU_ASSERT(d.nesc == nesc[0] && d.esc_sym == nsym,
			          "nesc %zu esc_sym %u", d.nesc, d.esc_sym);
			in[d.esc - in] = (uint8_t)nsym;
			TU_RC(ulp_rans_decode(sc, in, b[0].len, ctx, n, nsym,
			                      dec, &(size_t){ 0 }),
			      ULP_ERR_CORRUPT, "escaped symbol out of range");
			free(in);
		}
		free(dec);
		for (unsigned k = 0; k < 3; k++)
			ulp_buf_free(&b[k]);
		ulp_rans_scratch_free(sc);
	}
}

Test(rans, escaped_symbols)
{
	tu_rng r;
	tu_rng_init(&r, 0x45534341504531ull);
	const size_t n = 50000;
	const unsigned nsym = 63, nctx = 12;
	uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
	for (size_t i = 0; i < n; i++) {
		/* geometric-ish symbols, a few of them rare, and rare contexts
		 * the sample may miss */
		unsigned s = 0;
		while (s < nsym - 1 && tu_below(&r, 3) == 0)
			s++;
		sym[i] = (uint8_t)s;
		ctx[i] = (uint8_t)(tu_below(&r, 1000) == 0 ? 11
		                                           : tu_below(&r, 4));
	}
	uint32_t *h = calloc((size_t)nsym * nctx, sizeof(uint32_t));
	cr_assert(h);
	for (size_t i = 0; i < n; i += 4)
		h[(size_t)ctx[i] * nsym + sym[i]] += 4;
	esc_rt(sym, ctx, n, nsym, nctx, h, 1);
	/* exact counts: nothing to escape, and the same symbols decode */
	free(h);
	h = make_hist(sym, ctx, n, nsym, nctx);
	esc_rt(sym, ctx, n, nsym, nctx, h, 0);
	/* no counts at all: one table of the escape symbol alone */
	memset(h, 0, sizeof(uint32_t) * nsym * nctx);
	esc_rt(sym, ctx, 5000, nsym, nctx, h, 1);
	free(h);
	free(sym);
	free(ctx);
}

/* ulp_rans_encode_map writes the bytes ulp_rans_encode writes for the
 * codes themselves, with every lane count and kernel, and lists the
 * pairs coded as its escape code in order; n of 5 and 40000 cover the
 * ragged ends and the SIMD kernel. */
Test(rans, mapped_codes)
{
	tu_rng r;
	tu_rng_init(&r, 0x4d4150504544ull);
	const size_t ns[] = { 5, 40000 };
	const unsigned nsym = 16, nctx = 40, ncode = 200;
	uint8_t code[40 * 16], used[40] = { 0 };
	for (unsigned k = 0; k < nsym * nctx; k++)
		code[k] = (uint8_t)tu_below(&r, ncode);
	for (size_t t = 0; t < 2; t++) {
		const size_t n = ns[t];
		uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
		uint8_t *codes = tu_xmalloc(n);
		uint32_t *ev = tu_xmalloc(sizeof(uint32_t) * n);
		uint32_t h[200] = { 0 };
		size_t nesc = 0;
		for (size_t i = 0; i < n; i++) {
			/* contexts 30-39 never occur (their rows unbuilt) */
			ctx[i] = (uint8_t)tu_below(&r, 30);
			sym[i] = (uint8_t)tu_below(&r, nsym);
			used[ctx[i]] = 1;
			codes[i] = code[ctx[i] * nsym + sym[i]];
			h[codes[i]]++;
			nesc += codes[i] == 7;
		}
		for (unsigned lanes = 4; lanes <= 64;
		     lanes = rans_lanes_next(lanes)) {
			for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++) {
				int old = ulp_rans_set_simd(simd);
				ulp_rans_scratch *sc = ulp_rans_scratch_new();
				cr_assert(sc);
				ulp_rans_scratch_set_lanes(sc, lanes);
				ulp_buf a = { 0 }, b = { 0 };
				TU_OK(ulp_rans_encode(sc, codes, NULL, n, ncode,
				                      1, h, &a),
				      "encode");
				ulp_rans_map m = { code, nsym, nctx, used,
					           7,    ev,   nesc };
				TU_OK(ulp_rans_encode_map(sc, sym, ctx, n,
				                          ncode, h, &m, &b),
				      "encode_map");
				TU_ASSERT(a.len == b.len,
				          "n %zu lanes %u simd %d: %zu vs %zu",
				          n, lanes, simd, a.len, b.len);
				TU_MEMEQ(a.p, b.p, a.len, "mapped block");
				TU_ASSERT(m.nesc == nesc, "%zu listed of %zu",
				          m.nesc, nesc);
				for (size_t i = 0, j = 0; i < n; i++)
					if (codes[i] == 7)
						TU_ASSERT(ev[j++] == i,
						          "listed %zu", i);
				/* no room for the list */
				m.nesc = nesc ? nesc - 1 : 0;
				if (nesc)
					TU_RC(ulp_rans_encode_map(sc, sym, ctx,
					                          n, ncode, h,
					                          &m, &b),
					      ULP_ERR_ARG, "short list");
				ulp_buf_free(&a);
				ulp_buf_free(&b);
				ulp_rans_scratch_free(sc);
				ulp_rans_set_simd(old);
			}
		}
		free(sym);
		free(ctx);
		free(codes);
		free(ev);
	}
}

/* The largest table entry index, (255 tables) * 256 + 255, which the
 * AVX-512 encoder computes in 16 bits: 256 own tables of 256 symbols,
 * and of 255 symbols plus the escape symbol, symbol 255 of context 255
 * in both. */
Test(rans, largest_entry_index)
{
	tu_rng r;
	tu_rng_init(&r, 0x4c41524745535431ull);
	const size_t n = 256 * 1024;
	uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
	for (size_t i = 0; i < n; i++) {
		ctx[i] = (uint8_t)tu_below(&r, 256);
		sym[i] = (uint8_t)tu_below(&r, 256);
	}
	ctx[n - 1] = 255;
	sym[n - 1] = 255;
	rans_rt(sym, ctx, n, 256, 256);
	/* escapes: tables of 255 symbols from every fourth one's counts */
	for (size_t i = 0; i < n; i++)
		sym[i] = (uint8_t)(sym[i] % 255);
	sym[n - 2] = 254;
	ctx[n - 2] = 255;
	uint32_t *h = calloc((size_t)255 * 256, sizeof(uint32_t));
	cr_assert(h);
	for (size_t i = 0; i < n; i += 4)
		h[(size_t)ctx[i] * 255 + sym[i]] += 4;
	esc_rt(sym, ctx, n, 255, 256, h, 1);
	free(h);
	free(sym);
	free(ctx);
}

Test(rans, many_contexts_escape_and_own)
{
	tu_rng r;
	tu_rng_init(&r, 0x52414e530004ull);
	const unsigned nsym = 65;
	/* counts per context: a few common ones, many rare ones, some
	 * exactly at the threshold and one just below */
	uint32_t cnt[256];
	size_t n = 0;
	unsigned want_own = 0;
	for (unsigned c = 0; c < 256; c++) {
		if (c % 17 == 0)
			cnt[c] = 2000 + (uint32_t)tu_below(&r, 3000);
		else if (c == 100)
			cnt[c] = ULP_RANS_MIN_OWN_TABLE;
		else if (c == 101)
			cnt[c] = ULP_RANS_MIN_OWN_TABLE - 1;
		else if (c % 3 == 0)
			cnt[c] = 0;
		else
			cnt[c] = (uint32_t)tu_below(&r, 60);
		if (cnt[c] >= ULP_RANS_MIN_OWN_TABLE)
			want_own++;
		n += cnt[c];
	}
	uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
	size_t k = 0;
	for (unsigned c = 0; c < 256; c++)
		for (uint32_t j = 0; j < cnt[c]; j++, k++) {
			ctx[k] = (uint8_t)c;
			sym[k] = (uint8_t)tu_geom(&r, 2 + c % 5, nsym - 1);
		}
	/* interleave the contexts */
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = tu_below(&r, i + 1);
		uint8_t t = sym[i];
		sym[i] = sym[j];
		sym[j] = t;
		t = ctx[i];
		ctx[i] = ctx[j];
		ctx[j] = t;
	}
	rans_rt(sym, ctx, n, nsym, 256);

	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf b = rans_enc(sc, sym, ctx, n, nsym, 256);
	int esc;
	uint64_t nown;
	block_header(b.p, b.len, &esc, &nown);
	TU_ASSERT(esc == 1, "rare contexts present but no escape table");
	TU_ASSERT(nown == want_own, "%" PRIu64 " own tables, want %u", nown,
	          want_own);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
	free(sym);
	free(ctx);
}

Test(rans, all_256_contexts_own)
{
	/* 256 own tables and no escape: the largest table count. */
	tu_rng r;
	tu_rng_init(&r, 0x52414e530005ull);
	const size_t per = ULP_RANS_MIN_OWN_TABLE + 3;
	const size_t n = 256 * per;
	uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
	for (size_t i = 0; i < n; i++) {
		ctx[i] = (uint8_t)(i % 256);
		sym[i] = (uint8_t)((tu_geom(&r, 3, 30) + ctx[i]) % 33);
	}
	rans_rt(sym, ctx, n, 33, 256);
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf b = rans_enc(sc, sym, ctx, n, 33, 256);
	int esc;
	uint64_t nown;
	block_header(b.p, b.len, &esc, &nown);
	TU_ASSERT(esc == 0 && nown == 256, "esc %d nown %" PRIu64, esc, nown);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);

	/* only rare contexts: escape table alone */
	for (size_t i = 0; i < n; i++)
		ctx[i] = (uint8_t)(i % 256);
	size_t m = 256 * 10;
	rans_rt(sym, ctx, m, 33, 256);
	sc = ulp_rans_scratch_new();
	b = rans_enc(sc, sym, ctx, m, 33, 256);
	block_header(b.p, b.len, &esc, &nown);
	TU_ASSERT(esc == 1 && nown == 0, "esc %d nown %" PRIu64, esc, nown);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
	free(sym);
	free(ctx);
}

Test(rans, normalization_edge_cases)
{
	/* Many symbols that round to frequency 0 (raised to 1) with no
	 * dominant symbol to absorb the surplus: the "shave" path. */
	tu_rng r;
	tu_rng_init(&r, 0x52414e530006ull);
	size_t n = 0;
	uint32_t cnt[256];
	for (unsigned s = 0; s < 256; s++) {
		cnt[s] = s < 128 ? 1 : 200;
		n += cnt[s];
	}
	uint8_t *sym = tu_xmalloc(n);
	size_t k = 0;
	for (unsigned s = 0; s < 256; s++)
		for (uint32_t j = 0; j < cnt[s]; j++)
			sym[k++] = (uint8_t)s;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = tu_below(&r, i + 1);
		uint8_t t = sym[i];
		sym[i] = sym[j];
		sym[j] = t;
	}
	rans_rt(sym, NULL, n, 256, 1);
	free(sym);

	/* 255 singletons and one huge symbol */
	n = 255 + 1000000;
	sym = tu_xmalloc(n);
	memset(sym, 200, n);
	for (unsigned s = 0, j = 0; s < 256; s++)
		if (s != 200)
			sym[(j++ * 3919) % n] = (uint8_t)s;
	rans_rt(sym, NULL, n, 256, 1);
	free(sym);
}

Test(rans, large_near_entropy)
{
	/* 1M symbols in 16 contexts with different geometric laws: the block
	 * must be within 1% + 2 KiB of the empirical entropy (tables and
	 * states included), and cannot beat it. */
	const size_t n = 1000000;
	const unsigned nsym = 33, nctx = 16;
	tu_rng r;
	tu_rng_init(&r, 0x52414e530007ull);
	uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
	for (size_t i = 0; i < n; i++) {
		unsigned c = (unsigned)tu_below(&r, nctx);
		ctx[i] = (uint8_t)c;
		sym[i] = (uint8_t)((tu_geom(&r, 2 + c % 4, nsym - 1) + c) %
		                   nsym);
	}
	uint32_t *h = make_hist(sym, ctx, n, nsym, nctx);
	double bits = 0;
	for (unsigned c = 0; c < nctx; c++)
		bits += ulp_hist_bits(h + (size_t)c * nsym, nsym);
	free(h);
	size_t len = rans_rt(sym, ctx, n, nsym, nctx);
	double ent = bits / 8;
	TU_ASSERT(len <= ent * 1.01 + 2048,
	          "block %zu bytes, entropy %.0f bytes", len, ent);
	TU_ASSERT(len >= ent * 0.999, "block %zu bytes below entropy %.0f", len,
	          ent);
	free(sym);
	free(ctx);
}

/* ------------------------------------------------ rANS rejections */

Test(rans, reject_every_truncation)
{
	tu_rng r;
	tu_rng_init(&r, 0x52414e530010ull);
	/* one small block with an escape table only, one with own tables */
	const size_t ns[2] = { 200, 1000 };
	for (int v = 0; v < 2; v++) {
		size_t n = ns[v];
		uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
		for (size_t i = 0; i < n; i++) {
			ctx[i] = (uint8_t)(v ? i % 2 * 40 : tu_below(&r, 8));
			sym[i] = (uint8_t)tu_geom(&r, 2, 16);
		}
		ulp_rans_scratch *sc = ulp_rans_scratch_new();
		ulp_buf b = rans_enc(sc, sym, ctx, n, 17, 256);
		uint8_t *dec = tu_xmalloc(n);
		for (size_t len = 0; len < b.len; len++) {
			size_t used = 0;
			int rc = rans_dec(sc, b.p, len, ctx, n, 17, dec, &used);
			TU_RC(rc, ULP_ERR_CORRUPT,
			      "block of %zu bytes truncated to %zu", b.len,
			      len);
		}
		/* and the whole block still decodes with the same scratch */
		size_t used;
		TU_OK(rans_dec(sc, b.p, b.len, ctx, n, 17, dec, &used), "full");
		TU_MEMEQ(dec, sym, n, "after truncations");
		free(dec);
		ulp_buf_free(&b);
		ulp_rans_scratch_free(sc);
		free(sym);
		free(ctx);
	}
}

Test(rans, reject_table_sum)
{
	/* ctx NULL, 1000 symbols: one own table for context 0.
	 * Layout: [has_esc 0][nown 1][own 0][last][varint freqs...]. */
	tu_rng r;
	tu_rng_init(&r, 0x52414e530011ull);
	const size_t n = 1000;
	uint8_t sym[1000];
	for (size_t i = 0; i < n; i++)
		sym[i] = (uint8_t)tu_geom(&r, 2, 7);
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf b = rans_enc(sc, sym, NULL, n, 8, 1);
	cr_assert(b.p[0] == 0 && b.p[1] == 1 && b.p[2] == 0,
	          "unexpected header %02x %02x %02x", b.p[0], b.p[1], b.p[2]);
	unsigned last = b.p[3];
	const uint8_t *p = b.p + 4;
	uint64_t sum = 0, v;
	for (unsigned s = 0; s <= last; s++) {
		cr_assert_eq(ulp_varint_get(&p, b.p + b.len, &v), ULP_OK);
		sum += v;
	}
	TU_ASSERT(sum == ULP_RANS_M, "table sums to %" PRIu64, sum);
	size_t tab_end = (size_t)(p - b.p);
	uint8_t dec[1000];
	size_t used;
	/* every bit-0 flip of a frequency byte breaks the sum */
	for (size_t i = 4; i < tab_end; i++) {
		uint8_t *c = tu_dup(b.p, b.len);
		c[i] ^= 1;
		TU_RC(ulp_rans_decode(sc, c, b.len, NULL, n, 8, dec, &used),
		      ULP_ERR_CORRUPT, "freq byte %zu flipped", i);
		free(c);
	}
	/* "last" symbol out of the alphabet */
	uint8_t *c = tu_dup(b.p, b.len);
	c[3] = 8;
	TU_RC(ulp_rans_decode(sc, c, b.len, NULL, n, 8, dec, &used),
	      ULP_ERR_CORRUPT, "last >= nsym");
	free(c);
	/* a hand-made block: {1024, 1023} sums to M - 1 */
	static const uint8_t bad[] = { 0, 1, 0, 1, 0x80, 0x08, 0xff, 0x07,
		                       0, 0, 1, 0, 0,    0,    1,    0,
		                       0, 0, 1, 0, 0,    0,    1,    0 };
	c = tu_dup(bad, sizeof(bad));
	TU_RC(ulp_rans_decode(sc, c, sizeof(bad), NULL, 0, 2, dec, &used),
	      ULP_ERR_CORRUPT, "table summing to M-1");
	/* and with {1024, 1024} the same block is fine (n = 0) */
	c[6] = 0x80;
	c[7] = 0x08;
	TU_OK(ulp_rans_decode(sc, c, sizeof(bad), NULL, 0, 2, dec, &used),
	      "table summing to M");
	TU_ASSERT(used == sizeof(bad), "used %zu", used);
	/* a frequency above M */
	c[4] = 0x81;
	c[5] = 0x10;
	c[6] = 0;
	c[7] = 0; /* {2049, 0} then garbage: rejected either way */
	TU_RC(ulp_rans_decode(sc, c, sizeof(bad), NULL, 0, 2, dec, &used),
	      ULP_ERR_CORRUPT, "frequency above M");
	free(c);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
}

Test(rans, reject_final_states)
{
	tu_rng r;
	tu_rng_init(&r, 0x52414e530012ull);
	const size_t n = 1001;
	uint8_t sym[1001], dec[1001];
	for (size_t i = 0; i < n; i++)
		sym[i] = (uint8_t)tu_geom(&r, 2, 7);
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf b = rans_enc(sc, sym, NULL, n, 8, 1);
	/* states follow the table: find them by parsing */
	const uint8_t *p = b.p + 4;
	uint64_t v;
	for (unsigned s = 0; s <= b.p[3]; s++)
		cr_assert_eq(ulp_varint_get(&p, b.p + b.len, &v), ULP_OK);
	size_t st = (size_t)(p - b.p);
	cr_assert(st + 16 <= b.len);
	static const uint8_t masks[] = { 0x01, 0x10, 0x80, 0xff };
	for (size_t i = st; i < st + 16; i++)
		for (size_t m = 0; m < sizeof(masks); m++) {
			uint8_t *c = tu_dup(b.p, b.len);
			size_t used;
			c[i] ^= masks[m];
			TU_RC(ulp_rans_decode(sc, c, b.len, NULL, n, 8, dec,
			                      &used),
			      ULP_ERR_CORRUPT, "state byte %zu ^ %02x", i - st,
			      masks[m]);
			free(c);
		}
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
}

Test(rans, reject_unsorted_own_list)
{
	tu_rng r;
	tu_rng_init(&r, 0x52414e530013ull);
	const size_t n = 1210;
	uint8_t sym[1210], ctx[1210], dec[1210];
	/* contexts 3 and 7 get own tables with identical histograms (so
	 * that swapping them alone would still decode), 9 goes to the
	 * escape table */
	for (size_t i = 0; i < 10; i++) {
		ctx[i] = 9;
		sym[i] = (uint8_t)tu_below(&r, 8);
	}
	for (size_t i = 10; i < n; i += 2) {
		ctx[i] = 3;
		ctx[i + 1] = 7;
		sym[i] = sym[i + 1] = (uint8_t)tu_geom(&r, 2, 7);
	}
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf b = rans_enc(sc, sym, ctx, n, 8, 256);
	cr_assert(b.p[0] == 1 && b.p[1] == 2 && b.p[2] == 3 && b.p[3] == 7,
	          "header %02x %02x %02x %02x", b.p[0], b.p[1], b.p[2], b.p[3]);
	size_t used;
	TU_OK(rans_dec(sc, b.p, b.len, ctx, n, 8, dec, &used), "control");
	uint8_t *c = tu_dup(b.p, b.len);
	c[2] = 7;
	c[3] = 3;
	TU_RC(ulp_rans_decode(sc, c, b.len, ctx, n, 8, dec, &used),
	      ULP_ERR_CORRUPT, "own list 7, 3 (identical tables)");
	c[2] = 3;
	c[3] = 3;
	TU_RC(ulp_rans_decode(sc, c, b.len, ctx, n, 8, dec, &used),
	      ULP_ERR_CORRUPT, "own list 3, 3");
	c[2] = 7;
	c[3] = 7;
	TU_RC(ulp_rans_decode(sc, c, b.len, ctx, n, 8, dec, &used),
	      ULP_ERR_CORRUPT, "own list 7, 7");
	free(c);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
}

Test(rans, incremental_decoder)
{
	/* ulp_rans_dec_begin / step / dec_end, as the fused float decoder
	 * uses them, give the same symbols as ulp_rans_decode */
	tu_rng r;
	tu_rng_init(&r, 0x52414e530015ull);
	const size_t n = 5003;
	uint8_t *sym = tu_xmalloc(n), *ctx = tu_xmalloc(n);
	for (size_t i = 0; i < n; i++) {
		ctx[i] = (uint8_t)(i % 3 ? 120 : tu_below(&r, 256));
		sym[i] = (uint8_t)tu_geom(&r, 3, 40);
	}
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	/* the four lanes the fused decoder steps */
	ulp_rans_scratch_set_lanes(sc, ULP_RANS_WAYS);
	ulp_buf b = rans_enc(sc, sym, ctx, n, 41, 256);
	uint8_t *in = tu_dup(b.p, b.len);
	ulp_rans_dec d;
	TU_OK(ulp_rans_dec_begin(sc, in, b.len, 41, &d), "begin");
	TU_ASSERT(d.ntab >= 2, "%u tables", d.ntab);
	size_t i = 0, bad = (size_t)-1;
	unsigned s0, s1, s2, s3;
	for (; i + 4 <= n && d.end - d.p >= 8; i += 4) {
		d.x[0] = ulp_rans_dec_step(d.x[0], d.tab[ctx[i]], &d.p, &s0);
		d.x[1] =
			ulp_rans_dec_step(d.x[1], d.tab[ctx[i + 1]], &d.p, &s1);
		d.x[2] =
			ulp_rans_dec_step(d.x[2], d.tab[ctx[i + 2]], &d.p, &s2);
		d.x[3] =
			ulp_rans_dec_step(d.x[3], d.tab[ctx[i + 3]], &d.p, &s3);
		if ((s0 != sym[i] || s1 != sym[i + 1] || s2 != sym[i + 2] ||
		     s3 != sym[i + 3]) &&
		    bad == (size_t)-1)
			bad = i;
	}
	for (; i < n; i++) {
		unsigned s;
		TU_OK(ulp_rans_dec_step_checked(&d, &d.x[i % 4], d.tab[ctx[i]],
		                                &s),
		      "checked step %zu", i);
		if (s != sym[i] && bad == (size_t)-1)
			bad = i;
	}
	TU_ASSERT(bad == (size_t)-1, "symbol %zu differs", bad);
	size_t used = 0;
	TU_OK(ulp_rans_dec_end(&d, in, &used), "end");
	TU_ASSERT(used == b.len, "used %zu of %zu", used, b.len);
	/* a wrong final state, and a checked step at the end of input */
	ulp_rans_dec e = d;
	e.x[2] ^= 1;
	TU_RC(ulp_rans_dec_end(&e, in, &used), ULP_ERR_CORRUPT, "bad state");
	e = d;
	e.x[0] = ULP_RANS_L; /* the next step must renormalise */
	unsigned s;
	int rc = ULP_OK;
	for (int k = 0; k < 64 && rc == ULP_OK; k++)
		rc = ulp_rans_dec_step_checked(&e, &e.x[0], e.tab[120], &s);
	TU_RC(rc, ULP_ERR_CORRUPT, "step past the end of input");
	TU_ASSERT(e.p <= e.end, "read past the end");
	free(in);
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
	free(sym);
	free(ctx);
}

Test(rans, reject_malformed_headers)
{
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	uint8_t dec[16];
	size_t used;
	/* has_esc must be 0 or 1 */
	static const uint8_t b1[] = { 2, 0, 1, 0x80, 0x10, 0, 0, 1, 0, 0, 0,
		                      1, 0, 0, 0,    1,    0, 0, 0, 1, 0 };
	uint8_t *c = tu_dup(b1, sizeof(b1));
	TU_RC(ulp_rans_decode(sc, c, sizeof(b1), NULL, 1, 2, dec, &used),
	      ULP_ERR_CORRUPT, "has_esc 2");
	free(c);
	/* 257 own contexts */
	static const uint8_t b2[] = { 0, 0x81, 0x02, 0, 1, 2 };
	c = tu_dup(b2, sizeof(b2));
	TU_RC(ulp_rans_decode(sc, c, sizeof(b2), NULL, 1, 2, dec, &used),
	      ULP_ERR_CORRUPT, "257 own tables");
	free(c);
	/* 256 own tables plus an escape table: 257 tables, one too many;
	 * 256 own tables alone are fine */
	for (int esc = 1; esc >= 0; esc--) {
		tu_buf bb = { 0 };
		uint8_t h[3] = { (uint8_t)esc, 0x80, 0x02 };
		tu_buf_put(&bb, h, 3);
		for (unsigned k = 0; k < 256; k++) {
			uint8_t o = (uint8_t)k;
			tu_buf_put(&bb, &o, 1);
		}
		for (int t = 0; t < 256 + esc; t++)
			tu_buf_put(&bb, "\0\x80\x10", 3);
		for (unsigned k = 0; k < 4; k++)
			tu_buf_put(&bb, "\0\0\1\0", 4);
		uint8_t *cc = tu_dup(bb.p, bb.len);
		TU_RC(ulp_rans_decode(sc, cc, bb.len, NULL, 0, 1, dec, &used),
		      esc ? ULP_ERR_CORRUPT : ULP_OK, "%d tables", 256 + esc);
		free(cc);
		tu_buf_free(&bb);
	}
	/* no table at all but symbols to decode */
	static const uint8_t b3[] = { 0, 0, 0, 0, 1, 0, 0, 0, 1,
		                      0, 0, 0, 1, 0, 0, 0, 1, 0 };
	c = tu_dup(b3, sizeof(b3));
	TU_RC(ulp_rans_decode(sc, c, sizeof(b3), NULL, 1, 2, dec, &used),
	      ULP_ERR_CORRUPT, "no tables");
	/* ... which is fine for n = 0 */
	TU_OK(ulp_rans_decode(sc, c, sizeof(b3), NULL, 0, 2, dec, &used), "no "
	                                                                  "tabl"
	                                                                  "es, "
	                                                                  "n "
	                                                                  "0");
	free(c);
	/* a state below L */
	static const uint8_t b4[] = { 1, 0, 0, 0x80, 0x10, 0xff, 0xff,
		                      0, 0, 0, 0,    1,    0,    0,
		                      0, 1, 0, 0,    0,    1,    0 };
	c = tu_dup(b4, sizeof(b4));
	TU_RC(ulp_rans_decode(sc, c, sizeof(b4), NULL, 0, 1, dec, &used),
	      ULP_ERR_CORRUPT, "state below L");
	free(c);
	/* two tables but no contexts */
	static const uint8_t b5[] = { 1, 1, 4, 0, 0x80, 0x10, 0, 0x80, 0x10,
		                      0, 0, 1, 0, 0,    0,    1, 0,    0,
		                      0, 1, 0, 0, 0,    1,    0 };
	c = tu_dup(b5, sizeof(b5));
	TU_RC(ulp_rans_decode(sc, c, sizeof(b5), NULL, 1, 1, dec, &used),
	      ULP_ERR_CORRUPT, "two tables, ctx NULL");
	free(c);
	/* bad arguments */
	TU_RC(ulp_rans_decode(sc, b3, sizeof(b3), NULL, 0, 0, dec, &used),
	      ULP_ERR_ARG, "nsym 0");
	TU_RC(ulp_rans_decode(sc, b3, sizeof(b3), NULL, 0, 257, dec, &used),
	      ULP_ERR_ARG, "nsym 257");
	ulp_rans_scratch_free(sc);
}

Test(rans, encode_bad_args)
{
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf out = { 0 };
	uint8_t sym[1] = { 0 };
	uint32_t h[2] = { 1, 0 };
	TU_RC(ulp_rans_encode(sc, sym, NULL, 1, 0, 1, h, &out), ULP_ERR_ARG,
	      "nsym 0");
	TU_RC(ulp_rans_encode(sc, sym, NULL, 1, 257, 1, h, &out), ULP_ERR_ARG,
	      "nsym 257");
	TU_RC(ulp_rans_encode(sc, sym, NULL, 1, 2, 0, h, &out), ULP_ERR_ARG,
	      "nctx 0");
	TU_RC(ulp_rans_encode(sc, sym, NULL, 1, 2, 257, h, &out), ULP_ERR_ARG,
	      "nctx 257");
	ulp_buf_free(&out);
	ulp_rans_scratch_free(sc);
}

Test(rans, corrupted_blocks_never_crash)
{
	/* Random byte changes anywhere in valid blocks, and random garbage:
	 * the decoder may accept (words carry no checksum) but must stay in
	 * bounds (sanitizer build) and answer OK or CORRUPT only. */
	tu_rng r;
	tu_rng_init(&r, 0x52414e530014ull);
	const size_t n = 700;
	uint8_t sym[700], ctx[700], dec[700];
	for (size_t i = 0; i < n; i++) {
		ctx[i] = (uint8_t)(i < 500 ? i % 2 : tu_below(&r, 256));
		sym[i] = (uint8_t)tu_geom(&r, 2, 16);
	}
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	ulp_buf b = rans_enc(sc, sym, ctx, n, 17, 256);
	unsigned corrupt = 0;
	for (size_t i = 0; i < b.len; i++)
		for (int k = 0; k < 3; k++) {
			uint8_t *c = tu_dup(b.p, b.len);
			size_t used = 0;
			c[i] ^= (uint8_t)(k == 0   ? 0x01
			                  : k == 1 ? 0x80
			                           : 1 + tu_below(&r, 255));
			int rc = ulp_rans_decode(sc, c, b.len, ctx, n, 17, dec,
			                         &used);
			TU_ASSERT(rc == ULP_OK || rc == ULP_ERR_CORRUPT,
			          "byte %zu: rc %d", i, rc);
			TU_ASSERT(rc || used <= b.len, "used %zu > %zu", used,
			          b.len);
			corrupt += rc == ULP_ERR_CORRUPT;
			free(c);
		}
	TU_ASSERT(corrupt > b.len, "only %u of %zu corruptions rejected",
	          corrupt, 3 * b.len);
	for (int t = 0; t < 2000; t++) {
		size_t len = tu_below(&r, 64);
		uint8_t *c = tu_xmalloc(len);
		size_t used;
		tu_fill(&r, c, len);
		if (len)
			c[0] &= 1;
		int rc = ulp_rans_decode(sc, c, len, t % 2 ? ctx : NULL,
		                         tu_below(&r, 16), 17, dec, &used);
		TU_ASSERT(rc == ULP_OK || rc == ULP_ERR_CORRUPT,
		          "garbage rc %d", rc);
		free(c);
	}
	ulp_buf_free(&b);
	ulp_rans_scratch_free(sc);
}

/* ============================================================== bitio */

Test(bitio, put_get_roundtrip)
{
	tu_rng r;
	tu_rng_init(&r, 0x424954494f00ull);
	const size_t n = 20000;
	unsigned *w = tu_xmalloc(sizeof(unsigned) * n);
	uint64_t *v = tu_xmalloc(sizeof(uint64_t) * n);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		/* first half put (0..32 bits), second half put64 (0..64) */
		w[i] = (unsigned)tu_below(&r, i < n / 2 ? 33 : 65);
		v[i] = w[i] == 64 ? tu_next(&r)
		                  : tu_next(&r) & ((1ull << w[i]) - 1);
		total += w[i];
	}
	size_t bytes = (size_t)((total + 7) / 8);
	uint8_t *buf = tu_xmalloc(bytes + 8); /* the writer's 8-byte slack */
	ulp_bitw bw = { buf, 0, 0 };
	for (size_t i = 0; i < n; i++) {
		if (i < n / 2)
			ulp_bitw_put(&bw, v[i], w[i]);
		else
			ulp_bitw_put64(&bw, v[i], w[i]);
	}
	uint8_t *end = ulp_bitw_finish(&bw);
	TU_ASSERT((size_t)(end - buf) == bytes, "wrote %zu bytes, want %zu",
	          (size_t)(end - buf), bytes);

	/* read back from an exact-size copy, half with get, half get64 */
	uint8_t *in = tu_dup(buf, bytes);
	ulp_bitr br;
	ulp_bitr_init(&br, in, bytes);
	size_t bad = (size_t)-1;
	for (size_t i = 0; i < n && bad == (size_t)-1; i++) {
		uint64_t got = i < n / 2 ? ulp_bitr_get(&br, w[i])
		                         : ulp_bitr_get64(&br, w[i]);
		if (got != v[i])
			bad = i;
	}
	TU_ASSERT(bad == (size_t)-1, "value %zu (%u bits) differs", bad,
	          bad == (size_t)-1 ? 0 : w[bad]);
	TU_ASSERT(!br.overrun, "overrun flagged on a valid stream");
	TU_ASSERT(ulp_bitr_left(&br) == 0, "%zu bytes left",
	          ulp_bitr_left(&br));
	ulp_bitr_get(&br, 1);
	TU_ASSERT(br.overrun, "reading past the end not flagged");

	/* reading with explicit refills, as the float decoder does */
	ulp_bitr_init(&br, in, bytes);
	bad = (size_t)-1;
	for (size_t i = 0; i < n && bad == (size_t)-1; i++) {
		ulp_bitr_refill(&br);
		uint64_t got = ulp_bitr_get64(&br, w[i]);
		if (got != v[i])
			bad = i;
	}
	TU_ASSERT(bad == (size_t)-1 && !br.overrun, "refill path: value %zu",
	          bad);
	free(in);
	free(buf);
	free(w);
	free(v);
}

/* Runs of word-mode puts between byte-mode ones write the bytes that
 * byte-mode puts alone write. */
Test(bitio, word_mode_same_bytes)
{
	tu_rng r;
	tu_rng_init(&r, 0x574f5244ull);
	const size_t n = 30000;
	uint8_t *a = tu_xmalloc(8 * n + 8), *b = tu_xmalloc(8 * n + 8);
	memset(a, 0x5a, 8 * n + 8);
	memset(b, 0xa5, 8 * n + 8);
	ulp_bitw wa = { a, 0, 0 }, wb = { b, 0, 0 };
	int word = 0;
	for (size_t i = 0; i < n; i++) {
		if (tu_below(&r, 50) == 0) { /* switch mode now and then */
			if (word)
				ulp_bitw_word_end(&wb);
			word = !word;
		}
		unsigned w = (unsigned)tu_below(&r, word ? 65 : 57);
		uint64_t v = w == 64 ? tu_next(&r)
		                     : tu_next(&r) & ((1ull << w) - 1);
		ulp_bitw_put64(&wa, v, w);
		if (word)
			ulp_bitw_put_word(&wb, v, w);
		else
			ulp_bitw_put(&wb, v, w);
	}
	if (word)
		ulp_bitw_word_end(&wb);
	size_t la = (size_t)(ulp_bitw_finish(&wa) - a);
	size_t lb = (size_t)(ulp_bitw_finish(&wb) - b);
	TU_ASSERT(la == lb, "byte mode %zu bytes, word mode %zu", la, lb);
	TU_MEMEQ(b, a, la, "word-mode bytes");
	free(a);
	free(b);
}

Test(bitio, overrun_and_left)
{
	uint8_t buf[16] = { 0 };
	ulp_bitw bw = { buf, 0, 0 };
	ulp_bitw_put(&bw, 0x1abc, 13);
	uint8_t *end = ulp_bitw_finish(&bw);
	cr_assert_eq(end - buf, 2);
	cr_assert_eq(buf[0], 0xbc);
	cr_assert_eq(buf[1], 0x1a);

	uint8_t *in = tu_dup(buf, 2);
	ulp_bitr br;
	ulp_bitr_init(&br, in, 2);
	cr_assert_eq(ulp_bitr_left(&br), 2);
	cr_assert_eq(ulp_bitr_get(&br, 4), 0xc);
	cr_assert_eq(ulp_bitr_left(&br), 1, "partial byte counts as consumed");
	cr_assert_eq(ulp_bitr_get(&br, 9), 0x1ab);
	cr_assert(!br.overrun);
	cr_assert_eq(ulp_bitr_get(&br, 3), 0);
	cr_assert(!br.overrun, "padding bits of the last byte are readable");
	cr_assert_eq(ulp_bitr_left(&br), 0);
	(void)ulp_bitr_get(&br, 1);
	cr_assert(br.overrun, "bit past the end not flagged");

	ulp_bitr_init(&br, in, 2);
	(void)ulp_bitr_get(&br, 20);
	cr_assert(br.overrun, "20 bits from 2 bytes not flagged");
	ulp_bitr_init(&br, in, 2);
	(void)ulp_bitr_get64(&br, 40);
	cr_assert(br.overrun, "get64 of 40 bits from 2 bytes not flagged");
	ulp_bitr_init(&br, in, 0);
	cr_assert_eq(ulp_bitr_get(&br, 0), 0);
	cr_assert(!br.overrun, "0 bits from nothing is fine");
	(void)ulp_bitr_get(&br, 1);
	cr_assert(br.overrun);
	free(in);

	/* 3 bytes left after one byte of a 4-byte stream */
	uint8_t four[4] = { 1, 2, 3, 4 };
	in = tu_dup(four, 4);
	ulp_bitr_init(&br, in, 4);
	cr_assert_eq(ulp_bitr_get(&br, 8), 1);
	cr_assert_eq(ulp_bitr_left(&br), 3);
	cr_assert_eq(ulp_bitr_get(&br, 24), 0x040302);
	cr_assert_eq(ulp_bitr_left(&br), 0);
	free(in);
}

Test(bitio, long_stream_unaligned)
{
	/* 64-bit values at every bit phase, with the fast refill path */
	tu_rng r;
	tu_rng_init(&r, 0x424954494f01ull);
	uint8_t *buf = tu_xmalloc(9 * 1000 + 16);
	ulp_bitw bw = { buf, 0, 0 };
	uint64_t vals[1000];
	uint64_t bits = 0;
	for (int i = 0; i < 1000; i++) {
		vals[i] = tu_next(&r);
		ulp_bitw_put(&bw, i % 8, 3);
		ulp_bitw_put64(&bw, vals[i], 64);
		bits += 67;
	}
	size_t bytes = (size_t)(ulp_bitw_finish(&bw) - buf);
	cr_assert_eq(bytes, (bits + 7) / 8);
	uint8_t *in = tu_dup(buf, bytes);
	ulp_bitr br;
	ulp_bitr_init(&br, in, bytes);
	for (int i = 0; i < 1000; i++) {
		uint64_t ph = ulp_bitr_get(&br, 3);
		uint64_t v = ulp_bitr_get64(&br, 64);
		TU_ASSERT(ph == (uint64_t)(i % 8) && v == vals[i], "value %d",
		          i);
	}
	cr_assert(!br.overrun);
	free(in);
	free(buf);
}

/* ============================================================ floats */

static const struct {
	ulp_dtype dt;
	unsigned width, ebits, mbits;
} FMTS[] = {
	{ ULP_DT_BF16, 16, 8, 7 },  { ULP_DT_F16, 16, 5, 10 },
	{ ULP_DT_F32, 32, 8, 23 },  { ULP_DT_F64, 64, 11, 52 },
	{ ULP_DT_F8E4M3, 8, 4, 3 }, { ULP_DT_F8E5M2, 8, 5, 2 },
};
#define NFMTS (sizeof(FMTS) / sizeof(FMTS[0]))

Test(floatcode, dtype_formats)
{
	for (size_t i = 0; i < NFMTS; i++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[i].dt);
		cr_assert(f.width == FMTS[i].width &&
		                  f.ebits == FMTS[i].ebits &&
		                  f.mbits == FMTS[i].mbits,
		          "%s: %u/%u/%u", ulp_dtype_name(FMTS[i].dt), f.width,
		          f.ebits, f.mbits);
		cr_assert_eq(ulp_dtype_size(FMTS[i].dt), FMTS[i].width / 8);
	}
	cr_assert_eq(ulp_dtype_fmt(ULP_DT_GENERIC).width, 0);
	cr_assert_eq(ulp_dtype_size(ULP_DT_GENERIC), 1);
}

/* The coding of a standalone stream of n elements: fused (one rANS
 * symbol per element) from 1024 elements. */
static int sa_coding(size_t n)
{
	return n >= 1024 ? ULP_SC_FUSED : ULP_SC_STANDALONE;
}

/* Skips the pair map of a fused stream (*pp just past the coding byte,
 * then at the codes' block); returns the codes, and in *esc whether
 * there is an escape code. */
static unsigned fused_header(const uint8_t **pp, const uint8_t *end, int *esc)
{
	uint64_t rows;
	unsigned k = 0;
	TU_OK(ulp_varint_get(pp, end, &rows), "map rows");
	*esc = (int)(rows & 1);
	rows >>= 1;
	cr_assert((uint64_t)(end - *pp) >= 3 * rows, "map of %" PRIu64 " rows",
	          rows);
	for (uint64_t r = 0; r < rows; r++, *pp += 3)
		k += (unsigned)__builtin_popcount(ulp_le16(*pp + 1));
	return k;
}

typedef struct frt {
	int coding;
	size_t len;
	ulp_dtype_stats st;
} frt;

/* Encode cur against ref (NULL: none) behind 3 bytes already in the
 * output buffer, check the stats and the bound, decode with a fresh
 * scratch from exact-size copies and compare. */
static frt float_rt(ulp_float_fmt f, const uint8_t *cur, const uint8_t *ref,
                    size_t n, int alt)
{
	const size_t nb = n * (f.width / 8);
	ulp_float_scratch *es = ulp_float_scratch_new(),
			  *ds = ulp_float_scratch_new();
	ulp_buf out = { 0 };
	frt res;
	memset(&res, 0, sizeof(res));
	cr_assert(es && ds);
	TU_OK(ulp_buf_reserve(&out, 3), "reserve");
	memset(out.p, 0xaa, 3);
	out.len = 3;
	TU_OK(ulp_float_encode(es, f, cur, ref, n, alt, &out, &res.st),
	      "float encode w%u n=%zu ref=%d", f.width, n, ref != NULL);
	TU_ASSERT(out.p[0] == 0xaa && out.p[1] == 0xaa && out.p[2] == 0xaa,
	          "encoder clobbered bytes before its stream");
	res.len = out.len - 3;
	/* every encoder kernel writes the same bytes; with alt the delta
	 * pass is the portable one whatever the kernels, so the SIMD passes
	 * are compared without it too */
	for (int a = alt; a >= 0; a--) {
		int lv[3];
		ulp_buf first = { 0 };
		for (unsigned k = 0, nlv = simd_levels(lv); k < nlv; k++) {
			int old = ulp_rans_set_simd(lv[k]);
			ulp_buf o2 = { 0 };
			TU_OK(ulp_float_encode(es, f, cur, ref, n, a, &o2,
			                       NULL),
			      "float encode, kernels %d alt %d", lv[k], a);
			ulp_rans_set_simd(old);
			if (a != alt && k == 0) {
				first = o2;
				continue;
			}
			const uint8_t *want = a == alt ? out.p + 3 : first.p;
			size_t wlen = a == alt ? res.len : first.len;
			TU_ASSERT(o2.len == wlen,
			          "kernels %d alt %d disagree on the size: "
			          "%zu, %zu",
			          lv[k], a, o2.len, wlen);
			TU_MEMEQ(o2.p, want, wlen,
			         "kernels' %d streams, alt %d", lv[k], a);
			ulp_buf_free(&o2);
		}
		ulp_buf_free(&first);
	}
	res.coding = res.len ? out.p[3] : -1;
	TU_ASSERT(res.len >= 1, "empty stream");
	TU_ASSERT(res.len <= ulp_float_bound(n, f.width),
	          "stream %zu > bound %zu", res.len,
	          ulp_float_bound(n, f.width));
	TU_ASSERT(res.len <= nb + 1, "stream %zu bytes for %zu raw bytes",
	          res.len, nb);
	TU_ASSERT(res.coding == ULP_SC_RAW || res.coding == ULP_SC_IDENTICAL ||
	                  res.coding == ULP_SC_DELTA ||
	                  res.coding == ULP_SC_STANDALONE ||
	                  res.coding == ULP_SC_FUSED,
	          "coding %d", res.coding);
	if (!ref)
		TU_ASSERT(
			res.coding == ULP_SC_RAW || res.coding == sa_coding(n),
			"coding %d without a reference (n %zu)", res.coding, n);
	TU_ASSERT(res.st.elems == n && res.st.bytes_in == nb &&
	                  res.st.bytes_out == res.len,
	          "stats: elems %" PRIu64 " in %" PRIu64 " out %" PRIu64,
	          res.st.elems, res.st.bytes_in, res.st.bytes_out);
	int as_delta = res.coding == ULP_SC_DELTA ||
	               res.coding == ULP_SC_IDENTICAL;
	TU_ASSERT(res.st.delta_elems == (as_delta ? n : 0),
	          "delta_elems %" PRIu64 " (coding %d, n %zu)",
	          res.st.delta_elems, res.coding, n);
	if (res.coding == ULP_SC_RAW)
		TU_ASSERT(res.len == nb + 1, "raw stream of %zu bytes",
		          res.len);
	if (res.coding == ULP_SC_IDENTICAL)
		TU_ASSERT(res.len == 1, "identical stream of %zu bytes",
		          res.len);
	TU_ASSERT(res.st.ref_elems == (ref ? n : 0), "ref_elems %" PRIu64,
	          res.st.ref_elems);
	if (ref && alt && res.coding != ULP_SC_IDENTICAL) {
		/* the same residual symbols in more context never have a
		 * higher empirical entropy */
		double eps = 1e-6 * res.st.delta_noctx_bits + 1e-6;
		TU_ASSERT(res.st.delta_ctx_bits <=
		                  res.st.delta_noctx_bits + eps,
		          "context entropy %.1f > no-context %.1f",
		          res.st.delta_ctx_bits, res.st.delta_noctx_bits);
		TU_ASSERT(res.st.delta_prevk_bits <=
		                  res.st.delta_ctx_bits + eps,
		          "prev-k entropy %.1f > context %.1f",
		          res.st.delta_prevk_bits, res.st.delta_ctx_bits);
	}
	if (!alt)
		TU_ASSERT(res.st.delta_noctx_bits == 0 &&
		                  res.st.delta_ctx_bits == 0 &&
		                  res.st.delta_prevk_bits == 0,
		          "alternative models computed without alt_stats");

	uint8_t *in = tu_dup(out.p + 3, res.len);
	uint8_t *rc_ref = ref ? tu_dup(ref, nb) : NULL;
	uint8_t *dst = tu_xmalloc(nb);
	/* every stream through the portable and the SIMD kernels */
	for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++) {
		int old = ulp_rans_set_simd(simd);
		memset(dst, 0xcd, nb);
		TU_OK(ulp_float_decode(ds, f, in, res.len, rc_ref, n, dst),
		      "float decode w%u e%u n=%zu coding %d simd %d", f.width,
		      f.ebits, n, res.coding, simd);
		TU_MEMEQ(dst, cur, nb, "float stream w%u e%u coding %d simd %d",
		         f.width, f.ebits, res.coding, simd);
		ulp_rans_set_simd(old);
	}
	free(dst);
	free(rc_ref);
	free(in);
	ulp_buf_free(&out);
	ulp_float_scratch_free(es);
	ulp_float_scratch_free(ds);
	return res;
}

/* Special bit patterns of a format. */
static size_t specials(ulp_float_fmt f, uint64_t *v)
{
	const unsigned W = f.width;
	const uint64_t sb = 1ull << (W - 1);
	const uint64_t mant = (1ull << f.mbits) - 1;
	const uint64_t expm = ((1ull << f.ebits) - 1) << f.mbits;
	const uint64_t q = 1ull << (f.mbits - 1);
	const uint64_t maxfin = (expm - (1ull << f.mbits)) | mant;
	const uint64_t one = ((1ull << (f.ebits - 1)) - 1) << f.mbits;
	size_t n = 0;
	v[n++] = 0;                          /* +0 */
	v[n++] = sb;                         /* -0 */
	v[n++] = expm;                       /* +Inf */
	v[n++] = sb | expm;                  /* -Inf */
	v[n++] = expm | q;                   /* quiet NaN */
	v[n++] = expm | q | 1;               /* quiet NaN with payload */
	v[n++] = sb | expm | q | (5 & mant); /* negative quiet NaN, payload */
	v[n++] = expm | mant;                /* +NaN, all-ones payload */
	v[n++] = sb | expm | mant;    /* -NaN, all-ones payload (all ones) */
	v[n++] = expm | 1;            /* signalling NaN */
	v[n++] = sb | expm | (q - 1); /* signalling NaN, largest payload */
	v[n++] = 1;                   /* min denormal */
	v[n++] = sb | 1;
	v[n++] = mant; /* max denormal */
	v[n++] = sb | mant;
	v[n++] = 1ull << f.mbits; /* min normal */
	v[n++] = maxfin;          /* max finite */
	v[n++] = sb | maxfin;     /* most negative finite */
	v[n++] = one;             /* 1.0 */
	v[n++] = sb | one;        /* -1.0 */
	return n;
}

/* Pairs (ref, cur) with the largest ULP distances. */
static size_t extreme_pairs(ulp_float_fmt f, uint64_t *ref, uint64_t *cur)
{
	const unsigned W = f.width;
	const uint64_t sb = 1ull << (W - 1), all = tu_wmask(W);
	const uint64_t mant = (1ull << f.mbits) - 1;
	const uint64_t expm = ((1ull << f.ebits) - 1) << f.mbits;
	const uint64_t negmax = sb | ((expm - (1ull << f.mbits)) | mant);
	const uint64_t pnan = expm | mant;
	size_t n = 0;
	ref[n] = negmax, cur[n++] = pnan;
	ref[n] = pnan, cur[n++] = negmax;
	/* ord 0 -> ord 2^(W-1) and ord 2^W-1 -> ord 2^(W-1)-1:
	 * |d| == 2^(W-1) exactly */
	ref[n] = all, cur[n++] = 0;
	ref[n] = 0, cur[n++] = all;
	ref[n] = pnan, cur[n++] = sb;
	ref[n] = sb, cur[n++] = pnan;
	/* sign flips */
	ref[n] = 1ull << f.mbits, cur[n++] = sb | 1ull << f.mbits;
	ref[n] = sb | mant, cur[n++] = mant;
	for (size_t i = 0; i < 6; i++) {
		uint64_t o = tu_ord(cur[i], W) - tu_ord(ref[i], W);
		o &= all;
		uint64_t mag = (o >> (W - 1)) ? (0 - o) & all : o;
		if (i >= 2)
			cr_assert(mag == sb, "pair %zu: |d| %" PRIx64, i, mag);
	}
	return n;
}

Test(floatcode, special_values)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415400ull);
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const unsigned W = f.width, B = W / 8;
		uint64_t sp[32], pr[16], pc[16];
		size_t ns = specials(f, sp), np = extreme_pairs(f, pr, pc);

		/* every special against every special, small streams */
		size_t n = ns * ns;
		uint8_t *cur = tu_xmalloc(n * B), *ref = tu_xmalloc(n * B);
		for (size_t i = 0; i < ns; i++)
			for (size_t j = 0; j < ns; j++) {
				tu_store(cur, i * ns + j, sp[i], W);
				tu_store(ref, i * ns + j, sp[j], W);
			}
		float_rt(f, cur, ref, n, 1);
		float_rt(f, cur, NULL, n, 0);
		free(cur);
		free(ref);

		/* the same, with the extreme pairs, buried in a random walk so
		 * that DELTA (and, without reference, FUSED) is used */
		n = 4001;
		cur = tu_xmalloc(n * B);
		ref = tu_xmalloc(n * B);
		tu_fill_weights(&r, f, ref, n);
		tu_walk_weights(&r, f, ref, cur, n);
		for (size_t i = 0; i < ns * ns; i++) {
			size_t at = tu_below(&r, n);
			tu_store(cur, at, sp[i / ns], W);
			tu_store(ref, at, sp[i % ns], W);
		}
		/* pairs at the ends and inside */
		for (size_t i = 0; i < np; i++) {
			size_t at = i < 2 ? (i ? n - 1 : 0) : tu_below(&r, n);
			tu_store(cur, at, pc[i], W);
			tu_store(ref, at, pr[i], W);
		}
		frt d = float_rt(f, cur, ref, n, 1);
		TU_ASSERT(d.coding == ULP_SC_DELTA, "%s: coding %d",
		          ulp_dtype_name(FMTS[k].dt), d.coding);
		frt s = float_rt(f, cur, NULL, n, 0);
		TU_ASSERT(s.coding == sa_coding(n), "%s: coding %d",
		          ulp_dtype_name(FMTS[k].dt), s.coding);
		free(cur);
		free(ref);
	}
}

Test(floatcode, all_8bit_pairs)
{
	/* every (cur, ref) byte pair, through DELTA (a long identical tail
	 * makes delta coding win) and standalone */
	const size_t pairs = 65536, tail = 10 * 65536, n = pairs + tail;
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415401ull);
	uint8_t *cur = tu_xmalloc(n), *ref = tu_xmalloc(n);
	for (size_t i = 0; i < pairs; i++) {
		cur[i] = (uint8_t)i;
		ref[i] = (uint8_t)(i >> 8);
	}
	tu_fill(&r, ref + pairs, tail);
	memcpy(cur + pairs, ref + pairs, tail);
	for (size_t k = 4; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		frt d = float_rt(f, cur, ref, n, 1);
		TU_ASSERT(d.coding == ULP_SC_DELTA, "%s: coding %d",
		          ulp_dtype_name(FMTS[k].dt), d.coding);
		float_rt(f, cur, ref, pairs, 0);
		float_rt(f, cur, NULL, pairs, 0);
	}
	free(cur);
	free(ref);
}

Test(floatcode, all_16bit_values)
{
	/* every 16-bit pattern as cur against a scrambled reference, with
	 * an identical tail so that DELTA carries them */
	const size_t all = 65536, tail = 3 * 65536, n = all + tail;
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415402ull);
	uint8_t *cur = tu_xmalloc(2 * n), *ref = tu_xmalloc(2 * n);
	for (size_t i = 0; i < all; i++) {
		tu_store(cur, i, i, 16);
		tu_store(ref, i, (i * 40503u + 12345u) & 0xffff, 16);
	}
	for (size_t k = 0; k < 2; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		tu_fill_weights(&r, f, ref + 2 * all, tail);
		memcpy(cur + 2 * all, ref + 2 * all, 2 * tail);
		frt d = float_rt(f, cur, ref, n, 1);
		TU_ASSERT(d.coding == ULP_SC_DELTA, "%s: coding %d",
		          ulp_dtype_name(FMTS[k].dt), d.coding);
		float_rt(f, cur, ref, all, 0);
		float_rt(f, cur, NULL, all, 0);
		float_rt(f, cur, NULL, n, 0);
	}
	free(cur);
	free(ref);
}

Test(floatcode, random_walk_delta)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415403ull);
	const size_t n = 100001;
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const size_t nb = n * (f.width / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		tu_fill_weights(&r, f, ref, n);
		tu_walk_weights(&r, f, ref, cur, n);
		frt d = float_rt(f, cur, ref, n, 1);
		frt s = float_rt(f, cur, NULL, n, 0);
		const char *nm = ulp_dtype_name(FMTS[k].dt);
		TU_ASSERT(d.coding == ULP_SC_DELTA, "%s: coding %d", nm,
		          d.coding);
		/* 0 or +-1..3 ULPs: about 2.5 bits an element */
		size_t lim = f.width == 8 ? nb / 2 : nb / 4;
		TU_ASSERT(d.len < lim, "%s: delta %zu bytes, raw %zu", nm,
		          d.len, nb);
		TU_ASSERT(d.len * 2 < s.len, "%s: delta %zu vs standalone %zu",
		          nm, d.len, s.len);
		TU_ASSERT(d.st.model_bits > 0 && s.st.model_bits > 0,
		          "%s: model_bits", nm);
		TU_ASSERT(d.st.delta_noctx_bits > 0 &&
		                  d.st.delta_ctx_bits > 0 &&
		                  d.st.delta_prevk_bits > 0,
		          "%s: alternative model entropies missing", nm);
		TU_ASSERT(fabs(d.len * 8.0 - d.st.model_bits) <
		                  0.05 * d.st.model_bits,
		          "%s: %zu bytes vs model %.0f bits", nm, d.len,
		          d.st.model_bits);
		free(cur);
		free(ref);
	}
}

/* Residuals of every bit length 0 .. W (the ordinals wrap: the codec
 * works modulo 2^W), among small ones so that delta coding wins: every
 * raw bit count through the kernels' bit packing. */
Test(floatcode, residuals_of_every_length)
{
	tu_rng r;
	tu_rng_init(&r, 0x45564552594b31ull);
	const size_t n = 70001;
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const unsigned W = f.width;
		const size_t nb = n * (W / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		tu_fill_weights(&r, f, ref, n);
		for (size_t i = 0; i < n; i++) {
			unsigned bits = tu_chance(&r, 1, 4)
			                        ? (unsigned)tu_below(&r, W + 1)
			                        : (unsigned)tu_below(&r, 4);
			uint64_t d =
				bits ? (1ull << (bits - 1)) |
						(tu_next(&r) &
			                         ((1ull << (bits - 1)) - 1))
				     : 0;
			if (tu_chance(&r, 1, 2))
				d = 0 - d;
			uint64_t o = tu_ord(tu_load(ref, i, W), W) + d;
			tu_store(cur, i, tu_unord(o & tu_wmask(W), W), W);
		}
		frt d = float_rt(f, cur, ref, n, 0);
		TU_ASSERT(d.coding == ULP_SC_DELTA, "%s: coding %d",
		          ulp_dtype_name(FMTS[k].dt), d.coding);
		free(cur);
		free(ref);
	}
}

Test(floatcode, large_delta_stats)
{
	/* 1M F32 elements: the output is within 5% of the model entropy,
	 * tables and all. */
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415404ull);
	const size_t n = 1000000;
	ulp_float_fmt f = ulp_dtype_fmt(ULP_DT_F32);
	uint8_t *cur = tu_xmalloc(4 * n), *ref = tu_xmalloc(4 * n);
	tu_fill_weights(&r, f, ref, n);
	tu_walk_weights(&r, f, ref, cur, n);
	frt d = float_rt(f, cur, ref, n, 0);
	TU_ASSERT(d.coding == ULP_SC_DELTA, "coding %d", d.coding);
	TU_ASSERT(d.st.model_bits > 0, "model_bits");
	TU_ASSERT(fabs(d.len * 8.0 - d.st.model_bits) < 0.05 * d.st.model_bits,
	          "%zu bytes vs model %.0f bits", d.len, d.st.model_bits);
	TU_ASSERT(d.len < n, "%zu bytes for %zu small walks", d.len, n);
	free(cur);
	free(ref);
}

Test(floatcode, identical)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415405ull);
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const size_t n = 1001, nb = n * (f.width / 8);
		uint8_t *v = tu_xmalloc(nb);
		tu_fill(&r, v, nb);
		frt d = float_rt(f, v, v, n, 0);
		TU_ASSERT(d.coding == ULP_SC_IDENTICAL && d.len == 1,
		          "%s: coding %d len %zu", ulp_dtype_name(FMTS[k].dt),
		          d.coding, d.len);
		TU_ASSERT(d.st.delta_elems == n, "delta_elems");
		/* n = 0 with a reference is trivially identical */
		d = float_rt(f, v, v, 0, 0);
		TU_ASSERT(d.coding == ULP_SC_IDENTICAL, "n 0: coding %d",
		          d.coding);
		free(v);
	}
}

Test(floatcode, uncorrelated_with_reference)
{
	/* A reference that does not help must not cost more than coding
	 * without one (plus a small margin). */
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415406ull);
	const size_t n = 50001;
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const size_t nb = n * (f.width / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		tu_fill_weights(&r, f, cur, n);
		tu_fill_weights(&r, f, ref, n);
		frt d = float_rt(f, cur, ref, n, 1);
		frt s = float_rt(f, cur, NULL, n, 0);
		TU_ASSERT(d.len <= s.len + s.len / 50 + 64,
		          "%s: with ref %zu bytes, without %zu",
		          ulp_dtype_name(FMTS[k].dt), d.len, s.len);
		TU_ASSERT(s.coding == ULP_SC_FUSED && s.len < nb,
		          "%s: weights not compressed (coding %d, %zu/%zu)",
		          ulp_dtype_name(FMTS[k].dt), s.coding, s.len, nb);
		/* uniformly random bits: stored raw, one byte of overhead */
		tu_fill(&r, cur, nb);
		tu_fill(&r, ref, nb);
		d = float_rt(f, cur, ref, n, 0);
		s = float_rt(f, cur, NULL, n, 0);
		TU_ASSERT(d.len <= nb + 1 && s.len <= nb + 1, "random bits");
		free(cur);
		free(ref);
	}
}

/* Streams of at least 64 Ki elements estimate the delta coding on a
 * sample first and skip the delta pass where standalone coding is
 * clearly cheaper; the full pass (which the model statistics force)
 * must make the same choice, byte for byte, both ways. */
Test(floatcode, sampled_choice_matches_full_pass)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415410ull);
	const size_t n = 100003;
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const char *nm = ulp_dtype_name(FMTS[k].dt);
		const size_t nb = n * (f.width / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		uint8_t *near = tu_xmalloc(nb);
		tu_fill_weights(&r, f, cur, n);
		tu_fill_weights(&r, f, ref, n);
		tu_walk_weights(&r, f, cur, near, n);
		const uint8_t *refs[2] = { ref, cur };
		const uint8_t *curs[2] = { cur, near };
		const int want[2] = { sa_coding(n), ULP_SC_DELTA };
		for (int c = 0; c < 2; c++) {
			ulp_float_scratch *fs = ulp_float_scratch_new();
			ulp_buf fast = { 0 }, full = { 0 };
			ulp_dtype_stats st;
			memset(&st, 0, sizeof(st));
			cr_assert(fs);
			TU_OK(ulp_float_encode(fs, f, curs[c], refs[c], n, 0,
			                       &fast, NULL),
			      "%s: encode", nm);
			TU_OK(ulp_float_encode(fs, f, curs[c], refs[c], n, 1,
			                       &full, &st),
			      "%s: encode with statistics", nm);
			TU_ASSERT(fast.len > 0 && fast.p[0] == want[c],
			          "%s case %d: coding %d", nm, c,
			          fast.len ? fast.p[0] : -1);
			TU_ASSERT(fast.len == full.len,
			          "%s case %d: %zu vs %zu", nm, c, fast.len,
			          full.len);
			TU_MEMEQ(fast.p, full.p, fast.len, "sampled vs full");
			frt d = float_rt(f, curs[c], refs[c], n, 0);
			TU_ASSERT(d.coding == want[c], "%s: round trip", nm);
			ulp_buf_free(&fast);
			ulp_buf_free(&full);
			ulp_float_scratch_free(fs);
		}
		free(cur);
		free(ref);
		free(near);
	}
}

/* Large streams take their standalone estimate from a sparse sample
 * first, and the dense one only where the choice is close: streams that
 * are a mix of elements near the reference and elements unrelated to it
 * sweep the choice across the line, and the encoder must choose as the
 * full pass (the dense estimate every time) does, byte for byte. */
Test(floatcode, close_choices_match_full_pass)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415411ull);
	const size_t n = 131072 + 7;
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const char *nm = ulp_dtype_name(FMTS[k].dt);
		const size_t nb = n * (f.width / 8);
		uint8_t *ref = tu_xmalloc(nb), *near = tu_xmalloc(nb);
		uint8_t *other = tu_xmalloc(nb), *cur = tu_xmalloc(nb);
		tu_fill_weights(&r, f, ref, n);
		tu_walk_weights(&r, f, ref, near, n);
		tu_fill_weights(&r, f, other, n);
		int seen_delta = 0, seen_sa = 0;
		for (unsigned pct = 0; pct <= 100; pct += 5) {
			for (size_t i = 0; i < n; i++)
				tu_store(cur, i,
				         tu_load(tu_chance(&r, pct, 100)
				                         ? near
				                         : other,
				                 i, f.width),
				         f.width);
			ulp_float_scratch *fs = ulp_float_scratch_new();
			ulp_buf fast = { 0 }, full = { 0 };
			ulp_dtype_stats st;
			memset(&st, 0, sizeof(st));
			cr_assert(fs);
			TU_OK(ulp_float_encode(fs, f, cur, ref, n, 0, &fast,
			                       NULL),
			      "%s: encode", nm);
			TU_OK(ulp_float_encode(fs, f, cur, ref, n, 1, &full,
			                       &st),
			      "%s: encode with statistics", nm);
			TU_ASSERT(fast.len == full.len && fast.len > 0,
			          "%s %u%% near: %zu vs %zu bytes", nm, pct,
			          fast.len, full.len);
			TU_MEMEQ(fast.p, full.p, fast.len, "sparse vs full");
			seen_delta |= fast.p[0] == ULP_SC_DELTA;
			seen_sa |= fast.p[0] == sa_coding(n);
			ulp_buf_free(&fast);
			ulp_buf_free(&full);
			ulp_float_scratch_free(fs);
		}
		TU_ASSERT(seen_delta && seen_sa,
		          "%s: the sweep did not cross the line (delta %d, "
		          "standalone %d)",
		          nm, seen_delta, seen_sa);
		free(ref);
		free(near);
		free(other);
		free(cur);
	}
}

/* Streams large enough for 32-lane blocks, whose symbols are decoded in
 * bulk and reconstructed by the SIMD kernels of each width (float_rt
 * decodes at every level), with an odd tail for the portable loop: the
 * residuals of random sizes up to 2^(W - 8) ULPs, so that the raw bits
 * fill the kernels' windows. */
Test(floatcode, large_deltas_every_kernel)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415408ull);
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const unsigned W = f.width;
		if (W < 16) /* too few bits for both kinds of residual */
			continue;
		size_t n = 3 * ULP_RANS_WIDE_MIN + 13, nb = n * (W / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		tu_fill_weights(&r, f, ref, n);
		for (size_t i = 0; i < n; i++) {
			uint64_t o = tu_ord(tu_load(ref, i, W), W);
			uint64_t d = tu_below(&r, 1ull << tu_below(&r, W - 7));
			o = o + d <= tu_wmask(W) ? o + d : o - d;
			tu_store(cur, i, tu_unord(o, W), W);
		}
		frt d = float_rt(f, cur, ref, n, 0);
		TU_ASSERT(d.coding == ULP_SC_DELTA, "%s: coding %d",
		          ulp_dtype_name(FMTS[k].dt), d.coding);
		free(cur);
		free(ref);
	}
}

Test(floatcode, small_and_odd_n)
{
	/* around the SIMD passes' steps of 8 and 32 elements too */
	static const size_t ns[] = { 0,    1,    2,    3,    5,   7,  9,
		                     31,   32,   33,   63,   65,  97, 255,
		                     1023, 1024, 1025, 1031, 1057 };
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415407ull);
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
			size_t n = ns[a], nb = n * (f.width / 8);
			uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
			tu_fill_weights(&r, f, ref, n);
			tu_walk_weights(&r, f, ref, cur, n);
			float_rt(f, cur, ref, n, a & 1);
			float_rt(f, cur, NULL, n, 0);
			/* one element changed */
			if (n) {
				memcpy(cur, ref, nb);
				tu_store(cur, n / 2,
				         tu_walk_bits(&r,
				                      tu_load(ref, n / 2,
				                              f.width),
				                      f.width) ^
				                 1,
				         f.width);
				float_rt(f, cur, ref, n, 0);
			}
			free(cur);
			free(ref);
		}
	}
}

/* Fused standalone streams: bf16 weights (the pairs rarer than a table
 * slot escaped), few pairs (no escapes), more frequent pairs than codes
 * (the cut falls among equal counts) and nearly every element escaped;
 * every format, with a sample's counts (and so an escape code) for 64 Ki
 * elements or more; each through both kernels both ways (float_rt). */
Test(floatcode, fused_codes_and_escapes)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415411ull);
	static const size_t ns[] = { 40000 + 5, 65536 + 5 };
	ulp_float_fmt bf = ulp_dtype_fmt(ULP_DT_BF16);
	uint8_t *cur = tu_xmalloc(ns[1] * 8);
	struct {
		const char *what;
		int want_esc;   /* 1: some, 0: none */
		unsigned min_k; /* codes at least */
	} cases[] = {
		{ "weights", 1, 64 },
		{ "16 values", 0, 16 },
		{ "304 equally frequent pairs", 1, 255 },
		{ "2048 equally frequent pairs", 1, 0 },
	};
	for (int t = 0; t < 2; t++) {
		const size_t n = ns[t];
		for (int c = 0; c < 4; c++) {
			if (c == 0)
				tu_fill_weights(&r, bf, cur, n);
			for (size_t i = 0; c > 0 && i < n; i++) {
				/* B (sign, top mantissa bits), exponent, raw */
				uint64_t b = tu_below(&r, 16);
				uint64_t e = c == 1 ? 120
				                    : 100 + tu_below(&r, 19);
				uint64_t v = (b >> 3) << 15 | e << 7 |
				             (b & 7) << 4 | tu_below(&r, 16);
				/* 3: 2048 pairs, each rarer than a slot */
				tu_store(cur, i, c == 3 ? (i % 2048) << 4 : v,
				         16);
			}
			frt s = float_rt(bf, cur, NULL, n, 0);
			TU_ASSERT(s.coding == ULP_SC_FUSED, "%s: coding %d",
			          cases[c].what, s.coding);
			ulp_float_scratch *fs = ulp_float_scratch_new();
			ulp_buf out = { 0 };
			TU_OK(ulp_float_encode(fs, bf, cur, NULL, n, 0, &out,
			                       NULL),
			      "encode");
			const uint8_t *p = out.p + 1, *end = out.p + out.len;
			uint64_t blen, nesc = 0;
			int esc;
			unsigned k = fused_header(&p, end, &esc);
			TU_OK(ulp_varint_get(&p, end, &blen), "block length");
			p += blen;
			if (esc)
				TU_OK(ulp_varint_get(&p, end, &nesc), "escape"
				                                      "s");
			TU_ASSERT((nesc > 0) == cases[c].want_esc &&
			                  k >= cases[c].min_k &&
			                  k <= 256 - (unsigned)esc &&
			                  (esc || !nesc),
			          "%s n %zu: %u codes, escape code %d, %" PRIu64
			          " escapes",
			          cases[c].what, n, k, esc, nesc);
			ulp_buf_free(&out);
			ulp_float_scratch_free(fs);
		}
	}
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		for (int t = 0; t < 2; t++) {
			tu_fill_weights(&r, f, cur, ns[t]);
			frt s = float_rt(f, cur, NULL, ns[t], 0);
			TU_ASSERT(s.coding == ULP_SC_FUSED, "%s: coding %d",
			          ulp_dtype_name(FMTS[k].dt), s.coding);
			ulp_float_scratch *fs = ulp_float_scratch_new();
			ulp_buf out = { 0 };
			int esc;
			TU_OK(ulp_float_encode(fs, f, cur, NULL, ns[t], 0, &out,
			                       NULL),
			      "encode");
			const uint8_t *p = out.p + 1;
			fused_header(&p, out.p + out.len, &esc);
			if (t)
				TU_ASSERT(esc, "%s: sampled without an escape",
				          ulp_dtype_name(FMTS[k].dt));
			ulp_buf_free(&out);
			ulp_float_scratch_free(fs);
		}
	}
	free(cur);
}

Test(floatcode, bad_format)
{
	ulp_float_scratch *fs = ulp_float_scratch_new();
	ulp_buf out = { 0 };
	uint8_t v[8] = { 0 }, d[8];
	const ulp_float_fmt bad[] = {
		{ 24, 8, 15 }, { 16, 6, 9 }, { 0, 0, 0 }, { 32, 8, 22 }
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		TU_RC(ulp_float_encode(fs, bad[i], v, NULL, 2, 0, &out, NULL),
		      ULP_ERR_ARG, "encode format %zu", i);
		TU_RC(ulp_float_decode(fs, bad[i], v, 3, NULL, 1, d),
		      ULP_ERR_ARG, "decode format %zu", i);
	}
	ulp_buf_free(&out);
	ulp_float_scratch_free(fs);
}

/* A small DELTA stream: references in [1, 2) (one context), a few
 * elements moved. */
static ulp_buf small_delta_stream(tu_rng *r, uint8_t *cur, uint8_t *ref,
                                  size_t n)
{
	ulp_float_fmt f = ulp_dtype_fmt(ULP_DT_F32);
	for (size_t i = 0; i < n; i++) {
		uint32_t v = 0x3f800000u | (uint32_t)(tu_next(r) & 0x7fffff);
		tu_store(ref, i, v, 32);
		if (i % 5 == 0)
			v += (uint32_t)tu_below(r, 300);
		tu_store(cur, i, v, 32);
	}
	ulp_float_scratch *fs = ulp_float_scratch_new();
	ulp_buf out = { 0 };
	TU_OK(ulp_float_encode(fs, f, cur, ref, n, 0, &out, NULL), "encode");
	cr_assert(out.len > 4 && out.p[0] == ULP_SC_DELTA,
	          "want a DELTA stream, got coding %d", out.p[0]);
	ulp_float_scratch_free(fs);
	return out;
}

Test(floatcode, reject_corrupted_streams)
{
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415408ull);
	const size_t n = 61;
	uint8_t cur[61 * 4], ref[61 * 4], dst[61 * 4];
	ulp_float_fmt f = ulp_dtype_fmt(ULP_DT_F32);
	ulp_buf s = small_delta_stream(&r, cur, ref, n);
	ulp_float_scratch *fs = ulp_float_scratch_new();

	/* control */
	uint8_t *in = tu_dup(s.p, s.len);
	TU_OK(ulp_float_decode(fs, f, in, s.len, ref, n, dst), "control");
	TU_MEMEQ(dst, cur, sizeof(cur), "control");
	free(in);

	/* every truncation */
	for (size_t len = 0; len < s.len; len++) {
		in = tu_dup(s.p, len);
		TU_RC(ulp_float_decode(fs, f, in, len, ref, n, dst),
		      ULP_ERR_CORRUPT, "stream of %zu truncated to %zu", s.len,
		      len);
		free(in);
	}
	/* one byte too many */
	in = tu_dup(s.p, s.len + 1);
	in[s.len] = 0;
	TU_RC(ulp_float_decode(fs, f, in, s.len + 1, ref, n, dst),
	      ULP_ERR_CORRUPT, "trailing byte");
	free(in);
	/* every other coding byte */
	for (unsigned c = 0; c < 256; c++) {
		if (c == ULP_SC_DELTA)
			continue;
		in = tu_dup(s.p, s.len);
		in[0] = (uint8_t)c;
		TU_RC(ulp_float_decode(fs, f, in, s.len, ref, n, dst),
		      ULP_ERR_CORRUPT, "coding byte %u", c);
		free(in);
	}
	/* DELTA (and IDENTICAL) without the reference */
	in = tu_dup(s.p, s.len);
	TU_RC(ulp_float_decode(fs, f, in, s.len, NULL, n, dst), ULP_ERR_CORRUPT,
	      "DELTA stream, ref NULL");
	free(in);
	uint8_t ident = ULP_SC_IDENTICAL;
	TU_RC(ulp_float_decode(fs, f, &ident, 1, NULL, n, dst), ULP_ERR_CORRUPT,
	      "IDENTICAL stream, ref NULL");
	/* an empty stream */
	TU_RC(ulp_float_decode(fs, f, &ident, 0, ref, n, dst), ULP_ERR_CORRUPT,
	      "empty stream");
	/* a STANDALONE stream decoded with the wrong element count */
	ulp_buf out = { 0 };
	TU_OK(ulp_float_encode(fs, f, cur, NULL, n, 0, &out, NULL), "sa");
	for (size_t m = n - 3; m <= n + 3; m++) {
		if (m == n)
			continue;
		uint8_t big[70 * 4];
		in = tu_dup(out.p, out.len);
		TU_RC(ulp_float_decode(fs, f, in, out.len, NULL, m, big),
		      ULP_ERR_CORRUPT,
		      "coding %d for %zu elements decoded as %zu", out.p[0], n,
		      m);
		free(in);
	}

	/* random corruption: never a crash, only OK or CORRUPT */
	for (size_t i = 0; i < s.len; i++)
		for (int k = 0; k < 4; k++) {
			in = tu_dup(s.p, s.len);
			in[i] ^= (uint8_t)(1 + tu_below(&r, 255));
			int rc =
				ulp_float_decode(fs, f, in, s.len, ref, n, dst);
			TU_ASSERT(rc == ULP_OK || rc == ULP_ERR_CORRUPT,
			          "byte %zu: rc %d", i, rc);
			free(in);
		}
	ulp_buf_free(&out);
	ulp_buf_free(&s);
	ulp_float_scratch_free(fs);
}

Test(floatcode, reject_truncated_all_codings)
{
	/* Every truncation of small STANDALONE, RAW and IDENTICAL streams in
	 * every format. */
	tu_rng r;
	tu_rng_init(&r, 0x464c4f415409ull);
	ulp_float_scratch *fs = ulp_float_scratch_new();
	for (size_t k = 0; k < NFMTS; k++) {
		ulp_float_fmt f = ulp_dtype_fmt(FMTS[k].dt);
		const size_t n = 300, nb = n * (f.width / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		uint8_t *dst = tu_xmalloc(nb);
		for (int v = 0; v < 4; v++) {
			const uint8_t *rp = NULL;
			if (v == 0) {
				tu_fill_weights(&r, f, cur, n); /* STANDALONE */
			} else if (v == 1) {
				tu_fill(&r, cur, nb); /* RAW */
			} else if (v == 2) {
				tu_fill(&r, ref, nb); /* IDENTICAL */
				memcpy(cur, ref, nb);
				rp = ref;
			} else {
				tu_fill_weights(&r, f, ref, n); /* DELTA */
				tu_walk_weights(&r, f, ref, cur, n);
				rp = ref;
			}
			ulp_buf out = { 0 };
			TU_OK(ulp_float_encode(fs, f, cur, rp, n, 0, &out,
			                       NULL),
			      "encode");
			for (size_t len = 0; len < out.len; len++) {
				uint8_t *in = tu_dup(out.p, len);
				TU_RC(ulp_float_decode(fs, f, in, len, rp, n,
				                       dst),
				      ULP_ERR_CORRUPT,
				      "%s coding %d: %zu of %zu bytes",
				      ulp_dtype_name(FMTS[k].dt), out.p[0], len,
				      out.len);
				free(in);
			}
			uint8_t *in = tu_dup(out.p, out.len);
			TU_OK(ulp_float_decode(fs, f, in, out.len, rp, n, dst),
			      "control");
			TU_MEMEQ(dst, cur, nb, "control");
			free(in);
			ulp_buf_free(&out);
		}
		free(cur);
		free(ref);
		free(dst);
	}
	ulp_float_scratch_free(fs);
}

/* Streams long enough for 32- or 64-lane blocks and the SIMD kernels:
 * each truncation (sampled) fails and each corruption decodes or fails
 * cleanly, through both kernels (the sanitizer build checks every read).
 * From ULP_DELTA_SAMPLED_MIN elements delta blocks have escaped symbols
 * (tables from a sample). */
static void wide_streams_corrupted(size_t n, uint64_t seed)
{
	static const ulp_dtype dts[] = { ULP_DT_BF16, ULP_DT_F16, ULP_DT_F32,
		                         ULP_DT_F64 };
	tu_rng r;
	tu_rng_init(&r, seed);
	ulp_float_scratch *fs = ulp_float_scratch_new();
	for (size_t k = 0; k < sizeof(dts) / sizeof(dts[0]); k++) {
		ulp_float_fmt f = ulp_dtype_fmt(dts[k]);
		const size_t nb = n * (f.width / 8);
		uint8_t *cur = tu_xmalloc(nb), *ref = tu_xmalloc(nb);
		uint8_t *dst = tu_xmalloc(nb);
		tu_fill_weights(&r, f, ref, n);
		tu_walk_weights(&r, f, ref, cur, n);
		for (int delta = 0; delta < 2; delta++) {
			const uint8_t *rp = delta ? ref : NULL;
			ulp_buf out = { 0 };
			TU_OK(ulp_float_encode(fs, f, cur, rp, n, 0, &out,
			                       NULL),
			      "encode");
			TU_ASSERT(out.p[0] ==
			                  (delta ? ULP_SC_DELTA : ULP_SC_FUSED),
			          "%s: coding %d", ulp_dtype_name(dts[k]),
			          out.p[0]);
			const uint8_t *bp = out.p + 1;
			uint64_t blen;
			if (!delta)
				fused_header(&bp, out.p + out.len, &(int){ 0 });
			TU_OK(ulp_varint_get(&bp, out.p + out.len, &blen), "blo"
			                                                   "ck "
			                                                   "len"
			                                                   "gt"
			                                                   "h");
			TU_ASSERT(ulp_rans_block_lanes(bp, blen) ==
			                  rans_lanes_for(n),
			          "%s: %u lanes", ulp_dtype_name(dts[k]),
			          ulp_rans_block_lanes(bp, blen));
			TU_ASSERT(ulp_rans_block_escapes(bp, blen) ==
			                  (delta && n >= ULP_DELTA_SAMPLED_MIN),
			          "%s: escapes %d (delta %d, n %zu)",
			          ulp_dtype_name(dts[k]),
			          ulp_rans_block_escapes(bp, blen), delta, n);
			{
				/* the statistics pass writes the same stream
				 * (tables from the same sample) */
				ulp_buf o2 = { 0 };
				ulp_dtype_stats st;
				memset(&st, 0, sizeof(st));
				TU_OK(ulp_float_encode(fs, f, cur, rp, n, 1,
				                       &o2, &st),
				      "encode, alt stats");
				TU_ASSERT(o2.len == out.len,
				          "%s: alt stats %zu bytes, %zu",
				          ulp_dtype_name(dts[k]), o2.len,
				          out.len);
				TU_MEMEQ(o2.p, out.p, out.len, "alt stats");
				ulp_buf_free(&o2);
			}
			/* every encoder kernel writes the same stream */
			int lv[3];
			for (unsigned j = 0, nlv = simd_levels(lv); j < nlv;
			     j++) {
				int old = ulp_rans_set_simd(lv[j]);
				ulp_buf o2 = { 0 };
				TU_OK(ulp_float_encode(fs, f, cur, rp, n, 0,
				                       &o2, NULL),
				      "encode, kernels %d", lv[j]);
				ulp_rans_set_simd(old);
				TU_ASSERT(o2.len == out.len,
				          "%s: kernels %d: %zu bytes, %zu",
				          ulp_dtype_name(dts[k]), lv[j], o2.len,
				          out.len);
				TU_MEMEQ(o2.p, out.p, out.len, "kernels %d",
				         lv[j]);
				ulp_buf_free(&o2);
			}
			for (int simd = 0; simd <= ULP_SIMD_AVX512; simd++) {
				int old = ulp_rans_set_simd(simd);
				uint8_t *in = tu_dup(out.p, out.len);
				TU_OK(ulp_float_decode(fs, f, in, out.len, rp,
				                       n, dst),
				      "control");
				TU_MEMEQ(dst, cur, nb, "control");
				free(in);
				for (size_t len = 0; len < out.len;
				     len += 1 + out.len / 97) {
					in = tu_dup(out.p, len);
					TU_RC(ulp_float_decode(fs, f, in, len,
					                       rp, n, dst),
					      ULP_ERR_CORRUPT,
					      "%s simd %d: %zu of %zu bytes",
					      ulp_dtype_name(dts[k]), simd, len,
					      out.len);
					free(in);
				}
				for (int t = 0; t < 150; t++) {
					in = tu_dup(out.p, out.len);
					size_t at = tu_below(&r, out.len);
					in[at] ^= (uint8_t)(1 +
					                    tu_below(&r, 255));
					int rc = ulp_float_decode(
						fs, f, in, out.len, rp, n, dst);
					TU_ASSERT(rc == ULP_OK ||
					                  rc == ULP_ERR_CORRUPT,
					          "byte %zu: rc %d", at, rc);
					free(in);
				}
				ulp_rans_set_simd(old);
			}
			ulp_buf_free(&out);
		}
		free(cur);
		free(ref);
		free(dst);
	}
	ulp_float_scratch_free(fs);
}

Test(floatcode, wide_streams_corrupted_never_crash)
{
	wide_streams_corrupted(20000, 0x464c4f41540aull);
	wide_streams_corrupted(ULP_RANS_WIDE64_MIN + 77, 0x464c4f41540cull);
	wide_streams_corrupted(ULP_DELTA_SAMPLED_MIN + 4321, 0x464c4f41540bull);
}
