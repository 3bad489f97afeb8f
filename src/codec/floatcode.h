/*
 * floatcode.h - coding of one stream of float elements.
 *
 * A stream is n elements of one float format, optionally with the n
 * reference elements they correspond to.  The encoder picks, per stream,
 * the cheapest of:
 *   IDENTICAL  every element equals its reference (no payload);
 *   DELTA      residual d = ord(cur) - ord(ref) in ULPs: the symbol
 *              (bit length k of |d|, sign) is rANS-coded in the context of
 *              the reference's exponent, the k-1 bits below the leading
 *              one are stored raw;
 *   STANDALONE the exponent is rANS-coded, then the sign and top
 *              mantissa bits in its context, the rest stored raw (for
 *              data that decorrelates between versions, like Adam's
 *              first moment);
 *   FUSED      STANDALONE with one rANS symbol per element, the code of
 *              its (exponent, sign and top mantissa bits) pair, for
 *              streams of 1024 elements or more (format 5);
 *   RAW        the bytes as they are, when nothing else is smaller.
 * Stream layout: [coding u8] then, for DELTA,
 * [varint rans_len][rans block][raw bits]; STANDALONE has two blocks
 * before the raw bits, FUSED a pair map first (floatcode.c).
 */
#ifndef ULP_FLOATCODE_H
#define ULP_FLOATCODE_H

#include <stddef.h>
#include <stdint.h>

#include "codec_internal.h"

typedef struct ulp_float_scratch ulp_float_scratch;
ulp_float_scratch *ulp_float_scratch_new(void);
void ulp_float_scratch_free(ulp_float_scratch *fs);

/* Upper bound of the encoded size of n elements of width bits. */
size_t ulp_float_bound(size_t n, unsigned width);

/* Encode cur[0..n) (format f) against ref[0..n) (NULL: none), appending the
 * stream to out.  st, if not NULL, is added to (elems, delta_elems,
 * bytes_in, bytes_out, model_bits and, with alt_stats, the alternative
 * model entropies). */
int ulp_float_encode(ulp_float_scratch *fs, ulp_float_fmt f, const uint8_t *cur,
                     const uint8_t *ref, size_t n, int alt_stats, ulp_buf *out,
                     ulp_dtype_stats *st);

/* Decode a stream of exactly len bytes into dst[0..n).  ref must be given
 * when the stream was coded against one. */
int ulp_float_decode(ulp_float_scratch *fs, ulp_float_fmt f, const uint8_t *in,
                     size_t len, const uint8_t *ref, size_t n, uint8_t *dst);

struct ulp_bitw;

/* Delta streams of at least ULP_DELTA_SAMPLED_MIN elements build their
 * tables from the counts of a quarter of the elements (format 4): the
 * groups g of eight elements 8g .. 8g + 7 for which
 * ulp_delta_group_counted(g), counts scaled by ULP_DELTA_SAMPLE_SCALE;
 * the symbols the sample missed are escaped (ulp_rans_encode_esc).  The
 * phase moves every 32 groups, so that rows of a power-of-two length do
 * not show the sample the same columns every time. */
#define ULP_DELTA_SAMPLED_MIN (256u << 10)
#define ULP_DELTA_SAMPLE_SCALE 4u

static inline int ulp_delta_group_counted(size_t g)
{
	return ((g + (g >> 5)) & 3) == 0;
}

/* AVX2 reconstruction of 16-bit delta elements from their symbols, the
 * raw bits (starting at bit *pos of rawp[0..rawlen)) and the reference:
 * does a prefix of the n elements, advances *pos past their raw bits and
 * returns how many (floatcode_avx2.c; only when ulp_rans_simd()). */
size_t ulp_delta16_avx2(const uint8_t *sym, const uint8_t *rawp, size_t rawlen,
                        const uint8_t *ref, size_t n, uint8_t *dst,
                        uint64_t *pos);

/* ulp_delta16_avx2 with AVX-512 (floatcode_avx512.c; only when
 * ulp_rans_simd() >= ULP_SIMD_AVX512): 32 elements a step. */
size_t ulp_delta16_avx512(const uint8_t *sym, const uint8_t *rawp,
                          size_t rawlen, const uint8_t *ref, size_t n,
                          uint8_t *dst, uint64_t *pos);

/* The same for fp32 elements. */
size_t ulp_delta32_avx2(const uint8_t *sym, const uint8_t *rawp, size_t rawlen,
                        const uint8_t *ref, size_t n, uint8_t *dst,
                        uint64_t *pos);

/* The same with AVX-512, 16 elements a step (floatcode_avx512.c). */
size_t ulp_delta32_avx512(const uint8_t *sym, const uint8_t *rawp,
                          size_t rawlen, const uint8_t *ref, size_t n,
                          uint8_t *dst, uint64_t *pos);

/* The contexts (r >> mbits) & emask of a prefix of n 16- or 32-bit
 * reference elements (exponents of at most 8 bits); returns how many. */
size_t ulp_ctx_avx2(const uint8_t *ref, size_t n, unsigned width,
                    unsigned mbits, unsigned emask, uint8_t *ctx);

/* Standalone reconstruction of a prefix of n 16-bit elements from their
 * exponents a, sign and topbits mantissa bits b and fixed-width raw bits;
 * returns how many (a multiple of 8). */
size_t ulp_sa16_avx2(const uint8_t *a, const uint8_t *b, const uint8_t *rawp,
                     size_t rawlen, size_t n, unsigned mbits, unsigned topbits,
                     uint8_t *dst);

/* ulp_sa16_avx2 for fp32 (8 exponent bits, 3 top mantissa bits, 20 raw
 * bits). */
