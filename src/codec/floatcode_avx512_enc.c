/*
 * floatcode_avx512_enc.c - the encoder's delta passes (16 and 32 bits)
 * and its 16-bit standalone pass with AVX-512: 32 elements per step in
 * 16-bit lanes, 16 in 32-bit lanes.
 *
 * The steps of floatcode_avx2_enc.c, wider, with the bit length of a
 * residual from VPLZCNTD (AVX-512CD) instead of a float conversion and
 * the lanes' choices by mask registers instead of blends; the bytes are
 * the portable pass's, which finishes what these leave.
 */
#include <immintrin.h>

#include "bitio.h"
#include "floatcode.h"
#include "rans.h"

#define ULP_AVX512                                                  \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512cd," \
	                      "avx512vbmi,avx512vbmi2,bmi2")))
#define ULP_AVX512_INLINE \
	static inline __attribute__((always_inline)) ULP_AVX512

/* A register to p[0..64) by two 256-bit stores: the scalar loads that
 * read it back forward from those, not from one 512-bit store (measured:
 * those loads were the passes' costliest instructions). */
ULP_AVX512_INLINE void v16_store_halves(void *p, __m512i v)
{
	_mm256_store_si256((__m256i *)p, _mm512_castsi512_si256(v));
	_mm256_store_si256((__m256i *)p + 1, _mm512_extracti64x4_epi64(v, 1));
}

/* The histogram counting of floatcode_avx2_enc.c, with more partial
 * histograms: a run of one cell (unchanged elements of one exponent are
 * the common case) costs a chain of store-to-load forwardings, one per
 * increment, and four partial histograms left the AVX-512 passes bound by
 * those chains (measured).  Lane k counts in way k % ways of hw, each way
 * a whole context-by-symbol table (way-major, so that summing them reads
 * contiguous rows); the lowest and highest context counted bound the rows
 * ways_fold adds to h4. */
typedef struct count16 {
	uint32_t *hw;
	unsigned nsym, ways;
	__m512i vnsym, way, cmin, cmax;
} count16;

ULP_AVX512_INLINE count16 count16_init(uint32_t *hw, unsigned nsym)
{
	count16 dc;
	dc.hw = hw;
	dc.nsym = nsym;
	dc.ways = 16u * ULP_RANS_NCTX * nsym <= ULP_DELTA_WAYS_CELLS ? 16 : 8;
	dc.vnsym = _mm512_set1_epi32((int)nsym);
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
	                                       11, 12, 13, 14, 15);
	dc.way = _mm512_mullo_epi32(
		_mm512_and_si512(lane, _mm512_set1_epi32((int)dc.ways - 1)),
		_mm512_set1_epi32((int)(ULP_RANS_NCTX * nsym)));
	dc.cmin = _mm512_set1_epi32(255);
	dc.cmax = _mm512_setzero_si512();
	return dc;
}

/* Count the lanes 0-7 (lo), 8-15 (hi) or both of cells cx, s. */
ULP_AVX512_INLINE void count16_add(count16 *dc, __m512i cx, __m512i s, int lo,
                                   int hi)
{
	uint32_t c[16] __attribute__((aligned(64)));
	__mmask16 m = (__mmask16)((lo ? 0x00ffu : 0) | (hi ? 0xff00u : 0));
	v16_store_halves(
		c,
		_mm512_add_epi32(
			_mm512_add_epi32(_mm512_mullo_epi32(cx, dc->vnsym), s),
			dc->way));
	/* scalar loads instead of the extracts the compiler would make */
	__asm__("" : "+m"(c));
	dc->cmin = _mm512_mask_min_epu32(dc->cmin, m, dc->cmin, cx);
	dc->cmax = _mm512_mask_max_epu32(dc->cmax, m, dc->cmax, cx);
	uint32_t *hw = dc->hw;
	if (lo)
		for (int k = 0; k < 8; k++)
			hw[c[k]]++;
	if (hi)
		for (int k = 8; k < 16; k++)
			hw[c[k]]++;
}

/* Add the ways of rows a .. b of hw (nsym cells a row) to way 0 of h4
 * (the layout of floatcode.c's hist_d4: cell * 4 + way), zero them
 * again, and mark the rows used. */
