/*
 * floatcode_avx512.c - AVX-512 reconstruction of 16- and 32-bit delta
 * elements, and of fused standalone 16- and 32-bit ones.
 *
 * Delta elements as the AVX2 kernels (floatcode_avx2.c) decode them: the
 * symbol gives the residual's leading bits, sign and raw bit count, a
 * prefix sum of the counts gives each element's bit position, and the
 * raw bits are cut out of one load.  Here 32 16-bit elements go in 16-bit
 * lanes (the sum wraps there as the format's does), their symbols'
 * fields looked up in registers, and 16 32-bit ones in 32-bit lanes,
 * their fields computed, with masks for the signs and ternary logic for
 * the order-preserving maps.  Same results as the portable loops, which
 * finish what these leave.
 *
 * Compiled for the baseline target; only these functions are built for
 * AVX-512, and they run only where ulp_rans_simd() found it.
 */
#include <immintrin.h>

#include "floatcode.h"
#include "rans.h"
#include "rans_avx512.h"

#define ULP_AVX512 \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,bmi2")))
#define ULP_AVX512_INLINE \
	static inline __attribute__((always_inline)) ULP_AVX512

/* The pieces both lane widths share, W 16 or 32 (the intrinsics'
 * suffix), as statement expressions. */
#define V512(op, W) _mm512_##op##_epi##W

/* Bits off .. off + W - 1 of win, a window of consecutive input bytes,
 * in each W-bit lane: from its lanes off / W and the next, so a field
 * must end inside it. */
#define V512_WINDOW_BITS(W, win, off)                                          \
	({                                                                     \
		__m512i w_ = V512(srli, W)(off, W == 16 ? 4 : 5);              \
		__m512i lo_ = V512(permutexvar, W)(w_, win);                   \
		__m512i hi_ = V512(permutexvar, W)(                            \
			V512(add, W)(w_, V512(set1, W)(1)), win);              \
		__m512i sh_ = _mm512_and_si512(off, V512(set1, W)(W - 1));     \
		_mm512_or_si512(V512(srlv, W)(lo_, sh_),                       \
		                V512(sllv,                                     \
		                     W)(hi_,                                   \
		                        V512(sub, W)(V512(set1, W)(W), sh_))); \
	})

/* The signed residuals of 32-bit symbols s (t = s + 5) with nraw raw
 * bits, those bits the low ones of bits (16-bit symbols look these
 * fields up instead: d16_tabs). */
ULP_AVX512_INLINE __m512i residual32(__m512i s, __m512i t, __m512i nraw,
                                     __m512i bits)
{
	const __m512i one = _mm512_set1_epi32(1);
	/* k >= 2: (2 | b) << nraw; s 1 and 2: 1; s 0: 0 */
	__m512i lead = _mm512_sllv_epi32(
		_mm512_or_si512(_mm512_set1_epi32(2), _mm512_and_si512(t, one)),
		nraw);
	lead = _mm512_mask_min_epu32(
		lead, _mm512_cmplt_epu32_mask(s, _mm512_set1_epi32(3)), s, one);
	/* lead | (bits & ((1 << nraw) - 1)) */
	__m512i mag = _mm512_ternarylogic_epi32(
		lead, bits, _mm512_sub_epi32(_mm512_sllv_epi32(one, nraw), one),
		0xf8);
	/* negative: bit 1 of t, except for s = 1 */
	__mmask16 neg = _mm512_mask_test_epi32_mask(
		_mm512_cmpneq_epi32_mask(s, one), t, _mm512_set1_epi32(2));
	return _mm512_mask_sub_epi32(mag, neg, _mm512_setzero_si512(), mag);
}

/* Element c of reference u and residual d: unord(ord(u) + d), where ord
 * is u ^ ((u >> (W - 1) arithmetic) | sign) and unord
 * o ^ ~((o >> (W - 1) arithmetic) & ~sign). */
