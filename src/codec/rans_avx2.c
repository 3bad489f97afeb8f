/*
 * rans_avx2.c - 32- and 64-lane rANS with AVX2: four registers of eight
 * states a set of 32, stepped in turn so that one register's loads overlap
 * the others' arithmetic.
 *
 * The bitstream is the portable coder's: symbol i is coded by lane i % W
 * and the renormalisation words are read in symbol order, so a 64-lane
 * block is groups of 32 symbols coded by two sets of states in turn.
 * Decoding, the lanes of a register that fall below L take the next words
 * in lane order: eight words are loaded, widened, and moved to those lanes
 * by a permutation computed with PDEP from the lane mask (BMI2), then the
 * input advances by two bytes per such lane.  Encoding walks backwards and
 * compacts the emitting lanes' words with PEXT the same way.
 *
 * Compiled for the baseline target; only these functions are built for
 * AVX2 + BMI2, and they run only where ulp_rans_simd() found both.
 */
#include <immintrin.h>

#include "rans_avx2.h"

#define ULP_AVX2 __attribute__((target("avx2,bmi2")))

/* One decoding step of eight lanes; returns the new states and leaves the
 * eight symbols (one per 32-bit lane, in bits 0-7) in *s.  Each lane's
 * table entry is flat[off[ctx[k]] + slot]: the slots leave the register
 * by one store and the entries come back by scalar loads and inserts.
 * Adding the table offsets in scalar code spares the eight inserts a
 * vector of offsets would cost (without AVX-512's byte permutations). */
static inline __attribute__((always_inline)) ULP_AVX2 __m256i
dec8(__m256i x, const uint8_t *ctx, const uint32_t *off, const uint32_t *flat,
     const uint8_t **pp, __m256i *s)
{
	const __m256i mmask = _mm256_set1_epi32(ULP_RANS_M - 1);
	const __m256i lm1 = _mm256_set1_epi32(ULP_RANS_L - 1);
	uint32_t ix[8] __attribute__((aligned(32)));
	_mm256_store_si256((__m256i *)(void *)ix, _mm256_and_si256(x, mmask));
	__m256i e;
	if (ctx)
		e = _mm256_setr_epi32((int)flat[off[ctx[0]] + ix[0]],
		                      (int)flat[off[ctx[1]] + ix[1]],
		                      (int)flat[off[ctx[2]] + ix[2]],
		                      (int)flat[off[ctx[3]] + ix[3]],
		                      (int)flat[off[ctx[4]] + ix[4]],
		                      (int)flat[off[ctx[5]] + ix[5]],
		                      (int)flat[off[ctx[6]] + ix[6]],
		                      (int)flat[off[ctx[7]] + ix[7]]);
	else
		e = ulp_rans_load8_avx2(flat + off[0], ix);
	x = ulp_rans_advance8_avx2(x, e);
	*s = _mm256_srli_epi32(e, 24);
	/* lanes with x < L read a word: x <= L - 1 as unsigned */
	__m256i need = _mm256_cmpeq_epi32(_mm256_min_epu32(x, lm1), x);
	unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
	/* lane j (bit j of m set) takes word popcount(m & ((1 << j) - 1)):
	 * PDEP spreads the indices 0, 1, 2, ... over the set lanes' bytes */
	uint64_t bytes = _pdep_u64(m, 0x0101010101010101ull) * 0xff;
	uint64_t perm = _pdep_u64(0x0706050403020100ull, bytes);
	__m256i pv = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)perm));
	__m256i w = _mm256_cvtepu16_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)*pp));
	w = _mm256_permutevar8x32_epi32(w, pv);
	__m256i xs = _mm256_or_si256(_mm256_slli_epi32(x, 16), w);
	*pp += 2 * (unsigned)__builtin_popcount(m);
	return _mm256_blendv_epi8(x, xs, need);
}

/* Groups of 32 symbols (sets 1) or 64 (sets 2: a 64-lane block, its
 * two halves' states independent). */