ULP_AVX512_INLINE void ways_fold(uint32_t *hw, unsigned nsym, unsigned ways,
                                 uint32_t a, uint32_t b, uint32_t *h4,
                                 uint8_t *used)
{
	const size_t stride = (size_t)ULP_RANS_NCTX * nsym;
	uint32_t sum[ULP_RANS_MAXSYM];
	for (uint32_t c = a; c <= b; c++) {
		uint32_t *row = hw + (size_t)c * nsym;
		memset(sum, 0, sizeof(uint32_t) * nsym);
		for (unsigned k = 0; k < ways; k++, row += stride)
			for (unsigned j = 0; j < nsym; j++) {
				sum[j] += row[j];
				row[j] = 0;
			}
		for (unsigned j = 0; j < nsym; j++)
			h4[((size_t)c * nsym + j) * 4] += sum[j];
		used[c] = 1;
	}
}

ULP_AVX512_INLINE void count16_finish(const count16 *dc, uint32_t *h4,
                                      uint8_t *used)
{
	ways_fold(dc->hw, dc->nsym, dc->ways,
	          (uint32_t)_mm512_reduce_min_epu32(dc->cmin),
	          (uint32_t)_mm512_reduce_max_epu32(dc->cmax), h4, used);
}

/* Symbols (see floatcode_avx2.h) of magnitudes mag with signs ng (0 or
 * 1) and bit lengths k; *nraw receives the raw bit counts. */
ULP_AVX512_INLINE __m512i v16_symbol(__m512i mag, __m512i k, __m512i ng,
                                     __m512i *nraw)
{
	const __m512i one = _mm512_set1_epi32(1);
	*nraw = _mm512_max_epi32(_mm512_sub_epi32(k, _mm512_set1_epi32(2)),
	                         _mm512_setzero_si512());
	__m512i b1 = _mm512_and_si512(_mm512_srlv_epi32(mag, *nraw), one);
	__m512i sbig = _mm512_add_epi32(
		_mm512_sub_epi32(_mm512_slli_epi32(k, 2), _mm512_set1_epi32(5)),
		_mm512_add_epi32(_mm512_add_epi32(ng, ng), b1));
	return _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(k, one),
	                               _mm512_add_epi32(k, ng), sbig);
}

/* The magnitude of the residual diff (of signbit + 1 bits, in 32-bit
 * lanes), its sign in *ng and its bit length in *k. */
ULP_AVX512_INLINE __m512i v16_magnitude(__m512i diff, unsigned signbit,
                                        __m512i *ng, __m512i *k)
{
	*ng = _mm512_srli_epi32(diff, (int)signbit);
	__mmask16 neg = _mm512_test_epi32_mask(*ng, *ng);
	const __m512i wrap = signbit == 31 ? _mm512_setzero_si512()
	                                   : _mm512_set1_epi32(1 << 16);
	__m512i mag = _mm512_mask_sub_epi32(diff, neg, wrap, diff);
	*k = _mm512_sub_epi32(_mm512_set1_epi32(32), _mm512_lzcnt_epi32(mag));
	return mag;
}

/* The low nraw bits of the lanes, pairs of lanes merged into eight
 * 64-bit lanes (field 2j | field 2j+1 << nraw(2j)); *cnt receives each
 * merged lane's bit count. */
ULP_AVX512_INLINE __m512i v16_merge_pairs(__m512i mag, __m512i nraw,
                                          __m512i *cnt)
{
	const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
	__m512i low = _mm512_andnot_si512(
		_mm512_sllv_epi32(_mm512_set1_epi32(-1), nraw), mag);
	__m512i ne = _mm512_and_si512(nraw, lo32);
	*cnt = _mm512_add_epi64(ne, _mm512_srli_epi64(nraw, 32));
	return _mm512_or_si512(_mm512_and_si512(low, lo32),
	                       _mm512_sllv_epi64(_mm512_srli_epi64(low, 32),
	                                         ne));
}