#define V512_APPLY(W, u, d)                                                  \
	({                                                                   \
		__m512i o_ = V512(add, W)(                                   \
			_mm512_ternarylogic_epi32(                           \
				u, V512(srai, W)(u, W - 1),                  \
				V512(set1, W)(W == 16 ? (short)0x8000        \
		                                      : (int)0x80000000u),   \
				0x1e),                                       \
			d);                                                  \
		_mm512_ternarylogic_epi32(                                   \
			o_, V512(srai, W)(o_, W - 1),                        \
			V512(set1, W)(W == 16 ? 0x7fff : 0x7fffffff), 0x87); \
	})

/* The signed residuals of sixteen 32-bit delta elements with symbols s,
 * one per lane, their raw bits from bit pos of rawp: win holds the bytes
 * from pos / 8, where every field must end.  *total receives the
 * sixteen's raw bit count. */
ULP_AVX512_INLINE __m512i v16_residuals32(__m512i s, uint64_t pos, __m512i win,
                                          uint32_t *total)
{
	const __m512i zero = _mm512_setzero_si512();
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
	__m512i off = _mm512_add_epi32(_mm512_set1_epi32((int)(pos & 7)),
	                               _mm512_sub_epi32(inc, nraw));
	__m512i bits = V512_WINDOW_BITS(32, win, off);
	return residual32(s, t, nraw, bits);
}

