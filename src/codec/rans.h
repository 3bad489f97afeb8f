/*
 * rans.h - static, interleaved rANS (4, 32 or 64 lanes) with per-context
 * tables.
 *
 * Symbols are bytes from an alphabet of nsym <= 256 values; each symbol has
 * a context byte (0..255) that selects its frequency table.  Tables are
 * built per call from counts, normalised to 2^ULP_RANS_SCALE and sent in
 * front of the coded words.  Contexts seen fewer than
 * ULP_RANS_MIN_OWN_TABLE times share one escape table so that rare contexts
 * do not cost more in table bytes than they save.
 *
 * Encoded block: [header + tables][escapes][W x u32 final states][16-bit
 * words]; symbol i is coded by state i % W, which hides the latency of each
 * step.  The header's first byte says W: 4 lanes (object format 1), 32
 * (format 2, which the AVX2 decoder runs as four 8-lane registers; the
 * scalar decoder reads the same bitstream) or 64 (format 6: two such sets
 * of 32, stepped independently), and (format 4) whether the
 * counts were a sample's: then every table has an escape symbol nsym
 * (its frequency first in the table), a symbol without a frequency is
 * coded as it, and [escapes] is a varint count and the escaped symbols'
 * bytes in symbol order (absent otherwise).
 */
#ifndef ULP_RANS_H
#define ULP_RANS_H

#include <stddef.h>
#include <stdint.h>

#include "codec_internal.h"

/* At most 12 bits keep a decoding entry (freq, offset, symbol) in 32
 * bits; 11 keeps a table in 8 KiB, so the hot ones stay in L1. */
#define ULP_RANS_SCALE 11
#define ULP_RANS_WAYS 4   /* format-1 blocks; the fused float decoder */
#define ULP_RANS_LANES 32 /* from ULP_RANS_WIDE_MIN symbols */
#define ULP_RANS_MAX_LANES 64
#define ULP_RANS_M (1u << ULP_RANS_SCALE)
#define ULP_RANS_L (1u << 16)
#define ULP_RANS_NCTX 256
#define ULP_RANS_MAXSYM 256
#define ULP_RANS_MIN_OWN_TABLE 384

/* Scratch tables reused across calls; one per thread. */
typedef struct ulp_rans_scratch ulp_rans_scratch;
ulp_rans_scratch *ulp_rans_scratch_new(void);
void ulp_rans_scratch_free(ulp_rans_scratch *s);

/* Blocks of at least this many symbols get ULP_RANS_LANES lanes, of at
 * least ULP_RANS_WIDE64_MIN 64 (object format 6), which the SIMD
 * decoders run as two independent sets of 32: twice the chains of
 * dependent steps in flight. */
#define ULP_RANS_WIDE_MIN 4096
#define ULP_RANS_WIDE64_MIN 131072

/* Lanes the encoder writes with this scratch: 0 (the default) chooses by
 * the block's size, 4, 32 or 64 force a lane count (tests cover both paths
 * whatever the sizes). */
void ulp_rans_scratch_set_lanes(ulp_rans_scratch *s, unsigned lanes);

/* Which kernels run: ULP_SIMD_NONE the portable ones, ULP_SIMD_AVX2 the
 * AVX2 ones (with BMI2), ULP_SIMD_AVX512 also the AVX-512 ones where
 * there are (F, BW, VL, CD, VBMI and VBMI2; the others stay AVX2).
 * Chosen once from the CPU, the highest it runs; ULPFS_SIMD=N in the
 * environment caps it at level N, and tests switch with ulp_rans_set_simd
 * (returns the previous level; a level the CPU cannot run gives the
 * highest it can).  Every level reads and writes the same bytes. */
#define ULP_SIMD_NONE 0
#define ULP_SIMD_AVX2 1
#define ULP_SIMD_AVX512 2
int ulp_rans_simd(void);
int ulp_rans_set_simd(int level);

