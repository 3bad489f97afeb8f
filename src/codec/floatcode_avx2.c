/*
 * floatcode_avx2.c - AVX2 reconstruction of 16-bit delta streams (bf16,
 * fp16) from their decoded symbols, raw bits and reference.
 *
 * Eight elements per step: the symbol gives the residual's leading bits,
 * sign and raw bit count arithmetically (see DELTA_NSYM in floatcode.c:
 * s = 4k - 5 + 2 neg + b for k >= 2), a prefix sum of the raw bit counts
 * gives each element's bit position, and one gather fetches every
 * element's raw bits.  Same results as the portable loop, which finishes
 * what this leaves.  The encoder's pass is the same in reverse: symbols,
 * contexts and raw bits of eight elements per step, the raw bits merged
 * pairwise into two runs for the bit writer.
 */
#include <immintrin.h>

#include "bitio.h"
#include "floatcode.h"

#define ULP_AVX2 __attribute__((target("avx2,bmi2")))

ULP_AVX2 size_t ulp_delta16_avx2(const uint8_t *sym, const uint8_t *rawp,
                                 size_t rawlen, const uint8_t *ref, size_t n,
                                 uint8_t *dst, uint64_t *posp)
{
	const __m256i one = _mm256_set1_epi32(1);
	const __m256i two = _mm256_set1_epi32(2);
	const __m256i three = _mm256_set1_epi32(3);
	const __m256i five = _mm256_set1_epi32(5);
	const __m256i sb = _mm256_set1_epi32(0x8000);
	const __m256i m16 = _mm256_set1_epi32(0xffff);
	const __m256i zero = _mm256_setzero_si256();
	uint64_t pos = *posp;
	size_t i = 0;
	/* a step reads at most 8 x 14 raw bits past pos, 4 bytes a lane */
	for (; i + 8 <= n && (pos >> 3) + 24 <= rawlen; i += 8) {
		__m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			(const __m128i *)(const void *)(sym + i)));
		__m256i t = _mm256_add_epi32(s, five);
		__m256i nraw = _mm256_max_epi32(
			_mm256_sub_epi32(_mm256_srli_epi32(t, 2), two), zero);
		__m256i small = _mm256_cmpgt_epi32(three, s);
		/* k >= 2: (2 | b) << nraw; s 1 and 2: 1; s 0: 0 */
		__m256i lead = _mm256_sllv_epi32(
			_mm256_or_si256(two, _mm256_and_si256(t, one)), nraw);
		lead = _mm256_blendv_epi8(lead, _mm256_min_epi32(s, one),
		                          small);
		/* the sign bit is bit 1 of t, except for s = 1 */
		__m256i ng = _mm256_and_si256(_mm256_srli_epi32(t, 1), one);
		ng = _mm256_andnot_si256(_mm256_cmpeq_epi32(s, one), ng);
		__m256i neg = _mm256_sub_epi32(zero, ng);

		/* inclusive prefix sum of nraw over the eight lanes */
		__m256i inc =
			_mm256_add_epi32(nraw, _mm256_slli_si256(nraw, 4));
		inc = _mm256_add_epi32(inc, _mm256_slli_si256(inc, 8));
		__m256i lo3 = _mm256_shuffle_epi32(inc, 0xff);
		inc = _mm256_add_epi32(inc, _mm256_permute2x128_si256(lo3, lo3,
		                                                      0x08));
		__m256i bp = _mm256_add_epi32(_mm256_set1_epi32((int)pos),
		                              _mm256_sub_epi32(inc, nraw));
		__m256i word =
			_mm256_i32gather_epi32((const int *)(const void *)rawp,
		                               _mm256_srli_epi32(bp, 3), 1);
		__m256i low = _mm256_srlv_epi32(
			word, _mm256_and_si256(bp, _mm256_set1_epi32(7)));
		low = _mm256_and_si256(
			low,
			_mm256_sub_epi32(_mm256_sllv_epi32(one, nraw), one));
		__m256i mag = _mm256_or_si256(lead, low);
		__m256i d = _mm256_sub_epi32(_mm256_xor_si256(mag, neg), neg);

		__m256i r = _mm256_cvtepu16_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(ref + 2 * i)));
		__m256i rm = _mm256_or_si256(
			_mm256_sub_epi32(zero, _mm256_srli_epi32(r, 15)), sb);
		__m256i o = _mm256_and_si256(_mm256_xor_si256(r, rm), m16);
		o = _mm256_and_si256(_mm256_add_epi32(o, d), m16);
		__m256i um = _mm256_or_si256(
			_mm256_sub_epi32(_mm256_srli_epi32(o, 15), one), sb);
		__m256i u = _mm256_and_si256(_mm256_xor_si256(o, um), m16);
		u = _mm256_permute4x64_epi64(_mm256_packus_epi32(u, zero),
		                             0x08);
		_mm_storeu_si128((__m128i *)(void *)(dst + 2 * i),
		                 _mm256_castsi256_si128(u));
		pos += (uint32_t)_mm256_extract_epi32(inc, 7);
	}
	*posp = pos;
	return i;
}

