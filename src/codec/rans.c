/*
 * rans.c - static interleaved rANS coder with per-context tables.
 *
 * State x lives in [L, L << 16) with L = 2^16 and is renormalised 16 bits at
 * a time; with a probability scale of at most 16 bits one renormalisation
 * per symbol always suffices, which keeps both loops branch-light.
 * Division in the encoder is replaced by an exact multiply-shift
 * (Granlund-Montgomery) valid for every 32-bit state.
 */
#include "rans.h"

#include <cpuid.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Decoding table: one packed entry per slot, so a step is one load:
 * bits 0-11 freq - 1, bits 12-23 slot - cum, bits 24-31 the symbol. */
typedef struct ulp_rans_dtab {
	uint32_t e[ULP_RANS_M];
} ulp_rans_dtab;

#define ULP_RANS_MAXTAB (ULP_RANS_NCTX + 1)

struct ulp_rans_scratch {
	uint8_t remap[ULP_RANS_NCTX]; /* context -> table index */
	/* context -> its table, resolved once per block so that a step
	 * costs one load for the table instead of two and a multiply */
	const ulp_rans_esym *ebase[ULP_RANS_NCTX];
	const uint32_t *dbase[ULP_RANS_NCTX];
	uint16_t norm[ULP_RANS_MAXTAB][ULP_RANS_MAXSYM];
	uint32_t esc_hist[ULP_RANS_MAXSYM];
	ulp_rans_esym *esym; /* ntab * nsym, grown on demand */
	size_t esym_cap;
	ulp_rans_dtab *dtab; /* grown on demand */
	size_t dtab_cap;
	uint16_t *words; /* encoder output, written backwards */
	size_t words_cap;
	unsigned lanes; /* encoder: 4, 32, or 0 to choose by the size */
	uint32_t doff[ULP_RANS_NCTX]; /* context -> table offset in dtab */
	uint32_t *escv; /* encoder: indices of the escaped symbols */
	size_t escv_cap;
	ulp_rans_esym *xsym; /* ulp_rans_encode_map: per context, a row */
	size_t xsym_cap;
};

/* Block header byte 0: bit 0 an escape table follows the own tables,
 * bit 1 32 lanes, bit 3 64 lanes (object format 6; neither: 4), bit 2
 * the tables have an escape symbol (object format 4:
 * ulp_rans_encode_esc). */
#define RANS_HDR_LANES32 2u
#define RANS_HDR_ESC 4u
#define RANS_HDR_LANES64 8u
#define RANS_HDR_ALL (RANS_HDR_LANES64 | RANS_HDR_ESC | RANS_HDR_LANES32 | 1u)

void ulp_rans_scratch_set_lanes(ulp_rans_scratch *s, unsigned lanes)
{
	s->lanes = lanes == ULP_RANS_WAYS || lanes == 32 || lanes == 64 ? lanes
	                                                                : 0;
}

/* Whether the header byte h is one a decoder knows. */
static int rans_hdr_known(uint8_t h)
{
	return h <= RANS_HDR_ALL &&
	       (h & (RANS_HDR_LANES32 | RANS_HDR_LANES64)) !=
	               (RANS_HDR_LANES32 | RANS_HDR_LANES64);
}

unsigned ulp_rans_block_lanes(const uint8_t *in, size_t len)
{
	if (!len || !rans_hdr_known(in[0]))
		return 0;
	return in[0] & RANS_HDR_LANES64   ? 64
	       : in[0] & RANS_HDR_LANES32 ? 32
	                                  : ULP_RANS_WAYS;
}

int ulp_rans_block_escapes(const uint8_t *in, size_t len)
{
	return len && rans_hdr_known(in[0]) && (in[0] & RANS_HDR_ESC);
}

/* What the CPU was found to run, asked once: the kernel level in the low
 * bits (ULPFS_SIMD applied), RANS_CPU_SLOW_GATHERS for ulp_rans_gathers,
 * RANS_CPU_ONE_LOADS where blocks of one table decode without gathers;
 * -1 until asked.  Atomics keep concurrent first calls clean. */
static int rans_cpu_state = -1;
#define RANS_CPU_LEVEL 0xf
#define RANS_CPU_SLOW_GATHERS 0x10
#define RANS_CPU_ONE_LOADS 0x20

/* The highest kernel level this CPU runs: AVX-512 needs F, BW, VL, CD,
 * VBMI (byte permutations) and VBMI2 (word compression) besides what the
 * AVX2 kernels need.  Called after __builtin_cpu_init. */
static int rans_simd_max(void)
{
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("bmi2"))
		return ULP_SIMD_NONE;
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512cd") &&
	    __builtin_cpu_supports("avx512vbmi") &&
	    __builtin_cpu_supports("avx512vbmi2"))
		return ULP_SIMD_AVX512;
	return ULP_SIMD_AVX2;
}

/* The x86 family number: CPUID leaf 1's base family, plus its extended
 * family where the base is 0xf. */
static unsigned rans_cpu_family(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	unsigned fam = (a >> 8) & 0xf;
	return fam == 0xf ? fam + ((a >> 20) & 0xff) : fam;
}

