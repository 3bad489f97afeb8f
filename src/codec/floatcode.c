/*
 * floatcode.c - ULP-residual and exponent coding of float streams.
 *
 * Every loop is written once for a generic width W and instantiated for
 * 8, 16, 32 and 64 bits through always-inline helpers, so that the
 * compiler sees constant shifts and masks in the hot paths.
 */
#include "floatcode.h"

#include <stdlib.h>

#include "bitio.h"
#include "rans.h"

#define ULP_INLINE static inline __attribute__((always_inline))

/* Delta symbols, with k = bitlen|d|: 0 for d == 0; 1 + (d < 0) for k = 1;
 * for k >= 2, 4k - 5 + 2 (d < 0) + b where b is the first bit below the
 * leading one (it is 0 more often than not: residuals fall off within a
 * power of two), leaving k - 2 raw bits. */
#define DELTA_NSYM(W) (4 * (W)-1)
#define MAX_DELTA_NSYM DELTA_NSYM(64)
/* Standalone second symbol: sign and up to 3 top mantissa bits. */
#define SA_TOP_BITS 3
#define SA_MAX_NB (1u << (SA_TOP_BITS + 1))
/* Delta symbol pieces by bit length k: s = base + neg * negmul + b. */
typedef struct ksym_info {
	uint8_t base, negmul, b1mask, nraw;
} ksym_info;

#define KS(k)                                                              \
	{                                                                  \
		(k)<2 ? (k) : 4 * (k)-5, (k) < 2 ? 1 : 2, (k) >= 2, (k)> 2 \
			? (k)-2                                            \
			: 0                                                \
	}
#define KS8(k)                                                        \
	KS(k), KS(k + 1), KS(k + 2), KS(k + 3), KS(k + 4), KS(k + 5), \
		KS(k + 6), KS(k + 7)
static const ksym_info ktab[65] = { KS8(0),  KS8(8),  KS8(16), KS8(24), KS8(32),
	                            KS8(40), KS8(48), KS8(56), KS(64) };
#undef KS8
#undef KS

/* Previous-k buckets for the alternative model statistic. */
#define PK_BUCKETS 4

struct ulp_float_scratch {
	ulp_rans_scratch *rs;
	uint8_t *sym, *ctx;
	size_t cap;
	ulp_buf raw;
	uint32_t hist_d[ULP_RANS_NCTX * MAX_DELTA_NSYM];
	/* Four interleaved partial delta histograms, summed into hist_d. */
	uint32_t hist_d4[ULP_RANS_NCTX * MAX_DELTA_NSYM * 4];
	/* hist_d and hist_d4 stay zero between calls except for the rows of
	 * the contexts a delta pass used, listed here and cleared after use:
	 * clearing whole tables per stream would cost as much as the pass. */
	uint8_t dused[ULP_RANS_NCTX];
	uint32_t hist_s[ULP_RANS_MAXSYM];
	/* standalone: (sign, top mantissa bits) in the exponent's context */
	uint32_t hist_b[ULP_RANS_NCTX * SA_MAX_NB];
	/* hist_b counted by the SIMD passes in four partial histograms, and
	 * its rows to add (kept zero between calls like hist_d4) */
	uint32_t hist_b4[ULP_RANS_NCTX * SA_MAX_NB * 4];
	uint8_t bused[ULP_RANS_NCTX];
	/* fused standalone coding: the code of each (A, B) pair, the codes'
	 * counts, and for the escaped elements their indices (encoder: u32,
	 * first) and their A and B symbols (fused_esc) */
	uint8_t pcode[ULP_RANS_NCTX * SA_MAX_NB];
	uint32_t hist_f[ULP_RANS_MAXSYM];
	uint8_t *esc;
	size_t esc_cap;
	uint32_t hist_pk[PK_BUCKETS * ULP_RANS_NCTX * MAX_DELTA_NSYM];
	/* the AVX-512 delta passes' partial histograms (allocated on their
	 * first use, zero between calls) */
	uint32_t *hist_dw;
};

ulp_float_scratch *ulp_float_scratch_new(void)
{
	ulp_float_scratch *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return NULL;
	fs->rs = ulp_rans_scratch_new();
	if (!fs->rs) {
		free(fs);
		return NULL;
	}
	return fs;
}

void ulp_float_scratch_free(ulp_float_scratch *fs)
{
	if (!fs)
		return;
	ulp_rans_scratch_free(fs->rs);
	free(fs->sym);
	free(fs->ctx);
	free(fs->esc);
	ulp_buf_free(&fs->raw);
	free(fs->hist_dw);
	free(fs);
}

static int scratch_reserve(ulp_float_scratch *fs, size_t n)
{
	if (fs->cap >= n)
		return ULP_OK;
	free(fs->sym);
	free(fs->ctx);
	fs->sym = malloc(n ? n : 1);
	fs->ctx = malloc(n ? n : 1);
	if (!fs->sym || !fs->ctx) {
		free(fs->sym);
		free(fs->ctx);
		fs->sym = fs->ctx = NULL;
		fs->cap = 0;
		return ULP_ERR_NOMEM;
	}
	fs->cap = n;
	return ULP_OK;
}

/* The A symbols of the n escaped elements in fs->esc (then B's). */
static uint8_t *fused_esc(ulp_float_scratch *fs, size_t n)
{
	return fs->esc + sizeof(uint32_t) * n;
}

/* Room for n escaped elements in fs->esc (allocated even for none:
 * fused_esc offsets it). */
static int esc_reserve(ulp_float_scratch *fs, size_t n)
{
	if (fs->esc && fs->esc_cap >= n)
		return ULP_OK;
	uint8_t *p = realloc(fs->esc, (sizeof(uint32_t) + 2) * (n ? n : 1));
	if (!p)
		return ULP_ERR_NOMEM;
	fs->esc = p;
	fs->esc_cap = n;
	return ULP_OK;
}

size_t ulp_float_bound(size_t n, unsigned width)
{
	return 1 + ULP_VARINT_MAX + ulp_rans_bound(n, DELTA_NSYM(width)) +
	       n * (width / 8) + 16;
}

/* ------------------------------------------------- element primitives */

ULP_INLINE uint64_t el_load(const uint8_t *p, size_t i, unsigned W)
{
	switch (W) {
	case 8:
		return p[i];
	case 16: {
		uint16_t v;
		memcpy(&v, p + 2 * i, 2);
		return v;
	}
	case 32: {
		uint32_t v;
		memcpy(&v, p + 4 * i, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p + 8 * i, 8);
		return v;
	}
	}
}

ULP_INLINE void el_store(uint8_t *p, size_t i, uint64_t v, unsigned W)
{
	switch (W) {
	case 8:
		p[i] = (uint8_t)v;
		break;
	case 16: {
		uint16_t x = (uint16_t)v;
		memcpy(p + 2 * i, &x, 2);
		break;
	}
	case 32: {
		uint32_t x = (uint32_t)v;
		memcpy(p + 4 * i, &x, 4);
		break;
	}
	default:
		memcpy(p + 8 * i, &v, 8);
	}
}

ULP_INLINE uint64_t el_mask(unsigned W)
{
	return W == 64 ? ~0ull : (1ull << W) - 1;
}

/* Order-preserving map of float bits to unsigned integers: negative
 * values are complemented, positive ones get the sign bit set, so that
 * integer order is float order and d = ord(c) - ord(r) counts ULPs. */
ULP_INLINE uint64_t el_ord(uint64_t u, unsigned W)
{
	uint64_t sb = 1ull << (W - 1);
	uint64_t neg = 0 - (u >> (W - 1));
	return (u ^ (neg | sb)) & el_mask(W);
}

ULP_INLINE uint64_t el_unord(uint64_t o, unsigned W)
{
	uint64_t sb = 1ull << (W - 1);
	uint64_t m = (o >> (W - 1)) - 1;
	return (o ^ (m | sb)) & el_mask(W);
}

/* Context of a reference element: its exponent, folded to 8 bits. */
ULP_INLINE unsigned el_ctx(uint64_t r, ulp_float_fmt f)
{
	unsigned e = (unsigned)(r >> f.mbits) & ((1u << f.ebits) - 1);
	return f.ebits > 8 ? e >> (f.ebits - 8) : e;
}

ULP_INLINE unsigned pk_bucket(unsigned k)
{
	return k == 0 ? 0 : k <= 2 ? 1 : k <= 6 ? 2 : 3;
}

/* Standalone split of an element into two symbols and raw bits:
 *   A: the top min(ebits, 8) exponent bits, order-0;
 *   B: the sign and the top (up to 3) mantissa bits, in the context of A
 *      (the sign of Adam's second moment is constant, and the leading
 *      mantissa bits are far from uniform);
 *   raw: the low exponent bits (f64 only) and the remaining mantissa. */
ULP_INLINE unsigned sa_symbits(ulp_float_fmt f)
{
	return f.ebits < 8 ? f.ebits : 8;
}

ULP_INLINE unsigned sa_topbits(ulp_float_fmt f)
{
	return f.mbits < SA_TOP_BITS ? f.mbits : SA_TOP_BITS;
}