ULP_AVX2 size_t ulp_delta16_pass_avx2(const uint8_t *cur, const uint8_t *ref,
                                      size_t n, unsigned mbits, unsigned emask,
                                      uint8_t *sym, uint8_t *ctx, ulp_bitw *bw,
                                      uint64_t *raw_bits)
{
	const __m256i one = _mm256_set1_epi32(1);
	const __m256i two = _mm256_set1_epi32(2);
	const __m256i five = _mm256_set1_epi32(5);
	const __m256i sb = _mm256_set1_epi32(0x8000);
	const __m256i m16 = _mm256_set1_epi32(0xffff);
	const __m256i zero = _mm256_setzero_si256();
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	const __m256i em = _mm256_set1_epi32((int)emask);
	/* byte 0 of every 32-bit lane to the low 4 bytes of each half */
	const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1, -1, -1, 0, 4,
	                                      8, 12, -1, -1, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1);
	const __m256i halves = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
	uint64_t bits = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i c = _mm256_cvtepu16_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(cur + 2 * i)));
		__m256i r = _mm256_cvtepu16_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(ref + 2 * i)));
		__m256i oc = _mm256_and_si256(
			_mm256_xor_si256(
				c,
				_mm256_or_si256(
					_mm256_sub_epi32(
						zero, _mm256_srli_epi32(c, 15)),
					sb)),
			m16);
		__m256i orf = _mm256_and_si256(
			_mm256_xor_si256(
				r,
				_mm256_or_si256(
					_mm256_sub_epi32(
						zero, _mm256_srli_epi32(r, 15)),
					sb)),
			m16);
		__m256i diff = _mm256_and_si256(_mm256_sub_epi32(oc, orf), m16);
		__m256i ng = _mm256_srli_epi32(diff, 15);
		__m256i mag = _mm256_and_si256(
			_mm256_add_epi32(
				_mm256_xor_si256(diff,
		                                 _mm256_sub_epi32(zero, ng)),
				ng),
			m16);
		/* bit length from the exponent of the exact float of mag */
		__m256i k = _mm256_max_epi32(
			_mm256_sub_epi32(
				_mm256_srli_epi32(
					_mm256_castps_si256(
						_mm256_cvtepi32_ps(mag)),
					23),
				_mm256_set1_epi32(126)),
			zero);
		__m256i nraw = _mm256_max_epi32(_mm256_sub_epi32(k, two), zero);
		__m256i big = _mm256_cmpgt_epi32(k, one);
		__m256i b1 =
			_mm256_and_si256(_mm256_srlv_epi32(mag, nraw), one);
		__m256i sbig = _mm256_add_epi32(
			_mm256_sub_epi32(_mm256_slli_epi32(k, 2), five),
			_mm256_add_epi32(_mm256_add_epi32(ng, ng), b1));
		__m256i s =
			_mm256_blendv_epi8(_mm256_add_epi32(k, ng), sbig, big);
		__m256i cx = _mm256_and_si256(
			_mm256_srl_epi32(r, _mm_cvtsi32_si128((int)mbits)), em);
		__m256i sp = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(s, pick), halves);
		__m256i cp = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(cx, pick), halves);
		_mm_storel_epi64((__m128i *)(void *)(sym + i),
		                 _mm256_castsi256_si128(sp));
		_mm_storel_epi64((__m128i *)(void *)(ctx + i),
		                 _mm256_castsi256_si128(cp));

		/* raw bits: merge pairs of lanes, then pairs of pairs, into
		 * two runs of at most 56 bits */
		__m256i low = _mm256_and_si256(
			mag,
			_mm256_sub_epi32(_mm256_sllv_epi32(one, nraw), one));
		__m256i ne = _mm256_and_si256(nraw, lo32);
		__m256i r1 = _mm256_or_si256(
			_mm256_and_si256(low, lo32),
			_mm256_sllv_epi64(_mm256_srli_epi64(low, 32), ne));
		__m256i c1 = _mm256_add_epi64(ne, _mm256_srli_epi64(nraw, 32));
		__m256i r2 = _mm256_or_si256(
			r1, _mm256_sllv_epi64(_mm256_srli_si256(r1, 8), c1));
		__m256i c2 = _mm256_add_epi64(c1, _mm256_srli_si256(c1, 8));
		uint64_t v0 = (uint64_t)_mm256_extract_epi64(r2, 0);
		uint64_t v1 = (uint64_t)_mm256_extract_epi64(r2, 2);
		unsigned n0 = (unsigned)_mm256_extract_epi64(c2, 0);
		unsigned n1 = (unsigned)_mm256_extract_epi64(c2, 2);
		ulp_bitw_put(bw, v0, n0);
		ulp_bitw_put(bw, v1, n1);
		bits += n0 + n1;
	}
	*raw_bits += bits;
	return i;
}