/* Bytes 0 of the sixteen lanes to p[0..16). */
ULP_AVX512_INLINE void v16_store_u8(uint8_t *p, __m512i v)
{
	_mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8(v));
}

/* Elements i .. i + 15 of a delta pass, their residuals' magnitudes mag
 * (signs ng, bit lengths k) and contexts cx known: the symbols and
 * contexts stored, counted (with sampled, in the groups of eight that
 * ulp_delta_group_counted picks); returns the raw bit counts. */
ULP_AVX512_INLINE __m512i v16_emit(count16 *dc, __m512i mag, __m512i k,
                                   __m512i ng, __m512i cx, size_t i,
                                   uint8_t *sym, uint8_t *ctx, int sampled)
{
	__m512i nraw, sv = v16_symbol(mag, k, ng, &nraw);
	v16_store_u8(sym + i, sv);
	v16_store_u8(ctx + i, cx);
	int lo = !sampled || ulp_delta_group_counted(i / 8);
	int hi = !sampled || ulp_delta_group_counted(i / 8 + 1);
	if (lo || hi)
		count16_add(dc, cx, sv, lo, hi);
	return nraw;
}

/* The lanes of a step of 32 elements i .. i + 31 to count: all, or with
 * sampled those of the groups of eight ulp_delta_group_counted picks. */
ULP_AVX512_INLINE __mmask32 v32_counted(size_t i, int sampled)
{
	unsigned gm = 0;
	for (unsigned g = 0; g < 4; g++)
		if (!sampled || ulp_delta_group_counted(i / 8 + g))
			gm |= 0xffu << (8 * g);
	return (__mmask32)gm;
}

/* The low bytes of the 32 words of v to p[0..32). */
ULP_AVX512_INLINE void v32_store_u8(uint8_t *p, __m512i v)
{
	_mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi16_epi8(v));
}

/* The lowest and the highest of the 16-bit lanes of cmin and cmax. */
ULP_AVX512_INLINE void v32_range(__m512i cmin, __m512i cmax, uint32_t *a,
                                 uint32_t *b)
{
	uint16_t lo[32] __attribute__((aligned(64)));
	uint16_t hi[32] __attribute__((aligned(64)));
	_mm512_store_si512((void *)lo, cmin);
	_mm512_store_si512((void *)hi, cmax);
	*a = 255;
	*b = 0;
	for (int l = 0; l < 32; l++) {
		*a = lo[l] < *a ? lo[l] : *a;
		*b = hi[l] > *b ? hi[l] : *b;
	}
}

/* The 16-bit pass works on 32 elements a step in 16-bit lanes, with
 * symbols from a byte table of (k, sign, first bit below the leading
 * one) and cells of 16 bits; lane k counts in way k % 16 of hw. */
#define D16_WAYS 16u
#define D16_NSYM 63u /* DELTA_NSYM(16) in floatcode.c */
#define D16_STRIDE (ULP_RANS_NCTX * D16_NSYM)