static int rans_cpu(void)
{
	int v = __atomic_load_n(&rans_cpu_state, __ATOMIC_RELAXED);
	if (v >= 0)
		return v;
	__builtin_cpu_init();
	int level = rans_simd_max();
	const char *env = getenv("ULPFS_SIMD");
	if (env && env[0] >= '0' && env[0] <= '9' && !env[1] &&
	    env[0] - '0' < level)
		level = env[0] - '0';
	/* Where scalar loads beat gathers (rans_avx512.c, bench/README.md):
	 * on AMD Zen 4 (family 19h) in every block; on Zen 5 (1Ah) only in
	 * blocks of one table.  ULPFS_RANS_GATHERS=0 or 1 sets both, so that
	 * the tests run either AVX-512 decoder on any CPU with AVX-512. */
	const int amd = __builtin_cpu_is("amd");
	int slow = amd && rans_cpu_family() < 0x1a, one_loads = amd;
	env = getenv("ULPFS_RANS_GATHERS");
	if (env && (env[0] == '0' || env[0] == '1') && !env[1])
		slow = one_loads = env[0] == '0';
	v = level | (slow ? RANS_CPU_SLOW_GATHERS : 0) |
	    (one_loads ? RANS_CPU_ONE_LOADS : 0);
	__atomic_store_n(&rans_cpu_state, v, __ATOMIC_RELAXED);
	return v;
}

int ulp_rans_simd(void)
{
	return rans_cpu() & RANS_CPU_LEVEL;
}

/* Whether the gathering kernel runs where the CPU state lacks loads_flag:
 * only at the AVX-512 level. */
static int rans_gathers_unless(int loads_flag)
{
	int v = rans_cpu();
	return !(v & loads_flag) && (v & RANS_CPU_LEVEL) >= ULP_SIMD_AVX512;
}

int ulp_rans_gathers(void)
{
	return rans_gathers_unless(RANS_CPU_SLOW_GATHERS);
}

int ulp_rans_gathers_one(void)
{
	return rans_gathers_unless(RANS_CPU_ONE_LOADS);
}

int ulp_rans_set_simd(int level)
{
	int v = rans_cpu();
	int max = rans_simd_max();
	level = level < 0 ? 0 : level > max ? max : level;
	__atomic_store_n(&rans_cpu_state, level | (v & ~RANS_CPU_LEVEL),
	                 __ATOMIC_RELAXED);
	return v & RANS_CPU_LEVEL;
}

/* c -> c: the rows of ulp_rans_encode_map's tables (xsym) are indexed by
 * the context itself */
#define RANS_ID4(c) (c), (c) + 1, (c) + 2, (c) + 3
#define RANS_ID16(c) \
	RANS_ID4(c), RANS_ID4(c + 4), RANS_ID4(c + 8), RANS_ID4(c + 12)
#define RANS_ID64(c) \
	RANS_ID16(c), RANS_ID16(c + 16), RANS_ID16(c + 32), RANS_ID16(c + 48)
static const uint8_t rans_rowmap[ULP_RANS_NCTX] = { RANS_ID64(0), RANS_ID64(64),
	                                            RANS_ID64(128),
	                                            RANS_ID64(192) };

ulp_rans_scratch *ulp_rans_scratch_new(void)
{
	return calloc(1, sizeof(ulp_rans_scratch));
}

void ulp_rans_scratch_free(ulp_rans_scratch *s)
{
	if (!s)
		return;
	free(s->esym);
	free(s->dtab);
	free(s->words);
	free(s->escv);
	free(s->xsym);
	free(s);
}

size_t ulp_rans_bound(size_t n, unsigned nsym)
{
	/* header, one table per context (each at most nsym + 1 3-byte
	 * varints, the escape symbol's included), the escaped symbols, the
	 * final states and at most one 16-bit word per symbol */
	return 16 + ULP_RANS_NCTX +
	       (size_t)ULP_RANS_MAXTAB * (4 + 3 * (size_t)nsym) +
	       ULP_VARINT_MAX + n + 4 * ULP_RANS_MAX_LANES + 2 * n;
}

double ulp_hist_bits(const uint32_t *h, unsigned nsym)
{
	uint64_t total = 0;
	double bits = 0;
	for (unsigned s = 0; s < nsym; s++)
		total += h[s];
	if (!total)
		return 0;
	for (unsigned s = 0; s < nsym; s++)
		if (h[s])
			bits += h[s] * log2((double)total / h[s]);
	return bits;
}

/* Scale counts to frequencies summing to M, every seen symbol at least 1.
 * The rounding surplus or deficit goes to the largest frequency, where it
 * costs least; a flat 256-symbol table may need it spread further. */
static void rans_normalize(const uint32_t *h, unsigned nsym, uint16_t *f)
{
	uint64_t total = 0;
	unsigned big = 0;
	int64_t sum = 0;
	for (unsigned s = 0; s < nsym; s++)
		total += h[s];
	assert(total > 0);
	for (unsigned s = 0; s < nsym; s++) {
		uint64_t v = 0;
		if (h[s]) {
			v = (h[s] * (uint64_t)ULP_RANS_M + total / 2) / total;
			if (!v)
				v = 1;
		}
		f[s] = (uint16_t)(v > ULP_RANS_M ? ULP_RANS_M : v);
		sum += f[s];
		if (f[s] > f[big])
			big = s;
	}
	int64_t diff = (int64_t)ULP_RANS_M - sum;
	if (diff > 0 || (int64_t)f[big] + diff >= 1) {
		f[big] = (uint16_t)(f[big] + diff);
		return;
	}
	/* Too much surplus for one symbol: shave every frequency above one. */
	while (diff < 0) {
		for (unsigned s = 0; s < nsym && diff < 0; s++) {
			if (f[s] > 1) {
				f[s]--;
				diff++;
			}
		}
	}
}

