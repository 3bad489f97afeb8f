/*
 * floatcode_avx2.c - AVX2 decoding kernels of the float codec: delta
 * reconstruction (16 and 32 bits), standalone reconstruction (16 and 32
 * bits) and the context pass.
 *
 * Delta, eight elements per step: the symbol gives the residual's leading
 * bits, sign and raw bit count arithmetically (floatcode_avx2.h), a
 * prefix sum of the raw bit counts gives each element's bit position, and
 * the raw bits are cut out of one load of the step's bytes.  Same results
 * as the portable loops, which finish what these leave.
 */
#include "floatcode_avx2.h"

/* The residuals of eight 16-bit delta elements with symbols sym[0..8),
 * their raw bits from bit *pos of rawp (in the 16 bytes from *pos / 8:
 * at most 8 x 14 bits), advancing *pos. */
ULP_AVX2_INLINE __m256i delta16_residuals(const uint8_t *sym,
                                          const uint8_t *rawp, uint64_t *pos)
{
	__m256i s = v8_u8(sym), nraw, inc;
	__m256i off = v8_bitoff(s, *pos, &nraw, &inc);
	__m256i win = _mm256_broadcastsi128_si256(_mm_loadu_si128(
		(const __m128i *)(const void *)(rawp + (*pos >> 3))));
	*pos += (uint32_t)_mm256_extract_epi32(inc, 7);
	return v8_residual(s, nraw, v8_window_bits(win, off));
}

ULP_AVX2 size_t ulp_delta16_avx2(const uint8_t *sym, const uint8_t *rawp,
                                 size_t rawlen, const uint8_t *ref, size_t n,
                                 uint8_t *dst, uint64_t *posp)
{
	const __m256i m16 = _mm256_set1_epi32(0xffff);
	const __m256i h7 = _mm256_set1_epi16(0x7fff);
	const __m256i h8 = _mm256_set1_epi16((short)0x8000);
	uint64_t pos = *posp;
	size_t i = 0;
	/* Sixteen elements a step: the order-preserving maps and the sum in
	 * 16-bit lanes (which wrap as the format does) take half the
	 * instructions of two eight-lane steps.  The second half's bits
	 * start at most 14 bytes further. */
	for (; i + 16 <= n && (pos >> 3) + 30 <= rawlen; i += 16) {
		__m256i d0 = _mm256_and_si256(
			delta16_residuals(sym + i, rawp, &pos), m16);
		__m256i d1 = _mm256_and_si256(
			delta16_residuals(sym + i + 8, rawp, &pos), m16);
		__m256i d = _mm256_permute4x64_epi64(
			_mm256_packus_epi32(d0, d1), 0xd8);
		__m256i u = _mm256_loadu_si256(
			(const __m256i *)(const void *)(ref + 2 * i));
		/* ord: negative values complemented, the others' sign set */
		__m256i o = _mm256_add_epi16(
			_mm256_xor_si256(
				u,
				_mm256_or_si256(_mm256_srai_epi16(u, 15), h8)),
			d);
		/* unord: o ^ 0x8000 where o's top bit is set, ~o elsewhere */
		__m256i c = _mm256_xor_si256(
			o,
			_mm256_andnot_si256(
				_mm256_and_si256(_mm256_srai_epi16(o, 15), h7),
				_mm256_set1_epi32(-1)));
		_mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i), c);
	}
	for (; i + 8 <= n && (pos >> 3) + 16 <= rawlen; i += 8) {
		__m256i d = delta16_residuals(sym + i, rawp, &pos);
		__m256i o = _mm256_add_epi32(v8_ord16(v8_u16(ref + 2 * i)), d);
		v8_store_u16(dst + 2 * i, v8_unord16(_mm256_and_si256(o, m16)));
	}
	*posp = pos;
	return i;
}

