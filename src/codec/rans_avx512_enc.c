/*
 * rans_avx512_enc.c - the 32- and 64-lane rANS encoder with AVX-512: two
 * registers of sixteen states a set of 32.
 *
 * The bitstream is the portable coder's (see rans_avx2.c).  Against the
 * AVX2 kernel, a register step does twice the lanes with about the same
 * instructions; the emitting lanes' words are packed by a VBMI2 word
 * compress and a masked store instead of a permutation built with PEXT;
 * and the table entries' offsets are computed 32 at a time (VBMI byte
 * permutations of the context-to-table map) one group ahead, so that a
 * lane's entry costs two loads instead of four dependent ones.  The
 * entries themselves still come by one 16-byte load per lane and a
 * transposition.
 *
 * Compiled for the baseline target; only these functions are built for
 * AVX-512 (F, BW, VL, VBMI, VBMI2), and they run only where ulp_rans_simd()
 * found them.
 */
#include <immintrin.h>

#include "rans_avx512.h"

#define ULP_AVX512                                                    \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi," \
	                      "avx512vbmi2,bmi2")))

/* The entries' byte offsets from the first table of the 32 symbols sym
 * with contexts ctx (NULL: all 0) into off: (remap[ctx] * nt + sym) * 16,
 * where remap[ctx] * nt + sym fits 16 bits (at most 256 tables of 256
 * entries). */
static inline __attribute__((always_inline)) ULP_AVX512 void
entry_offsets(const __m512i rm[4], __m512i vnt, const uint8_t *sym,
              const uint8_t *ctx, uint32_t *off)
{
	__m512i t;
	if (ctx) {
		__m512i c = _mm512_castsi256_si512(
			_mm256_loadu_si256((const __m256i *)(const void *)ctx));
		t = ulp_map256_avx512(rm, c);
	} else {
		t = _mm512_broadcastb_epi8(_mm512_castsi512_si128(rm[0]));
	}
	__m512i idx = _mm512_add_epi16(
		_mm512_mullo_epi16(
			_mm512_cvtepu8_epi16(_mm512_castsi512_si256(t)), vnt),
		_mm512_cvtepu8_epi16(_mm256_loadu_si256(
			(const __m256i *)(const void *)sym)));
	/* 256-bit stores, which forward to the single loads that follow */
	__m512i lo = _mm512_slli_epi32(
		_mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx)), 4);
	__m512i hi = _mm512_slli_epi32(
		_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(idx, 1)), 4);
	_mm256_store_si256((__m256i *)(void *)off, _mm512_castsi512_si256(lo));
	_mm256_store_si256((__m256i *)(void *)(off + 8),
	                   _mm512_extracti64x4_epi64(lo, 1));
	_mm256_store_si256((__m256i *)(void *)(off + 16),
	                   _mm512_castsi512_si256(hi));
	_mm256_store_si256((__m256i *)(void *)(off + 24),
	                   _mm512_extracti64x4_epi64(hi, 1));
	/* the lanes load them back one by one: extracts, which the
	 * compiler would otherwise make of them, cost a shuffle each */
	__asm__("" : "+m"(*(uint32_t(*)[32])off));
}

/* One encoding step of sixteen lanes (symbols j .. j + 15, their entries
 * at base + off[k]): the lanes emitting words in the order the decoder
 * reads them, escaped symbols' indices to escv. */
static inline __attribute__((always_inline)) ULP_AVX512 __m512i
enc16(__m512i x, const uint8_t *base, const uint32_t *off, size_t j,
      uint16_t **wp, uint32_t *escv, size_t *nesc, const int esc)
{
	__m128i v[16];
	for (int k = 0; k < 16; k++)
		v[k] = _mm_loadu_si128(
			(const __m128i *)(const void *)(base + off[k]));
	/* a[q] holds the entries q, q + 4, q + 8, q + 12 in its 128-bit
	 * lanes; the unpacks then transpose each lane's four entries into
	 * the four field vectors, entry k in dword k */
	__m512i a[4];
	for (int q = 0; q < 4; q++) {
		__m512i t = _mm512_castsi128_si512(v[q]);
		t = _mm512_inserti32x4(t, v[q + 4], 1);
		t = _mm512_inserti32x4(t, v[q + 8], 2);
		a[q] = _mm512_inserti32x4(t, v[q + 12], 3);
	}
	__m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]);
	__m512i t1 = _mm512_unpackhi_epi32(a[0], a[1]);
	__m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]);
	__m512i t3 = _mm512_unpackhi_epi32(a[2], a[3]);
	__m512i xmax = _mm512_unpacklo_epi64(t0, t2);
	__m512i rcp = _mm512_unpackhi_epi64(t0, t2);
	__m512i bc = _mm512_unpacklo_epi64(t1, t3);
	__m512i sh = _mm512_unpackhi_epi64(t1, t3);
	if (esc) {
		unsigned em = _mm512_test_epi32_mask(
			sh, _mm512_set1_epi32((int)ULP_RANS_ESYM_ESC));
		for (; __builtin_expect(em != 0, 0); em &= em - 1)
			escv[(*nesc)++] =
				(uint32_t)(j + (unsigned)__builtin_ctz(em));
		sh = _mm512_and_si512(sh, _mm512_set1_epi32(0xff));
	}

	/* renormalise: lanes with x > x_max emit their low 16 bits, packed
	 * in lane order to end at *wp */
	__mmask16 m = _mm512_cmpgt_epu32_mask(x, xmax);
	unsigned cnt = (unsigned)__builtin_popcount((unsigned)m);
	__m256i wv = _mm256_maskz_compress_epi16(m, _mm512_cvtepi32_epi16(x));
	*wp -= cnt;
	_mm256_mask_storeu_epi16(*wp, (__mmask16)((1u << cnt) - 1), wv);
	x = _mm512_mask_srli_epi32(x, m, x, 16);

	/* q = ((x * rcp >> 32) + x) >> shift, as rans_avx2.c computes it */
	__m512i pe = _mm512_srli_epi64(_mm512_mul_epu32(x, rcp), 32);
	__m512i po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32),
	                              _mm512_srli_epi64(rcp, 32));
	__m512i h = _mm512_mask_blend_epi32(0xaaaa, pe, po);
	__m512i t = _mm512_add_epi32(
		_mm512_srli_epi32(_mm512_sub_epi32(x, h), 1), h);
	__m512i q = _mm512_srlv_epi32(
		t, _mm512_sub_epi32(sh, _mm512_set1_epi32(1)));
	q = _mm512_mask_mov_epi32(
		q, _mm512_cmpeq_epi32_mask(sh, _mm512_setzero_si512()), x);
	__m512i bias = _mm512_and_si512(bc, _mm512_set1_epi32(0xffff));
	__m512i cmpl = _mm512_srli_epi32(bc, 16);
	return _mm512_add_epi32(_mm512_add_epi32(x, bias),
	                        _mm512_mullo_epi32(q, cmpl));
}

