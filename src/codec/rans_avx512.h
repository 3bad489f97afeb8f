/*
 * rans_avx512.h - what the AVX-512 rANS decoder and encoder share.
 *
 * Included only by the files whose functions are built for AVX-512; the
 * helpers here carry their own target attribute (a subset of the
 * callers'), so they inline into either.
 */
#ifndef ULP_RANS_AVX512_H
#define ULP_RANS_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "rans.h"

/* Load a 256-byte context map (ULP_RANS_NCTX entries) as the four 64-byte
 * permutation sources ulp_map256_avx512 reads. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,"
                                                   "avx512vbmi"))) void
ulp_map256_load_avx512(const uint8_t *map, __m512i m[4])
{
	for (int k = 0; k < 4; k++)
		m[k] = _mm512_loadu_si512((const void *)(map + 64 * k));
}

/* map[c] for each of the 64 bytes c: two VBMI permutations, one over each
 * half of the map, and bit 7 of c picking between them. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,"
                                                   "avx512vbmi"))) __m512i
ulp_map256_avx512(const __m512i m[4], __m512i c)
{
	__m512i lo = _mm512_permutex2var_epi8(m[0], c, m[1]);
	__m512i hi = _mm512_permutex2var_epi8(m[2], c, m[3]);
	return _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), lo, hi);
}

/* Where a decoding loop's contexts come from: ctx (one byte a symbol),
 * or (ctx NULL, ref16 set) the 16-bit reference elements as
 * (r >> shift) & emask; and the decoder's context -> table map
 * (d->off[c] / ULP_RANS_M) as the four permutation sources of
 * ulp_map256_avx512. */
typedef struct ulp_rans_ctx_src {
	const uint8_t *ctx, *ref16;
	__m128i sh;
	__m512i em, m[4];
} ulp_rans_ctx_src;

static inline __attribute__((always_inline, target("avx512f,avx512bw,"
                                                   "avx512vbmi"))) void
ulp_rans_ctx_src_init(ulp_rans_ctx_src *cs, const ulp_rans_dec *d,
                      const uint8_t *ctx, const uint8_t *ref16, unsigned shift,
                      unsigned emask)
{
	uint8_t map[ULP_RANS_NCTX] __attribute__((aligned(64)));
	for (unsigned c = 0; c < ULP_RANS_NCTX; c++)
		map[c] = (uint8_t)(d->off[c] / ULP_RANS_M);
	ulp_map256_load_avx512(map, cs->m);
	cs->ctx = ctx;
	cs->ref16 = ref16;
	cs->sh = _mm_cvtsi32_si128((int)shift);
	cs->em = _mm512_set1_epi16((short)emask);
}

/* The table indices of symbols i .. i + 31, in the low 32 bytes. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,"
                                                   "avx512vbmi"))) __m512i
ulp_rans_ctx_tables(const ulp_rans_ctx_src *cs, size_t i)
{
	__m512i c;
	if (cs->ctx) {
		c = _mm512_zextsi256_si512(_mm256_loadu_si256(
			(const __m256i *)(const void *)(cs->ctx + i)));
	} else {
		__m512i r =
			_mm512_loadu_si512((const void *)(cs->ref16 + 2 * i));
		c = _mm512_zextsi256_si512(_mm512_cvtepi16_epi8(
			_mm512_and_si512(_mm512_srl_epi16(r, cs->sh), cs->em)));
	}
	return ulp_map256_avx512(cs->m, c);
}

#endif /* ULP_RANS_AVX512_H */