ULP_AVX512 size_t ulp_delta16_pass_avx512(
	const uint8_t *cur, const uint8_t *ref, size_t n, unsigned mbits,
	unsigned emask, uint8_t *sym, uint8_t *ctx, ulp_bitw *bw,
	uint64_t *raw_bits, uint32_t *h4, uint32_t *hw, unsigned nsym,
	uint8_t *used, int sampled)
{
	/* symbol of index 4k + 2 sign + b: 0, 1 + sign for k = 1 (b is 1),
	 * index - 5 from k = 2 */
	uint8_t t[128] = { 0 };
	t[5] = 1;
	t[7] = 2;
	for (unsigned x = 8; x < 128; x++)
		t[x] = (uint8_t)(x - 5);
	const __m512i tlo = _mm512_loadu_si512((const void *)t);
	const __m512i thi = _mm512_loadu_si512((const void *)(t + 64));
	if (nsym != D16_NSYM)
		return 0;
	const __m512i sb = _mm512_set1_epi16((short)0x8000);
	const __m512i one = _mm512_set1_epi16(1);
	const __m512i w16 = _mm512_set1_epi32(0xffff);
	const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
	const __m512i em = _mm512_set1_epi16((short)emask);
	const __m512i vnsym = _mm512_set1_epi16((short)nsym);
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	__m512i cmin = _mm512_set1_epi16(255), cmax = _mm512_setzero_si512();
	ulp_bitw w = *bw; /* in registers, as in ulp_delta16_pass_avx2 */
	uint64_t bits = 0;
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512i r = _mm512_loadu_si512((const void *)(ref + 2 * i));
		__m512i c = _mm512_loadu_si512((const void *)(cur + 2 * i));
		/* ord: u ^ (u >> 15 (arithmetic) | sign bit) */
		__m512i oc = _mm512_ternarylogic_epi32(
			c, _mm512_srai_epi16(c, 15), sb, 0x1e);
		__m512i orr = _mm512_ternarylogic_epi32(
			r, _mm512_srai_epi16(r, 15), sb, 0x1e);
		__m512i diff = _mm512_sub_epi16(oc, orr);
		/* |diff| (0x8000 stays 0x8000), its sign, its bit length by
		 * 32-bit leading-zero counts of the even and odd words */
		__m512i mag = _mm512_abs_epi16(diff);
		__m512i ng = _mm512_srli_epi16(diff, 15);
		const __m512i b32 = _mm512_set1_epi32(32);
		__m512i ke = _mm512_sub_epi32(
			b32, _mm512_lzcnt_epi32(_mm512_and_si512(mag, w16)));
		__m512i ko = _mm512_sub_epi32(
			b32, _mm512_lzcnt_epi32(_mm512_srli_epi32(mag, 16)));
		__m512i k = _mm512_or_si512(ke, _mm512_slli_epi32(ko, 16));
		__m512i nraw = _mm512_subs_epu16(k, _mm512_set1_epi16(2));
		__m512i b1 =
			_mm512_and_si512(_mm512_srlv_epi16(mag, nraw), one);
		__m512i idx = _mm512_ternarylogic_epi32(
			_mm512_slli_epi16(k, 2), _mm512_add_epi16(ng, ng), b1,
			0xfe);
		/* the index's high bytes are 0, which t maps to 0 */
		__m512i sv = _mm512_permutex2var_epi8(tlo, idx, thi);
		__m512i cx = _mm512_and_si512(_mm512_srl_epi16(r, cm), em);
		v32_store_u8(sym + i, sv);
		v32_store_u8(ctx + i, cx);
		/* the groups of eight counted */
		const __mmask32 gm = v32_counted(i, sampled);
		if (gm) {
			uint16_t cl[32] __attribute__((aligned(64)));
			v16_store_halves(
				cl, _mm512_add_epi16(
					    _mm512_mullo_epi16(cx, vnsym), sv));
			__asm__("" : "+m"(cl));
			cmin = _mm512_mask_min_epu16(cmin, gm, cmin, cx);
			cmax = _mm512_mask_max_epu16(cmax, gm, cmax, cx);
			/* unrolled, each lane's way is a constant offset */
#pragma GCC unroll 4
			for (unsigned g = 0; g < 4; g++) {
				if (!(gm >> (8 * g) & 1))
					continue;
#pragma GCC unroll 8
				for (unsigned k8 = 0; k8 < 8; k8++) {
					unsigned l = 8 * g + k8;
					hw[(l % D16_WAYS) * D16_STRIDE +
					   cl[l]]++;
				}
			}
		}
		/* raw bits: pairs of words, pairs of dwords, into eight runs
		 * of at most 56 bits */
		__m512i low = _mm512_andnot_si512(
			_mm512_sllv_epi16(_mm512_set1_epi16(-1), nraw), mag);
		__m512i ne = _mm512_and_si512(nraw, w16);
		__m512i c1 = _mm512_add_epi32(ne, _mm512_srli_epi32(nraw, 16));
		__m512i r1 = _mm512_or_si512(
			_mm512_and_si512(low, w16),
			_mm512_sllv_epi32(_mm512_srli_epi32(low, 16), ne));
		__m512i ne2 = _mm512_and_si512(c1, lo32);
		__m512i c2 = _mm512_add_epi64(ne2, _mm512_srli_epi64(c1, 32));
		__m512i r2 = _mm512_or_si512(
			_mm512_and_si512(r1, lo32),
			_mm512_sllv_epi64(_mm512_srli_epi64(r1, 32), ne2));
		uint64_t v[8] __attribute__((aligned(64)));
		uint64_t cn[8] __attribute__((aligned(64)));
		v16_store_halves(v, r2);
		v16_store_halves(cn, c2);
		for (int j = 0; j < 8; j++) {
			ulp_bitw_put(&w, v[j], (unsigned)cn[j]);
			bits += cn[j];
		}
	}
	*bw = w;
	if (i) {
		uint32_t a, b;
		v32_range(cmin, cmax, &a, &b);
		ways_fold(hw, nsym, D16_WAYS, a, b, h4, used);
	}
	*raw_bits += bits;
	return i;
}

