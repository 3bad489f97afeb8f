/*
 * rans_avx512_loads.c - 32-lane rANS decoding with AVX-512 where its
 * gathers are slow (AMD Zen 4): four registers of eight states, each
 * lane's table entry by a scalar load, as in rans_avx2.c.
 *
 * The bitstream is the portable coder's (rans.h).  Against the AVX2
 * kernel, the instructions around the loads are AVX-512's:
 *  - the contexts become table offsets 32 at a time, by byte
 *    permutations (VBMI) of the context -> table map, and join the slots
 *    by one ternary OR: a lane's entry costs one scalar load, not three
 *    (its context, its table's offset, the entry);
 *  - the lane mask of the states below L is a mask register, and those
 *    lanes take the next words by vpexpandd instead of PDEP and a
 *    permutation.
 *
 * Compiled for the baseline target; only these functions are built for
 * AVX-512, and they run only where ulp_rans_simd() found it and
 * ulp_rans_gathers() did not.
 */
#include <immintrin.h>

#include "rans_avx2.h"
#include "rans_avx512.h"

#define ULP_AVX512                                                    \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi," \
	                      "popcnt")))

/* One decoding step of eight lanes whose tables start at entries base
 * (multiples of ULP_RANS_M): returns the new states and leaves the
 * entries (symbol in bits 24-31) in *e. */
static inline __attribute__((always_inline)) ULP_AVX512 __m256i
dec8(__m256i x, __m256i base, const uint32_t *flat, const uint8_t **pp,
     __m256i *e)
{
	uint32_t ix[8] __attribute__((aligned(32)));
	/* (x & (M - 1)) | base */
	_mm256_store_si256(
		(__m256i *)(void *)ix,
		_mm256_ternarylogic_epi32(x, _mm256_set1_epi32(ULP_RANS_M - 1),
	                                  base, 0xea));
	__m256i w = _mm256_cvtepu16_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)*pp));
	*e = ulp_rans_load8_avx2(flat, ix);
	x = ulp_rans_advance8_avx2(x, *e);
	/* lanes with x < L take the next words, in lane order */
	__mmask8 need =
		_mm256_cmplt_epu32_mask(x, _mm256_set1_epi32(ULP_RANS_L));
	*pp += 2 * (unsigned)__builtin_popcount(need);
	return _mm256_or_si256(_mm256_mask_slli_epi32(x, need, x, 16),
	                       _mm256_maskz_expand_epi32(need, w));
}

/* Bytes 8k .. 8k + 7 of the 32 table indices t, as entry offsets. */
static inline __attribute__((always_inline)) ULP_AVX512 __m256i base8(__m512i t,
                                                                      int k)
{
	__m128i q = _mm512_extracti32x4_epi32(t, 0);
	if (k >= 2)
		q = _mm512_extracti32x4_epi32(t, 1);
	if (k & 1)
		q = _mm_srli_si128(q, 8);
	return _mm256_slli_epi32(_mm256_cvtepu8_epi32(q), ULP_RANS_SCALE);
}

/* The 32-lane loop of rans_avx512.c (the same arguments), in four
 * registers of eight lanes. */
static inline __attribute__((always_inline)) ULP_AVX512 size_t
dec32(ulp_rans_dec *d, const uint8_t *ctx, const uint8_t *ref16, unsigned shift,
      unsigned emask, size_t n, uint8_t *sym)
{
	const uint32_t *flat = d->flat;
	const uint8_t *p = d->p;
	ulp_rans_ctx_src cs;
	ulp_rans_ctx_src_init(&cs, d, ctx, ref16, shift, emask);
	__m256i x[4], b[4];
	ulp_rans_x_load_avx2(d->x, x);
#pragma GCC unroll 4
	for (int k = 0; k < 4; k++)
		b[k] = _mm256_set1_epi32((int)d->off[0]);
	size_t i = 0;
	/* each register step reads 16 bytes and consumes at most 16: four
	 * of them stay within 64 */
	for (; i + 32 <= n && d->end - p >= 64; i += 32) {
		if (ctx || ref16) {
			__m512i t = ulp_rans_ctx_tables(&cs, i);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++)
				b[k] = base8(t, k);
		}
		__m256i e[4];
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			x[k] = dec8(x[k], b[k], flat, &p, &e[k]);
			e[k] = _mm256_srli_epi32(e[k], 24);
		}
		ulp_rans_sym32_avx2(sym + i, e[0], e[1], e[2], e[3]);
	}
	ulp_rans_x_store_avx2(d->x, x);
	d->p = p;
	return i;
}

ULP_AVX512 size_t ulp_rans_dec32_avx512_loads(ulp_rans_dec *d,
                                              const uint8_t *ctx, size_t n,
                                              uint8_t *sym)
{
	return ctx ? dec32(d, ctx, NULL, 0, 0, n, sym)
	           : dec32(d, NULL, NULL, 0, 0, n, sym);
}

ULP_AVX512 size_t ulp_rans_dec32_ref16_avx512_loads(ulp_rans_dec *d,
                                                    const uint8_t *ref,
                                                    unsigned shift,
                                                    unsigned emask, size_t n,
                                                    uint8_t *sym)
{
	return dec32(d, NULL, ref, shift, emask, n, sym);
}