ULP_AVX2 size_t ulp_delta32_avx2(const uint8_t *sym, const uint8_t *rawp,
                                 size_t rawlen, const uint8_t *ref, size_t n,
                                 uint8_t *dst, uint64_t *posp)
{
	uint64_t pos = *posp;
	size_t i = 0;
	/* a step's raw bits (at most 8 x 30) lie in the 32 bytes from
	 * pos / 8 */
	for (; i + 8 <= n && (pos >> 3) + 32 <= rawlen; i += 8) {
		__m256i s = v8_u8(sym + i), nraw, inc;
		__m256i off = v8_bitoff(s, pos, &nraw, &inc);
		__m256i win = _mm256_loadu_si256(
			(const __m256i *)(const void *)(rawp + (pos >> 3)));
		__m256i d = v8_residual(s, nraw, v8_window_bits(win, off));
		__m256i r = _mm256_loadu_si256(
			(const __m256i *)(const void *)(ref + 4 * i));
		_mm256_storeu_si256(
			(__m256i *)(void *)(dst + 4 * i),
			v8_unord32(_mm256_add_epi32(v8_ord32(r), d)));
		pos += (uint32_t)_mm256_extract_epi32(inc, 7);
	}
	*posp = pos;
	return i;
}

ULP_AVX2 size_t ulp_ctx_avx2(const uint8_t *ref, size_t n, unsigned width,
                             unsigned mbits, unsigned emask, uint8_t *ctx)
{
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	size_t i = 0;
	if (width == 16) {
		const __m256i em = _mm256_set1_epi16((short)emask);
		for (; i + 16 <= n; i += 16) {
			__m256i v = _mm256_loadu_si256(
				(const __m256i *)(const void *)(ref + 2 * i));
			__m256i e =
				_mm256_and_si256(_mm256_srl_epi16(v, cm), em);
			e = _mm256_permute4x64_epi64(_mm256_packus_epi16(e, e),
			                             0x08);
			_mm_storeu_si128((__m128i *)(void *)(ctx + i),
			                 _mm256_castsi256_si128(e));
		}
	} else if (width == 32) {
		const __m256i em = _mm256_set1_epi32((int)emask);
		const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1,
		                                      -1, -1, -1, -1, -1, -1,
		                                      -1, -1, -1, 0, 4, 8, 12,
		                                      -1, -1, -1, -1, -1, -1,
		                                      -1, -1, -1, -1, -1, -1);
		const __m256i halves =
			_mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
		for (; i + 8 <= n; i += 8) {
			__m256i v = _mm256_loadu_si256(
				(const __m256i *)(const void *)(ref + 4 * i));
			__m256i e =
				_mm256_and_si256(_mm256_srl_epi32(v, cm), em);
			e = _mm256_permutevar8x32_epi32(
				_mm256_shuffle_epi8(e, pick), halves);
			_mm_storel_epi64((__m128i *)(void *)(ctx + i),
			                 _mm256_castsi256_si128(e));
		}
	}
	return i;
}
/* The lowm-bit raw fields of the eight standalone 16-bit elements from
 * i (a multiple of 8): 8 x lowm <= 56 bits starting on a byte boundary,
 * one 64-bit load. */
ULP_AVX2_INLINE __m256i sa16_raw8(const uint8_t *rawp, size_t i, unsigned lowm)
{
	const __m256i lm = _mm256_set1_epi32((int)((1u << lowm) - 1));
	const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	const __m256i sh0 = _mm256_setr_epi64x(0, lowm, 2 * lowm, 3 * lowm);
	const __m256i sh1 =
		_mm256_setr_epi64x(4 * lowm, 5 * lowm, 6 * lowm, 7 * lowm);
	uint64_t word;
	memcpy(&word, rawp + (i / 8) * lowm, 8);
	__m256i wv = _mm256_set1_epi64x((long long)word);
	__m256i f0 =
		_mm256_permutevar8x32_epi32(_mm256_srlv_epi64(wv, sh0), even);
	__m256i f1 =
		_mm256_permutevar8x32_epi32(_mm256_srlv_epi64(wv, sh1), even);
	return _mm256_and_si256(
		_mm256_inserti128_si256(f0, _mm256_castsi256_si128(f1), 1), lm);
}

/* The 20-bit raw fields of the eight standalone fp32 elements from i (a
 * multiple of 8): 20 bytes from byte 20 * (i / 8), one 32-byte window. */