ULP_AVX512 size_t ulp_delta32_pass_avx512(
	const uint8_t *cur, const uint8_t *ref, size_t n, uint8_t *sym,
	uint8_t *ctx, ulp_bitw *bw, uint64_t *raw_bits, uint32_t *h4,
	uint32_t *hw, unsigned nsym, uint8_t *used, int sampled)
{
	count16 dc = count16_init(hw, nsym);
	ulp_bitw w = *bw; /* in registers, as in ulp_delta16_pass_avx2 */
	const __m512i sb = _mm512_set1_epi32((int)0x80000000u);
	uint64_t bits = 0;
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i c = _mm512_loadu_si512((const void *)(cur + 4 * i));
		__m512i r = _mm512_loadu_si512((const void *)(ref + 4 * i));
		/* ord: x ^ (x >> 31 (arithmetic) | sign bit) */
		__m512i oc = _mm512_xor_si512(
			c, _mm512_or_si512(_mm512_srai_epi32(c, 31), sb));
		__m512i orr = _mm512_xor_si512(
			r, _mm512_or_si512(_mm512_srai_epi32(r, 31), sb));
		__m512i ng, k;
		__m512i mag =
			v16_magnitude(_mm512_sub_epi32(oc, orr), 31, &ng, &k);
		__m512i cx = _mm512_and_si512(_mm512_srli_epi32(r, 23),
		                              _mm512_set1_epi32(0xff));
		__m512i nraw =
			v16_emit(&dc, mag, k, ng, cx, i, sym, ctx, sampled);
		/* raw bits: pairs of lanes into eight runs of at most 60
		 * bits, each put in word mode (as ulp_delta32_pass_avx2) */
		__m512i c1, r1 = v16_merge_pairs(mag, nraw, &c1);
		uint64_t v[8] __attribute__((aligned(64)));
		uint64_t cn[8] __attribute__((aligned(64)));
		v16_store_halves(v, r1);
		v16_store_halves(cn, c1);
		for (int j = 0; j < 8; j++) {
			ulp_bitw_put_word(&w, v[j], (unsigned)cn[j]);
			bits += cn[j];
		}
	}
	ulp_bitw_word_end(&w);
	*bw = w;
	if (i)
		count16_finish(&dc, h4, used);
	*raw_bits += bits;
	return i;
}

/* The standalone pass of ulp_sa16_pass_avx2, 32 elements a step in
 * 16-bit lanes: a step's raw fields are 4 * lowm whole bytes, packed from
 * the four 128-bit lanes by a VBMI2 byte compress into one masked store
 * (measured: f16 keyframes 0.90 -> 0.98 of zstd -3's encode). */
