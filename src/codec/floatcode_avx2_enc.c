/*
 * floatcode_avx2_enc.c - AVX2 encoding passes of the float codec: the
 * delta pass (16 and 32 bits) and the standalone pass (16 and 32 bits).
 *
 * Eight elements per step: symbols and contexts (or exponents and
 * sign/top-mantissa symbols) stored as bytes, the raw bits merged
 * pairwise in 64-bit lanes into a few runs for the bit writer.  The bytes
 * are the portable passes', which finish what these leave.
 */
#include "floatcode_avx2.h"

ULP_AVX2_INLINE __m256i bitlen32(__m256i mag)
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

/* Histogram counting fused into the passes: the eight cells
 * ctx * nsym + sym of a step (standalone: exponent * nb + second symbol) leave the register by one store and are
 * counted into four interleaved partial histograms (cell * 4 + lane % 4),
 * so that runs of one symbol do not serialise on one counter; a second
 * pass over the byte arrays would load both again and combine them.  The
 * lowest and highest context seen bound the rows the caller must sum. */
typedef struct delta_count {
	uint32_t *h4;
	__m256i nsym, cmin, cmax;
} delta_count;

ULP_AVX2_INLINE delta_count count_init(uint32_t *h4, unsigned nsym)
{
	delta_count dc = { h4, _mm256_set1_epi32((int)nsym),
		           _mm256_set1_epi32(255), _mm256_setzero_si256() };
	return dc;
}

/* With via_memory the cells come back by eight scalar loads instead of
 * the eight two-uop extracts the compiler would otherwise make of them:
 * faster in the delta passes, which count one group in four, slower in
 * the standalone ones, which count every group (measured). */
ULP_AVX2_INLINE void count8(delta_count *dc, __m256i cx, __m256i s,
                            const int via_memory)
{
	uint32_t c[8] __attribute__((aligned(32)));
	_mm256_store_si256(
		(__m256i *)(void *)c,
		_mm256_slli_epi32(
			_mm256_add_epi32(_mm256_mullo_epi32(cx, dc->nsym), s),
			2));
	if (via_memory)
		__asm__("" : "+m"(c));
	dc->cmin = _mm256_min_epu32(dc->cmin, cx);
	dc->cmax = _mm256_max_epu32(dc->cmax, cx);
	uint32_t *h4 = dc->h4;
	h4[c[0]]++;
	h4[c[1] + 1]++;
	h4[c[2] + 2]++;
	h4[c[3] + 3]++;
	h4[c[4]]++;
	h4[c[5] + 1]++;
	h4[c[6] + 2]++;
	h4[c[7] + 3]++;
}

/* Mark the rows between the lowest and the highest context counted. */
ULP_AVX2_INLINE void count_finish(const delta_count *dc, size_t done,
                                  uint8_t *used)
{
	uint32_t lo[8] __attribute__((aligned(32)));
	uint32_t hi[8] __attribute__((aligned(32)));
	if (!done)
		return;
	_mm256_store_si256((__m256i *)(void *)lo, dc->cmin);
	_mm256_store_si256((__m256i *)(void *)hi, dc->cmax);
	uint32_t a = lo[0], b = hi[0];
	for (int k = 1; k < 8; k++) {
		a = lo[k] < a ? lo[k] : a;
		b = hi[k] > b ? hi[k] : b;
	}
	memset(used + a, 1, b - a + 1);
}

