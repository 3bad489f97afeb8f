/*
 * rans_avx2.h - the decoding step of eight lanes that the AVX2 kernel
 * (rans_avx2.c) and the AVX-512 one-table kernel without gathers
 * (rans_avx512.c) share.
 *
 * Included only by files whose functions are built for AVX2 or more; the
 * helpers carry their own target attribute (a subset of the callers'), so
 * they inline into either.
 */
#ifndef ULP_RANS_AVX2_H
#define ULP_RANS_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "rans.h"

#define ULP_RANS_AVX2_INLINE \
	static inline __attribute__((always_inline, target("avx2")))

/* The entries t[ix[0]] .. t[ix[7]], by scalar loads: a vpgatherdd costs
 * about 3 ns on the AMD EPYC measured (half the kernel's speed). */
ULP_RANS_AVX2_INLINE __m256i ulp_rans_load8_avx2(const uint32_t *t,
                                                 const uint32_t ix[8])
{
	return _mm256_setr_epi32((int)t[ix[0]], (int)t[ix[1]], (int)t[ix[2]],
	                         (int)t[ix[3]], (int)t[ix[4]], (int)t[ix[5]],
	                         (int)t[ix[6]], (int)t[ix[7]]);
}

/* The states x after decoding the symbols of entries e (frequency - 1 in
 * bits 0-11, the slot's bias in bits 12-23), before renormalisation. */
ULP_RANS_AVX2_INLINE __m256i ulp_rans_advance8_avx2(__m256i x, __m256i e)
{
	const __m256i m12 = _mm256_set1_epi32(0xfff);
	__m256i freq = _mm256_add_epi32(_mm256_and_si256(e, m12),
	                                _mm256_set1_epi32(1));
	__m256i bias = _mm256_and_si256(_mm256_srli_epi32(e, 12), m12);
	return _mm256_add_epi32(
		_mm256_mullo_epi32(freq, _mm256_srli_epi32(x, ULP_RANS_SCALE)),
		bias);
}

/* The 8 * nreg states x[0..8 * nreg) as nreg registers of eight (nreg
 * at most 8: a 64-lane block), and back. */
ULP_RANS_AVX2_INLINE void ulp_rans_x_load_avx2(const uint32_t *x, __m256i *v,
                                               unsigned nreg)
{
#pragma GCC unroll 8
	for (unsigned k = 0; k < nreg; k++)
		v[k] = _mm256_loadu_si256(
			(const __m256i *)(const void *)(x + 8 * k));
}

ULP_RANS_AVX2_INLINE void ulp_rans_x_store_avx2(uint32_t *x, const __m256i *v,
                                                unsigned nreg)
{
#pragma GCC unroll 8
	for (unsigned k = 0; k < nreg; k++)
		_mm256_storeu_si256((__m256i *)(void *)(x + 8 * k), v[k]);
}

/* Four registers of eight symbols (one per 32-bit lane, below 256) to
 * 32 bytes in order at sym: the packs interleave the 128-bit halves, the
 * permutation restores symbol order. */
ULP_RANS_AVX2_INLINE void ulp_rans_sym32_avx2(uint8_t *sym, __m256i s0,
                                              __m256i s1, __m256i s2,
                                              __m256i s3)
{
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	__m256i b = _mm256_packus_epi16(_mm256_packus_epi32(s0, s1),
	                                _mm256_packus_epi32(s2, s3));
	_mm256_storeu_si256((__m256i *)(void *)sym,
	                    _mm256_permutevar8x32_epi32(b, order));
}

/* The symbols of nreg registers (a multiple of 4) to 8 * nreg bytes. */
ULP_RANS_AVX2_INLINE void ulp_rans_syms_avx2(uint8_t *sym, const __m256i *s,
                                             unsigned nreg)
{
#pragma GCC unroll 2
	for (unsigned k = 0; k < nreg; k += 4)
		ulp_rans_sym32_avx2(sym + 8 * k, s[k], s[k + 1], s[k + 2],
		                    s[k + 3]);
}

#endif /* ULP_RANS_AVX2_H */