ULP_INLINE unsigned sa_nraw(ulp_float_fmt f)
{
	return f.ebits - sa_symbits(f) + f.mbits - sa_topbits(f);
}

typedef struct sa_parts {
	unsigned a, b;
	uint64_t raw;
} sa_parts;

ULP_INLINE sa_parts sa_split(uint64_t c, ulp_float_fmt f, unsigned W)
{
	const unsigned lowe = f.ebits - sa_symbits(f);
	const unsigned lowm = f.mbits - sa_topbits(f);
	uint64_t e = (c >> f.mbits) & ((1ull << f.ebits) - 1);
	uint64_t m = c & ((1ull << f.mbits) - 1);
	sa_parts r;
	r.a = (unsigned)(e >> lowe);
	r.b = (unsigned)(((c >> (W - 1)) << sa_topbits(f)) | (m >> lowm));
	r.raw = ((e & ((1ull << lowe) - 1)) << lowm) |
	        (m & ((1ull << lowm) - 1));
	return r;
}

ULP_INLINE uint64_t sa_join(unsigned a, unsigned b, uint64_t raw,
                            ulp_float_fmt f, unsigned W)
{
	const unsigned lowe = f.ebits - sa_symbits(f);
	const unsigned lowm = f.mbits - sa_topbits(f);
	const unsigned tb = sa_topbits(f);
	uint64_t e = ((uint64_t)a << lowe) | (raw >> lowm);
	uint64_t m = ((uint64_t)(b & ((1u << tb) - 1)) << lowm) |
	             (raw & ((1ull << lowm) - 1));
	return ((uint64_t)(b >> tb) << (W - 1)) | (e << f.mbits) | m;
}

/* ------------------------------------------------------------ encoder */

typedef struct delta_pass {
	uint64_t raw_bits; /* raw bits the delta coding needs */
	size_t raw_bytes;  /* bytes written to fs->raw */
} delta_pass;

/* A row of n cells from its four interleaved partial histograms, times
 * scale (added to dst when add, else stored), which are left zero. */
static void hist_ways_sum(uint32_t *restrict dst, uint32_t *restrict h4,
                          unsigned n, int add, uint32_t scale)
{
	for (unsigned j = 0; j < n; j++)
		dst[j] = (add ? dst[j] : 0) +
		         scale * (h4[4 * j] + h4[4 * j + 1] + h4[4 * j + 2] +
		                  h4[4 * j + 3]);
	memset(h4, 0, sizeof(uint32_t) * 4 * n);
}

/* The symbol and raw bit count of the residual of c against r. */
ULP_INLINE unsigned delta_symbol(uint64_t c, uint64_t r, unsigned *nraw_out,
                                 uint64_t *mag_out, unsigned *k_out, unsigned W)
{
	uint64_t diff = (el_ord(c, W) - el_ord(r, W)) & el_mask(W);
	uint64_t neg = diff >> (W - 1);
	uint64_t mag = ((diff ^ (0 - neg)) + neg) & el_mask(W);
	/* branch-free: zero residuals are common and unpredictable */
	unsigned k = 64u - (unsigned)__builtin_clzll(mag | 1) - (mag == 0);
	/* by table: compilers turn the k < 2 case into a branch, which
	 * mispredicts constantly */
	const ksym_info *ki = &ktab[k];
	unsigned nraw = ki->nraw;
	unsigned b1 = (unsigned)(mag >> nraw) & ki->b1mask;
	*nraw_out = nraw;
	*mag_out = mag;
	*k_out = k;
	return ki->base + (unsigned)neg * ki->negmul + b1;
}

/* The standalone estimate only steers the choice of coding: a 1-in-step
 * sample of the elements is plenty (counts scaled up to n). */
ULP_INLINE void sa_sample_w(ulp_float_scratch *fs, ulp_float_fmt f,
                            const uint8_t *cur, size_t n, size_t step,
                            unsigned W)
{
	const unsigned nb = 2u << sa_topbits(f);
	for (size_t j = 0; j < n; j += step) {
		sa_parts sp = sa_split(el_load(cur, j, W), f, W);
		fs->hist_s[sp.a] += (uint32_t)step;
		fs->hist_b[sp.a * nb + sp.b] += (uint32_t)step;
	}
}

/* Streams of at least this many elements first estimate the delta
 * coding on a sample of DELTA_SAMPLES elements, and skip the delta pass
 * where standalone coding is clearly cheaper (Adam's first moment).  A
 * fixed count keeps the cost off the large streams, which delta coding
 * mostly wins. */
#define DELTA_SAMPLE_MIN (64u << 10)
#define DELTA_SAMPLES 2048u
#define DELTA_SAMPLE_AHEAD 16u

/* The standalone estimate's samples: 1 in SA_DENSE_STEP elements, or
 * first 1 in SA_SPARSE_STEP for streams of SA_SPARSE_MIN elements or
 * more (at least 1024 samples).  The dense sample's loop is bound by its
 * histogram's read-modify-write chain, not by its loads: it cost 8% of a
 * bf16 delta encode (perf, bench/floatcode_bench).  The sparse estimate
 * decides alone where the delta coding's estimate is below
 * SA_SPARSE_CLEAR of it, a margin far above its sampling error. */
#define SA_DENSE_STEP 8u
#define SA_SPARSE_STEP 61u /* odd: a sample of rows of 2^k elements */
#define SA_SPARSE_MIN (64u << 10)
#define SA_SPARSE_CLEAR 0.9

/* The sampled delta histogram into hist_d (rows flagged in dused, counts
 * scaled up to about n; n >= DELTA_SAMPLES); returns the raw bits, scaled
 * the same way. */
ULP_INLINE uint64_t delta_sample_w(ulp_float_scratch *fs, ulp_float_fmt f,
                                   const uint8_t *cur, const uint8_t *ref,
                                   size_t n, unsigned W)
{
	const unsigned nsym = DELTA_NSYM(W);
	const size_t step = n / DELTA_SAMPLES;
	uint64_t raw = 0;
	for (size_t j = 0; j < n; j += step) {
		/* the samples lie a cache line or more apart, each a miss
		 * (and a TLB miss): fetched DELTA_SAMPLE_AHEAD ahead */
		size_t ahead = j + DELTA_SAMPLE_AHEAD * step;
		if (ahead < n) {
			__builtin_prefetch(ref + ahead * (W / 8));
			__builtin_prefetch(cur + ahead * (W / 8));
		}
		uint64_t r = el_load(ref, j, W), mag;
		unsigned nraw, k;
		unsigned s =
			delta_symbol(el_load(cur, j, W), r, &nraw, &mag, &k, W);
		unsigned cx = el_ctx(r, f);
		fs->hist_d[cx * nsym + s] += (uint32_t)step;
		fs->dused[cx] = 1;
		raw += nraw;
	}
	return raw * step;
}

/* One pass over a stream with a reference: delta symbols, contexts and
 * raw bits; the histogram of every element, or with sampled of the
 * groups ulp_delta_group_counted picks (scaled up). */