ULP_AVX2 size_t ulp_delta16_pass_avx2(const uint8_t *cur, const uint8_t *ref,
                                      size_t n, unsigned mbits, unsigned emask,
                                      uint8_t *sym, uint8_t *ctx, ulp_bitw *bw,
                                      uint64_t *raw_bits, uint32_t *h4,
                                      unsigned nsym, uint8_t *used, int sampled)
{
	delta_count dc = count_init(h4, nsym);
	/* the writer's state in registers: through bw, every histogram
	 * increment (a store to unsigned ints) would reload it */
	ulp_bitw w = *bw;
	const __m256i m16 = _mm256_set1_epi32(0xffff);
	const __m256i em = _mm256_set1_epi32((int)emask);
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	uint64_t bits = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i r = v8_u16(ref + 2 * i);
		__m256i diff = _mm256_and_si256(
			_mm256_sub_epi32(v8_ord16(v8_u16(cur + 2 * i)),
		                         v8_ord16(r)),
			m16);
		__m256i ng, nraw;
		__m256i mag =
			_mm256_and_si256(v8_magnitude(diff, 15, &ng), m16);
		/* bit length from the exponent of the exact float of mag */
		__m256i k = _mm256_max_epi32(
			_mm256_sub_epi32(
				_mm256_srli_epi32(
					_mm256_castps_si256(
						_mm256_cvtepi32_ps(mag)),
					23),
				_mm256_set1_epi32(126)),
			_mm256_setzero_si256());
		__m256i sv = v8_symbol(mag, k, ng, &nraw);
		__m256i cx = _mm256_and_si256(_mm256_srl_epi32(r, cm), em);
		v8_store_u8(sym + i, sv);
		v8_store_u8(ctx + i, cx);
		if (!sampled || ulp_delta_group_counted(i / 8))
			count8(&dc, cx, sv, 1);
		/* raw bits: pairs of lanes, then pairs of pairs, into two
		 * runs of at most 56 bits */
		__m256i c1,
			r1 = v8_merge_pairs(v8_low_bits(mag, nraw), nraw, &c1);
		__m256i r2 = _mm256_or_si256(
			r1, _mm256_sllv_epi64(_mm256_srli_si256(r1, 8), c1));
		__m256i c2 = _mm256_add_epi64(c1, _mm256_srli_si256(c1, 8));
		unsigned n0 = (unsigned)_mm256_extract_epi64(c2, 0);
		unsigned n1 = (unsigned)_mm256_extract_epi64(c2, 2);
		ulp_bitw_put(&w, (uint64_t)_mm256_extract_epi64(r2, 0), n0);
		ulp_bitw_put(&w, (uint64_t)_mm256_extract_epi64(r2, 2), n1);
		bits += n0 + n1;
	}
	*bw = w;
	count_finish(&dc, i, used);
	*raw_bits += bits;
	return i;
}

ULP_AVX2 size_t ulp_delta32_pass_avx2(const uint8_t *cur, const uint8_t *ref,
                                      size_t n, uint8_t *sym, uint8_t *ctx,
                                      ulp_bitw *bw, uint64_t *raw_bits,
                                      uint32_t *h4, unsigned nsym,
                                      uint8_t *used, int sampled)
{
	delta_count dc = count_init(h4, nsym);
	ulp_bitw w = *bw; /* in registers, as in ulp_delta16_pass_avx2 */
	uint64_t bits = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i c = _mm256_loadu_si256(
			(const __m256i *)(const void *)(cur + 4 * i));
		__m256i r = _mm256_loadu_si256(
			(const __m256i *)(const void *)(ref + 4 * i));
		__m256i ng, nraw;
		__m256i mag = v8_magnitude(
			_mm256_sub_epi32(v8_ord32(c), v8_ord32(r)), 31, &ng);
		__m256i sv = v8_symbol(mag, bitlen32(mag), ng, &nraw);
		__m256i cx = _mm256_and_si256(_mm256_srli_epi32(r, 23),
		                              _mm256_set1_epi32(0xff));
		v8_store_u8(sym + i, sv);
		v8_store_u8(ctx + i, cx);
		if (!sampled || ulp_delta_group_counted(i / 8))
			count8(&dc, cx, sv, 1);
		/* raw bits: pairs of lanes into four runs of at most 60
		 * bits, each one put in word mode (the puts' chain through
		 * the writer's state bounded this loop at eight pieces) */
		__m256i c1,
			r1 = v8_merge_pairs(v8_low_bits(mag, nraw), nraw, &c1);
		uint64_t v[4] __attribute__((aligned(32)));
		uint64_t cn[4] __attribute__((aligned(32)));
		_mm256_store_si256((__m256i *)(void *)v, r1);
		_mm256_store_si256((__m256i *)(void *)cn, c1);
		for (int j = 0; j < 4; j++) {
			ulp_bitw_put_word(&w, v[j], (unsigned)cn[j]);
			bits += cn[j];
		}
	}
	ulp_bitw_word_end(&w);
	*bw = w;
	count_finish(&dc, i, used);
	*raw_bits += bits;
	return i;
}