ULP_AVX2_INLINE __m256i sa32_raw8(const uint8_t *rawp, size_t i)
{
	const __m256i off = _mm256_setr_epi32(0, 20, 40, 60, 80, 100, 120, 140);
	__m256i win = _mm256_loadu_si256(
		(const __m256i *)(const void *)(rawp + (i / 8) * 20));
	return _mm256_and_si256(v8_window_bits(win, off),
	                        _mm256_set1_epi32((1 << 20) - 1));
}

ULP_AVX2 size_t ulp_sa16_avx2(const uint8_t *a, const uint8_t *b,
                              const uint8_t *rawp, size_t rawlen, size_t n,
                              unsigned mbits, unsigned topbits, uint8_t *dst)
{
	const unsigned lowm = mbits - topbits;
	const __m256i tm = _mm256_set1_epi32((int)((1u << topbits) - 1));
	const __m128i ct = _mm_cvtsi32_si128((int)topbits);
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	const __m128i cl = _mm_cvtsi32_si128((int)lowm);
	size_t i = 0;
	for (; i + 8 <= n && (i / 8) * lowm + 8 <= rawlen; i += 8) {
		__m256i raw = sa16_raw8(rawp, i, lowm);
		__m256i av = v8_u8(a + i);
		__m256i bv = v8_u8(b + i);
		__m256i c = _mm256_or_si256(
			_mm256_or_si256(
				_mm256_slli_epi32(_mm256_srl_epi32(bv, ct), 15),
				_mm256_sll_epi32(av, cm)),
			_mm256_or_si256(
				_mm256_sll_epi32(_mm256_and_si256(bv, tm), cl),
				raw));
		v8_store_u16(dst + 2 * i, c);
	}
	return i;
}

ULP_AVX2 size_t ulp_sa32_avx2(const uint8_t *a, const uint8_t *b,
                              const uint8_t *rawp, size_t rawlen, size_t n,
                              uint8_t *dst)
{
	size_t i = 0;
	for (; i + 8 <= n && (i / 8) * 20 + 32 <= rawlen; i += 8) {
		__m256i raw = sa32_raw8(rawp, i);
		__m256i av = v8_u8(a + i);
		__m256i bv = v8_u8(b + i);
		__m256i c = _mm256_or_si256(
			_mm256_or_si256(
				_mm256_slli_epi32(_mm256_srli_epi32(bv, 3), 31),
				_mm256_slli_epi32(av, 23)),
			_mm256_or_si256(
				_mm256_slli_epi32(
					_mm256_and_si256(bv,
		                                         _mm256_set1_epi32(7)),
					20),
				raw));
		_mm256_storeu_si256((__m256i *)(void *)(dst + 4 * i), c);
	}
	return i;
}

/* Fused: the top bits of each element are its code's, gathered from the
 * low 32 bits of base[code] (little-endian, scale 8). */
ULP_AVX2_INLINE __m256i saf_top8(const uint8_t *code, const uint64_t *base)
{
	return _mm256_i32gather_epi32((const int *)(const void *)base,
	                              v8_u8(code), 8);
}

ULP_AVX2 size_t ulp_saf16_avx2(const uint8_t *code, const uint64_t *base,
                               const uint8_t *rawp, size_t rawlen, size_t n,
                               unsigned lowm, uint8_t *dst)
{
	size_t i = 0;
	for (; i + 8 <= n && (i / 8) * lowm + 8 <= rawlen; i += 8)
		v8_store_u16(dst + 2 * i,
		             _mm256_or_si256(saf_top8(code + i, base),
		                             sa16_raw8(rawp, i, lowm)));
	return i;
}

ULP_AVX2 size_t ulp_saf32_avx2(const uint8_t *code, const uint64_t *base,
                               const uint8_t *rawp, size_t rawlen, size_t n,
                               uint8_t *dst)
{
	size_t i = 0;
	for (; i + 8 <= n && (i / 8) * 20 + 32 <= rawlen; i += 8) {
		/* the output 512 elements ahead (measured: 9% of the fp32
		 * decoding; nothing in the 16-bit kernel) */
		_mm_prefetch((const char *)(dst + 4 * i + 2048), _MM_HINT_T0);
		_mm256_storeu_si256((__m256i *)(void *)(dst + 4 * i),
		                    _mm256_or_si256(saf_top8(code + i, base),
		                                    sa32_raw8(rawp, i)));
	}
	return i;
}