ULP_INLINE void delta_pass_w(ulp_float_scratch *fs, ulp_float_fmt f,
                             const uint8_t *cur, const uint8_t *ref, size_t n,
                             int alt, int sampled, delta_pass *dp, unsigned W)
{
	const unsigned nsym = DELTA_NSYM(W);
	uint8_t *restrict sym = fs->sym;
	uint8_t *restrict ctx = fs->ctx;
	uint32_t *restrict h4 = fs->hist_d4;
	ulp_bitw bw = { fs->raw.p, 0, 0 };
	uint64_t raw_bits = 0;
	unsigned kprev = 0;
	size_t i = 0;
	int simd = alt ? 0 : ulp_rans_simd();
	if ((W == 16 || W == 32) && simd >= ULP_SIMD_AVX512 && !fs->hist_dw &&
	    !(fs->hist_dw = calloc(ULP_DELTA_WAYS_CELLS, sizeof(uint32_t))))
		simd = ULP_SIMD_AVX2; /* no room for its histograms */
	if (W == 16 && simd >= ULP_SIMD_AVX512)
		i = ulp_delta16_pass_avx512(cur, ref, n, f.mbits,
		                            (1u << f.ebits) - 1, sym, ctx, &bw,
		                            &raw_bits, h4, fs->hist_dw, nsym,
		                            fs->dused, sampled);
	else if (W == 16 && simd)
		i = ulp_delta16_pass_avx2(cur, ref, n, f.mbits,
		                          (1u << f.ebits) - 1, sym, ctx, &bw,
		                          &raw_bits, h4, nsym, fs->dused,
		                          sampled);
	if (W == 32 && simd >= ULP_SIMD_AVX512)
		i = ulp_delta32_pass_avx512(cur, ref, n, sym, ctx, &bw,
		                            &raw_bits, h4, fs->hist_dw, nsym,
		                            fs->dused, sampled);
	else if (W == 32 && simd)
		i = ulp_delta32_pass_avx2(cur, ref, n, sym, ctx, &bw, &raw_bits,
		                          h4, nsym, fs->dused, sampled);
	/* the elements the SIMD pass counted (a multiple of 8) */
	const size_t counted = i;
	for (; i < n; i++) {
		uint64_t r = el_load(ref, i, W), mag;
		unsigned nraw, k;
		unsigned s =
			delta_symbol(el_load(cur, i, W), r, &nraw, &mag, &k, W);
		unsigned cx = el_ctx(r, f);
		sym[i] = (uint8_t)s;
		ctx[i] = (uint8_t)cx;
		uint64_t low = mag & ((1ull << nraw) - 1);
		if (W == 64)
			ulp_bitw_put64(&bw, low, nraw);
		else
			ulp_bitw_put(&bw, low, nraw);
		raw_bits += nraw;
		if (alt) {
			fs->hist_pk[(pk_bucket(kprev) * ULP_RANS_NCTX + cx) *
			                    nsym +
			            s]++;
			kprev = k;
		}
	}
	/* Counting what the SIMD pass did not in a second, tight pass into
	 * four interleaved partial histograms: runs of equal symbols would
	 * otherwise serialise on one counter's read-modify-write. */
	{
		uint8_t *restrict used = fs->dused;
		size_t j = counted;
		/* counted is a multiple of 8: four elements of one group */
		for (; j + 4 <= n; j += 4) {
			if (sampled && !ulp_delta_group_counted(j / 8))
				continue;
			h4[(ctx[j] * nsym + sym[j]) * 4]++;
			h4[(ctx[j + 1] * nsym + sym[j + 1]) * 4 + 1]++;
			h4[(ctx[j + 2] * nsym + sym[j + 2]) * 4 + 2]++;
			h4[(ctx[j + 3] * nsym + sym[j + 3]) * 4 + 3]++;
			used[ctx[j]] = used[ctx[j + 1]] = used[ctx[j + 2]] =
				used[ctx[j + 3]] = 1;
		}
		for (; j < n; j++) {
			if (sampled && !ulp_delta_group_counted(j / 8))
				continue;
			h4[(ctx[j] * nsym + sym[j]) * 4]++;
			used[ctx[j]] = 1;
		}
	}
	for (unsigned c = 0; c < ULP_RANS_NCTX; c++) {
		if (!fs->dused[c])
			continue;
		hist_ways_sum(fs->hist_d + (size_t)c * nsym,
		              h4 + (size_t)c * nsym * 4, nsym, 0,
		              sampled ? ULP_DELTA_SAMPLE_SCALE : 1);
	}
	dp->raw_bytes = (size_t)(ulp_bitw_finish(&bw) - fs->raw.p);
	dp->raw_bits = raw_bits;
}

/* Standalone pass: A symbols into sym[], B symbols into ctx[] (the
 * second rANS block codes ctx[] in the context of sym[]), raw bits; the
 * histograms of every element, or with sampled of the groups
 * ulp_delta_group_counted picks (scaled up). */
ULP_INLINE size_t sa_pass_w(ulp_float_scratch *fs, ulp_float_fmt f,
                            const uint8_t *cur, size_t n, int sampled,
                            unsigned W)
{
	const uint32_t scale = sampled ? ULP_DELTA_SAMPLE_SCALE : 1;
	const unsigned nraw = sa_nraw(f);
	const unsigned nb = 2u << sa_topbits(f);
	uint8_t *restrict a = fs->sym;
	uint8_t *restrict b = fs->ctx;
	uint32_t *restrict hs = fs->hist_s;
	uint32_t *restrict hb = fs->hist_b;
	ulp_bitw bw = { fs->raw.p, 0, 0 };
	size_t i = 0;
	if (W == 16 && ulp_rans_simd() >= ULP_SIMD_AVX512)
		i = ulp_sa16_pass_avx512(cur, n, f.mbits, (1u << f.ebits) - 1,
		                         sa_topbits(f), a, b, &bw, fs->hist_b4,
		                         fs->bused, sampled);
	else if (W == 16 && ulp_rans_simd())
		i = ulp_sa16_pass_avx2(cur, n, f.mbits, (1u << f.ebits) - 1,
		                       sa_topbits(f), a, b, &bw, fs->hist_b4,
		                       fs->bused, sampled);
	if (W == 32 && ulp_rans_simd())
		i = ulp_sa32_pass_avx2(cur, n, a, b, &bw, fs->hist_b4,
		                       fs->bused, sampled);
	const size_t counted = i;
	for (; i < n; i++) {
		sa_parts sp = sa_split(el_load(cur, i, W), f, W);
		a[i] = (uint8_t)sp.a;
		b[i] = (uint8_t)sp.b;
		if (W == 64)
			ulp_bitw_put64(&bw, sp.raw, nraw);
		else
			ulp_bitw_put(&bw, sp.raw, nraw);
	}
	/* the exponent histogram is the row sums of the pair histogram:
	 * one counter per element, whose updates chain less often */
	for (i = counted; i < n; i++)
		if (!sampled || ulp_delta_group_counted(i / 8))
			hb[a[i] * nb + b[i]] += scale;
	for (unsigned e = 0; e < ULP_RANS_NCTX; e++) {
		if (!fs->bused[e])
			continue;
		hist_ways_sum(hb + e * nb, fs->hist_b4 + (size_t)e * nb * 4, nb,
		              1, scale);
		fs->bused[e] = 0;
	}
	for (unsigned e = 0; e < (1u << sa_symbits(f)); e++)
		for (unsigned k = 0; k < nb; k++)
			hs[e] += hb[e * nb + k];
	return (size_t)(ulp_bitw_finish(&bw) - fs->raw.p);
}

/* Instantiate a call for each supported format with the format as a
 * compile-time constant, so that shifts and masks fold away. */
#define ULP_DISPATCH_FMT(f, CALL)                                  \
	do {                                                       \
		if ((f).width == 16 && (f).ebits == 8)             \
			CALL(((ulp_float_fmt){ 16, 8, 7 }), 16);   \
		else if ((f).width == 16)                          \
			CALL(((ulp_float_fmt){ 16, 5, 10 }), 16);  \
		else if ((f).width == 32)                          \
			CALL(((ulp_float_fmt){ 32, 8, 23 }), 32);  \
		else if ((f).width == 64)                          \
			CALL(((ulp_float_fmt){ 64, 11, 52 }), 64); \
		else if ((f).ebits == 4)                           \
			CALL(((ulp_float_fmt){ 8, 4, 3 }), 8);     \
		else                                               \
			CALL(((ulp_float_fmt){ 8, 5, 2 }), 8);     \
	} while (0)

static int fmt_supported(ulp_float_fmt f)
{
	static const ulp_float_fmt known[] = { { 16, 8, 7 },  { 16, 5, 10 },
		                               { 32, 8, 23 }, { 64, 11, 52 },
		                               { 8, 4, 3 },   { 8, 5, 2 } };
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].width == f.width && known[i].ebits == f.ebits &&
		    known[i].mbits == f.mbits)
			return 1;
	return 0;
}

static void delta_pass_any(ulp_float_scratch *fs, ulp_float_fmt f,
                           const uint8_t *cur, const uint8_t *ref, size_t n,
                           int alt, int sampled, delta_pass *dp)
{
	/* alt is a compile-time constant in each instance too */
#define DELTA_PASS_ALT(F, w) delta_pass_w(fs, F, cur, ref, n, 1, sampled, dp, w)
#define DELTA_PASS(F, w) delta_pass_w(fs, F, cur, ref, n, 0, sampled, dp, w)
	if (alt)
		ULP_DISPATCH_FMT(f, DELTA_PASS_ALT);
	else
		ULP_DISPATCH_FMT(f, DELTA_PASS);
#undef DELTA_PASS_ALT
#undef DELTA_PASS
}

static void sa_sample_any(ulp_float_scratch *fs, ulp_float_fmt f,
                          const uint8_t *cur, size_t n, size_t step)
{
#define SA_SAMPLE(F, w) sa_sample_w(fs, F, cur, n, step, w)
	ULP_DISPATCH_FMT(f, SA_SAMPLE);
#undef SA_SAMPLE
}

static uint64_t delta_sample_any(ulp_float_scratch *fs, ulp_float_fmt f,
                                 const uint8_t *cur, const uint8_t *ref,
                                 size_t n)
{
	uint64_t r;
#define DELTA_SAMPLE_CALL(F, w) r = delta_sample_w(fs, F, cur, ref, n, w)
	ULP_DISPATCH_FMT(f, DELTA_SAMPLE_CALL);
#undef DELTA_SAMPLE_CALL
	return r;
}

static size_t sa_pass_any(ulp_float_scratch *fs, ulp_float_fmt f,
                          const uint8_t *cur, size_t n, int sampled)
{
	size_t r;
#define SA_PASS(F, w) r = sa_pass_w(fs, F, cur, n, sampled, w)
	ULP_DISPATCH_FMT(f, SA_PASS);
#undef SA_PASS
	return r;
}

/* Entropy of a context-by-symbol histogram and a rough count of the table
 * bytes it will cost (about two bytes per used cell). */