/* Whether the gathering AVX-512 rANS decoder runs for blocks with
 * contexts (level ULP_SIMD_AVX512, and not on AMD Zen 4): it loads its
 * table entries by vpgatherdd, which beats scalar loads on the Intel
 * cores and the AMD Zen 5 measured, while on Zen 4 a gather cost about
 * 3 ns and halved the AVX2 kernel's speed (bench/README.md); there
 * ulp_rans_dec32_avx512_loads decodes the symbols.  ulp_rans_gathers_one:
 * the same for blocks of one table, where scalar loads in four registers
 * of eight lanes win on both AMD cores.  ULPFS_RANS_GATHERS=0 or 1 sets
 * both (for the tests, which run both decoders on any CPU with AVX-512). */
int ulp_rans_gathers(void);
int ulp_rans_gathers_one(void);

/* Upper bound of the encoded size of n symbols over nsym values. */
size_t ulp_rans_bound(size_t n, unsigned nsym);

/* Encode sym[0..n) (each < nsym) with contexts ctx[0..n) (each < nctx;
 * ctx NULL: all 0).  hist holds the exact counts, hist[c * nsym + s] for
 * c < nctx.  Appends the block to out. */
int ulp_rans_encode(ulp_rans_scratch *sc, const uint8_t *sym,
                    const uint8_t *ctx, size_t n, unsigned nsym, unsigned nctx,
                    const uint32_t *hist, ulp_buf *out);

/* ulp_rans_encode for counts hist that may miss symbols (those of a
 * sample; nsym < 256): every table gets an escape symbol (nsym, the least
 * frequency), a symbol without a frequency in its table is coded as it
 * and stored as a byte after the tables, in symbol order.  *nesc
 * receives how many (a measure of how well the sample did).  The block's
 * header says so (object format 4); ulp_rans_decode restores them. */
int ulp_rans_encode_esc(ulp_rans_scratch *sc, const uint8_t *sym,
                        const uint8_t *ctx, size_t n, unsigned nsym,
                        unsigned nctx, const uint32_t *hist, ulp_buf *out,
                        size_t *nesc);

/* ulp_rans_encode_map's codes of (context, symbol) pairs. */
typedef struct ulp_rans_map {
	const uint8_t *code; /* pair (c, s) codes as code[c * nsym + s] */
	unsigned nsym, nctx; /* the pairs' symbols and contexts */
	const uint8_t *used; /* per context: nonzero if it occurs */
	unsigned esc;        /* the code whose elements are listed */
	uint32_t *escv;      /* receives their indices, increasing */
	size_t nesc;         /* in: room in escv; out: how many */
} ulp_rans_map;

/* The block ulp_rans_encode writes for the codes of the n pairs (ctx[i],
 * sym[i]) over ncode values with no context (hist: the codes' counts),
 * without an array of the codes: per context a row of the codes'
 * encoding entries (ULP_ERR_ARG if more than map->nesc are esc). */
int ulp_rans_encode_map(ulp_rans_scratch *sc, const uint8_t *sym,
                        const uint8_t *ctx, size_t n, unsigned ncode,
                        const uint32_t *hist, ulp_rans_map *map, ulp_buf *out);

/* Decode n symbols from in[0..len) into sym, given the same contexts the
 * encoder saw.  *used receives the bytes the block occupied.  Returns
 * ULP_ERR_CORRUPT for any inconsistency (bad tables, running out of input,
 * final states wrong, a symbol out of range). */
int ulp_rans_decode(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                    const uint8_t *ctx, size_t n, unsigned nsym, uint8_t *sym,
                    size_t *used);

/* ulp_rans_decode with the contexts of 16-bit reference elements ref,
 * ctx[i] = (ref[i] >> shift) & emask (emask < ULP_RANS_NCTX): the
 * AVX-512 kernels (level ULP_SIMD_AVX512) compute them as they decode a
 * block of 32 or 64 lanes instead of reading them from a pass of their own; ctx
 * (n bytes of scratch) receives those computed apart (all of them, by a
 * portable loop, where those kernels do not run). */
int ulp_rans_decode_ref16(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                          const uint8_t *ref, unsigned shift, unsigned emask,
                          uint8_t *ctx, size_t n, unsigned nsym, uint8_t *sym,
                          size_t *used);

/* Incremental decoding, for callers that fuse symbol decoding with their
 * own per-element work (and compute contexts on the fly).  After
 * ulp_rans_dec_begin, symbol i is decoded by state x[i % lanes] with
 * tab[context of i]; ulp_rans_dec_end checks the final states. */