static inline __attribute__((always_inline)) ULP_AVX2 size_t
dec_wide(ulp_rans_dec *d, const uint8_t *ctx, size_t n, uint8_t *sym,
         const unsigned sets)
{
	const uint32_t *flat = d->flat, *off = d->off;
	const uint8_t *p = d->p;
	const size_t L = 32 * sets;
	__m256i x[8];
	ulp_rans_x_load_avx2(d->x, x, 4 * sets);
	size_t i = 0;
	/* each register step reads at most 16 bytes (8 words, some unused)
	 * and consumes at most 16: four a set stay within 64 */
	for (; i + L <= n && (size_t)(d->end - p) >= 2 * L; i += L) {
		const uint8_t *c = ctx ? ctx + i : NULL;
		__m256i s[8];
#pragma GCC unroll 8
		for (unsigned k = 0; k < 4 * sets; k++)
			x[k] = dec8(x[k], c ? c + 8 * k : NULL, off, flat, &p,
			            &s[k]);
		ulp_rans_syms_avx2(sym + i, s, 4 * sets);
	}
	ulp_rans_x_store_avx2(d->x, x, 4 * sets);
	d->p = p;
	return i;
}

ULP_AVX2 size_t ulp_rans_dec32_avx2(ulp_rans_dec *d, const uint8_t *ctx,
                                    size_t n, uint8_t *sym)
{
	return d->lanes == 64 ? dec_wide(d, ctx, n, sym, 2)
	                      : dec_wide(d, ctx, n, sym, 1);
}

/* One encoding step of eight lanes (symbols j .. j + 7), the lanes
 * emitting words in the order the decoder reads them; escaped symbols'
 * indices go to escv. */
static inline __attribute__((always_inline)) ULP_AVX2 __m256i
enc8(__m256i x, const ulp_rans_esym *const *eb, const uint8_t *sym,
     const uint8_t *ctx, size_t j, uint16_t **wp, uint32_t *escv, size_t *nesc,
     const int esc)
{
	__m128i v[8];
	for (int k = 0; k < 8; k++)
		v[k] = _mm_loadu_si128(
			(const __m128i *)(const void *)(eb[ctx ? ctx[k] : 0] +
		                                        sym[k]));
	/* transpose the eight 16-byte entries into four field vectors */
	__m256i a0 =
		_mm256_inserti128_si256(_mm256_castsi128_si256(v[0]), v[4], 1);
	__m256i a1 =
		_mm256_inserti128_si256(_mm256_castsi128_si256(v[1]), v[5], 1);
	__m256i a2 =
		_mm256_inserti128_si256(_mm256_castsi128_si256(v[2]), v[6], 1);
	__m256i a3 =
		_mm256_inserti128_si256(_mm256_castsi128_si256(v[3]), v[7], 1);
	__m256i t0 = _mm256_unpacklo_epi32(a0, a1);
	__m256i t1 = _mm256_unpackhi_epi32(a0, a1);
	__m256i t2 = _mm256_unpacklo_epi32(a2, a3);
	__m256i t3 = _mm256_unpackhi_epi32(a2, a3);
	__m256i xmax = _mm256_unpacklo_epi64(t0, t2);
	__m256i rcp = _mm256_unpackhi_epi64(t0, t2);
	__m256i bc = _mm256_unpacklo_epi64(t1, t3);
	__m256i sh = _mm256_unpackhi_epi64(t1, t3);
	/* the escape mark (bit 8 of shift) to the sign bit: rare, and only
	 * in blocks with escapes (esc) */
	if (esc) {
		unsigned em = (unsigned)_mm256_movemask_ps(
			_mm256_castsi256_ps(_mm256_slli_epi32(sh, 23)));
		if (__builtin_expect(em != 0, 0)) {
			for (; em; em &= em - 1)
				escv[(*nesc)++] =
					(uint32_t)(j +
				                   (unsigned)__builtin_ctz(em));
		}
		sh = _mm256_and_si256(sh, _mm256_set1_epi32(0xff));
	}

	/* renormalise: lanes with x > x_max emit their low 16 bits */
	__m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(x, xmax), xmax);
	unsigned m = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(keep)) &
	             0xff;
	unsigned cnt = (unsigned)__builtin_popcount(m);
	{
		/* the emitting lanes' words, in lane order, end at *wp.
		 * Stored whether any lane emits or not (the 8 words below *wp
		 * are free): a branch on it mispredicts on skewed data */
		uint64_t bytes = _pdep_u64(m, 0x0101010101010101ull) * 0xff;
		uint64_t perm = _pext_u64(0x0706050403020100ull, bytes);
		/* two shifts: 8 * (8 - cnt) is 64 for cnt 0 */
		perm = (perm << (4 * (8 - cnt))) << (4 * (8 - cnt));
		__m256i pv = _mm256_cvtepu8_epi32(
			_mm_cvtsi64_si128((long long)perm));
		__m256i wv = _mm256_permutevar8x32_epi32(
			_mm256_and_si256(x, _mm256_set1_epi32(0xffff)), pv);
		wv = _mm256_permute4x64_epi64(
			_mm256_packus_epi32(wv, _mm256_setzero_si256()), 0x08);
		_mm_storeu_si128((__m128i *)(void *)(*wp - 8),
		                 _mm256_castsi256_si128(wv));
		*wp -= cnt;
	}
	x = _mm256_blendv_epi8(_mm256_srli_epi32(x, 16), x, keep);

	/* q = ((x * rcp >> 32) + x) >> shift without 33-bit sums:
	 * ((x - h) / 2 + h) >> (shift - 1); freq 1 (shift 0) gives x */
	__m256i pe = _mm256_srli_epi64(_mm256_mul_epu32(x, rcp), 32);
	__m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32),
	                              _mm256_srli_epi64(rcp, 32));
	__m256i h = _mm256_blend_epi32(pe, po, 0xaa);
	__m256i t = _mm256_add_epi32(
		_mm256_srli_epi32(_mm256_sub_epi32(x, h), 1), h);
	__m256i q = _mm256_srlv_epi32(
		t, _mm256_sub_epi32(sh, _mm256_set1_epi32(1)));
	q = _mm256_blendv_epi8(q, x,
	                       _mm256_cmpeq_epi32(sh, _mm256_setzero_si256()));
	__m256i bias = _mm256_and_si256(bc, _mm256_set1_epi32(0xffff));
	__m256i cmpl = _mm256_srli_epi32(bc, 16);
	return _mm256_add_epi32(_mm256_add_epi32(x, bias),
	                        _mm256_mullo_epi32(q, cmpl));
}