static double hist2_bits(const uint32_t *h, unsigned nctx, unsigned nsym,
                         size_t *cells)
{
	double bits = 0;
	size_t used = 0;
	for (unsigned c = 0; c < nctx; c++) {
		const uint32_t *row = h + (size_t)c * nsym;
		int any = 0;
		for (unsigned s = 0; s < nsym; s++)
			if (row[s]) {
				used++;
				any = 1;
			}
		if (any)
			bits += ulp_hist_bits(row, nsym);
	}
	if (cells)
		*cells = used;
	return bits;
}

/* The estimated cost in bits of coding cur[0..n) standalone, tables
 * included, from a 1-in-step sample (hist_s and hist_b: its counts). */
static double sa_estimate(ulp_float_scratch *fs, ulp_float_fmt f,
                          const uint8_t *cur, size_t n, size_t step)
{
	const unsigned nb = 2u << sa_topbits(f);
	const unsigned snsym = 1u << sa_symbits(f);
	size_t scells, bcells;
	memset(fs->hist_s, 0, sizeof(uint32_t) * snsym);
	memset(fs->hist_b, 0, sizeof(uint32_t) * ULP_RANS_NCTX * nb);
	sa_sample_any(fs, f, cur, n, step);
	double bits = hist2_bits(fs->hist_s, 1, snsym, &scells) +
	              hist2_bits(fs->hist_b, ULP_RANS_NCTX, nb, &bcells) +
	              (double)n * sa_nraw(f);
	return bits + 16.0 * (double)(scells + bcells);
}

/* The standalone estimate to weigh a delta cost dcost against: sa_cost,
 * from a 1-in-*step sample, while the choice is clear, else the dense
 * sample's (then *step becomes SA_DENSE_STEP). */
static double sa_settle(ulp_float_scratch *fs, ulp_float_fmt f,
                        const uint8_t *cur, size_t n, size_t *step,
                        double sa_cost, double dcost)
{
	if (*step == SA_DENSE_STEP || dcost <= SA_SPARSE_CLEAR * sa_cost)
		return sa_cost;
	*step = SA_DENSE_STEP;
	return sa_estimate(fs, f, cur, n, SA_DENSE_STEP);
}

/* The (k, sign) symbol of a delta symbol: what FM-Delta and ULPack code
 * (the first bit below the leading one then counts as raw). */
static unsigned fold_ks(unsigned s)
{
	return s < 3 ? s : 2 * ((s + 5) >> 2) - 1 + (((s + 5) >> 1) & 1);
}

/* Entropy of (k, sign) symbols in rows contexts (1: no context), plus
 * one raw bit for each element with k >= 2. */
static double ks_bits(const uint32_t *h, unsigned rows, unsigned nsym)
{
	uint32_t m[MAX_DELTA_NSYM];
	double bits = 0;
	for (unsigned c = 0; c < rows; c++) {
		memset(m, 0, sizeof(m));
		for (unsigned s = 0; s < nsym; s++) {
			m[fold_ks(s)] += h[(size_t)c * nsym + s];
			if (s >= 3)
				bits += h[(size_t)c * nsym + s];
		}
		bits += ulp_hist_bits(m, nsym);
	}
	return bits;
}

/* Without context: the rows summed (FM-Delta-like). */
static double noctx_bits(const uint32_t *h, unsigned nsym)
{
	uint32_t m[MAX_DELTA_NSYM] = { 0 };
	for (unsigned c = 0; c < ULP_RANS_NCTX; c++)
		for (unsigned s = 0; s < nsym; s++)
			m[s] += h[(size_t)c * nsym + s];
	return ks_bits(m, 1, nsym);
}

/* Restore the all-zero state of hist_d (see dused). */
static void clear_delta_rows(ulp_float_scratch *fs, unsigned nsym)
{
	for (unsigned c = 0; c < ULP_RANS_NCTX; c++) {
		if (!fs->dused[c])
			continue;
		memset(fs->hist_d + (size_t)c * nsym, 0,
		       sizeof(uint32_t) * nsym);
		fs->dused[c] = 0;
	}
}

/* One rANS block, preceded by a varint of its length; with nesc, from
 * counts that may miss symbols (ulp_rans_encode_esc: *nesc escaped). */
static int emit_block(ulp_float_scratch *fs, const uint8_t *sym,
                      const uint8_t *ctx, size_t n, unsigned nsym,
                      unsigned nctx, const uint32_t *hist, size_t *nesc,
                      ulp_buf *out)
{
	size_t start = out->len;
	size_t gap = ulp_buf_open_gap(out, ulp_rans_bound(n, nsym));
	if (!gap)
		return ULP_ERR_NOMEM;
	int rc = nesc ? ulp_rans_encode_esc(fs->rs, sym, ctx, n, nsym, nctx,
	                                    hist, out, nesc)
	              : ulp_rans_encode(fs->rs, sym, ctx, n, nsym, nctx, hist,
	                                out);
	if (rc)
		return rc;
	return ulp_buf_close_gap(out, start, gap);
}

/* A sample that made more escapes than one in this many symbols cost
 * more than exact counts would: they are made after all. */
#define DELTA_ESC_MAX_FRAC 1024

/* The delta block of fs->sym and fs->ctx from hist_d (sampled: counts of
 * a sample, escapes allowed). */
static int emit_delta_block(ulp_float_scratch *fs, size_t n, unsigned nsym,
                            int sampled, ulp_buf *out)
{
	size_t start = out->len, nesc = 0;
	int rc = emit_block(fs, fs->sym, fs->ctx, n, nsym, ULP_RANS_NCTX,
	                    fs->hist_d, sampled ? &nesc : NULL, out);
	if (rc || nesc <= n / DELTA_ESC_MAX_FRAC)
		return rc;
	out->len = start;
	clear_delta_rows(fs, nsym);
	for (size_t i = 0; i < n; i++) {
		fs->hist_d[(size_t)fs->ctx[i] * nsym + fs->sym[i]]++;
		fs->dused[fs->ctx[i]] = 1;
	}
	return emit_block(fs, fs->sym, fs->ctx, n, nsym, ULP_RANS_NCTX,
	                  fs->hist_d, NULL, out);
}

/* The exact delta histogram of an alt-stats pass, the previous-k
 * buckets summed, in fs->hist_d4 (which the caller zeroes again). */
static const uint32_t *exact_delta_hist(ulp_float_scratch *fs, unsigned nsym)
{
	uint32_t *hx = fs->hist_d4;
	const size_t cells = (size_t)ULP_RANS_NCTX * nsym;
	for (unsigned b = 0; b < PK_BUCKETS; b++)
		for (size_t j = 0; j < cells; j++)
			hx[j] += fs->hist_pk[b * cells + j];
	return hx;
}

static int emit_raw(ulp_float_scratch *fs, size_t raw_bytes, ulp_buf *out)
{
	if (ulp_buf_reserve(out, out->len + raw_bytes))
		return ULP_ERR_NOMEM;
	memcpy(out->p + out->len, fs->raw.p, raw_bytes);
	out->len += raw_bytes;
	return ULP_OK;
}

static int emit_coding(uint8_t coding, ulp_buf *out)
{
	if (ulp_buf_reserve(out, out->len + 1))
		return ULP_ERR_NOMEM;
	out->p[out->len++] = coding;
	return ULP_OK;
}

/* Fused standalone coding (format 5): one rANS symbol per element, the
 * code of its (A, B) pair, so that decoding takes one step an element
 * instead of two.  Codes go to the pairs in pair order (A, then B), to
 * all of them when they are at most 256, else to the SA_FUSED_CODES most
 * frequent; the others share the escape code K (the number of codes) and
 * are coded after the codes as STANDALONE codes every element, over the
 * escaped elements only.  Stream, after the coding byte:
 *   [varint 2 * rows + esc] rows x [u8 A][u16 mask of the B with a code]
 *   [varint len][codes' block, K + esc symbols]
 *   esc: [varint nesc], nesc > 0: [varint len][A block][varint len][B
 *   block, in A's context]
 *   [raw bits, as STANDALONE's]
 * Streams of fewer than SA_FUSED_MIN elements stay STANDALONE: the map
 * and a table of up to 256 codes would cost more than the step saves.
 * Streams of SA_SAMPLED_MIN elements or more take their codes and table
 * from the pairs of a quarter of the elements (the groups
 * ulp_delta_group_counted picks), with an escape code for the pairs the
 * sample missed: counting every pair was 40% of the fp32 pass, and with
 * the passes' prefetch it costs the 16-bit encoding 13% (measured). */
#define SA_FUSED_CODES 255u
#define SA_FUSED_MIN 1024u
#define SA_SAMPLED_MIN (64u << 10)

static int cmp_u32_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x < y) - (x > y);
}

/* Marks in pcode (1, else 0) the pairs counted in hist_b that get a
 * code: those worth a slot of the table (at least n / ULP_RANS_M
 * elements), at most SA_FUSED_CODES of them when they are more than 256
 * or some pair needs the escape code (always so for counts of a sample,
 * esc).  A table of 2^11 slots codes pairs rarer than that badly
 * (measured on bf16 weights: 0.9% over the entropy with a code for every
 * pair), and their escape costs the order-0 exponent and B in its
 * context, which are as good as STANDALONE; returns how many, and in
 * *esc whether there is an escape code. */