ULP_AVX512_INLINE __m512i v16_u8(const uint8_t *p)
{
	return _mm512_cvtepu8_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* What v32_residuals16 looks up by symbol s (below 64, one 16-bit lane
 * each, two registers a table for vpermt2w): the raw bit count, the
 * residual's leading bits, the raw bits' mask, and all ones for a
 * negative residual (dsym_info in floatcode.c, in 16 bits); and the lane
 * indices that shift a register up by 1, 2, 4, 8 and 16 lanes, with 32
 * (a zero register's first lane) below.  Looking the symbol's fields up
 * takes half the instructions of computing them, and the shifts need no
 * mask registers (which the loop rebuilt each step). */
typedef struct d16_tabs {
	__m512i nraw[2], lead[2], mask[2], neg[2], up[5];
} d16_tabs;

ULP_AVX512_INLINE void d16_tabs_init(d16_tabs *d)
{
	uint16_t nraw[64], lead[64], mask[64], neg[64];
	for (unsigned s = 0; s < 64; s++) {
		const unsigned t = s + 5, n = s < 3 ? 0 : (t >> 2) - 2;
		nraw[s] = (uint16_t)n;
		mask[s] = (uint16_t)((1u << n) - 1);
		lead[s] = (uint16_t)(s < 3 ? s > 0 : (2u | (t & 1)) << n);
		neg[s] = s == 2 || (s >= 3 && (t & 2)) ? 0xffff : 0;
	}
	for (unsigned h = 0; h < 2; h++) {
		d->nraw[h] = _mm512_loadu_si512((const void *)(nraw + 32 * h));
		d->lead[h] = _mm512_loadu_si512((const void *)(lead + 32 * h));
		d->mask[h] = _mm512_loadu_si512((const void *)(mask + 32 * h));
		d->neg[h] = _mm512_loadu_si512((const void *)(neg + 32 * h));
	}
	for (unsigned k = 0; k < 5; k++) {
		uint16_t up[32];
		for (unsigned l = 0; l < 32; l++)
			up[l] = (uint16_t)(l >= (1u << k) ? l - (1u << k) : 32);
		d->up[k] = _mm512_loadu_si512((const void *)up);
	}
}

ULP_AVX512_INLINE __m512i d16_lookup(const __m512i tab[2], __m512i s)
{
	return _mm512_permutex2var_epi16(tab[0], s, tab[1]);
}

/* The residuals of 32 16-bit delta elements with symbols sym[0..32),
 * in 16-bit lanes (the sum wraps there as the format's does), their raw
 * bits (at most 7 + 32 x 14 bits from *pos / 8) cut out of one 64-byte
 * load; advances *pos.  Half the instructions of two 32-bit steps. */
ULP_AVX512_INLINE __m512i v32_residuals16(const uint8_t *sym,
                                          const uint8_t *rawp, uint64_t *pos,
                                          const d16_tabs *tb)
{
	const __m512i zero = _mm512_setzero_si512();
	__m512i s = _mm512_cvtepu8_epi16(
		_mm256_loadu_si256((const __m256i *)(const void *)sym));
	__m512i nraw = d16_lookup(tb->nraw, s);
	/* inclusive prefix sum: lanes shifted up by 1, 2, 4, 8, 16 */
	__m512i inc = nraw;
	for (unsigned k = 0; k < 5; k++)
		inc = _mm512_add_epi16(
			inc, _mm512_permutex2var_epi16(inc, tb->up[k], zero));
	__m512i off = _mm512_add_epi16(_mm512_set1_epi16((short)(*pos & 7)),
	                               _mm512_sub_epi16(inc, nraw));
	/* a field ends by bit 455: the second word is at most word 28 */
	__m512i win = _mm512_loadu_si512((const void *)(rawp + (*pos >> 3)));
	__m512i bits = V512_WINDOW_BITS(16, win, off);
	*pos += (uint32_t)_mm_extract_epi16(_mm512_extracti32x4_epi32(inc, 3),
	                                    7);
	/* lead | (bits & mask), negated where the symbol says so */
	__m512i mag = _mm512_ternarylogic_epi32(d16_lookup(tb->lead, s), bits,
	                                        d16_lookup(tb->mask, s), 0xf8);
	return _mm512_mask_sub_epi16(
		mag, _mm512_movepi16_mask(d16_lookup(tb->neg, s)), zero, mag);
}

ULP_AVX512 size_t ulp_delta16_avx512(const uint8_t *sym, const uint8_t *rawp,
                                     size_t rawlen, const uint8_t *ref,
                                     size_t n, uint8_t *dst, uint64_t *posp)
{
	d16_tabs tb;
	d16_tabs_init(&tb);
	uint64_t pos = *posp;
	size_t i = 0;
	for (; i + 32 <= n && (pos >> 3) + 64 <= rawlen; i += 32) {
		__m512i d = v32_residuals16(sym + i, rawp, &pos, &tb);
		__m512i u = _mm512_loadu_si512((const void *)(ref + 2 * i));
		_mm512_storeu_si512((void *)(dst + 2 * i),
		                    V512_APPLY(16, u, d));
	}
	*posp = pos;
	return i;
}

ULP_AVX512 size_t ulp_delta32_avx512(const uint8_t *sym, const uint8_t *rawp,
                                     size_t rawlen, const uint8_t *ref,
                                     size_t n, uint8_t *dst, uint64_t *posp)
{
	uint64_t pos = *posp;
	size_t i = 0;
	/* a step's raw bits (at most 7 + 16 x 30) lie in the 64 bytes from
	 * pos / 8 */
	for (; i + 16 <= n && (pos >> 3) + 64 <= rawlen; i += 16) {
		uint32_t total;
		__m512i win =
			_mm512_loadu_si512((const void *)(rawp + (pos >> 3)));
		__m512i d = v16_residuals32(v16_u8(sym + i), pos, win, &total);
		pos += total;
		__m512i u = _mm512_loadu_si512((const void *)(ref + 4 * i));
		_mm512_storeu_si512((void *)(dst + 4 * i),
		                    V512_APPLY(32, u, d));
	}
	*posp = pos;
	return i;
}

/* Byte k of each of the 256 entries of base as the four permutation
 * sources of ulp_map256_avx512. */
ULP_AVX512_INLINE void base_byte_map(const uint64_t *base, unsigned k,
                                     __m512i m[4])
{
	uint8_t t[ULP_RANS_MAXSYM] __attribute__((aligned(64)));
	for (unsigned c = 0; c < ULP_RANS_MAXSYM; c++)
		t[c] = (uint8_t)(base[c] >> (8 * k));
	ulp_map256_load_avx512(t, m);
}

/* Fused standalone 16-bit elements, 32 a step in 16-bit lanes: each
 * element's top bits are base[code] (its low two bytes, by two VBMI byte
 * lookups of 256-entry tables, where the AVX2 kernel gathers: slow on
 * AMD), its low lowm bits the next raw field.  32 fields of lowm <= 16
 * bits start on a byte (i is a multiple of 32) and fit one 64-byte load. */
ULP_AVX512 size_t ulp_saf16_avx512(const uint8_t *code, const uint64_t *base,
                                   const uint8_t *rawp, size_t rawlen, size_t n,
                                   unsigned lowm, uint8_t *dst)
{
	const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24,
	                                      23, 22, 21, 20, 19, 18, 17, 16,
	                                      15, 14, 13, 12, 11, 10, 9, 8, 7,
	                                      6, 5, 4, 3, 2, 1, 0);
	if (lowm > 16)
		return 0;
	__m512i mlo[4], mhi[4];
	base_byte_map(base, 0, mlo);
	base_byte_map(base, 1, mhi);
	const __m512i off =
		_mm512_mullo_epi16(iota, _mm512_set1_epi16((short)lowm));
	const __m512i lm = _mm512_set1_epi16((short)((1u << lowm) - 1));
	size_t i = 0;
	for (; i + 32 <= n && (i / 8) * lowm + 64 <= rawlen; i += 32) {
		__m512i c = _mm512_zextsi256_si512(_mm256_loadu_si256(
			(const __m256i *)(const void *)(code + i)));
		__m512i top = _mm512_or_si512(
			_mm512_cvtepu8_epi16(_mm512_castsi512_si256(
				ulp_map256_avx512(mlo, c))),
			_mm512_slli_epi16(
				_mm512_cvtepu8_epi16(_mm512_castsi512_si256(
					ulp_map256_avx512(mhi, c))),
				8));
		__m512i win = _mm512_loadu_si512(
			(const void *)(rawp + (i / 8) * lowm));
		__m512i raw =
			_mm512_and_si512(V512_WINDOW_BITS(16, win, off), lm);
		_mm512_storeu_si512((void *)(dst + 2 * i),
		                    _mm512_or_si512(top, raw));
	}
	return i;
}

/* The same for fp32, 16 a step in 32-bit lanes: base[code]'s bits 16-31
 * (those below are 0: the raw field's), 20-bit raw fields, 40 bytes a
 * step. */
ULP_AVX512 size_t ulp_saf32_avx512(const uint8_t *code, const uint64_t *base,
                                   const uint8_t *rawp, size_t rawlen, size_t n,
                                   uint8_t *dst)
{
	const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
	                                       11, 12, 13, 14, 15);
	__m512i m2[4], m3[4];
	base_byte_map(base, 2, m2);
	base_byte_map(base, 3, m3);
	const __m512i off = _mm512_mullo_epi32(iota, _mm512_set1_epi32(20));
	const __m512i lm = _mm512_set1_epi32((1 << 20) - 1);
	size_t i = 0;
	for (; i + 16 <= n && (i / 16) * 40 + 64 <= rawlen; i += 16) {
		__m512i c = _mm512_zextsi128_si512(_mm_loadu_si128(
			(const __m128i *)(const void *)(code + i)));
		__m512i top = _mm512_or_si512(
			_mm512_slli_epi32(
				_mm512_cvtepu8_epi32(_mm512_castsi512_si128(
					ulp_map256_avx512(m2, c))),
				16),
			_mm512_slli_epi32(
				_mm512_cvtepu8_epi32(_mm512_castsi512_si128(
					ulp_map256_avx512(m3, c))),
				24));
		/* the output 512 elements ahead, as in ulp_saf32_avx2 */
		_mm_prefetch((const char *)(dst + 4 * i + 2048), _MM_HINT_T0);
		__m512i win = _mm512_loadu_si512(
			(const void *)(rawp + (i / 16) * 40));
		__m512i raw =
			_mm512_and_si512(V512_WINDOW_BITS(32, win, off), lm);
		_mm512_storeu_si512((void *)(dst + 4 * i),
		                    _mm512_or_si512(top, raw));
	}
	return i;
}