typedef struct ulp_rans_dec {
	const uint8_t *p, *end; /* renormalisation words */
	uint32_t x[ULP_RANS_MAX_LANES];
	unsigned lanes;
	const uint32_t *const *tab; /* per context: decoding table */
	unsigned ntab;              /* tables sent (0: no symbols) */
	/* the same tables for the SIMD kernel: all of them back to back,
	 * and per context the offset of its table in entries */
	const uint32_t *flat;
	const uint32_t *off;
	/* escaped symbols (ulp_rans_encode_esc): decoded as esc_sym (256
	 * when the block has none), the nesc bytes at esc in order */
	const uint8_t *esc;
	size_t nesc;
	unsigned esc_sym;
} ulp_rans_dec;

/* Lanes of the block starting at in (0 if len is 0 or the header byte is
 * not one a decoder knows: ulp_rans_dec_begin then fails). */
unsigned ulp_rans_block_lanes(const uint8_t *in, size_t len);

/* Whether the block starting at in has escaped symbols (format 4). */
int ulp_rans_block_escapes(const uint8_t *in, size_t len);

int ulp_rans_dec_begin(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                       unsigned nsym, ulp_rans_dec *d);
int ulp_rans_dec_end(const ulp_rans_dec *d, const uint8_t *in, size_t *used);

/* Put the escaped symbols in place of the escape symbols of the n
 * decoded symbols sym (nothing for a block without): ULP_ERR_CORRUPT
 * unless there is one for each. */
int ulp_rans_unescape(const ulp_rans_dec *d, uint8_t *sym, size_t n);

/* One step of state x with table tab: returns the new state and stores
 * the symbol.  Reads a renormalisation word whether it is needed or not,
 * and renormalises with arithmetic instead of a branch (an unpredictable
 * one), so the caller must know that 2 bytes remain at *p:
 * end - p >= 8 covers a group of 4 steps. */
static inline uint32_t ulp_rans_dec_step(uint32_t x, const uint32_t *tab,
                                         const uint8_t **p, unsigned *sym)
{
	uint32_t e = tab[x & (ULP_RANS_M - 1)];
	x = ((e & 0xfff) + 1) * (x >> ULP_RANS_SCALE) + ((e >> 12) & 0xfff);
	uint32_t r = x < ULP_RANS_L;
	x = (x << (r << 4)) | (ulp_le16(*p) & (0u - r));
	*p += r << 1;
	*sym = e >> 24;
	return x;
}

/* The same near the end of the input: fails instead of over-reading. */
static inline int ulp_rans_dec_step_checked(ulp_rans_dec *d, uint32_t *x,
                                            const uint32_t *tab, unsigned *sym)
{
	uint32_t v = *x;
	uint32_t e = tab[v & (ULP_RANS_M - 1)];
	v = ((e & 0xfff) + 1) * (v >> ULP_RANS_SCALE) + ((e >> 12) & 0xfff);
	if (v < ULP_RANS_L) {
		if (d->end - d->p < 2)
			return ULP_ERR_CORRUPT;
		v = (v << 16) | ulp_le16(d->p);
		d->p += 2;
	}
	*x = v;
	*sym = e >> 24;
	return ULP_OK;
}

/* Encoding entry of one symbol of one table (16 bytes: the SIMD
 * encoder loads one per lane). */
typedef struct ulp_rans_esym {
	uint32_t x_max_m1; /* renormalise while x > x_max_m1 */
	uint32_t rcp;      /* low 32 bits of ceil(2^(32+shift) / freq) */
	uint16_t bias;     /* cumulative frequency */
	uint16_t cmpl;     /* M - freq */
	uint32_t shift;    /* bits 0-7; ULP_RANS_ESYM_ESC: an escaped symbol */
} ulp_rans_esym;

#define ULP_RANS_ESYM_ESC 0x100u

/* Words of scratch the encoders may write below their output. */
#define ULP_RANS_WORDS_SLACK 8