/* A table: [last symbol with a frequency][with esc: the escape symbol's
 * (nsym) frequency][the frequencies of symbols 0 .. last] (varints), so
 * that the escape symbol costs one byte, not the zeros up to it. */
static size_t rans_put_table(uint8_t *p, const uint16_t *f, unsigned nsym,
                             int esc)
{
	unsigned last = 0;
	size_t n = 0;
	for (unsigned s = 0; s < nsym; s++)
		if (f[s])
			last = s;
	p[n++] = (uint8_t)last;
	if (esc)
		n += ulp_varint_put(p + n, f[nsym]);
	for (unsigned s = 0; s <= last; s++)
		n += ulp_varint_put(p + n, f[s]);
	return n;
}

static int rans_get_table(const uint8_t **pp, const uint8_t *end, unsigned nsym,
                          int esc, uint16_t *f)
{
	if (*pp >= end)
		return ULP_ERR_CORRUPT;
	unsigned last = *(*pp)++;
	uint32_t sum = 0;
	if (last >= nsym)
		return ULP_ERR_CORRUPT;
	memset(f, 0, sizeof(uint16_t) * (nsym + (unsigned)esc));
	for (unsigned k = 0; k <= last + (unsigned)esc; k++) {
		/* with esc, the first is the escape symbol's */
		unsigned s = esc ? (k ? k - 1 : nsym) : k;
		uint64_t v;
		if (ulp_varint_get(pp, end, &v) || v > ULP_RANS_M)
			return ULP_ERR_CORRUPT;
		f[s] = (uint16_t)v;
		sum += (uint32_t)v;
	}
	return sum == ULP_RANS_M ? ULP_OK : ULP_ERR_CORRUPT;
}

static void rans_esym_init(ulp_rans_esym *e, uint32_t cum, uint32_t freq)
{
	uint32_t shift = 0;
	if (!freq) {
		/* never encoded: the encoder only sees counted symbols */
		memset(e, 0, sizeof(*e));
		return;
	}
	while (freq > (1u << shift))
		shift++;
	uint64_t m = ((1ull << (32 + shift)) + freq - 1) / freq;
	e->rcp = (uint32_t)(m - (1ull << 32));
	e->shift = shift;
	e->bias = (uint16_t)cum;
	e->cmpl = (uint16_t)(ULP_RANS_M - freq);
	e->x_max_m1 =
		(uint32_t)(((uint64_t)(ULP_RANS_L >> ULP_RANS_SCALE) << 16) *
	                           freq -
	                   1);
}

/* Normalise one table's counts h[0..nsym); with esc, symbol nsym is the
 * escape symbol and gets the least frequency. */
static void rans_normalize_esc(const uint32_t *h, unsigned nsym, int esc,
                               uint16_t *f)
{
	uint32_t t[ULP_RANS_MAXSYM];
	if (!esc) {
		rans_normalize(h, nsym, f);
		return;
	}
	memcpy(t, h, sizeof(uint32_t) * nsym);
	t[nsym] = 1;
	rans_normalize(t, nsym + 1, f);
}

/* Choose tables: contexts with enough symbols get their own, the rest
 * share the escape table (not to be confused with the escape symbol of
 * esc).  Returns the number of tables. */
static unsigned rans_assign(ulp_rans_scratch *sc, const uint32_t *hist,
                            const uint32_t *ctx_count, unsigned nsym,
                            unsigned nctx, int esc, uint8_t *own,
                            unsigned *nown, int *has_esc)
{
	unsigned ntab = 0;
	*has_esc = 0;
	memset(sc->esc_hist, 0, sizeof(sc->esc_hist));
	memset(sc->remap, 0, sizeof(sc->remap));
	for (unsigned c = 0; c < nctx; c++) {
		if (!ctx_count[c])
			continue;
		if (ctx_count[c] >= ULP_RANS_MIN_OWN_TABLE) {
			own[ntab] = (uint8_t)c;
			sc->remap[c] = (uint8_t)ntab;
			rans_normalize_esc(hist + (size_t)c * nsym, nsym, esc,
			                   sc->norm[ntab]);
			ntab++;
		} else {
			*has_esc = 1;
			for (unsigned s = 0; s < nsym; s++)
				sc->esc_hist[s] += hist[(size_t)c * nsym + s];
		}
	}
	*nown = ntab;
	/* Counts from a sample (esc) may miss contexts that occur: they take
	 * the table the decoder gives unknown contexts, the escape table
	 * (made here if no context has one) or else table 0. */
	if (esc && !ntab)
		*has_esc = 1;
	/* ntab <= 255 here unless all 256 contexts are common, in which case
	 * there is no escape table and index 255 is still free of clashes. */
	if (*has_esc) {
		rans_normalize_esc(sc->esc_hist, nsym, esc, sc->norm[ntab]);
		for (unsigned c = 0; c < ULP_RANS_NCTX; c++)
			if (c >= nctx || ctx_count[c] < ULP_RANS_MIN_OWN_TABLE)
				sc->remap[c] = (uint8_t)ntab;
		ntab++;
	}
	return ntab;
}