/* Symbols i .. i + 31 of the eight-lane states x[0..4), walking down. */
static inline __attribute__((always_inline)) ULP_AVX2 uint16_t *
enc_group(const ulp_rans_esym *const *eb, const uint8_t *sym,
          const uint8_t *ctx, size_t i, __m256i *x, uint16_t *w, uint32_t *escv,
          size_t *nesc, const int esc)
{
	const uint8_t *c = ctx ? ctx + i : NULL;
	for (int k = 4; k-- > 0;)
		x[k] = enc8(x[k], eb, sym + i + 8 * k, c ? c + 8 * k : NULL,
		            i + 8 * (size_t)k, &w, escv, nesc, esc);
	return w;
}

/* Groups of 32 lanes (sets 1) or 64 (sets 2), from i down to 0. */
static inline __attribute__((always_inline)) ULP_AVX2 uint16_t *
enc_wide(const ulp_rans_esym *const *eb, const uint8_t *sym, const uint8_t *ctx,
         size_t i, uint32_t *x, uint16_t *w, uint32_t *escv, size_t *nesc,
         const int esc, const unsigned sets)
{
	__m256i v[8];
	ulp_rans_x_load_avx2(x, v, 4 * sets);
	while (i > 0) {
		if (sets == 2) {
			i -= 32;
			w = enc_group(eb, sym, ctx, i, v + 4, w, escv, nesc,
			              esc);
		}
		i -= 32;
		w = enc_group(eb, sym, ctx, i, v, w, escv, nesc, esc);
	}
	ulp_rans_x_store_avx2(x, v, 4 * sets);
	return w;
}

ULP_AVX2 uint16_t *ulp_rans_enc32_avx2(const ulp_rans_esym *const *eb,
                                       const uint8_t *sym, const uint8_t *ctx,
                                       size_t i, uint32_t *x, unsigned sets,
                                       uint16_t *w, uint32_t *escv,
                                       size_t *nesc)
{
	if (sets == 2)
		return escv ? enc_wide(eb, sym, ctx, i, x, w, escv, nesc, 1, 2)
		            : enc_wide(eb, sym, ctx, i, x, w, NULL, nesc, 0, 2);
	return escv ? enc_wide(eb, sym, ctx, i, x, w, escv, nesc, 1, 1)
	            : enc_wide(eb, sym, ctx, i, x, w, NULL, nesc, 0, 1);
}
