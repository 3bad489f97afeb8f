/*
 * rans_avx512.c - 32- and 64-lane rANS decoding with AVX-512: two
 * registers of sixteen states a set of 32.
 *
 * The bitstream is the portable coder's (rans.h): symbol i is coded by
 * lane i % W and the renormalisation words are read in symbol order.  A
 * 64-lane block's two sets step independently: with one set, the
 * dependent steps of each state (a gather, a product, the renormalisation)
 * left the cores idle, and two sets decoded bf16 deltas about a tenth
 * faster on AMD Zen 5, where four sets (128 lanes) gained nothing more
 * (bench/README.md).
 * Against the AVX2 kernel (rans_avx2.c):
 *  - the contexts become table offsets by byte permutations (VBMI) of a
 *    256-byte context -> table map, 32 at a time, instead of a scalar
 *    load per lane;
 *  - the lanes below L take the next words in lane order by vpexpandd
 *    from one 32-byte load, instead of PDEP and a permutation.
 * Each register's sixteen table entries come one of two ways, chosen
 * once (ulp_rans_gathers): by one vpgatherdd, which on the Intel cores
 * with AVX-512 and on AMD Zen 5 measured beats sixteen scalar loads; or,
 * on AMD Zen 4, where a gather is slow, by sixteen scalar loads and
 * inserts (bench/README.md).  Without gathers a block without contexts
 * (one table) runs in four registers of eight lanes instead, as it does
 * on Zen 5 (ulp_rans_gathers_one).
 *
 * Compiled for the baseline target; only these functions are built for
 * AVX-512, and they run only where ulp_rans_simd() found it.
 */
#include <immintrin.h>

#include "rans_avx2.h"
#include "rans_avx512.h"

#define ULP_AVX512                                                    \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi," \
	                      "bmi2,popcnt")))

/* The entries t[idx[0]] .. t[idx[15]] by scalar loads, four to each
 * 128-bit quarter. */
static inline __attribute__((always_inline)) ULP_AVX512 __m512i
load16(const uint32_t *t, __m512i idx)
{
	uint32_t ix[16] __attribute__((aligned(64)));
	_mm512_store_si512((void *)ix, idx);
	__m512i e = _mm512_castsi128_si512(_mm_setr_epi32(
		(int)t[ix[0]], (int)t[ix[1]], (int)t[ix[2]], (int)t[ix[3]]));
	e = _mm512_inserti32x4(e,
	                       _mm_setr_epi32((int)t[ix[4]], (int)t[ix[5]],
	                                      (int)t[ix[6]], (int)t[ix[7]]),
	                       1);
	e = _mm512_inserti32x4(e,
	                       _mm_setr_epi32((int)t[ix[8]], (int)t[ix[9]],
	                                      (int)t[ix[10]], (int)t[ix[11]]),
	                       2);
	return _mm512_inserti32x4(e,
	                          _mm_setr_epi32((int)t[ix[12]], (int)t[ix[13]],
	                                         (int)t[ix[14]],
	                                         (int)t[ix[15]]),
	                          3);
}

/* One decoding step of sixteen lanes whose tables start at entries base
 * (multiples of ULP_RANS_M): returns the new states, the entries (symbol
 * in bits 24-31) in *e.  The product is one vpmulld: on the Intel cores
 * measured it ran as fast as two vpmuludq and their shifts, whose latency
 * is lower; on AMD Zen 4 and 5 it is faster (bench/README.md). */
static inline __attribute__((always_inline)) ULP_AVX512 __m512i
dec16(__m512i x, __m512i base, const uint32_t *flat, const uint8_t **pp,
      __m512i *e, const int gather)
{
	const __m512i m12 = _mm512_set1_epi32(0xfff);
	/* (x & (M - 1)) | base */
	__m512i idx = _mm512_ternarylogic_epi32(
		x, _mm512_set1_epi32(ULP_RANS_M - 1), base, 0xea);
	__m512i w = _mm512_cvtepu16_epi32(
		_mm256_loadu_si256((const __m256i *)(const void *)*pp));
	__m512i q = _mm512_srli_epi32(x, ULP_RANS_SCALE);
	__m512i t = gather ? _mm512_i32gather_epi32(idx, (const void *)flat, 4)
	                   : load16(flat, idx);
	*e = t;
	__m512i freq = _mm512_add_epi32(_mm512_and_si512(t, m12),
	                                _mm512_set1_epi32(1));
	__m512i bias = _mm512_and_si512(_mm512_srli_epi32(t, 12), m12);
	x = _mm512_add_epi32(_mm512_mullo_epi32(freq, q), bias);
	/* lanes with x < L take the next words, in lane order */
	__mmask16 need =
		_mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(ULP_RANS_L));
	*pp += 2 * (unsigned)__builtin_popcount(need);
	return _mm512_or_si512(_mm512_mask_slli_epi32(x, need, x, 16),
	                       _mm512_maskz_expand_epi32(need, w));
}