static unsigned fused_pick(ulp_float_scratch *fs, unsigned npair, size_t n,
                           int *esc)
{
	const uint32_t *hb = fs->hist_b;
	uint32_t v[ULP_RANS_NCTX * SA_MAX_NB];
	const uint32_t min = (uint32_t)((n + ULP_RANS_M - 1) / ULP_RANS_M);
	unsigned used = 0, rare = 0;
	for (unsigned p = 0; p < npair; p++) {
		if (hb[p] >= min && hb[p])
			v[used++] = hb[p];
		else
			rare += hb[p] != 0;
	}
	*esc |= rare || used > ULP_RANS_MAXSYM;
	/* the escape code needs a symbol of its own */
	const unsigned cap = *esc ? SA_FUSED_CODES : ULP_RANS_MAXSYM;
	uint32_t cut = min ? min : 1;
	unsigned ties = cap;
	if (used > cap) {
		/* the cap most frequent, ties in pair order */
		qsort(v, used, sizeof(v[0]), cmp_u32_desc);
		cut = v[cap - 1];
		for (unsigned k = 0; k < cap; k++)
			ties -= v[k] > cut;
	}
	unsigned k = 0;
	for (unsigned p = 0; p < npair; p++) {
		int tie = hb[p] == cut && ties;
		int take = hb[p] > cut || tie;
		ties -= (unsigned)tie;
		fs->pcode[p] = (uint8_t)take;
		k += (unsigned)take;
	}
	return k;
}

/* The fused stream of the symbols of a standalone pass (A in fs->sym, B
 * in fs->ctx, counts in hist_b, of a sample with sampled; hist_s and
 * hist_b are spent). */
static int emit_fused(ulp_float_scratch *fs, unsigned nsa, unsigned nb,
                      size_t n, int sampled, ulp_buf *out)
{
	const unsigned npair = nsa * nb;
	uint32_t *hb = fs->hist_b, *hs = fs->hist_s;
	int esc = sampled;
	const unsigned K = fused_pick(fs, npair, n, &esc);
	unsigned rows = 0, code = 0;
	uint16_t mask[ULP_RANS_NCTX];
	uint8_t used[ULP_RANS_NCTX];
	memset(fs->hist_f, 0, sizeof(fs->hist_f));
	for (unsigned a = 0; a < nsa; a++) {
		mask[a] = 0;
		/* a sample may miss an exponent that occurs */
		used[a] = (uint8_t)sampled;
		for (unsigned b = 0; b < nb; b++) {
			unsigned p = a * nb + b;
			if (fs->pcode[p]) {
				fs->hist_f[code] = hb[p];
				/* K may be 256 only without escapes, when no
				 * element reads the code of a pair without */
				fs->pcode[p] = (uint8_t)code++;
				mask[a] |= (uint16_t)(1u << b);
			} else {
				fs->pcode[p] = (uint8_t)K;
				if (hb[p]) /* then K < 256 */
					fs->hist_f[K] += hb[p];
			}
			used[a] |= hb[p] != 0;
		}
		rows += mask[a] != 0;
	}
	if (esc && !fs->hist_f[K])
		fs->hist_f[K] = 1; /* the pairs a sample missed */
	/* a sample's escapes are known after coding: room for all */
	const size_t room = sampled ? n : esc ? fs->hist_f[K] : 0;
	if (ulp_buf_reserve(out, out->len + ULP_VARINT_MAX + 3 * rows) ||
	    esc_reserve(fs, room))
		return ULP_ERR_NOMEM;
	out->len += ulp_varint_put(out->p + out->len, 2 * rows + (unsigned)esc);
	for (unsigned a = 0; a < nsa; a++) {
		if (!mask[a])
			continue;
		out->p[out->len++] = (uint8_t)a;
		ulp_put16(out->p + out->len, mask[a]);
		out->len += 2;
	}

	/* the codes are never stored: the rANS coder reads them from
	 * per-exponent rows of the codes' entries */
	uint32_t *ev = (uint32_t *)(void *)fs->esc;
	ulp_rans_map map = { fs->pcode, nb, nsa, used, esc ? K : 256, ev, room };
	size_t start = out->len;
	size_t gap = ulp_buf_open_gap(out, ulp_rans_bound(n, K + 1));
	if (!gap)
		return ULP_ERR_NOMEM;
	int rc = ulp_rans_encode_map(fs->rs, fs->ctx, fs->sym, n,
	                             K + (unsigned)esc, fs->hist_f, &map, out);
	if (!rc)
		rc = ulp_buf_close_gap(out, start, gap);
	if (rc || !esc)
		return rc;
	const size_t nesc = map.nesc;
	if (ulp_buf_reserve(out, out->len + ULP_VARINT_MAX))
		return ULP_ERR_NOMEM;
	out->len += ulp_varint_put(out->p + out->len, nesc);
	if (!nesc)
		return ULP_OK;
	/* the escaped elements' exact counts, their symbols after the list */
	uint8_t *ea = fused_esc(fs, nesc), *eb = ea + nesc;
	memset(hs, 0, sizeof(uint32_t) * nsa);
	memset(hb, 0, sizeof(uint32_t) * npair);
	for (size_t j = 0; j < nesc; j++) {
		ea[j] = fs->sym[ev[j]];
		eb[j] = fs->ctx[ev[j]];
		hs[ea[j]]++;
		hb[ea[j] * nb + eb[j]]++;
	}
	rc = emit_block(fs, ea, NULL, nesc, nsa, 1, hs, NULL, out);
	if (!rc)
		rc = emit_block(fs, eb, ea, nesc, nb, nsa, hb, NULL, out);
	return rc;
}

/* Code the n elements of cur standalone (a coding byte, then the
 * symbols, fused or in two blocks): the raw bytes still to emit into
 * *raw_bytes, the model's bits into *model_bits.  0 or ULP_ERR_*. */
static int emit_standalone(ulp_float_scratch *fs, ulp_float_fmt f,
                           const uint8_t *cur, size_t n, size_t *raw_bytes,
                           double *model_bits, ulp_buf *out)
{
	const unsigned sbits = sa_symbits(f);
	const unsigned snsym = 1u << sbits;
	const unsigned nb = 2u << sa_topbits(f);
	int rc;

	memset(fs->hist_s, 0, sizeof(uint32_t) * snsym);
	memset(fs->hist_b, 0, sizeof(uint32_t) * ULP_RANS_NCTX * nb);
	const int fused = n >= SA_FUSED_MIN;
	const int sa_sampled = n >= SA_SAMPLED_MIN;
	*raw_bytes = sa_pass_any(fs, f, cur, n, sa_sampled);
	/* for large streams, the entropy of the sample's counts */
	*model_bits = hist2_bits(fs->hist_s, 1, snsym, NULL) +
	              hist2_bits(fs->hist_b, ULP_RANS_NCTX, nb, NULL) +
	              (double)n * sa_nraw(f);
	rc = emit_coding(fused ? ULP_SC_FUSED : ULP_SC_STANDALONE, out);
	if (!rc && fused)
		rc = emit_fused(fs, snsym, nb, n, sa_sampled, out);
	if (!rc && !fused)
		rc = emit_block(fs, fs->sym, NULL, n, snsym, 1, fs->hist_s,
		                NULL, out);
	if (!rc && !fused)
		rc = emit_block(fs, fs->ctx, fs->sym, n, nb, 1u << sbits,
		                fs->hist_b, NULL, out);
	return rc;
}