/* Bit length of eight 32-bit magnitudes: each 16-bit half converts to
 * float exactly, and the exponent of the high half (or, if it is zero, of
 * the low half) gives it. */
static inline __attribute__((always_inline)) ULP_AVX2 __m256i
bitlen32(__m256i mag)
{
	const __m256i zero = _mm256_setzero_si256();
	const __m256i b126 = _mm256_set1_epi32(126);
	__m256i hi = _mm256_srli_epi32(mag, 16);
	__m256i lo = _mm256_and_si256(mag, _mm256_set1_epi32(0xffff));
	__m256i kh = _mm256_sub_epi32(
		_mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(hi)),
	                          23),
		_mm256_set1_epi32(110));
	__m256i kl = _mm256_max_epi32(
		_mm256_sub_epi32(
			_mm256_srli_epi32(
				_mm256_castps_si256(_mm256_cvtepi32_ps(lo)),
				23),
			b126),
		zero);
	return _mm256_blendv_epi8(kh, kl, _mm256_cmpeq_epi32(hi, zero));
}

ULP_AVX2 size_t ulp_delta32_pass_avx2(const uint8_t *cur, const uint8_t *ref,
                                      size_t n, uint8_t *sym, uint8_t *ctx,
                                      ulp_bitw *bw, uint64_t *raw_bits)
{
	const __m256i one = _mm256_set1_epi32(1);
	const __m256i two = _mm256_set1_epi32(2);
	const __m256i five = _mm256_set1_epi32(5);
	const __m256i sb = _mm256_set1_epi32((int)0x80000000u);
	const __m256i zero = _mm256_setzero_si256();
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1, -1, -1, 0, 4,
	                                      8, 12, -1, -1, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1);
	const __m256i halves = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
	uint64_t bits = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i c = _mm256_loadu_si256(
			(const __m256i *)(const void *)(cur + 4 * i));
		__m256i r = _mm256_loadu_si256(
			(const __m256i *)(const void *)(ref + 4 * i));
		__m256i oc = _mm256_xor_si256(
			c, _mm256_or_si256(_mm256_srai_epi32(c, 31), sb));
		__m256i orf = _mm256_xor_si256(
			r, _mm256_or_si256(_mm256_srai_epi32(r, 31), sb));
		__m256i diff = _mm256_sub_epi32(oc, orf);
		__m256i ng = _mm256_srli_epi32(diff, 31);
		__m256i mag = _mm256_add_epi32(
			_mm256_xor_si256(diff, _mm256_sub_epi32(zero, ng)), ng);
		__m256i k = bitlen32(mag);
		__m256i nraw = _mm256_max_epi32(_mm256_sub_epi32(k, two), zero);
		__m256i big = _mm256_cmpgt_epi32(k, one);
		__m256i b1 =
			_mm256_and_si256(_mm256_srlv_epi32(mag, nraw), one);
		__m256i sbig = _mm256_add_epi32(
			_mm256_sub_epi32(_mm256_slli_epi32(k, 2), five),
			_mm256_add_epi32(_mm256_add_epi32(ng, ng), b1));
		__m256i s =
			_mm256_blendv_epi8(_mm256_add_epi32(k, ng), sbig, big);
		__m256i cx = _mm256_and_si256(_mm256_srli_epi32(r, 23),
		                              _mm256_set1_epi32(0xff));
		__m256i sp = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(s, pick), halves);
		__m256i cp = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(cx, pick), halves);
		_mm_storel_epi64((__m128i *)(void *)(sym + i),
		                 _mm256_castsi256_si128(sp));
		_mm_storel_epi64((__m128i *)(void *)(ctx + i),
		                 _mm256_castsi256_si128(cp));

		/* raw bits: pairs of lanes merged into four runs of at most
		 * 60 bits, each written as two pieces of at most 32 */
		__m256i low = _mm256_and_si256(
			mag,
			_mm256_sub_epi32(_mm256_sllv_epi32(one, nraw), one));
		__m256i ne = _mm256_and_si256(nraw, lo32);
		__m256i r1 = _mm256_or_si256(
			_mm256_and_si256(low, lo32),
			_mm256_sllv_epi64(_mm256_srli_epi64(low, 32), ne));
		__m256i c1 = _mm256_add_epi64(ne, _mm256_srli_epi64(nraw, 32));
		uint64_t v[4] __attribute__((aligned(32)));
		uint64_t cn[4] __attribute__((aligned(32)));
		_mm256_store_si256((__m256i *)(void *)v, r1);
		_mm256_store_si256((__m256i *)(void *)cn, c1);
		for (int j = 0; j < 4; j++) {
			unsigned nl = cn[j] < 32 ? (unsigned)cn[j] : 32;
			ulp_bitw_put(bw, v[j] & 0xffffffffu, nl);
			ulp_bitw_put(bw, v[j] >> 32, (unsigned)cn[j] - nl);
			bits += cn[j];
		}
	}
	*raw_bits += bits;
	return i;
}