/* The table offsets (multiples of ULP_RANS_M) of symbols i .. i + 15
 * in *b0, of i + 16 .. i + 31 in *b1. */
static inline __attribute__((always_inline)) ULP_AVX512 void
ctx_bases(const ulp_rans_ctx_src *cs, size_t i, __m512i *b0, __m512i *b1)
{
	__m512i t = ulp_rans_ctx_tables(cs, i);
	*b0 = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(t)),
	                        ULP_RANS_SCALE);
	*b1 = _mm512_slli_epi32(
		_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(t, 1)),
		ULP_RANS_SCALE);
}

/* Symbols i .. i + 31 of states xa (lanes 0-15 of the set) and xb. */
static inline __attribute__((always_inline)) ULP_AVX512 void
dec_group(const ulp_rans_ctx_src *cs, const int has_ctx, __m512i b,
          const uint32_t *flat, const uint8_t **pp, __m512i *xa, __m512i *xb,
          size_t i, uint8_t *sym, const int gather)
{
	/* byte 3 of each entry of two registers: the 32 symbols (the upper
	 * half of the result is not stored) */
	const __m512i pick = _mm512_set_epi8(
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 123, 119, 115, 111, 107,
		103, 99, 95, 91, 87, 83, 79, 75, 71, 67, 63, 59, 55, 51, 47, 43,
		39, 35, 31, 27, 23, 19, 15, 11, 7, 3);
	__m512i b0 = b, b1 = b, e0, e1;
	if (has_ctx)
		ctx_bases(cs, i, &b0, &b1);
	*xa = dec16(*xa, b0, flat, pp, &e0, gather);
	*xb = dec16(*xb, b1, flat, pp, &e1, gather);
	__m512i s = _mm512_permutex2var_epi8(e0, pick, e1);
	_mm256_storeu_si256((__m256i *)(void *)(sym + i),
	                    _mm512_castsi512_si256(s));
}

/* The loop over groups of 32 symbols (sets 1) or 64 (sets 2: a 64-lane
 * block, whose two halves' states step independently), with the
 * contexts read from ctx, or (ctx NULL and ref16 set) computed from
 * 16-bit reference elements as (r >> shift) & emask, or all 0. */
static inline __attribute__((always_inline)) ULP_AVX512 size_t
dec_wide(ulp_rans_dec *d, const uint8_t *ctx, const uint8_t *ref16,
         unsigned shift, unsigned emask, size_t n, uint8_t *sym,
         const int gather, const unsigned sets)
{
	const uint32_t *flat = d->flat;
	const uint8_t *p = d->p;
	const int has_ctx = ctx || ref16;
	const size_t L = 32 * sets;
	ulp_rans_ctx_src cs;
	ulp_rans_ctx_src_init(&cs, d, ctx, ref16, shift, emask);
	__m512i x[4];
	for (unsigned k = 0; k < 2 * sets; k++)
		x[k] = _mm512_loadu_si512((const void *)(d->x + 16 * k));
	const __m512i b = _mm512_set1_epi32((int)d->off[0]);
	size_t i = 0;
	/* each register step reads 32 bytes and consumes at most 32: two
	 * a set stay within 64 */
	for (; i + L <= n && (size_t)(d->end - p) >= 2 * L; i += L) {
		dec_group(&cs, has_ctx, b, flat, &p, &x[0], &x[1], i, sym,
		          gather);
		if (sets == 2)
			dec_group(&cs, has_ctx, b, flat, &p, &x[2], &x[3],
			          i + 32, sym, gather);
	}
	for (unsigned k = 0; k < 2 * sets; k++)
		_mm512_storeu_si512((void *)(d->x + 16 * k), x[k]);
	d->p = p;
	return i;
}

/* dec_wide for the block's lanes (32 or 64). */
static inline __attribute__((always_inline)) ULP_AVX512 size_t
dec32(ulp_rans_dec *d, const uint8_t *ctx, const uint8_t *ref16, unsigned shift,
      unsigned emask, size_t n, uint8_t *sym, const int gather)
{
	return d->lanes == 64 ? dec_wide(d, ctx, ref16, shift, emask, n, sym,
	                                 gather, 2)
	                      : dec_wide(d, ctx, ref16, shift, emask, n, sym,
	                                 gather, 1);
}

ULP_AVX512 size_t ulp_rans_dec32_avx512(ulp_rans_dec *d, const uint8_t *ctx,
                                        size_t n, uint8_t *sym)
{
	return ctx ? dec32(d, ctx, NULL, 0, 0, n, sym, 1)
	           : dec32(d, NULL, NULL, 0, 0, n, sym, 1);
}