/* The coding loop for a constant lane count N: symbol i belongs to state
 * i % N; walk backwards, the ragged end first, then whole groups, which
 * the compiler keeps in registers for N = 4 and unrolls for N = 32 (the
 * lanes' steps are independent, so they overlap).  Returns the first
 * word written (words end at wend). */
static inline __attribute__((always_inline)) uint16_t *
rans_enc_lanes(const ulp_rans_scratch *sc, const ulp_rans_esym *tabs,
               const uint8_t *remap, unsigned rowlen, const uint8_t *sym,
               const uint8_t *ctx, size_t n, unsigned nsym, uint16_t *wend,
               uint32_t *xout, uint32_t *escv, size_t *nesc, const unsigned N)
{
	const ulp_rans_esym *const *eb = sc->ebase;
	uint16_t *w = wend;
	uint32_t x[ULP_RANS_MAX_LANES];
	(void)nsym;
	for (unsigned k = 0; k < N; k++)
		x[k] = ULP_RANS_L;
#define RANS_ENC_STEP(xs, i)                                               \
	do {                                                               \
		const ulp_rans_esym *e_ = eb[ctx ? ctx[i] : 0] + sym[i];   \
		assert(sym[i] < nsym);                                     \
		if (__builtin_expect(e_->shift & ULP_RANS_ESYM_ESC, 0))    \
			escv[(*nesc)++] = (uint32_t)(i);                   \
		unsigned r_ = xs > e_->x_max_m1;                           \
		w[-1] = (uint16_t)xs; /* kept only when r_: branch-free */ \
		w -= r_;                                                   \
		xs >>= r_ * 16;                                            \
		uint64_t q_ = ((((uint64_t)xs * e_->rcp) >> 32) + xs) >>   \
		              (e_->shift & 31);                            \
		xs += e_->bias + (uint32_t)q_ * e_->cmpl;                  \
	} while (0)
	size_t i = n;
	while (i % N) {
		i--;
		RANS_ENC_STEP(x[i % N], i);
	}
	if (N >= 32 && i > 0 && ulp_rans_simd()) {
		w = ulp_rans_simd() >= ULP_SIMD_AVX512
		            ? ulp_rans_enc32_avx512(tabs, remap, rowlen, sym,
		                                    ctx, i, x, N / 32, w, escv,
		                                    nesc)
		            : ulp_rans_enc32_avx2(eb, sym, ctx, i, x, N / 32, w,
		                                  escv, nesc);
		i = 0;
	}
	while (i > 0) {
		i -= N;
#pragma GCC unroll 64
		for (unsigned k = N; k-- > 0;)
			RANS_ENC_STEP(x[k], i + k);
	}
#undef RANS_ENC_STEP
	for (unsigned k = 0; k < N; k++)
		xout[k] = x[k];
	return w;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Encoding entries of table t (frequencies f over nt symbols).  With an
 * escape symbol (esc: it is symbol nt - 1), the symbols without a
 * frequency code as it, marked so that the coder lists them. */
static void rans_esym_table(ulp_rans_esym *e, const uint16_t *f, unsigned nt,
                            int esc)
{
	uint32_t cum = 0;
	for (unsigned s = 0; s < nt; s++) {
		rans_esym_init(&e[s], cum, f[s]);
		cum += f[s];
	}
	if (!esc)
		return;
	for (unsigned s = 0; s + 1 < nt; s++)
		if (!f[s]) {
			e[s] = e[nt - 1];
			e[s].shift |= ULP_RANS_ESYM_ESC;
		}
}

/* The rows of ulp_rans_encode_map: entry s of context c's row is the
 * entry of its code in the block's one table e (nt codes), marked when
 * it is map->esc; rows only for the contexts map->used names. */
static int rans_map_rows(ulp_rans_scratch *sc, const ulp_rans_esym *e,
                         unsigned nt, const ulp_rans_map *map)
{
	const size_t cells = (size_t)map->nctx * map->nsym;
	if (sc->xsym_cap < cells) {
		free(sc->xsym);
		sc->xsym = malloc(sizeof(ulp_rans_esym) * cells);
		sc->xsym_cap = sc->xsym ? cells : 0;
		if (!sc->xsym)
			return ULP_ERR_NOMEM;
	}
	for (unsigned c = 0; c < map->nctx; c++) {
		ulp_rans_esym *row = sc->xsym + (size_t)c * map->nsym;
		sc->ebase[c] = row;
		if (!map->used[c])
			continue;
		for (unsigned s = 0; s < map->nsym; s++) {
			unsigned k = map->code[(size_t)c * map->nsym + s];
			if (k >= nt) {
				/* a pair that does not occur */
				memset(&row[s], 0, sizeof(row[s]));
				continue;
			}
			row[s] = e[k];
			if (k == map->esc)
				row[s].shift |= ULP_RANS_ESYM_ESC;
		}
	}
	return ULP_OK;
}

/* map (ulp_rans_encode_map): sym and ctx are the pairs that map codes,
 * nsym and nctx the codes' alphabet and 1. */
static int rans_encode_impl(ulp_rans_scratch *sc, const uint8_t *sym,
                            const uint8_t *ctx, size_t n, unsigned nsym,
                            unsigned nctx, const uint32_t *hist, int esc,
                            ulp_buf *out, size_t *nesc_out, ulp_rans_map *map)
{
	uint32_t ctx_count[ULP_RANS_NCTX] = { 0 };
	uint8_t own[ULP_RANS_NCTX];
	unsigned nown, ntab;
	int has_esc;

	if (nsym == 0 || nsym > ULP_RANS_MAXSYM - (unsigned)esc || nctx == 0 ||
	    nctx > ULP_RANS_NCTX)
		return ULP_ERR_ARG;
	for (unsigned c = 0; c < nctx; c++)
		for (unsigned s = 0; s < nsym; s++)
			ctx_count[c] += hist[(size_t)c * nsym + s];
	ntab = rans_assign(sc, hist, ctx_count, nsym, nctx, esc, own, &nown,
	                   &has_esc);
	/* the tables' alphabet: the escape symbol is nsym */
	const unsigned nt = nsym + (unsigned)esc;
	size_t nesc = 0;
	/* the indices of map's escape code are listed as escapes are */
	const int list = esc || (map && map->esc < nsym);
	if (list && sc->escv_cap < n) {
		/* one index per escaped symbol: only the ones used are
		 * touched */
		free(sc->escv);
		sc->escv = malloc(sizeof(uint32_t) * (n ? n : 1));
		sc->escv_cap = sc->escv ? n : 0;
		if (!sc->escv)
			return ULP_ERR_NOMEM;
	}

	if (ulp_buf_reserve(out, out->len + ulp_rans_bound(n, nsym)))
		return ULP_ERR_NOMEM;
	if (sc->esym_cap < (size_t)ntab * nt) {
		free(sc->esym);
		sc->esym_cap = (size_t)ntab * nt;
		sc->esym = malloc(sizeof(ulp_rans_esym) * sc->esym_cap);
		if (!sc->esym) {
			sc->esym_cap = 0;
			return ULP_ERR_NOMEM;
		}
	}
	/* the SIMD encoder stores 8 words at a time below its position */
	if (sc->words_cap < n + 1 + ULP_RANS_WORDS_SLACK) {
		free(sc->words);
		sc->words_cap = n + 1 + ULP_RANS_WORDS_SLACK;
		sc->words = malloc(sizeof(uint16_t) * sc->words_cap);
		if (!sc->words) {
			sc->words_cap = 0;
			return ULP_ERR_NOMEM;
		}
	}

	uint8_t *p = out->p + out->len;
	size_t hn = 0;
	p[hn++] = (uint8_t)(has_esc | (esc ? RANS_HDR_ESC : 0));
	hn += ulp_varint_put(p + hn, nown);
	memcpy(p + hn, own, nown);
	hn += nown;
	for (unsigned t = 0; t < ntab; t++) {
		hn += rans_put_table(p + hn, sc->norm[t], nsym, esc);
		rans_esym_table(&sc->esym[(size_t)t * nt], sc->norm[t], nt,
		                esc);
	}

	/* rANS encodes backwards: each symbol emits at most one word, so n
	 * words of scratch suffice. */
	for (unsigned c = 0; c < nctx; c++)
		sc->ebase[c] = sc->esym + (size_t)sc->remap[c] * nt;
	if (map && rans_map_rows(sc, sc->ebase[0], nt, map))
		return ULP_ERR_NOMEM;
	const unsigned lsym = map ? map->nsym : nsym;
	/* for the AVX-512 coder, entry s of context c is tabs[remap[c] *
	 * rowlen + s]: the block's tables, or map's rows (xsym) */
	const ulp_rans_esym *tabs = map ? sc->xsym : sc->esym;
	const uint8_t *remap = map ? rans_rowmap : sc->remap;
	const unsigned rowlen = map ? map->nsym : nt;
	/* 32 final states cost 112 bytes more than 4: small blocks, which
	 * decode fast either way, keep four lanes; 64 cost 128 more than
	 * 32, paid back by the decoders' two independent sets of 32 only in
	 * large blocks */
	const unsigned lanes = sc->lanes                  ? sc->lanes
	                       : n >= ULP_RANS_WIDE64_MIN ? 64
	                       : n >= ULP_RANS_WIDE_MIN   ? ULP_RANS_LANES
	                                                  : ULP_RANS_WAYS;
	uint32_t x[ULP_RANS_MAX_LANES];
	uint16_t *wend = sc->words + ULP_RANS_WORDS_SLACK + n;
	uint32_t *escl = list ? sc->escv : NULL;
	uint16_t *w =
		lanes == ULP_RANS_WAYS
			? rans_enc_lanes(sc, tabs, remap, rowlen, sym, ctx, n,
	                                 lsym, wend, x, escl, &nesc,
	                                 ULP_RANS_WAYS)
		: lanes == 32
			? rans_enc_lanes(sc, tabs, remap, rowlen, sym, ctx, n,
	                                 lsym, wend, x, escl, &nesc, 32)
			: rans_enc_lanes(sc, tabs, remap, rowlen, sym, ctx, n,
	                                 lsym, wend, x, escl, &nesc, 64);
	size_t nwords = (size_t)(wend - w);
	p[0] |= lanes == 64   ? RANS_HDR_LANES64
	        : lanes == 32 ? RANS_HDR_LANES32
	                      : 0;
	if (esc) {
		/* the escaped symbols, in symbol order (the coder walked
		 * backwards, the SIMD kernel a register at a time) */
		qsort(sc->escv, nesc, sizeof(uint32_t), cmp_u32);
		hn += ulp_varint_put(p + hn, nesc);
		for (size_t k = 0; k < nesc; k++)
			p[hn++] = sym[sc->escv[k]];
	}
	if (map && list) {
		if (nesc > map->nesc)
			return ULP_ERR_ARG;
		/* the coders list a group of lanes at a time from the end,
		 * so reversed the list is out of order only within a group:
		 * an insertion sort beats qsort by far (measured: qsort was
		 * 2% of a keyframe's encoding) */
		uint32_t *ev = map->escv;
		for (size_t k = 0; k < nesc; k++) {
			uint32_t v = sc->escv[nesc - 1 - k];
			size_t j = k;
			for (; j > 0 && ev[j - 1] > v; j--)
				ev[j] = ev[j - 1];
			ev[j] = v;
		}
	}
	if (map)
		map->nesc = list ? nesc : 0;
	if (nesc_out)
		*nesc_out = nesc;
	uint8_t *dst = p + hn;
	for (unsigned k = 0; k < lanes; k++)
		ulp_put32(dst + 4 * k, x[k]);
	memcpy(dst + 4 * lanes, w, nwords * 2);
	out->len += hn + 4 * lanes + nwords * 2;
	return ULP_OK;
}

int ulp_rans_encode(ulp_rans_scratch *sc, const uint8_t *sym,
                    const uint8_t *ctx, size_t n, unsigned nsym, unsigned nctx,
                    const uint32_t *hist, ulp_buf *out)
{
	return rans_encode_impl(sc, sym, ctx, n, nsym, nctx, hist, 0, out, NULL,
	                        NULL);
}

int ulp_rans_encode_map(ulp_rans_scratch *sc, const uint8_t *sym,
                        const uint8_t *ctx, size_t n, unsigned ncode,
                        const uint32_t *hist, ulp_rans_map *map, ulp_buf *out)
{
	if (!map->nctx || map->nctx > ULP_RANS_NCTX)
		return ULP_ERR_ARG;
	return rans_encode_impl(sc, sym, ctx, n, ncode, 1, hist, 0, out, NULL,
	                        map);
}

int ulp_rans_encode_esc(ulp_rans_scratch *sc, const uint8_t *sym,
                        const uint8_t *ctx, size_t n, unsigned nsym,
                        unsigned nctx, const uint32_t *hist, ulp_buf *out,
                        size_t *nesc)
{
	return rans_encode_impl(sc, sym, ctx, n, nsym, nctx, hist, 1, out, nesc,
	                        NULL);
}

int ulp_rans_dec_begin(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                       unsigned nsym, ulp_rans_dec *d)
{
	const uint8_t *p = in, *end = in + len;
	uint8_t own[ULP_RANS_NCTX];
	uint64_t nown;
	unsigned ntab;
	int rc;

	if (nsym == 0 || nsym > ULP_RANS_MAXSYM)
		return ULP_ERR_ARG;
	unsigned lanes = ulp_rans_block_lanes(p, (size_t)(end - p));
	if (!lanes)
		return ULP_ERR_CORRUPT;
	/* escape symbol: the tables' alphabet has one more, nsym */
	const int esc = (*p & RANS_HDR_ESC) != 0;
	const unsigned nt = nsym + (unsigned)esc;
	if (nt > ULP_RANS_MAXSYM)
		return ULP_ERR_CORRUPT;
	int has_esc = *p++ & 1;
	if (ulp_varint_get(&p, end, &nown) || nown > ULP_RANS_NCTX ||
	    (size_t)(end - p) < nown)
		return ULP_ERR_CORRUPT;
	memcpy(own, p, nown);
	p += nown;
	ntab = (unsigned)nown + (unsigned)has_esc;
	if (ntab > 256)
		return ULP_ERR_CORRUPT;
	/* Contexts without a table of their own use the escape table. */
	memset(sc->remap, has_esc ? (int)nown : 0xff, sizeof(sc->remap));
	for (unsigned t = 0; t < nown; t++) {
		if (t && own[t] <= own[t - 1])
			return ULP_ERR_CORRUPT;
		sc->remap[own[t]] = (uint8_t)t;
	}
	if (sc->dtab_cap < ntab || !sc->dtab) {
		free(sc->dtab);
		sc->dtab = malloc(sizeof(ulp_rans_dtab) * (ntab ? ntab : 1));
		sc->dtab_cap = sc->dtab ? (ntab ? ntab : 1) : 0;
		if (!sc->dtab)
			return ULP_ERR_NOMEM;
	}
	if (ntab == 0) /* only valid for zero symbols: a table that fails */
		memset(sc->dtab[0].e, 0, sizeof(sc->dtab[0].e));
	const int simd = ulp_rans_simd();
	for (unsigned t = 0; t < ntab; t++) {
		ulp_rans_dtab *dt = &sc->dtab[t];
		uint16_t f[ULP_RANS_MAXSYM];
		uint32_t cum = 0;
		rc = rans_get_table(&p, end, nsym, esc, f);
		if (rc)
			return rc;
		if (simd >= ULP_SIMD_AVX512) {
			ulp_rans_fill_avx512(dt->e, f, nt);
			continue;
		}
		for (unsigned s = 0; s < nt; s++) {
			uint32_t hi = (uint32_t)s << 24 | (f[s] - 1u);
			for (uint32_t k = 0; k < f[s]; k++)
				dt->e[cum + k] = hi | k << 12;
			cum += f[s];
		}
	}
	d->esc = NULL;
	d->nesc = 0;
	d->esc_sym = esc ? nsym : ULP_RANS_MAXSYM;
	if (esc) {
		uint64_t ne;
		if (ulp_varint_get(&p, end, &ne) || ne > (uint64_t)(end - p))
			return ULP_ERR_CORRUPT;
		d->esc = p;
		d->nesc = (size_t)ne;
		p += ne;
	}
	if ((size_t)(end - p) < 4 * lanes)
		return ULP_ERR_CORRUPT;
	for (unsigned k = 0; k < lanes; k++) {
		d->x[k] = ulp_le32(p + 4 * k);
		if (d->x[k] < ULP_RANS_L)
			return ULP_ERR_CORRUPT;
	}
	p += 4 * lanes;
	/* Unknown contexts of a crafted payload select table 0: decoding
	 * stays in bounds and the chunk checksum rejects the result. */
	for (unsigned c = 0; c < ULP_RANS_NCTX; c++) {
		unsigned t = sc->remap[c] < ntab ? sc->remap[c] : 0;
		sc->dbase[c] = sc->dtab[t].e;
		sc->doff[c] = t * ULP_RANS_M;
	}
	d->tab = sc->dbase;
	d->flat = sc->dtab[0].e;
	d->off = sc->doff;
	d->lanes = lanes;
	d->p = p;
	d->end = end;
	d->ntab = ntab;
	return ULP_OK;
}

int ulp_rans_unescape(const ulp_rans_dec *d, uint8_t *sym, size_t n)
{
	uint8_t *p = sym, *end = sym + n;
	size_t k = 0;
	if (d->esc_sym >= ULP_RANS_MAXSYM)
		return ULP_OK;
	/* escapes are rare: memchr skips the rest at memory speed */
	while ((p = memchr(p, (int)d->esc_sym, (size_t)(end - p)))) {
		if (k == d->nesc || d->esc[k] >= d->esc_sym)
			return ULP_ERR_CORRUPT;
		*p++ = d->esc[k++];
	}
	return k == d->nesc ? ULP_OK : ULP_ERR_CORRUPT;
}

int ulp_rans_dec_end(const ulp_rans_dec *d, const uint8_t *in, size_t *used)
{
	for (unsigned k = 0; k < d->lanes; k++)
		if (d->x[k] != ULP_RANS_L)
			return ULP_ERR_CORRUPT;
	*used = (size_t)(d->p - in);
	return ULP_OK;
}

/* Portable decoding of whole groups of L (32 or 64) symbols while the
 * input surely holds their (at most L) renormalisation words; returns
 * the symbols done, the caller finishes with checked steps. */
static inline __attribute__((always_inline)) size_t
rans_dec_wide_l(ulp_rans_dec *d, const uint8_t *ctx, size_t n, uint8_t *sym,
                const unsigned L)
{
	const uint32_t *const *db = d->tab;
	const uint8_t *p = d->p;
	uint32_t x[ULP_RANS_MAX_LANES];
	size_t i = 0;
	memcpy(x, d->x, sizeof(x[0]) * L);
	for (; i + L <= n && d->end - p >= 2 * L; i += L) {
		for (unsigned k = 0; k < L; k++) {
			unsigned s;
			x[k] = ulp_rans_dec_step(x[k], db[ctx ? ctx[i + k] : 0],
			                         &p, &s);
			sym[i + k] = (uint8_t)s;
		}
	}
	memcpy(d->x, x, sizeof(x[0]) * L);
	d->p = p;
	return i;
}

static size_t rans_dec_wide(ulp_rans_dec *d, const uint8_t *ctx, size_t n,
                            uint8_t *sym)
{
	return d->lanes == 64 ? rans_dec_wide_l(d, ctx, n, sym, 64)
	                      : rans_dec_wide_l(d, ctx, n, sym, 32);
}

/* The kernel that decodes a block of 32 or 64 lanes at this level:
 * whole groups of d->lanes symbols while 2 * d->lanes input bytes
 * remain; returns the symbols done. */
static size_t rans_wide_run(ulp_rans_dec *d, const uint8_t *ctx,
                            const uint8_t *ref16, unsigned shift,
                            unsigned emask, size_t n, uint8_t *sym)
{
	const int simd = ulp_rans_simd();
	if (ref16)
		return ulp_rans_gathers()
		               ? ulp_rans_dec32_ref16_avx512(d, ref16, shift,
		                                             emask, n, sym)
		               : ulp_rans_dec32_ref16_avx512_loads(
					 d, ref16, shift, emask, n, sym);
	return (ctx ? ulp_rans_gathers() : ulp_rans_gathers_one())
	               ? ulp_rans_dec32_avx512(d, ctx, n, sym)
	       : simd >= ULP_SIMD_AVX512
	               ? ulp_rans_dec32_avx512_loads(d, ctx, n, sym)
	       : simd ? ulp_rans_dec32_avx2(d, ctx, n, sym)
	              : rans_dec_wide(d, ctx, n, sym);
}

/* ulp_rans_decode, and with ref16 ulp_rans_decode_ref16 where the
 * AVX-512 kernels run (a block of 32 or 64 lanes). */
static int rans_decode(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                       uint8_t *ctx, const uint8_t *ref16, unsigned shift,
                       unsigned emask, size_t n, unsigned nsym, uint8_t *sym,
                       size_t *used)
{
	ulp_rans_dec d;
	int rc = ulp_rans_dec_begin(sc, in, len, nsym, &d);
	if (rc)
		return rc;
	if (n > 0 && (d.ntab == 0 || (!ctx && d.ntab != 1)))
		return ULP_ERR_CORRUPT;
	const uint32_t *const *db = d.tab;
	if (d.lanes >= 32) {
		const size_t L = d.lanes;
		size_t i = rans_wide_run(&d, ctx, ref16, shift, emask, n, sym);
		/* The groups whose words lie in the last 2 L bytes: the
		 * kernel again, on a copy padded with 2 L zero bytes, instead
		 * of checked steps (which were a twentieth of a bf16 delta
		 * decode).  A valid block never reads the padding; a
		 * corrupt one that did is caught here. */
		size_t left = (size_t)(d.end - d.p);
		if (n - i >= L && left < 2 * L) {
			uint8_t pad[4 * ULP_RANS_MAX_LANES]
				__attribute__((aligned(64))) = { 0 };
			const uint8_t *p0 = d.p, *end = d.end;
			memcpy(pad, p0, left);
			d.p = pad;
			d.end = pad + left + 2 * L;
			size_t k = rans_wide_run(&d, ctx ? ctx + i : NULL,
			                         ref16 ? ref16 + 2 * i : NULL,
			                         shift, emask, n - i, sym + i);
			size_t got = (size_t)(d.p - pad);
			d.p = p0 + got;
			d.end = end;
			if (got > left)
				return ULP_ERR_CORRUPT;
			i += k;
		}
		/* the tail's contexts */
		if (ref16)
			for (size_t j = i; j < n; j++)
				ctx[j] = (uint8_t)((ulp_le16(ref16 + 2 * j) >>
				                    shift) &
				                   emask);
		for (; i < n; i++) {
			unsigned s;
			if (ulp_rans_dec_step_checked(&d, &d.x[i % L],
			                              db[ctx ? ctx[i] : 0], &s))
				return ULP_ERR_CORRUPT;
			sym[i] = (uint8_t)s;
		}
		rc = ulp_rans_unescape(&d, sym, n);
		return rc ? rc : ulp_rans_dec_end(&d, in, used);
	}
	const uint8_t *p = d.p;
	uint32_t x0 = d.x[0], x1 = d.x[1], x2 = d.x[2], x3 = d.x[3];
	unsigned s0, s1, s2, s3;
	size_t i = 0;
	/* Whole groups while the input surely holds their (at most four)
	 * renormalisation words; then one symbol at a time with checks. */
	for (; i + 4 <= n && d.end - p >= 8; i += 4) {
		const uint32_t *t0 = db[ctx ? ctx[i] : 0];
		const uint32_t *t1 = db[ctx ? ctx[i + 1] : 0];
		const uint32_t *t2 = db[ctx ? ctx[i + 2] : 0];
		const uint32_t *t3 = db[ctx ? ctx[i + 3] : 0];
		x0 = ulp_rans_dec_step(x0, t0, &p, &s0);
		x1 = ulp_rans_dec_step(x1, t1, &p, &s1);
		x2 = ulp_rans_dec_step(x2, t2, &p, &s2);
		x3 = ulp_rans_dec_step(x3, t3, &p, &s3);
		sym[i] = (uint8_t)s0;
		sym[i + 1] = (uint8_t)s1;
		sym[i + 2] = (uint8_t)s2;
		sym[i + 3] = (uint8_t)s3;
	}
	d.p = p;
	d.x[0] = x0;
	d.x[1] = x1;
	d.x[2] = x2;
	d.x[3] = x3;
	for (; i < n; i++) {
		unsigned s;
		if (ulp_rans_dec_step_checked(&d, &d.x[i % ULP_RANS_WAYS],
		                              db[ctx ? ctx[i] : 0], &s))
			return ULP_ERR_CORRUPT;
		sym[i] = (uint8_t)s;
	}
	rc = ulp_rans_unescape(&d, sym, n);
	return rc ? rc : ulp_rans_dec_end(&d, in, used);
}

int ulp_rans_decode(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                    const uint8_t *ctx, size_t n, unsigned nsym, uint8_t *sym,
                    size_t *used)
{
	/* ctx is only read without ref16 */
	return rans_decode(sc, in, len, (uint8_t *)(uintptr_t)ctx, NULL, 0, 0,
	                   n, nsym, sym, used);
}

int ulp_rans_decode_ref16(ulp_rans_scratch *sc, const uint8_t *in, size_t len,
                          const uint8_t *ref, unsigned shift, unsigned emask,
                          uint8_t *ctx, size_t n, unsigned nsym, uint8_t *sym,
                          size_t *used)
{
	if (ulp_rans_simd() >= ULP_SIMD_AVX512 &&
	    ulp_rans_block_lanes(in, len) >= 32)
		return rans_decode(sc, in, len, ctx, ref, shift, emask, n, nsym,
		                   sym, used);
	for (size_t i = 0; i < n; i++)
		ctx[i] = (uint8_t)((ulp_le16(ref + 2 * i) >> shift) & emask);
	return ulp_rans_decode(sc, in, len, ctx, n, nsym, sym, used);
}