int ulp_float_encode(ulp_float_scratch *fs, ulp_float_fmt f, const uint8_t *cur,
                     const uint8_t *ref, size_t n, int alt_stats, ulp_buf *out,
                     ulp_dtype_stats *st)
{
	const unsigned W = f.width;
	const size_t nbytes = n * (W / 8);
	const unsigned dnsym = DELTA_NSYM(W);
	size_t start = out->len;
	double model_bits = 0;
	int rc;

	if (!fmt_supported(f))
		return ULP_ERR_ARG;
	if (st) {
		st->elems += n;
		st->bytes_in += nbytes;
		st->ref_elems += ref ? n : 0;
	}
	if (ref && memcmp(cur, ref, nbytes) == 0) {
		if (ulp_buf_reserve(out, out->len + 1))
			return ULP_ERR_NOMEM;
		out->p[out->len++] = ULP_SC_IDENTICAL;
		if (st) {
			st->delta_elems += n;
			st->bytes_out += 1;
		}
		return ULP_OK;
	}
	if (scratch_reserve(fs, n) || ulp_buf_reserve(&fs->raw, nbytes + 16))
		return ULP_ERR_NOMEM;
	const int sampled = n >= ULP_DELTA_SAMPLED_MIN;

	int use_delta = 0;
	size_t raw_bytes = 0;
	if (ref) {
		delta_pass dp;
		size_t dcells;
		/* large streams start from a sparse sample, which settles
		 * every clear choice (most are: a delta version's weights
		 * cost about 6 bits an element against 10 standalone); a
		 * close one takes the dense sample's estimate, as always */
		size_t sa_step = !alt_stats && n >= SA_SPARSE_MIN
		                         ? SA_SPARSE_STEP
		                         : SA_DENSE_STEP;
		double sa_cost = sa_estimate(fs, f, cur, n, sa_step);
		if (!alt_stats && n >= DELTA_SAMPLE_MIN) {
			/* a sample's entropy errs low, and more so for the
			 * delta model's many cells: skipping the delta pass
			 * on a clear margin keeps the full pass's choice */
			double est =
				(double)delta_sample_any(fs, f, cur, ref, n);
			est += hist2_bits(fs->hist_d, ULP_RANS_NCTX, dnsym,
			                  &dcells) +
			       16.0 * dcells;
			sa_cost = sa_settle(fs, f, cur, n, &sa_step, sa_cost,
			                    est);
			if (est > 1.02 * sa_cost)
				goto emit;
			/* a sampled pass may not count these rows again,
			 * and must build the tables an alt_stats pass does */
			clear_delta_rows(fs, dnsym);
		}
		if (alt_stats)
			memset(fs->hist_pk, 0,
			       sizeof(uint32_t) * PK_BUCKETS * ULP_RANS_NCTX *
			               dnsym);
		delta_pass_any(fs, f, cur, ref, n, alt_stats, sampled, &dp);
		double dbits =
			hist2_bits(fs->hist_d, ULP_RANS_NCTX, dnsym, &dcells) +
			(double)dp.raw_bits;
		const double dcost = dbits + 16.0 * dcells;
		sa_cost = sa_settle(fs, f, cur, n, &sa_step, sa_cost, dcost);
		use_delta = dcost < sa_cost;
		if (use_delta) {
			raw_bytes = dp.raw_bytes;
			model_bits = dbits;
		}
		if (st && alt_stats) {
			/* the model statistics from every element, where
			 * the tables may come from a sample */
			const uint32_t *hx = exact_delta_hist(fs, dnsym);
			st->delta_ctx_bits +=
				ks_bits(hx, ULP_RANS_NCTX, dnsym) + dp.raw_bits;
			st->delta_noctx_bits +=
				noctx_bits(hx, dnsym) + dp.raw_bits;
			st->delta_prevk_bits +=
				ks_bits(fs->hist_pk, PK_BUCKETS * ULP_RANS_NCTX,
			                dnsym) +
				dp.raw_bits;
			if (use_delta)
				model_bits = hist2_bits(hx, ULP_RANS_NCTX,
				                        dnsym, NULL) +
				             (double)dp.raw_bits;
			memset(fs->hist_d4, 0,
			       sizeof(uint32_t) * ULP_RANS_NCTX * dnsym);
		}
	}
emit:
	if (use_delta) {
		rc = emit_coding(ULP_SC_DELTA, out);
		if (!rc)
			rc = emit_delta_block(fs, n, dnsym, sampled, out);
	} else {
		rc = emit_standalone(fs, f, cur, n, &raw_bytes, &model_bits,
		                     out);
	}
	if (!rc)
		rc = emit_raw(fs, raw_bytes, out);
	if (ref)
		clear_delta_rows(fs, dnsym);
	if (rc)
		return rc;
	if (out->len - start > nbytes + 1) {
		/* Incompressible: store as is. */
		out->len = start;
		if (ulp_buf_reserve(out, start + 1 + nbytes))
			return ULP_ERR_NOMEM;
		out->p[out->len++] = ULP_SC_RAW;
		memcpy(out->p + out->len, cur, nbytes);
		out->len += nbytes;
		use_delta = 0;
		model_bits = 8.0 * nbytes;
	}
	if (st) {
		if (use_delta)
			st->delta_elems += n;
		st->bytes_out += out->len - start;
		st->model_bits += model_bits;
	}
	return ULP_OK;
}

/* ------------------------------------------------------------ decoder */

/* Per-symbol facts for branch-free reconstruction. */
typedef struct dsym_info {
	uint64_t lead; /* the leading one and the modelled bit below it */
	uint64_t neg;  /* all ones for a negative residual */
	unsigned nraw; /* raw bits below those */
} dsym_info;

static void dsym_info_init(dsym_info *info, unsigned W)
{
	info[0] = (dsym_info){ 0, 0, 0 };
	info[1] = (dsym_info){ 1, 0, 0 };
	info[2] = (dsym_info){ 1, ~0ull, 0 };
	for (unsigned k = 2; k <= W; k++)
		for (unsigned ng = 0; ng < 2; ng++)
			for (unsigned b = 0; b < 2; b++)
				info[4 * k - 5 + 2 * ng + b] =
					(dsym_info){ (2ull | b) << (k - 2),
					             ng ? ~0ull : 0, k - 2 };
}

/* The SIMD reconstruction of 16- or 32-bit delta elements (W) at this
 * level: from raw bit *pos, while its steps' 64-byte windows lie in
 * rawp[0..rawlen); returns the elements done. */
ULP_INLINE size_t delta_simd_w(const uint8_t *sym, const uint8_t *rawp,
                               size_t rawlen, const uint8_t *ref, size_t n,
                               uint8_t *dst, uint64_t *pos, unsigned W)
{
	const int simd = ulp_rans_simd();
	size_t i = 0;
	if (W == 16 && simd >= ULP_SIMD_AVX512)
		i = ulp_delta16_avx512(sym, rawp, rawlen, ref, n, dst, pos);
	if (W == 16 && simd)
		i += ulp_delta16_avx2(sym + i, rawp, rawlen, ref + 2 * i, n - i,
		                      dst + 2 * i, pos);
	if (W == 32 && simd >= ULP_SIMD_AVX512)
		i = ulp_delta32_avx512(sym, rawp, rawlen, ref, n, dst, pos);
	if (W == 32 && simd)
		i += ulp_delta32_avx2(sym + i, rawp, rawlen, ref + 4 * i, n - i,
		                      dst + 4 * i, pos);
	return i;
}

ULP_INLINE int delta_decode_w(ulp_float_scratch *fs, const uint8_t *rawp,
                              size_t rawlen, const uint8_t *ref, size_t n,
                              uint8_t *dst, unsigned W)
{
	dsym_info info[MAX_DELTA_NSYM];
	ulp_bitr br;
	dsym_info_init(info, W);
	const uint8_t *restrict sym = fs->sym;
	size_t i = 0;
	if (W <= 32) {
		/* Every element's raw bits start at a running bit position,
		 * so each is one independent unaligned load instead of a
		 * serial bit-reader chain.  Runs while 8 bytes are readable. */
		uint64_t pos = 0;
		i = delta_simd_w(sym, rawp, rawlen, ref, n, dst, &pos, W);
		/* The elements whose raw bits lie in the last 64 bytes: the
		 * kernels again, on a copy padded with 64 zero bytes, instead
		 * of the scalar loop below (a thirtieth of a bf16 delta
		 * decode).  Bits taken from the padding mean a corrupt
		 * stream. */
		size_t left = rawlen - (size_t)(pos >> 3);
		if (ulp_rans_simd() && n - i >= 32 && left < 64) {
			uint8_t pad[128] __attribute__((aligned(64))) = { 0 };
			uint64_t lp = pos & 7;
			memcpy(pad, rawp + (pos >> 3), left);
			size_t k = delta_simd_w(sym + i, pad, left + 64,
			                        ref + i * (W / 8), n - i,
			                        dst + i * (W / 8), &lp, W);
			if (lp > 8 * (uint64_t)left)
				return ULP_ERR_CORRUPT;
			pos = (pos & ~7ull) + lp;
			i += k;
		}
		for (; i < n; i++) {
			const dsym_info *si = &info[sym[i]];
			if ((pos >> 3) + 8 > rawlen)
				break;
			uint64_t word;
			memcpy(&word, rawp + (pos >> 3), 8);
			uint64_t low = (word >> (pos & 7)) &
			               ((1ull << si->nraw) - 1);
			pos += si->nraw;
			uint64_t r = el_load(ref, i, W);
			uint64_t mag = si->lead | low;
			uint64_t d = (mag ^ si->neg) - si->neg;
			uint64_t o = (el_ord(r, W) + d) & el_mask(W);
			el_store(dst, i, el_unord(o, W), W);
		}
		ulp_bitr_init(&br, rawp + (pos >> 3), rawlen - (pos >> 3));
		if (pos & 7)
			(void)ulp_bitr_get(&br, pos & 7);
	} else {
		ulp_bitr_init(&br, rawp, rawlen);
	}
	for (; i < n; i++) {
		const dsym_info *si = &info[sym[i]];
		ulp_bitr_refill(&br);
		uint64_t r = el_load(ref, i, W);
		uint64_t low = W == 64 ? ulp_bitr_get64(&br, si->nraw)
		                       : ulp_bitr_get(&br, si->nraw);
		uint64_t mag = si->lead | low;
		uint64_t d = (mag ^ si->neg) - si->neg;
		uint64_t o = (el_ord(r, W) + d) & el_mask(W);
		el_store(dst, i, el_unord(o, W), W);
	}
	return br.overrun || ulp_bitr_left(&br) ? ULP_ERR_CORRUPT : ULP_OK;
}