ULP_AVX2 size_t ulp_sa16_pass_avx2(const uint8_t *cur, size_t n, unsigned mbits,
                                   unsigned emask, unsigned topbits, uint8_t *a,
                                   uint8_t *b, ulp_bitw *bw)
{
	const unsigned lowm = mbits - topbits;
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	const __m128i cl = _mm_cvtsi32_si128((int)lowm);
	const __m256i em = _mm256_set1_epi32((int)emask);
	const __m256i mm = _mm256_set1_epi32((int)((1u << mbits) - 1));
	const __m256i lm = _mm256_set1_epi32((int)((1u << lowm) - 1));
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	const __m256i nraw = _mm256_set1_epi32((int)lowm);
	const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1, -1, -1, 0, 4,
	                                      8, 12, -1, -1, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1);
	const __m256i halves = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i c = _mm256_cvtepu16_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(cur + 2 * i)));
		__m256i e = _mm256_and_si256(_mm256_srl_epi32(c, cm), em);
		__m256i m = _mm256_and_si256(c, mm);
		__m256i sb = _mm256_or_si256(
			_mm256_slli_epi32(_mm256_srli_epi32(c, 15),
		                          (int)topbits),
			_mm256_srl_epi32(m, cl));
		__m256i low = _mm256_and_si256(m, lm);
		__m256i ap = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(e, pick), halves);
		__m256i bp = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(sb, pick), halves);
		_mm_storel_epi64((__m128i *)(void *)(a + i),
		                 _mm256_castsi256_si128(ap));
		_mm_storel_epi64((__m128i *)(void *)(b + i),
		                 _mm256_castsi256_si128(bp));
		/* eight fixed-width fields into two runs (8 x 13 bits at most
		 * for the 16-bit formats) */
		__m256i r1 = _mm256_or_si256(
			_mm256_and_si256(low, lo32),
			_mm256_sllv_epi64(_mm256_srli_epi64(low, 32),
		                          _mm256_and_si256(nraw, lo32)));
		__m256i r2 = _mm256_or_si256(
			r1, _mm256_sll_epi64(_mm256_srli_si256(r1, 8),
		                             _mm_cvtsi32_si128(2 * (int)lowm)));
		ulp_bitw_put(bw, (uint64_t)_mm256_extract_epi64(r2, 0),
		             4 * lowm);
		ulp_bitw_put(bw, (uint64_t)_mm256_extract_epi64(r2, 2),
		             4 * lowm);
	}
	return i;
}

