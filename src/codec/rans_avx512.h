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

#endif /* ULP_RANS_AVX512_H */