/* Symbols i .. i + 31 of states xa (lanes 0-15 of the set) and xb,
 * their entries' offsets at o; the next group's (i - 32 ..) to off. */
static inline __attribute__((always_inline)) ULP_AVX512 uint16_t *
enc_group(const uint8_t *base, const __m512i rm[4], __m512i vnt,
          const uint8_t *sym, const uint8_t *ctx, size_t i, const uint32_t *o,
          uint32_t *off, __m512i *xa, __m512i *xb, uint16_t *w, uint32_t *escv,
          size_t *nesc, const int esc)
{
	if (i > 0)
		entry_offsets(rm, vnt, sym + i - 32, ctx ? ctx + i - 32 : NULL,
		              off);
	*xb = enc16(*xb, base, o + 16, i + 16, &w, escv, nesc, esc);
	*xa = enc16(*xa, base, o, i, &w, escv, nesc, esc);
	return w;
}

/* Groups of 32 lanes (sets 1) or 64 (sets 2: the group at i - 32 in
 * states x2, x3, the one below in x0, x1), from i down to 0. */
static inline __attribute__((always_inline)) ULP_AVX512 uint16_t *
enc_wide(const ulp_rans_esym *esym, const uint8_t *remap, unsigned nt,
         const uint8_t *sym, const uint8_t *ctx, size_t i, uint32_t *x,
         uint16_t *w, uint32_t *escv, size_t *nesc, const int esc,
         const unsigned sets)
{
	const uint8_t *base = (const uint8_t *)esym;
	/* a group's offsets are made while the group before it is coded,
	 * so that their loads do not wait for the stores */
	uint32_t off[2][32] __attribute__((aligned(64)));
	__m512i rm[4];
	ulp_map256_load_avx512(remap, rm);
	const __m512i vnt = _mm512_set1_epi16((short)nt);
	__m512i x0 = _mm512_loadu_si512((const void *)x);
	__m512i x1 = _mm512_loadu_si512((const void *)(x + 16));
	__m512i x2 = x0, x3 = x1;
	if (sets == 2) {
		x2 = _mm512_loadu_si512((const void *)(x + 32));
		x3 = _mm512_loadu_si512((const void *)(x + 48));
	}
	if (i > 0)
		entry_offsets(rm, vnt, sym + i - 32, ctx ? ctx + i - 32 : NULL,
		              off[0]);
	/* two groups a turn, so that the offsets' buffers alternate in
	 * the same order for either number of sets */
	while (i > 0) {
		i -= 32;
		w = sets == 2 ? enc_group(base, rm, vnt, sym, ctx, i, off[0],
		                          off[1], &x2, &x3, w, escv, nesc, esc)
		              : enc_group(base, rm, vnt, sym, ctx, i, off[0],
		                          off[1], &x0, &x1, w, escv, nesc, esc);
		if (i == 0)
			break;
		i -= 32;
		w = enc_group(base, rm, vnt, sym, ctx, i, off[1], off[0], &x0,
		              &x1, w, escv, nesc, esc);
	}
	_mm512_storeu_si512((void *)x, x0);
	_mm512_storeu_si512((void *)(x + 16), x1);
	if (sets == 2) {
		_mm512_storeu_si512((void *)(x + 32), x2);
		_mm512_storeu_si512((void *)(x + 48), x3);
	}
	return w;
}

ULP_AVX512 uint16_t *
ulp_rans_enc32_avx512(const ulp_rans_esym *esym, const uint8_t *remap,
                      unsigned nt, const uint8_t *sym, const uint8_t *ctx,
                      size_t i, uint32_t *x, unsigned sets, uint16_t *w,
                      uint32_t *escv, size_t *nesc)
{
#define ENC_WIDE(S)                                                            \
	(escv ? enc_wide(esym, remap, nt, sym, ctx, i, x, w, escv, nesc, 1, S) \
	      : enc_wide(esym, remap, nt, sym, ctx, i, x, w, NULL, nesc, 0,    \
	                 S))
	return sets == 2 ? ENC_WIDE(2) : ENC_WIDE(1);
#undef ENC_WIDE
}