/* The AVX2 kernel of 32- and 64-lane encoding (rans_avx2.c): codes
 * symbols [0, i) (i a multiple of 32 * sets, walking down from i - 1)
 * with the 32 * sets states x (sets 1 or 2), entry eb[context] + symbol,
 * writing words downwards from w (which may write ULP_RANS_WORDS_SLACK
 * words below the last one it keeps); returns the new w.  The indices of
 * the symbols whose entries are marked ULP_RANS_ESYM_ESC are appended to
 * escv (*nesc of them), in no particular order; escv NULL: a block
 * without escapes, whose entries have no marks.  The bytes are the
 * portable loop's. */
uint16_t *ulp_rans_enc32_avx2(const ulp_rans_esym *const *eb,
                              const uint8_t *sym, const uint8_t *ctx, size_t i,
                              uint32_t *x, unsigned sets, uint16_t *w,
                              uint32_t *escv, size_t *nesc);

/* ulp_rans_enc32_avx2 with AVX-512 (rans_avx512.c: two registers of 16
 * states a set), for ulp_rans_simd() >= ULP_SIMD_AVX512.  The entry of a
 * symbol s in context c is esym[remap[c] * nt + s] (remap: 256 table
 * indices, nt entries a table); writes no words below the last one it
 * keeps. */
uint16_t *ulp_rans_enc32_avx512(const ulp_rans_esym *esym, const uint8_t *remap,
                                unsigned nt, const uint8_t *sym,
                                const uint8_t *ctx, size_t i, uint32_t *x,
                                unsigned sets, uint16_t *w, uint32_t *escv,
                                size_t *nesc);

/* The decoding kernels of blocks of 32 or 64 lanes (d->lanes), named for
 * the 32 lanes a register set holds; a 64-lane block runs as two sets,
 * whose steps are independent.  AVX2 (rans_avx2.c): decodes whole
 * groups of d->lanes symbols while 2 * d->lanes input bytes remain,
 * updates d->x and d->p and returns the symbols done.  Only when
 * ulp_rans_simd(). */
size_t ulp_rans_dec32_avx2(ulp_rans_dec *d, const uint8_t *ctx, size_t n,
                           uint8_t *sym);

/* The same with AVX-512 (rans_avx512.c): two registers of 16 lanes a
 * set.  Only when ulp_rans_gathers() (ctx given) or
 * ulp_rans_gathers_one() (ctx NULL). */
size_t ulp_rans_dec32_avx512(ulp_rans_dec *d, const uint8_t *ctx, size_t n,
                             uint8_t *sym);

/* The same with AVX-512 where its gathers are slow (rans_avx512.c:
 * scalar loads instead).  Only when ulp_rans_simd() >= ULP_SIMD_AVX512
 * and not ulp_rans_gathers() (ctx given) or ulp_rans_gathers_one()
 * (ctx NULL). */
size_t ulp_rans_dec32_avx512_loads(ulp_rans_dec *d, const uint8_t *ctx,
                                   size_t n, uint8_t *sym);

/* ulp_rans_dec32_avx512_loads with the contexts of ulp_rans_decode_ref16. */
size_t ulp_rans_dec32_ref16_avx512_loads(ulp_rans_dec *d, const uint8_t *ref,
                                         unsigned shift, unsigned emask,
                                         size_t n, uint8_t *sym);

/* ulp_rans_dec32_avx512 with the contexts of ulp_rans_decode_ref16. */
size_t ulp_rans_dec32_ref16_avx512(ulp_rans_dec *d, const uint8_t *ref,
                                   unsigned shift, unsigned emask, size_t n,
                                   uint8_t *sym);

/* A decoding table's ULP_RANS_M entries from the normalised frequencies
 * f[0..nt) (which sum to ULP_RANS_M): entry cum(s) + k of symbol s is
 * s << 24 | k << 12 | (f[s] - 1).  AVX-512 (rans_avx512.c), 16 entries a
 * store instead of one; only when ulp_rans_simd() >= ULP_SIMD_AVX512. */
void ulp_rans_fill_avx512(uint32_t *e, const uint16_t *f, unsigned nt);

/* Empirical entropy in bits of a histogram: sum c * log2(total / c). */
double ulp_hist_bits(const uint32_t *h, unsigned nsym);

#endif /* ULP_RANS_H */
