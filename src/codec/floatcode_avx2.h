/*
 * floatcode_avx2.h - the eight-lane pieces the AVX2 float kernels share
 * (floatcode_avx2.c decodes, floatcode_avx2_enc.c encodes).  Include only
 * from files whose functions are built with ULP_AVX2.
 *
 * Delta symbols, as in floatcode.c: with k = bitlen|d|, s = k + neg for
 * k < 2, s = 4k - 5 + 2 neg + b for k >= 2 (b the bit below the leading
 * one), leaving max(k - 2, 0) raw bits.
 */
#ifndef ULP_FLOATCODE_AVX2_H
#define ULP_FLOATCODE_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "bitio.h"
#include "floatcode.h"

#define ULP_AVX2 __attribute__((target("avx2,bmi2")))
#define ULP_AVX2_INLINE static inline __attribute__((always_inline)) ULP_AVX2

ULP_AVX2_INLINE __m256i v8_u8(const uint8_t *p)
{
	return _mm256_cvtepu8_epi32(
		_mm_loadl_epi64((const __m128i *)(const void *)p));
}

ULP_AVX2_INLINE __m256i v8_u16(const uint8_t *p)
{
	return _mm256_cvtepu16_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Byte 0 of each 32-bit lane, in lane order, to p[0..8). */
ULP_AVX2_INLINE void v8_store_u8(uint8_t *p, __m256i v)
{
	const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1, -1, -1, 0, 4,
	                                      8, 12, -1, -1, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1);
	const __m256i halves = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
	v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pick), halves);
	_mm_storel_epi64((__m128i *)(void *)p, _mm256_castsi256_si128(v));
}

/* The low 16 bits of each lane (values below 2^16) to p[0..16). */
ULP_AVX2_INLINE void v8_store_u16(uint8_t *p, __m256i v)
{
	v = _mm256_permute4x64_epi64(
		_mm256_packus_epi32(v, _mm256_setzero_si256()), 0x08);
	_mm_storeu_si128((__m128i *)(void *)p, _mm256_castsi256_si128(v));
}

/* Order-preserving maps (floatcode.c: el_ord, el_unord) of 16-bit
 * values in 32-bit lanes and of 32-bit values. */
ULP_AVX2_INLINE __m256i v8_ord16(__m256i u)
{
	__m256i m = _mm256_or_si256(_mm256_sub_epi32(_mm256_setzero_si256(),
	                                             _mm256_srli_epi32(u, 15)),
	                            _mm256_set1_epi32(0x8000));
	return _mm256_and_si256(_mm256_xor_si256(u, m),
	                        _mm256_set1_epi32(0xffff));
}

ULP_AVX2_INLINE __m256i v8_unord16(__m256i o)
{
	__m256i m = _mm256_or_si256(_mm256_sub_epi32(_mm256_srli_epi32(o, 15),
	                                             _mm256_set1_epi32(1)),
	                            _mm256_set1_epi32(0x8000));
	return _mm256_and_si256(_mm256_xor_si256(o, m),
	                        _mm256_set1_epi32(0xffff));
}

ULP_AVX2_INLINE __m256i v8_ord32(__m256i u)
{
	return _mm256_xor_si256(
		u, _mm256_or_si256(_mm256_srai_epi32(u, 31),
	                           _mm256_set1_epi32((int)0x80000000u)));
}

ULP_AVX2_INLINE __m256i v8_unord32(__m256i o)
{
	__m256i m = _mm256_or_si256(_mm256_sub_epi32(_mm256_srli_epi32(o, 31),
	                                             _mm256_set1_epi32(1)),
	                            _mm256_set1_epi32((int)0x80000000u));
	return _mm256_xor_si256(o, m);
}

/* Inclusive prefix sum over the eight lanes. */
ULP_AVX2_INLINE __m256i v8_prefix(__m256i v)
{
	v = _mm256_add_epi32(v, _mm256_slli_si256(v, 4));
	v = _mm256_add_epi32(v, _mm256_slli_si256(v, 8));
	__m256i lo3 = _mm256_shuffle_epi32(v, 0xff);
	return _mm256_add_epi32(v, _mm256_permute2x128_si256(lo3, lo3, 0x08));
}

/* Raw bit count max(k - 2, 0) of symbols s (decoder) */
ULP_AVX2_INLINE __m256i v8_sym_nraw(__m256i s)
{
	__m256i t = _mm256_add_epi32(s, _mm256_set1_epi32(5));
	return _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(t, 2),
	                                         _mm256_set1_epi32(2)),
	                        _mm256_setzero_si256());
}

/* The low n bits of each lane (n <= 31). */
ULP_AVX2_INLINE __m256i v8_low_bits(__m256i v, __m256i n)
{
	const __m256i one = _mm256_set1_epi32(1);
	return _mm256_and_si256(v, _mm256_sub_epi32(_mm256_sllv_epi32(one, n),
	                                            one));
}

/* Decoder: bits off .. off + 31 of win, a window of consecutive input
 * bytes, in each lane (off < 256; bits past the end of win are garbage,
 * so a field must end inside it).  Two permutations and two shifts
 * instead of a gather of eight loads, which costs about 3 ns on the AMD
 * EPYC measured and was the costliest step of delta decoding. */