ULP_AVX512 size_t ulp_rans_dec32_ref16_avx512(ulp_rans_dec *d,
                                              const uint8_t *ref,
                                              unsigned shift, unsigned emask,
                                              size_t n, uint8_t *sym)
{
	return dec32(d, NULL, ref, shift, emask, n, sym, 1);
}

/* One decoding step of eight lanes of table t, with scalar loads. */
static inline __attribute__((always_inline)) ULP_AVX512 __m256i
dec8_one(__m256i x, const uint32_t *t, const uint8_t **pp, __m256i *e)
{
	uint32_t ix[8] __attribute__((aligned(32)));
	_mm256_store_si256((__m256i *)(void *)ix,
	                   _mm256_and_si256(x,
	                                    _mm256_set1_epi32(ULP_RANS_M - 1)));
	__m256i w = _mm256_cvtepu16_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)*pp));
	*e = ulp_rans_load8_avx2(t, ix);
	x = ulp_rans_advance8_avx2(x, *e);
	/* lanes with x < L take the next words, in lane order */
	__mmask8 need =
		_mm256_cmplt_epu32_mask(x, _mm256_set1_epi32(ULP_RANS_L));
	*pp += 2 * (unsigned)__builtin_popcount(need);
	return _mm256_or_si256(_mm256_mask_slli_epi32(x, need, x, 16),
	                       _mm256_maskz_expand_epi32(need, w));
}

/* A block of one table without gathers: four registers of eight lanes.
 * There they beat two of sixteen by a fifth (0.46 against 0.56 ns a
 * symbol on Zen 4, bench/README.md), while with contexts the two of
 * sixteen win (0.83 against 0.94), their table offsets made half as
 * often. */
static inline __attribute__((always_inline)) ULP_AVX512 size_t
dec_one(ulp_rans_dec *d, size_t n, uint8_t *sym, const unsigned sets)
{
	const uint32_t *t = d->flat + d->off[0];
	const uint8_t *p = d->p;
	const size_t L = 32 * sets;
	__m256i x[8];
	ulp_rans_x_load_avx2(d->x, x, 4 * sets);
	size_t i = 0;
	/* each register step reads 16 bytes and consumes at most 16: four
	 * a set stay within 64 */
	for (; i + L <= n && (size_t)(d->end - p) >= 2 * L; i += L) {
		__m256i e[8];
#pragma GCC unroll 8
		for (unsigned k = 0; k < 4 * sets; k++) {
			x[k] = dec8_one(x[k], t, &p, &e[k]);
			e[k] = _mm256_srli_epi32(e[k], 24);
		}
		ulp_rans_syms_avx2(sym + i, e, 4 * sets);
	}
	ulp_rans_x_store_avx2(d->x, x, 4 * sets);
	d->p = p;
	return i;
}

static inline __attribute__((always_inline)) ULP_AVX512 size_t
dec32_one(ulp_rans_dec *d, size_t n, uint8_t *sym)
{
	return d->lanes == 64 ? dec_one(d, n, sym, 2) : dec_one(d, n, sym, 1);
}

ULP_AVX512 size_t ulp_rans_dec32_avx512_loads(ulp_rans_dec *d,
                                              const uint8_t *ctx, size_t n,
                                              uint8_t *sym)
{
	return ctx ? dec32(d, ctx, NULL, 0, 0, n, sym, 0)
	           : dec32_one(d, n, sym);
}

ULP_AVX512 size_t ulp_rans_dec32_ref16_avx512_loads(ulp_rans_dec *d,
                                                    const uint8_t *ref,
                                                    unsigned shift,
                                                    unsigned emask, size_t n,
                                                    uint8_t *sym)
{
	return dec32(d, NULL, ref, shift, emask, n, sym, 0);
}

ULP_AVX512 void ulp_rans_fill_avx512(uint32_t *e, const uint16_t *f,
                                     unsigned nt)
{
	const __m512i step = _mm512_set1_epi32(16 << 12);
	const __m512i iota =
		_mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8,
	                                           7, 6, 5, 4, 3, 2, 1, 0),
	                          12);
	uint32_t cum = 0;
	for (unsigned s = 0; s < nt; s++) {
		uint32_t fs = f[s];
		__m512i v = _mm512_add_epi32(
			_mm512_set1_epi32((int)((uint32_t)s << 24 | (fs - 1u))),
			iota);
		uint32_t k = 0;
		for (; k + 16 <= fs; k += 16) {
			_mm512_storeu_si512((void *)(e + cum + k), v);
			v = _mm512_add_epi32(v, step);
		}
		if (k < fs)
			_mm512_mask_storeu_epi32(
				(void *)(e + cum + k),
				(__mmask16)((1u << (fs - k)) - 1), v);
		cum += fs;
	}
}
