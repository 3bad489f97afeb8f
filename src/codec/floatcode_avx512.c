/*
 * floatcode_avx512.c - AVX-512 reconstruction of 16- and 32-bit delta
 * elements.
 *
 * The AVX2 kernel's method (floatcode_avx2.c) on sixteen lanes: the
 * symbol gives the residual's leading bits, sign and raw bit count
 * arithmetically, a prefix sum of the counts gives each element's bit
 * position, and the raw bits are cut out of one 32-byte load.  Masks
 * take the place of the blends and sign arithmetic, ternary logic joins
 * the order-preserving maps' steps, and one byte permutation (VBMI)
 * packs two registers' residuals into 32 16-bit lanes.  Same results as
 * the portable loop, which finishes what this leaves.
 *
 * Compiled for the baseline target; only these functions are built for
 * AVX-512, and they run only where ulp_rans_simd() found it.
 */
#include <immintrin.h>

#include "floatcode.h"
#include "rans.h"

#define ULP_AVX512 \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,bmi2")))
#define ULP_AVX512_INLINE \
	static inline __attribute__((always_inline)) ULP_AVX512

/* The signed residuals of sixteen delta elements with symbols s, one per
 * 32-bit lane, their raw bits from bit pos of rawp: win holds the bytes
 * from pos / 8, where every field must end (the 16-bit kernel loads only
 * the low 8 dwords).  *total receives the sixteen's raw bit count. */
ULP_AVX512_INLINE __m512i v16_residuals(__m512i s, uint64_t pos, __m512i win,
                                        uint32_t *total)
{
	const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
	__m512i t = _mm512_add_epi32(s, _mm512_set1_epi32(5));
	/* raw bit count max(k - 2, 0) */
	__m512i nraw = _mm512_max_epi32(
		_mm512_sub_epi32(_mm512_srli_epi32(t, 2), _mm512_set1_epi32(2)),
		zero);
	/* inclusive prefix sum: lanes shifted up by 1, 2, 4, 8 */
	__m512i inc =
		_mm512_add_epi32(nraw, _mm512_alignr_epi32(nraw, zero, 15));
	inc = _mm512_add_epi32(inc, _mm512_alignr_epi32(inc, zero, 14));
	inc = _mm512_add_epi32(inc, _mm512_alignr_epi32(inc, zero, 12));
	inc = _mm512_add_epi32(inc, _mm512_alignr_epi32(inc, zero, 8));
	*total = (uint32_t)_mm_extract_epi32(_mm512_extracti32x4_epi32(inc, 3),
	                                     3);
	/* bits off .. off + 31 of the window, from two of its dwords */
	__m512i off = _mm512_add_epi32(_mm512_set1_epi32((int)(pos & 7)),
	                               _mm512_sub_epi32(inc, nraw));
	__m512i w = _mm512_srli_epi32(off, 5);
	__m512i lo = _mm512_permutexvar_epi32(w, win);
	__m512i hi = _mm512_permutexvar_epi32(_mm512_add_epi32(w, one), win);
	__m512i sh = _mm512_and_si512(off, _mm512_set1_epi32(31));
	__m512i bits = _mm512_or_si512(
		_mm512_srlv_epi32(lo, sh),
		_mm512_sllv_epi32(hi,
	                          _mm512_sub_epi32(_mm512_set1_epi32(32), sh)));
	/* k >= 2: (2 | b) << nraw; s 1 and 2: 1; s 0: 0 */
	__m512i lead = _mm512_sllv_epi32(
		_mm512_or_si512(_mm512_set1_epi32(2), _mm512_and_si512(t, one)),
		nraw);
	lead = _mm512_mask_min_epi32(
		lead, _mm512_cmplt_epi32_mask(s, _mm512_set1_epi32(3)), s, one);
	/* lead | (bits & ((1 << nraw) - 1)) */
	__m512i mag = _mm512_ternarylogic_epi32(
		lead, bits, _mm512_sub_epi32(_mm512_sllv_epi32(one, nraw), one),
		0xf8);
	/* negative: bit 1 of t, except for s = 1 */
	__mmask16 neg = _mm512_mask_test_epi32_mask(
		_mm512_cmpneq_epi32_mask(s, one), t, _mm512_set1_epi32(2));
	return _mm512_mask_sub_epi32(mag, neg, zero, mag);
}