ULP_AVX2_INLINE __m256i v8_window_bits(__m256i win, __m256i off)
{
	__m256i w = _mm256_srli_epi32(off, 5);
	__m256i lo = _mm256_permutevar8x32_epi32(win, w);
	__m256i hi = _mm256_permutevar8x32_epi32(
		win, _mm256_add_epi32(w, _mm256_set1_epi32(1)));
	__m256i sh = _mm256_and_si256(off, _mm256_set1_epi32(31));
	return _mm256_or_si256(
		_mm256_srlv_epi32(lo, sh),
		_mm256_sllv_epi32(hi,
	                          _mm256_sub_epi32(_mm256_set1_epi32(32), sh)));
}

/* Decoder: the bit offsets, from byte pos / 8, of the raw bits of eight
 * elements with symbols s, the first at bit pos; *nraw receives their
 * counts and *inc the running total (lane 7: all eight). */
ULP_AVX2_INLINE __m256i v8_bitoff(__m256i s, uint64_t pos, __m256i *nraw,
                                  __m256i *inc)
{
	*nraw = v8_sym_nraw(s);
	*inc = v8_prefix(*nraw);
	return _mm256_add_epi32(_mm256_set1_epi32((int)(pos & 7)),
	                        _mm256_sub_epi32(*inc, *nraw));
}

/* The signed residual of symbols s with nraw raw bits low. */
ULP_AVX2_INLINE __m256i v8_residual(__m256i s, __m256i nraw, __m256i low)
{
	const __m256i one = _mm256_set1_epi32(1);
	__m256i t = _mm256_add_epi32(s, _mm256_set1_epi32(5));
	/* k >= 2: (2 | b) << nraw; s 1 and 2: 1; s 0: 0 */
	__m256i lead = _mm256_sllv_epi32(
		_mm256_or_si256(_mm256_set1_epi32(2), _mm256_and_si256(t, one)),
		nraw);
	lead = _mm256_blendv_epi8(lead, _mm256_min_epi32(s, one),
	                          _mm256_cmpgt_epi32(_mm256_set1_epi32(3), s));
	/* the sign bit is bit 1 of t, except for s = 1 */
	__m256i ng = _mm256_and_si256(_mm256_srli_epi32(t, 1), one);
	ng = _mm256_andnot_si256(_mm256_cmpeq_epi32(s, one), ng);
	__m256i neg = _mm256_sub_epi32(_mm256_setzero_si256(), ng);
	__m256i mag = _mm256_or_si256(lead, v8_low_bits(low, nraw));
	return _mm256_sub_epi32(_mm256_xor_si256(mag, neg), neg);
}

/* Encoder: the symbols of magnitudes mag with bit lengths k and signs ng
 * (0 or 1); *nraw receives the raw bit counts. */
ULP_AVX2_INLINE __m256i v8_symbol(__m256i mag, __m256i k, __m256i ng,
                                  __m256i *nraw)
{
	const __m256i one = _mm256_set1_epi32(1);
	*nraw = _mm256_max_epi32(_mm256_sub_epi32(k, _mm256_set1_epi32(2)),
	                         _mm256_setzero_si256());
	__m256i b1 = _mm256_and_si256(_mm256_srlv_epi32(mag, *nraw), one);
	__m256i sbig = _mm256_add_epi32(
		_mm256_sub_epi32(_mm256_slli_epi32(k, 2), _mm256_set1_epi32(5)),
		_mm256_add_epi32(_mm256_add_epi32(ng, ng), b1));
	return _mm256_blendv_epi8(_mm256_add_epi32(k, ng), sbig,
	                          _mm256_cmpgt_epi32(k, one));
}

/* Encoder: the magnitude of d = a - b in ULPs (mod 2^32; 16-bit callers
 * mask) and its sign in *ng. */
ULP_AVX2_INLINE __m256i v8_magnitude(__m256i diff, unsigned signbit,
                                     __m256i *ng)
{
	*ng = _mm256_srli_epi32(diff, (int)signbit);
	return _mm256_add_epi32(
		_mm256_xor_si256(diff,
	                         _mm256_sub_epi32(_mm256_setzero_si256(), *ng)),
		*ng);
}

/* Encoder: pairs of lanes' low nbits-bit fields (n of them) merged into
 * four 64-bit lanes of (field 2j) | (field 2j+1) << n(2j); *cnt receives
 * each merged lane's bit count. */
ULP_AVX2_INLINE __m256i v8_merge_pairs(__m256i low, __m256i nbits, __m256i *cnt)
{
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	__m256i ne = _mm256_and_si256(nbits, lo32);
	*cnt = _mm256_add_epi64(ne, _mm256_srli_epi64(nbits, 32));
	return _mm256_or_si256(_mm256_and_si256(low, lo32),
	                       _mm256_sllv_epi64(_mm256_srli_epi64(low, 32),
	                                         ne));
}

#endif /* ULP_FLOATCODE_AVX2_H */