ULP_AVX512 size_t ulp_sa16_pass_avx512(const uint8_t *cur, size_t n,
                                       unsigned mbits, unsigned emask,
                                       unsigned topbits, uint8_t *a, uint8_t *b,
                                       ulp_bitw *bw, uint32_t *h4,
                                       uint8_t *used, int sampled)
{
	const unsigned lowm = mbits - topbits;
	if (bw->fill || lowm > 7 || lowm == 0)
		return 0; /* the steps below write whole bytes */
	const __m128i cm = _mm_cvtsi32_si128((int)mbits);
	const __m128i cl = _mm_cvtsi32_si128((int)lowm);
	const __m128i ct = _mm_cvtsi32_si128((int)topbits);
	const __m128i cw = _mm_cvtsi32_si128((int)lowm * 2);
	const __m128i cq = _mm_cvtsi32_si128((int)lowm * 4);
	const __m128i cc = _mm_cvtsi32_si128((int)topbits + 3);
	const __m512i em = _mm512_set1_epi16((short)emask);
	const __m512i mm = _mm512_set1_epi16((short)((1u << mbits) - 1));
	const __m512i lm = _mm512_set1_epi16((short)((1u << lowm) - 1));
	const __m512i w16 = _mm512_set1_epi32(0xffff);
	const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
	/* lane l counts in way l % 4 of h4 (cell * 4 + way) */
	const __m512i way = _mm512_and_si512(
		_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
	                         19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8,
	                         7, 6, 5, 4, 3, 2, 1, 0),
		_mm512_set1_epi16(3));
	/* the first lowm bytes of each 128-bit lane: a step's raw bytes */
	const __mmask64 rawm = 0x0001000100010001ull * ((1u << lowm) - 1);
	__m512i cmin = _mm512_set1_epi16(255), cmax = _mm512_setzero_si512();
	uint8_t *op = bw->p;
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		/* as in ulp_sa16_pass_avx2: the hardware's prefetch alone
		 * left the pass waiting on its loads */
		_mm_prefetch((const char *)(cur + 2 * i + 1024), _MM_HINT_T0);
		__m512i c = _mm512_loadu_si512((const void *)(cur + 2 * i));
		__m512i e = _mm512_and_si512(_mm512_srl_epi16(c, cm), em);
		__m512i m = _mm512_and_si512(c, mm);
		__m512i sb = _mm512_or_si512(
			_mm512_sll_epi16(_mm512_srli_epi16(c, 15), ct),
			_mm512_srl_epi16(m, cl));
		v32_store_u8(a + i, e);
		v32_store_u8(b + i, sb);
		const __mmask32 gm = v32_counted(i, sampled);
		if (gm) {
			/* (e * nb + sb) * 4 + way, nb = 2 << topbits */
			uint16_t cl16[32] __attribute__((aligned(64)));
			v16_store_halves(
				cl16, _mm512_or_si512(
					      _mm512_or_si512(
						      _mm512_sll_epi16(e, cc),
						      _mm512_slli_epi16(sb, 2)),
					      way));
			__asm__("" : "+m"(cl16));
			cmin = _mm512_mask_min_epu16(cmin, gm, cmin, e);
			cmax = _mm512_mask_max_epu16(cmax, gm, cmax, e);
#pragma GCC unroll 4
			for (unsigned g = 0; g < 4; g++) {
				if (!(gm >> (8 * g) & 1))
					continue;
#pragma GCC unroll 8
				for (unsigned k8 = 0; k8 < 8; k8++)
					h4[cl16[8 * g + k8]]++;
			}
		}
		/* the lowm-bit fields merged: word pairs, dword pairs, then
		 * qword pairs, each 128-bit lane's eight fields in its low
		 * lowm bytes; those of the four lanes packed and stored */
		__m512i low = _mm512_and_si512(m, lm);
		__m512i r1 = _mm512_or_si512(
			_mm512_and_si512(low, w16),
			_mm512_sll_epi32(_mm512_srli_epi32(low, 16), cl));
		__m512i r2 = _mm512_or_si512(
			_mm512_and_si512(r1, lo32),
			_mm512_sll_epi64(_mm512_srli_epi64(r1, 32), cw));
		__m512i r3 = _mm512_or_si512(
			r2, _mm512_sll_epi64(_mm512_bsrli_epi128(r2, 8), cq));
		_mm512_mask_storeu_epi8(op, (__mmask64)~0ull >> (64 - 4 * lowm),
		                        _mm512_maskz_compress_epi8(rawm, r3));
		op += 4 * lowm;
	}
	bw->p = op;
	if (i) {
		uint32_t x, y;
		v32_range(cmin, cmax, &x, &y);
		if (x <= y)
			memset(used + x, 1, y - x + 1);
	}
	return i;
}