ULP_AVX512_INLINE __m512i v16_u8(const uint8_t *p)
{
	return _mm512_cvtepu8_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* The residuals of 32 16-bit delta elements with symbols sym[0..32),
 * in 16-bit lanes (the sum wraps there as the format's does), their raw
 * bits (at most 7 + 32 x 14 bits from *pos / 8) cut out of one 64-byte
 * load; advances *pos.  Half the instructions of two 32-bit steps. */
ULP_AVX512_INLINE __m512i v32_residuals16(const uint8_t *sym,
                                          const uint8_t *rawp, uint64_t *pos)
{
	const __m512i one = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
	const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24,
	                                      23, 22, 21, 20, 19, 18, 17, 16,
	                                      15, 14, 13, 12, 11, 10, 9, 8, 7,
	                                      6, 5, 4, 3, 2, 1, 0);
	__m512i s = _mm512_cvtepu8_epi16(
		_mm256_loadu_si256((const __m256i *)(const void *)sym));
	__m512i t = _mm512_add_epi16(s, _mm512_set1_epi16(5));
	/* raw bit count max(k - 2, 0) */
	__m512i nraw = _mm512_subs_epu16(_mm512_srli_epi16(t, 2),
	                                 _mm512_set1_epi16(2));
	/* inclusive prefix sum: lanes shifted up by 1, 2, 4, 8, 16 */
	__m512i inc = nraw;
	for (unsigned k = 1; k < 32; k *= 2)
		inc = _mm512_add_epi16(
			inc, _mm512_maskz_permutexvar_epi16(
				     ~0u << k,
				     _mm512_sub_epi16(
					     iota, _mm512_set1_epi16((short)k)),
				     inc));
	__m512i off = _mm512_add_epi16(_mm512_set1_epi16((short)(*pos & 7)),
	                               _mm512_sub_epi16(inc, nraw));
	/* bits off .. off + 15 of the window, from two of its words (a
	 * field ends by bit 455: the second word is at most word 28) */
	__m512i win = _mm512_loadu_si512((const void *)(rawp + (*pos >> 3)));
	__m512i w = _mm512_srli_epi16(off, 4);
	__m512i lo = _mm512_permutexvar_epi16(w, win);
	__m512i hi = _mm512_permutexvar_epi16(_mm512_add_epi16(w, one), win);
	__m512i sh = _mm512_and_si512(off, _mm512_set1_epi16(15));
	__m512i bits = _mm512_or_si512(
		_mm512_srlv_epi16(lo, sh),
		_mm512_sllv_epi16(hi,
	                          _mm512_sub_epi16(_mm512_set1_epi16(16), sh)));
	*pos += (uint32_t)_mm_extract_epi16(_mm512_extracti32x4_epi32(inc, 3),
	                                    7);
	/* k >= 2: (2 | b) << nraw; s 1 and 2: 1; s 0: 0 */
	__m512i lead = _mm512_sllv_epi16(
		_mm512_or_si512(_mm512_set1_epi16(2), _mm512_and_si512(t, one)),
		nraw);
	lead = _mm512_mask_min_epu16(
		lead, _mm512_cmplt_epu16_mask(s, _mm512_set1_epi16(3)), s, one);
	/* lead | (bits & ((1 << nraw) - 1)) */
	__m512i mag = _mm512_ternarylogic_epi32(
		lead, bits, _mm512_sub_epi16(_mm512_sllv_epi16(one, nraw), one),
		0xf8);
	/* negative: bit 1 of t, except for s = 1 */
	__mmask32 neg = _mm512_mask_test_epi16_mask(
		_mm512_cmpneq_epi16_mask(s, one), t, _mm512_set1_epi16(2));
	return _mm512_mask_sub_epi16(mag, neg, zero, mag);
}

ULP_AVX512 size_t ulp_delta16_avx512(const uint8_t *sym, const uint8_t *rawp,
                                     size_t rawlen, const uint8_t *ref,
                                     size_t n, uint8_t *dst, uint64_t *posp)
{
	const __m512i h7 = _mm512_set1_epi16(0x7fff);
	const __m512i h8 = _mm512_set1_epi16((short)0x8000);
	uint64_t pos = *posp;
	size_t i = 0;
	for (; i + 32 <= n && (pos >> 3) + 64 <= rawlen; i += 32) {
		__m512i d = v32_residuals16(sym + i, rawp, &pos);
		__m512i u = _mm512_loadu_si512((const void *)(ref + 2 * i));
		/* ord: u ^ ((u >> 15 arithmetic) | 0x8000), plus d */
		__m512i o = _mm512_add_epi16(
			_mm512_ternarylogic_epi32(u, _mm512_srai_epi16(u, 15),
		                                  h8, 0x1e),
			d);
		/* unord: o ^ ~((o >> 15 arithmetic) & 0x7fff) */
		__m512i c = _mm512_ternarylogic_epi32(
			o, _mm512_srai_epi16(o, 15), h7, 0x87);
		_mm512_storeu_si512((void *)(dst + 2 * i), c);
	}
	*posp = pos;
	return i;
}

ULP_AVX512 size_t ulp_delta32_avx512(const uint8_t *sym, const uint8_t *rawp,
                                     size_t rawlen, const uint8_t *ref,
                                     size_t n, uint8_t *dst, uint64_t *posp)
{
	const __m512i sb = _mm512_set1_epi32((int)0x80000000u);
	uint64_t pos = *posp;
	size_t i = 0;
	/* a step's raw bits (at most 7 + 16 x 30) lie in the 64 bytes from
	 * pos / 8 */
	for (; i + 16 <= n && (pos >> 3) + 64 <= rawlen; i += 16) {
		uint32_t total;
		__m512i win =
			_mm512_loadu_si512((const void *)(rawp + (pos >> 3)));
		__m512i d = v16_residuals(v16_u8(sym + i), pos, win, &total);
		pos += total;
		__m512i u = _mm512_loadu_si512((const void *)(ref + 4 * i));
		/* ord: u ^ ((u >> 31 arithmetic) | sign), plus d; unord:
		 * o ^ ~((o >> 31 arithmetic) & ~sign) */
		__m512i o = _mm512_add_epi32(
			_mm512_ternarylogic_epi32(u, _mm512_srai_epi32(u, 31),
		                                  sb, 0x1e),
			d);
		__m512i c = _mm512_ternarylogic_epi32(
			o, _mm512_srai_epi32(o, 31),
			_mm512_set1_epi32(0x7fffffff), 0x87);
		_mm512_storeu_si512((void *)(dst + 4 * i), c);
	}
	*posp = pos;
	return i;
}