/* One delta element: residual symbol s, raw bits at bit position *pos of
 * rawp (8 readable bytes guaranteed by the caller), reference r. */
ULP_INLINE uint64_t delta_elem(const dsym_info *info, unsigned s,
                               const uint8_t *rawp, uint64_t *pos, uint64_t r,
                               unsigned W)
{
	const dsym_info *si = &info[s];
	uint64_t word;
	memcpy(&word, rawp + (*pos >> 3), 8);
	uint64_t low = (word >> (*pos & 7)) & ((1ull << si->nraw) - 1);
	*pos += si->nraw;
	uint64_t mag = si->lead | low;
	uint64_t d = (mag ^ si->neg) - si->neg;
	return el_unord((el_ord(r, W) + d) & el_mask(W), W);
}

/* Delta decoding with the rANS steps, contexts and reconstruction fused
 * into one pass (widths up to 32 bits): no symbol or context arrays. */
ULP_INLINE int delta_decode_fused_w(ulp_float_scratch *fs, ulp_float_fmt f,
                                    const uint8_t *in, size_t blen,
                                    const uint8_t *rawp, size_t rawlen,
                                    const uint8_t *ref, size_t n, uint8_t *dst,
                                    unsigned W)
{
	dsym_info info[MAX_DELTA_NSYM];
	ulp_rans_dec rd;
	size_t used;
	int rc = ulp_rans_dec_begin(fs->rs, in, blen, DELTA_NSYM(W), &rd);
	if (rc)
		return rc;
	/* escaped symbols are put back in bulk: ulp_float_decode sends
	 * their blocks to the other path */
	if ((n > 0 && rd.ntab == 0) || rd.esc_sym < ULP_RANS_MAXSYM)
		return ULP_ERR_CORRUPT;
	dsym_info_init(info, W);
	const uint32_t *const *tab = rd.tab;
	const uint8_t *p = rd.p;
	uint32_t x0 = rd.x[0], x1 = rd.x[1], x2 = rd.x[2], x3 = rd.x[3];
	unsigned s0, s1, s2, s3;
	uint64_t pos = 0;
	size_t i = 0;
	/* A group of four reads at most 4 rANS words and 4 x 31 raw bits. */
	for (; i + 4 <= n && rd.end - p >= 8 && (pos >> 3) + 24 <= rawlen;
	     i += 4) {
		uint64_t r0 = el_load(ref, i, W), r1 = el_load(ref, i + 1, W);
		uint64_t r2 = el_load(ref, i + 2, W),
			 r3 = el_load(ref, i + 3, W);
		x0 = ulp_rans_dec_step(x0, tab[el_ctx(r0, f)], &p, &s0);
		x1 = ulp_rans_dec_step(x1, tab[el_ctx(r1, f)], &p, &s1);
		x2 = ulp_rans_dec_step(x2, tab[el_ctx(r2, f)], &p, &s2);
		x3 = ulp_rans_dec_step(x3, tab[el_ctx(r3, f)], &p, &s3);
		el_store(dst, i, delta_elem(info, s0, rawp, &pos, r0, W), W);
		el_store(dst, i + 1, delta_elem(info, s1, rawp, &pos, r1, W),
		         W);
		el_store(dst, i + 2, delta_elem(info, s2, rawp, &pos, r2, W),
		         W);
		el_store(dst, i + 3, delta_elem(info, s3, rawp, &pos, r3, W),
		         W);
	}
	rd.p = p;
	rd.x[0] = x0;
	rd.x[1] = x1;
	rd.x[2] = x2;
	rd.x[3] = x3;
	/* The tail checks every read. */
	ulp_bitr br;
	ulp_bitr_init(&br, rawp + (pos >> 3), rawlen - (pos >> 3));
	if (pos & 7)
		(void)ulp_bitr_get(&br, pos & 7);
	for (; i < n; i++) {
		unsigned s;
		uint64_t r = el_load(ref, i, W);
		if (ulp_rans_dec_step_checked(&rd, &rd.x[i % ULP_RANS_WAYS],
		                              tab[el_ctx(r, f)], &s))
			return ULP_ERR_CORRUPT;
		const dsym_info *si = &info[s];
		uint64_t mag = si->lead | ulp_bitr_get(&br, si->nraw);
		uint64_t d = (mag ^ si->neg) - si->neg;
		el_store(dst, i, el_unord((el_ord(r, W) + d) & el_mask(W), W),
		         W);
	}
	rc = ulp_rans_dec_end(&rd, in, &used);
	if (rc || used != blen || br.overrun || ulp_bitr_left(&br))
		return ULP_ERR_CORRUPT;
	return ULP_OK;
}

ULP_INLINE void ctx_pass_w(ulp_float_scratch *fs, ulp_float_fmt f,
                           const uint8_t *ref, size_t n, unsigned W)
{
	uint8_t *restrict ctx = fs->ctx;
	size_t i = 0;
	if (W <= 32 && W >= 16 && f.ebits <= 8 && ulp_rans_simd())
		i = ulp_ctx_avx2(ref, n, W, f.mbits, (1u << f.ebits) - 1, ctx);
	for (; i < n; i++)
		ctx[i] = (uint8_t)el_ctx(el_load(ref, i, W), f);
}

/* A standalone element from its raw bits: from the A and B symbols
 * fs->sym[i] and fs->ctx[i], or (fused) from the code fs->sym[i], whose
 * sign, exponent and top mantissa bits are base[code] (sa_join's with no
 * raw bits): the raw bits go below the top mantissa bits and, for f64,
 * below the exponent's top 8 bits. */
ULP_INLINE uint64_t sa_elem(const ulp_float_scratch *fs, const uint64_t *base,
                            size_t i, uint64_t raw, ulp_float_fmt f, unsigned W,
                            int fused)
{
	if (!fused)
		return sa_join(fs->sym[i], fs->ctx[i], raw, f, W);
	const unsigned lowm = f.mbits - sa_topbits(f);
	return base[fs->sym[i]] | ((raw >> lowm) << f.mbits) |
	       (raw & ((1ull << lowm) - 1));
}

ULP_INLINE int sa_decode_w(ulp_float_scratch *fs, ulp_float_fmt f,
                           const uint8_t *rawp, size_t rawlen, size_t n,
                           const uint64_t *base, uint8_t *dst, unsigned W,
                           int fused)
{
	const unsigned nraw = sa_nraw(f);
	const uint8_t *restrict a = fs->sym;
	const uint8_t *restrict b = fs->ctx;
	ulp_bitr br;
	size_t i = 0;
	if (W == 16 && ulp_rans_simd() && !fused)
		i = ulp_sa16_avx2(a, b, rawp, rawlen, n, f.mbits, sa_topbits(f),
		                  dst);
	if (W == 32 && ulp_rans_simd() && !fused)
		i = ulp_sa32_avx2(a, b, rawp, rawlen, n, dst);
	if (W == 16 && ulp_rans_simd() >= ULP_SIMD_AVX512 && fused)
		i = ulp_saf16_avx512(a, base, rawp, rawlen, n, nraw, dst);
	else if (W == 16 && ulp_rans_simd() && fused)
		i = ulp_saf16_avx2(a, base, rawp, rawlen, n, nraw, dst);
	if (W == 32 && ulp_rans_simd() >= ULP_SIMD_AVX512 && fused)
		i = ulp_saf32_avx512(a, base, rawp, rawlen, n, dst);
	else if (W == 32 && ulp_rans_simd() && fused)
		i = ulp_saf32_avx2(a, base, rawp, rawlen, n, dst);
	if (W <= 32) {
		/* element i's raw bits start at bit i * nraw: independent
		 * loads instead of a serial bit reader, while 8 bytes remain */
		const uint64_t mask = (1ull << nraw) - 1;
		for (; i < n && ((i * nraw) >> 3) + 8 <= rawlen; i++) {
			uint64_t pos = (uint64_t)i * nraw, word;
			memcpy(&word, rawp + (pos >> 3), 8);
			uint64_t raw = (word >> (pos & 7)) & mask;
			el_store(dst, i, sa_elem(fs, base, i, raw, f, W, fused),
			         W);
		}
	}
	uint64_t pos = (uint64_t)i * nraw;
	ulp_bitr_init(&br, rawp + (pos >> 3), rawlen - (pos >> 3));
	if (pos & 7)
		(void)ulp_bitr_get(&br, pos & 7);
	for (; i < n; i++) {
		ulp_bitr_refill(&br);
		uint64_t raw = W == 64 ? ulp_bitr_get64(&br, nraw)
		                       : ulp_bitr_get(&br, nraw);
		el_store(dst, i, sa_elem(fs, base, i, raw, f, W, fused), W);
	}
	return br.overrun || ulp_bitr_left(&br) ? ULP_ERR_CORRUPT : ULP_OK;
}

/* The escaped elements of a fused stream: their codes (esc) decoded with
 * no sign, exponent or top mantissa bits, which come from the nesc A and
 * B symbols ea and eb in order. */