ULP_AVX2 size_t ulp_delta32_avx2(const uint8_t *sym, const uint8_t *rawp,
                                 size_t rawlen, const uint8_t *ref, size_t n,
                                 uint8_t *dst, uint64_t *posp)
{
	const __m256i one = _mm256_set1_epi32(1);
	const __m256i two = _mm256_set1_epi32(2);
	const __m256i sb = _mm256_set1_epi32((int)0x80000000u);
	const __m256i zero = _mm256_setzero_si256();
	const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	uint64_t pos = *posp;
	size_t i = 0;
	/* a step reads at most 8 x 30 raw bits past pos, 8 bytes a lane */
	for (; i + 8 <= n && (pos >> 3) + 48 <= rawlen; i += 8) {
		__m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			(const __m128i *)(const void *)(sym + i)));
		__m256i t = _mm256_add_epi32(s, _mm256_set1_epi32(5));
		__m256i nraw = _mm256_max_epi32(
			_mm256_sub_epi32(_mm256_srli_epi32(t, 2), two), zero);
		__m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(3), s);
		__m256i lead = _mm256_sllv_epi32(
			_mm256_or_si256(two, _mm256_and_si256(t, one)), nraw);
		lead = _mm256_blendv_epi8(lead, _mm256_min_epi32(s, one),
		                          small);
		__m256i ng = _mm256_and_si256(_mm256_srli_epi32(t, 1), one);
		ng = _mm256_andnot_si256(_mm256_cmpeq_epi32(s, one), ng);
		__m256i neg = _mm256_sub_epi32(zero, ng);

		__m256i inc =
			_mm256_add_epi32(nraw, _mm256_slli_si256(nraw, 4));
		inc = _mm256_add_epi32(inc, _mm256_slli_si256(inc, 8));
		__m256i lo3 = _mm256_shuffle_epi32(inc, 0xff);
		inc = _mm256_add_epi32(inc, _mm256_permute2x128_si256(lo3, lo3,
		                                                      0x08));
		__m256i bp = _mm256_add_epi32(_mm256_set1_epi32((int)pos),
		                              _mm256_sub_epi32(inc, nraw));
		/* up to 7 + 30 bits per lane: 64-bit words, by scalar loads
		 * (see load8_at's note on gathers) */
		uint32_t o[8] __attribute__((aligned(32)));
		uint64_t wv[8] __attribute__((aligned(32)));
		_mm256_store_si256((__m256i *)(void *)o,
		                   _mm256_srli_epi32(bp, 3));
		for (int j = 0; j < 8; j++)
			memcpy(&wv[j], rawp + o[j], 8);
		__m256i sh = _mm256_and_si256(bp, _mm256_set1_epi32(7));
		__m256i w0 = _mm256_srlv_epi64(
			_mm256_load_si256((const __m256i *)(const void *)wv),
			_mm256_cvtepu32_epi64(_mm256_castsi256_si128(sh)));
		__m256i w1 = _mm256_srlv_epi64(
			_mm256_load_si256(
				(const __m256i *)(const void *)(wv + 4)),
			_mm256_cvtepu32_epi64(_mm256_extracti128_si256(sh, 1)));
		w0 = _mm256_permutevar8x32_epi32(w0, even);
		w1 = _mm256_permutevar8x32_epi32(w1, even);
		__m256i word = _mm256_inserti128_si256(
			w0, _mm256_castsi256_si128(w1), 1);
		__m256i low = _mm256_and_si256(
			word,
			_mm256_sub_epi32(_mm256_sllv_epi32(one, nraw), one));
		__m256i mag = _mm256_or_si256(lead, low);
		__m256i d = _mm256_sub_epi32(_mm256_xor_si256(mag, neg), neg);

		__m256i r = _mm256_loadu_si256(
			(const __m256i *)(const void *)(ref + 4 * i));
		__m256i ordr = _mm256_xor_si256(
			r, _mm256_or_si256(_mm256_srai_epi32(r, 31), sb));
		__m256i oo = _mm256_add_epi32(ordr, d);
		__m256i um = _mm256_or_si256(
			_mm256_sub_epi32(_mm256_srli_epi32(oo, 31), one), sb);
		_mm256_storeu_si256((__m256i *)(void *)(dst + 4 * i),
		                    _mm256_xor_si256(oo, um));
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