ULP_AVX2 size_t ulp_sa16_pass_avx2(const uint8_t *cur, size_t n, unsigned mbits,
                                   unsigned emask, unsigned topbits, uint8_t *a,
                                   uint8_t *b, ulp_bitw *bw, uint32_t *h4,
                                   uint8_t *used, int sampled)
{
	if (bw->fill || mbits - topbits > 7)
		return 0; /* the steps below write whole bytes */
	delta_count dc = count_init(h4, 2u << topbits);
	const unsigned lowm = mbits - topbits;
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	const __m128i cl = _mm_cvtsi32_si128((int)lowm);
	const __m256i em = _mm256_set1_epi32((int)emask);
	const __m256i mm = _mm256_set1_epi32((int)((1u << mbits) - 1));
	const __m256i lm = _mm256_set1_epi32((int)((1u << lowm) - 1));
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	const __m256i nraw = _mm256_set1_epi32((int)lowm);
	uint8_t *op = bw->p; /* a local: the byte stores would reload bw->p */
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		/* 512 elements ahead: the hardware's prefetch alone left
		 * this pass waiting on its loads (measured: 4% of the bf16
		 * encoding, 24% of fp32's with the same in its pass) */
		_mm_prefetch((const char *)(cur + 2 * i + 1024), _MM_HINT_T0);
		__m256i c = _mm256_cvtepu16_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(cur + 2 * i)));
		__m256i e = _mm256_and_si256(_mm256_srl_epi32(c, cm), em);
		__m256i m = _mm256_and_si256(c, mm);
		__m256i sb = _mm256_or_si256(
			_mm256_slli_epi32(_mm256_srli_epi32(c, 15),
		                          (int)topbits),
			_mm256_srl_epi32(m, cl));
		__m256i low = _mm256_and_si256(m, lm);
		v8_store_u8(a + i, e);
		v8_store_u8(b + i, sb);
		if (!sampled || ulp_delta_group_counted(i / 8))
			count8(&dc, e, sb, 0);
		/* eight fixed-width fields (8 x 7 bits at most for the 16-bit
		 * formats) are lowm whole bytes: one store, and no bit
		 * writer's chain from one step to the next */
		__m256i r1 = _mm256_or_si256(
			_mm256_and_si256(low, lo32),
			_mm256_sllv_epi64(_mm256_srli_epi64(low, 32),
		                          _mm256_and_si256(nraw, lo32)));
		__m256i r2 = _mm256_or_si256(
			r1, _mm256_sll_epi64(_mm256_srli_si256(r1, 8),
		                             _mm_cvtsi32_si128(2 * (int)lowm)));
		uint64_t v = (uint64_t)_mm256_extract_epi64(r2, 0) |
		             (uint64_t)_mm256_extract_epi64(r2, 2)
		                     << (4 * lowm);
		memcpy(op, &v, 8);
		op += lowm;
	}
	bw->p = op;
	count_finish(&dc, i, used);
	return i;
}
ULP_AVX2 size_t ulp_sa32_pass_avx2(const uint8_t *cur, size_t n, uint8_t *a,
                                   uint8_t *b, ulp_bitw *bw, uint32_t *h4,
                                   uint8_t *used, int sampled)
{
	if (bw->fill)
		return 0; /* the steps below write whole bytes */
	delta_count dc = count_init(h4, 16);
	/* fp32: 8 exponent bits, sign and 3 mantissa bits, 20 raw bits */
	const __m256i m20 = _mm256_set1_epi32((1 << 20) - 1);
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
	uint8_t *op = bw->p; /* as in ulp_sa16_pass_avx2 */
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		/* as in ulp_sa16_pass_avx2 */
		_mm_prefetch((const char *)(cur + 4 * i + 2048), _MM_HINT_T0);
		__m256i c = _mm256_loadu_si256(
			(const __m256i *)(const void *)(cur + 4 * i));
		__m256i e = _mm256_and_si256(_mm256_srli_epi32(c, 23),
		                             _mm256_set1_epi32(0xff));
		__m256i sb = _mm256_or_si256(
			_mm256_slli_epi32(_mm256_srli_epi32(c, 31), 3),
			_mm256_and_si256(_mm256_srli_epi32(c, 20),
		                         _mm256_set1_epi32(7)));
		__m256i low = _mm256_and_si256(c, m20);
		v8_store_u8(a + i, e);
		v8_store_u8(b + i, sb);
		if (!sampled || ulp_delta_group_counted(i / 8))
			count8(&dc, e, sb, 0);
		/* pairs of 20-bit fields into four runs of 40 bits, five
		 * whole bytes each: four stores (each one's zero top bytes
		 * overwritten by the next), no bit writer's chain */
		__m256i r1 = _mm256_or_si256(
			_mm256_and_si256(low, lo32),
			_mm256_slli_epi64(_mm256_srli_epi64(low, 32), 20));
		uint64_t v[4] __attribute__((aligned(32)));
		_mm256_store_si256((__m256i *)(void *)v, r1);
		for (int j = 0; j < 4; j++)
			memcpy(op + 5 * j, &v[j], 8);
		op += 20;
	}
	bw->p = op;
	count_finish(&dc, i, used);
	return i;
}