ULP_INLINE int sa_unescape_w(const uint8_t *code, size_t n, uint8_t esc,
                             const uint8_t *ea, const uint8_t *eb, size_t nesc,
                             uint8_t *dst, ulp_float_fmt f, unsigned W)
{
	size_t j = 0;
	for (const uint8_t *c = code, *end = code + n;
	     (c = memchr(c, esc, (size_t)(end - c))) != NULL; c++) {
		if (j == nesc)
			return ULP_ERR_CORRUPT;
		size_t i = (size_t)(c - code);
		el_store(dst, i,
		         el_load(dst, i, W) | sa_join(ea[j], eb[j], 0, f, W),
		         W);
		j++;
	}
	return j == nesc ? ULP_OK : ULP_ERR_CORRUPT;
}

/* A fused stream from after its coding byte (see emit_fused). */
static int fused_decode(ulp_float_scratch *fs, ulp_float_fmt f,
                        const uint8_t *p, const uint8_t *end, size_t n,
                        uint8_t *dst)
{
	const unsigned W = f.width;
	const unsigned nsa = 1u << sa_symbits(f), nb = 2u << sa_topbits(f);
	uint64_t base[ULP_RANS_MAXSYM] = { 0 }; /* all of it read by SIMD */
	uint64_t rows, nesc = 0, blen;
	unsigned K = 0;
	size_t used;
	int rc;
	if (ulp_varint_get(&p, end, &rows) || rows >> 1 > nsa ||
	    (uint64_t)(end - p) < 3 * (rows >> 1))
		return ULP_ERR_CORRUPT;
	const unsigned esc = rows & 1;
	rows >>= 1;
	for (unsigned r = 0, prev = 0; r < rows; r++, p += 3) {
		unsigned a = p[0], mask = ulp_le16(p + 1);
		if (a >= nsa || (r && a <= prev) || !mask || mask >> nb)
			return ULP_ERR_CORRUPT;
		prev = a;
		for (unsigned b = 0; b < nb; b++) {
			if (!(mask >> b & 1))
				continue;
			if (K == ULP_RANS_MAXSYM)
				return ULP_ERR_CORRUPT;
			base[K++] = sa_join(a, b, 0, f, W);
		}
	}
	if ((esc && K >= ULP_RANS_MAXSYM) || (!K && !esc))
		return ULP_ERR_CORRUPT;
	if (esc)
		base[K] = 0; /* sa_unescape_w adds what is missing */
	if (ulp_varint_get(&p, end, &blen) || blen > (uint64_t)(end - p))
		return ULP_ERR_CORRUPT;
	if (scratch_reserve(fs, n))
		return ULP_ERR_NOMEM;
	rc = ulp_rans_decode(fs->rs, p, blen, NULL, n, K + esc, fs->sym, &used);
	if (rc || used != blen)
		return rc ? rc : ULP_ERR_CORRUPT;
	p += blen;
	if (esc && (ulp_varint_get(&p, end, &nesc) || nesc > n))
		return ULP_ERR_CORRUPT;
	if (esc_reserve(fs, nesc))
		return ULP_ERR_NOMEM;
	uint8_t *ea = fused_esc(fs, nesc), *eb = ea + nesc;
	if (nesc) {
		if (ulp_varint_get(&p, end, &blen) ||
		    blen > (uint64_t)(end - p))
			return ULP_ERR_CORRUPT;
		rc = ulp_rans_decode(fs->rs, p, blen, NULL, nesc, nsa, ea,
		                     &used);
		if (rc || used != blen)
			return rc ? rc : ULP_ERR_CORRUPT;
		p += blen;
		if (ulp_varint_get(&p, end, &blen) ||
		    blen > (uint64_t)(end - p))
			return ULP_ERR_CORRUPT;
		rc = ulp_rans_decode(fs->rs, p, blen, ea, nesc, nb, eb, &used);
		if (rc || used != blen)
			return rc ? rc : ULP_ERR_CORRUPT;
		p += blen;
	}
	const size_t rawlen = (size_t)(end - p);
#define FUSED_SA_CALL(F, w)                                                \
	do {                                                               \
		rc = sa_decode_w(fs, F, p, rawlen, n, base, dst, w, 1);    \
		if (!rc && nesc)                                           \
			rc = sa_unescape_w(fs->sym, n, (uint8_t)K, ea, eb, \
			                   nesc, dst, F, w);               \
	} while (0)
	ULP_DISPATCH_FMT(f, FUSED_SA_CALL);
	if (!rc && esc && !nesc && memchr(fs->sym, (int)K, n))
		rc = ULP_ERR_CORRUPT; /* an escape code without escapes */
#undef FUSED_SA_CALL
	return rc;
}

int ulp_float_decode(ulp_float_scratch *fs, ulp_float_fmt f, const uint8_t *in,
                     size_t len, const uint8_t *ref, size_t n, uint8_t *dst)
{
	const unsigned W = f.width;
	const size_t nbytes = n * (W / 8);
	const uint8_t *p = in + 1, *end = in + len;
	uint64_t blen;
	size_t used;
	int rc;

	if (!fmt_supported(f))
		return ULP_ERR_ARG;
	if (len < 1)
		return ULP_ERR_CORRUPT;
	switch (in[0]) {
	case ULP_SC_IDENTICAL:
		if (!ref || len != 1)
			return ULP_ERR_CORRUPT;
		memcpy(dst, ref, nbytes);
		return ULP_OK;
	case ULP_SC_RAW:
		if (len != 1 + nbytes)
			return ULP_ERR_CORRUPT;
		memcpy(dst, p, nbytes);
		return ULP_OK;
	case ULP_SC_DELTA:
		if (!ref)
			return ULP_ERR_CORRUPT;
		/* fall through */
	case ULP_SC_STANDALONE:
		break;
	case ULP_SC_FUSED:
		return fused_decode(fs, f, p, end, n, dst);
	default:
		return ULP_ERR_CORRUPT;
	}
	if (ulp_varint_get(&p, end, &blen) || blen > (uint64_t)(end - p))
		return ULP_ERR_CORRUPT;
	if (scratch_reserve(fs, n))
		return ULP_ERR_NOMEM;
	const uint8_t *rawp = p + blen;
	size_t rawlen = (size_t)(end - rawp);
	/* Four-lane blocks (format 1, and small streams) decode fused with
	 * the reconstruction; wider blocks and blocks with escaped
	 * symbols decode the symbols in bulk, the contexts gathered from the
	 * reference first. */
	if (in[0] == ULP_SC_DELTA && W <= 32 &&
	    ulp_rans_block_lanes(p, blen) == ULP_RANS_WAYS &&
	    !ulp_rans_block_escapes(p, blen)) {
#define FUSED_CALL(F, w) \
	rc = delta_decode_fused_w(fs, F, p, blen, rawp, rawlen, ref, n, dst, w)
		ULP_DISPATCH_FMT(f, FUSED_CALL);
		return rc;
	}
	if (in[0] == ULP_SC_DELTA) {
		if (W == 16 && f.ebits <= 8 &&
		    ulp_rans_simd() >= ULP_SIMD_AVX512 &&
		    ulp_rans_block_lanes(p, blen) >= 32) {
			/* the contexts computed with the symbols */
			rc = ulp_rans_decode_ref16(fs->rs, p, blen, ref,
			                           f.mbits, (1u << f.ebits) - 1,
			                           fs->ctx, n, DELTA_NSYM(W),
			                           fs->sym, &used);
		} else {
#define CTX_CALL(F, w) ctx_pass_w(fs, F, ref, n, w)
			ULP_DISPATCH_FMT(f, CTX_CALL);
			rc = ulp_rans_decode(fs->rs, p, blen, fs->ctx, n,
			                     DELTA_NSYM(W), fs->sym, &used);
		}
		if (rc)
			return rc;
		if (used != blen)
			return ULP_ERR_CORRUPT;
#define DELTA_CALL(F, w) rc = delta_decode_w(fs, rawp, rawlen, ref, n, dst, w)
		ULP_DISPATCH_FMT(f, DELTA_CALL);
		return rc;
	}
	/* standalone: block A (exponents), block B (in A's context), raw */
	rc = ulp_rans_decode(fs->rs, p, blen, NULL, n, 1u << sa_symbits(f),
	                     fs->sym, &used);
	if (rc)
		return rc;
	if (used != blen)
		return ULP_ERR_CORRUPT;
	p += blen;
	if (ulp_varint_get(&p, end, &blen) || blen > (uint64_t)(end - p))
		return ULP_ERR_CORRUPT;
	rc = ulp_rans_decode(fs->rs, p, blen, fs->sym, n, 2u << sa_topbits(f),
	                     fs->ctx, &used);
	if (rc)
		return rc;
	if (used != blen)
		return ULP_ERR_CORRUPT;
	rawp = p + blen;
	rawlen = (size_t)(end - rawp);
#define SA_CALL(F, w) rc = sa_decode_w(fs, F, rawp, rawlen, n, NULL, dst, w, 0)
	ULP_DISPATCH_FMT(f, SA_CALL);
	return rc;
}