ULP_AVX2 size_t ulp_sa16_avx2(const uint8_t *a, const uint8_t *b,
                              const uint8_t *rawp, size_t rawlen, size_t n,
                              unsigned mbits, unsigned topbits, uint8_t *dst)
{
	const unsigned lowm = mbits - topbits;
	const __m256i zero = _mm256_setzero_si256();
	const __m256i lm = _mm256_set1_epi32((int)((1u << lowm) - 1));
	const __m256i tm = _mm256_set1_epi32((int)((1u << topbits) - 1));
	const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	const __m256i sh0 = _mm256_setr_epi64x(0, lowm, 2 * lowm, 3 * lowm);
	const __m256i sh1 =
		_mm256_setr_epi64x(4 * lowm, 5 * lowm, 6 * lowm, 7 * lowm);
	const __m128i ct = _mm_cvtsi32_si128((int)topbits);
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	const __m128i cl = _mm_cvtsi32_si128((int)lowm);
	size_t i = 0;
	/* eight elements' raw bits are 8 x lowm <= 56 bits starting on a
	 * byte boundary: one 64-bit load */
	for (; i + 8 <= n && (i / 8) * lowm + 8 <= rawlen; i += 8) {
		uint64_t word;
		memcpy(&word, rawp + (i / 8) * lowm, 8);
		__m256i wv = _mm256_set1_epi64x((long long)word);
		__m256i f0 = _mm256_permutevar8x32_epi32(
			_mm256_srlv_epi64(wv, sh0), even);
		__m256i f1 = _mm256_permutevar8x32_epi32(
			_mm256_srlv_epi64(wv, sh1), even);
		__m256i raw = _mm256_and_si256(
			_mm256_inserti128_si256(f0, _mm256_castsi256_si128(f1),
		                                1),
			lm);
		__m256i av = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			(const __m128i *)(const void *)(a + i)));
		__m256i bv = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			(const __m128i *)(const void *)(b + i)));
		__m256i c = _mm256_or_si256(
			_mm256_or_si256(
				_mm256_slli_epi32(_mm256_srl_epi32(bv, ct), 15),
				_mm256_sll_epi32(av, cm)),
			_mm256_or_si256(
				_mm256_sll_epi32(_mm256_and_si256(bv, tm), cl),
				raw));
		c = _mm256_permute4x64_epi64(_mm256_packus_epi32(c, zero),
		                             0x08);
		_mm_storeu_si128((__m128i *)(void *)(dst + 2 * i),
		                 _mm256_castsi256_si128(c));
	}
	return i;
}

ULP_AVX2 size_t ulp_sa32_pass_avx2(const uint8_t *cur, size_t n, uint8_t *a,
                                   uint8_t *b, ulp_bitw *bw)
{
	/* fp32: 8 exponent bits, sign and 3 mantissa bits, 20 raw bits */
	const __m256i m20 = _mm256_set1_epi32((1 << 20) - 1);
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1, -1, -1, 0, 4,
	                                      8, 12, -1, -1, -1, -1, -1, -1, -1,
	                                      -1, -1, -1, -1, -1);
	const __m256i halves = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i c = _mm256_loadu_si256(
			(const __m256i *)(const void *)(cur + 4 * i));
		__m256i e = _mm256_and_si256(_mm256_srli_epi32(c, 23),
		                             _mm256_set1_epi32(0xff));
		__m256i sb = _mm256_or_si256(
			_mm256_slli_epi32(_mm256_srli_epi32(c, 31), 3),
			_mm256_and_si256(_mm256_srli_epi32(c, 20),
		                         _mm256_set1_epi32(7)));
		__m256i low = _mm256_and_si256(c, m20);
		__m256i ap = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(e, pick), halves);
		__m256i bp = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(sb, pick), halves);
		_mm_storel_epi64((__m128i *)(void *)(a + i),
		                 _mm256_castsi256_si128(ap));
		_mm_storel_epi64((__m128i *)(void *)(b + i),
		                 _mm256_castsi256_si128(bp));
		/* pairs of 20-bit fields into four runs of 40 bits */
		__m256i r1 = _mm256_or_si256(
			_mm256_and_si256(low, lo32),
			_mm256_slli_epi64(_mm256_srli_epi64(low, 32), 20));
		ulp_bitw_put(bw, (uint64_t)_mm256_extract_epi64(r1, 0), 40);
		ulp_bitw_put(bw, (uint64_t)_mm256_extract_epi64(r1, 1), 40);
		ulp_bitw_put(bw, (uint64_t)_mm256_extract_epi64(r1, 2), 40);
		ulp_bitw_put(bw, (uint64_t)_mm256_extract_epi64(r1, 3), 40);
	}
	return i;
}