size_t ulp_sa32_avx2(const uint8_t *a, const uint8_t *b, const uint8_t *rawp,
                     size_t rawlen, size_t n, uint8_t *dst);

/* Fused standalone reconstruction (ULP_SC_FUSED) of a prefix of n
 * elements from their codes: base[code] (the sign, exponent and top
 * mantissa bits) or the element's lowm raw bits (16 bits; 20 for fp32);
 * returns how many (a multiple of 8). */
size_t ulp_saf16_avx2(const uint8_t *code, const uint64_t *base,
                      const uint8_t *rawp, size_t rawlen, size_t n,
                      unsigned lowm, uint8_t *dst);
/* ulp_saf16_avx2 and ulp_saf32_avx2 with AVX-512 (floatcode_avx512.c;
 * only when ulp_rans_simd() >= ULP_SIMD_AVX512), 32 and 16 elements a
 * step; base has ULP_RANS_MAXSYM entries, all read (those no code names
 * set, to 0). */
size_t ulp_saf16_avx512(const uint8_t *code, const uint64_t *base,
                        const uint8_t *rawp, size_t rawlen, size_t n,
                        unsigned lowm, uint8_t *dst);
size_t ulp_saf32_avx2(const uint8_t *code, const uint64_t *base,
                      const uint8_t *rawp, size_t rawlen, size_t n,
                      uint8_t *dst);
size_t ulp_saf32_avx512(const uint8_t *code, const uint64_t *base,
                        const uint8_t *rawp, size_t rawlen, size_t n,
                        uint8_t *dst);

/* ulp_sa16_pass_avx2 (below) for fp32 (8 exponent bits, 3 top mantissa
 * bits). */
size_t ulp_sa32_pass_avx2(const uint8_t *cur, size_t n, uint8_t *a, uint8_t *b,
                          struct ulp_bitw *bw, uint32_t *h4, uint8_t *used,
                          int sampled);

/* The encoder's delta pass over 16-bit elements with AVX2: symbols and
 * contexts (exponent (r >> mbits) & emask) of a prefix of the n elements,
 * their raw bits appended to bw and counted in *raw_bits, each
 * (context c, symbol s) counted at h4[(c * nsym + s) * 4 + i % 4] (with
 * sampled, only in the groups ulp_delta_group_counted picks) and used[c]
 * set for every context between the lowest and the highest seen;
 * returns how many elements it did (a multiple of 8). */
size_t ulp_delta16_pass_avx2(const uint8_t *cur, const uint8_t *ref, size_t n,
                             unsigned mbits, unsigned emask, uint8_t *sym,
                             uint8_t *ctx, struct ulp_bitw *bw,
                             uint64_t *raw_bits, uint32_t *h4, unsigned nsym,
                             uint8_t *used, int sampled);

/* The same for fp32 (contexts: the 8 exponent bits). */
size_t ulp_delta32_pass_avx2(const uint8_t *cur, const uint8_t *ref, size_t n,
                             uint8_t *sym, uint8_t *ctx, struct ulp_bitw *bw,
                             uint64_t *raw_bits, uint32_t *h4, unsigned nsym,
                             uint8_t *used, int sampled);

/* ulp_delta16_pass_avx2 and ulp_delta32_pass_avx2 with AVX-512
 * (floatcode_avx512_enc.c; only when ulp_rans_simd() >= ULP_SIMD_AVX512):
 * the same arguments and bytes, a multiple of 16 elements done, and hw,
 * ULP_DELTA_WAYS_CELLS zeros (left zero), where they count before adding
 * their counts to h4. */
#define ULP_DELTA_WAYS_CELLS (16u * 256u * 64u)
size_t ulp_delta16_pass_avx512(const uint8_t *cur, const uint8_t *ref, size_t n,
                               unsigned mbits, unsigned emask, uint8_t *sym,
                               uint8_t *ctx, struct ulp_bitw *bw,
                               uint64_t *raw_bits, uint32_t *h4, uint32_t *hw,
                               unsigned nsym, uint8_t *used, int sampled);
size_t ulp_delta32_pass_avx512(const uint8_t *cur, const uint8_t *ref, size_t n,
                               uint8_t *sym, uint8_t *ctx, struct ulp_bitw *bw,
                               uint64_t *raw_bits, uint32_t *h4, uint32_t *hw,
                               unsigned nsym, uint8_t *used, int sampled);

/* The standalone pass over 16-bit elements (exponent bits at most 8):
 * exponents into a, sign and topbits mantissa bits into b, the other
 * mantissa bits (at most 7) appended to bw, for a prefix of the n
 * elements; returns how many.  Each pair is counted at
 * h4[(a * nb + b) * 4 + i % 4] (nb = 2 << topbits; with sampled, only
 * in the groups ulp_delta_group_counted picks) and used[a] set for every
 * exponent between the lowest and the highest counted.  Does nothing
 * unless bw is at a byte boundary, since it writes whole bytes. */
size_t ulp_sa16_pass_avx2(const uint8_t *cur, size_t n, unsigned mbits,
                          unsigned emask, unsigned topbits, uint8_t *a,
                          uint8_t *b, struct ulp_bitw *bw, uint32_t *h4,
                          uint8_t *used, int sampled);
/* ulp_sa16_pass_avx2 with AVX-512 (32 elements a step), for
 * ulp_rans_simd() >= ULP_SIMD_AVX512; same contract, a multiple of 32. */
size_t ulp_sa16_pass_avx512(const uint8_t *cur, size_t n, unsigned mbits,
                            unsigned emask, unsigned topbits, uint8_t *a,
                            uint8_t *b, struct ulp_bitw *bw, uint32_t *h4,
                            uint8_t *used, int sampled);

#endif /* ULP_FLOATCODE_H */
