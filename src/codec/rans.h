/*
 * rans.h - static, four-way interleaved rANS with per-context tables.
 *
 * Symbols are bytes from an alphabet of nsym <= 256 values; each symbol has
 * a context byte (0..255) that selects its frequency table.  Tables are
 * built per call from exact counts, normalised to 2^ULP_RANS_SCALE and sent
 * in front of the coded words.  Contexts seen fewer than
 * ULP_RANS_MIN_OWN_TABLE times share one escape table so that rare contexts
 * do not cost more in table bytes than they save.
 *
 * Encoded block: [header + tables][4 x u32 final states][16-bit words];
 * symbol i is coded by state i % 4, which hides the latency of each step.
 */
#ifndef ULP_RANS_H
#define ULP_RANS_H

#include <stddef.h>
#include <stdint.h>

#include "codec_internal.h"

/* At most 12 bits keep a decoding entry (freq, offset, symbol) in 32
 * bits; 11 keeps a table in 8 KiB, so the hot ones stay in L1. */
#define ULP_RANS_SCALE 11
#define ULP_RANS_WAYS 4
#define ULP_RANS_M (1u << ULP_RANS_SCALE)
#define ULP_RANS_L (1u << 16)
#define ULP_RANS_NCTX 256
#define ULP_RANS_MAXSYM 256
#define ULP_RANS_MIN_OWN_TABLE 384

/* Scratch tables reused across calls; one per thread. */
typedef struct ulp_rans_scratch ulp_rans_scratch;
ulp_rans_scratch *ulp_rans_scratch_new(void);
void ulp_rans_scratch_free(ulp_rans_scratch *s);

/* Upper bound of the encoded size of n symbols over nsym values. */
size_t ulp_rans_bound(size_t n, unsigned nsym);

/* Encode sym[0..n) (each < nsym) with contexts ctx[0..n) (each < nctx;
 * ctx NULL: all 0).  hist holds the exact counts, hist[c * nsym + s] for
 * c < nctx.  Appends the block to out. */
int ulp_rans_encode(ulp_rans_scratch *sc, const uint8_t *sym,
                    const uint8_t *ctx, size_t n, unsigned nsym,
                    unsigned nctx, const uint32_t *hist, ulp_buf *out);

/* Decode n symbols from in[0..len) into sym, given the same contexts the
 * encoder saw.  *used receives the bytes the block occupied.  Returns
 * ULP_ERR_CORRUPT for any inconsistency (bad tables, running out of input,
 * final states wrong, a symbol out of range). */
int ulp_rans_decode(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                    const uint8_t *ctx, size_t n, unsigned nsym,
                    uint8_t *sym, size_t *used);

/* Empirical entropy in bits of a histogram: sum c * log2(total / c). */
double ulp_hist_bits(const uint32_t *h, unsigned nsym);

#endif /* ULP_RANS_H */
