/*
 * test_util.h - helpers shared by the codec unit tests (test_rans.c,
 * test_codec.c, test_container.c).
 *
 *   - a seeded PRNG (splitmix64): every randomised test starts from a fixed
 *     seed, so runs are reproducible; TU_ASSERT() prints the seed on
 *     failure and ULP_TEST_SEED=<n> in the environment perturbs every seed
 *     to explore other inputs;
 *   - a growable byte buffer and a memory sink for ulp_write_fn, with
 *     failure injection;
 *   - a memory source usable as ulp_read_at_fn and ulp_ref_read_fn, with
 *     bounds checking and failure injection;
 *   - float bit helpers and a builder of synthetic safetensors-like files
 *     with hand-made tensor maps;
 *   - one-call encode / open / decode wrappers.
 *
 * Everything is static inline so that each test program uses what it
 * needs without -Wunused-function noise.
 */
#ifndef ULP_TEST_UTIL_H
#define ULP_TEST_UTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "codec_internal.h"
#include "ulpfs/ulp.h"

/* ------------------------------------------------------------ the PRNG */

/* Seed of the randomised input currently under test; printed by
 * TU_ASSERT on failure. */
static uint64_t tu_seed __attribute__((unused));

typedef struct tu_rng {
	uint64_t s;
} tu_rng;

static inline uint64_t tu_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Start a stream from seed (xor ULP_TEST_SEED when set). */
static inline void tu_rng_init(tu_rng *r, uint64_t seed)
{
	const char *e = getenv("ULP_TEST_SEED");
	if (e && *e)
		seed ^= strtoull(e, NULL, 0);
	tu_seed = seed;
	r->s = seed;
}

static inline uint64_t tu_next(tu_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return tu_mix64(r->s);
}

/* Uniform in [0, n), n > 0 (the modulo bias is irrelevant here). */
static inline uint64_t tu_below(tu_rng *r, uint64_t n)
{
	return tu_next(r) % n;
}

/* 1 with probability num/den. */
static inline int tu_chance(tu_rng *r, unsigned num, unsigned den)
{
	return tu_below(r, den) < num;
}

static inline void tu_fill(tu_rng *r, void *p, size_t n)
{
	uint8_t *d = p;
	while (n >= 8) {
		uint64_t v = tu_next(r);
		memcpy(d, &v, 8);
		d += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = tu_next(r);
		memcpy(d, &v, n);
	}
}

/* Geometric-ish: number of failures before a success of probability
 * 1/den, capped. */
static inline unsigned tu_geom(tu_rng *r, unsigned den, unsigned cap)
{
	unsigned k = 0;
	while (k < cap && !tu_chance(r, 1, den))
		k++;
	return k;
}

/* ------------------------------------------------------- assertions */

#define TU_ASSERT(cond, fmt, ...)                                        \
	cr_assert((cond), fmt " [seed 0x%016" PRIx64 "]", ##__VA_ARGS__, \
	          tu_seed)

/* rc must be exactly want. */
#define TU_RC(rc, want, fmt, ...)                                   \
	do {                                                        \
		int tu_rc_ = (rc), tu_want_ = (want);               \
		TU_ASSERT(tu_rc_ == tu_want_,                       \
		          "rc %d (%s), want %d (%s): " fmt, tu_rc_, \
		          ulp_strerror(tu_rc_), tu_want_,           \
		          ulp_strerror(tu_want_), ##__VA_ARGS__);   \
	} while (0)

#define TU_OK(rc, fmt, ...) TU_RC(rc, ULP_OK, fmt, ##__VA_ARGS__)

/* The byte sweeps (an object corrupted at every byte in turn, decoded
 * each time) take every TU_SWEEP_STRIDE-th byte of a payload: every one in
 * the plain build of a test, every 7th in its sanitizer twin, where each
 * decode is ten times slower and the full sweep took minutes.  Header,
 * index and trailer bytes are always all taken. */
#ifdef __SANITIZE_ADDRESS__
#define TU_SWEEP_STRIDE 7
#else
#define TU_SWEEP_STRIDE 1
#endif

/* Index of the first differing byte, or (size_t)-1. */
static inline size_t tu_first_diff(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;
	if (memcmp(x, y, n) == 0)
		return (size_t)-1;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return i;
	return (size_t)-1;
}

#define TU_MEMEQ(a, b, n, fmt, ...)                                  \
	do {                                                         \
		size_t tu_d_ = tu_first_diff((a), (b), (n));         \
		TU_ASSERT(tu_d_ == (size_t)-1,                       \
		          "bytes differ at %zu of %zu: " fmt, tu_d_, \
		          (size_t)(n), ##__VA_ARGS__);               \
	} while (0)

static inline void *tu_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	cr_assert(p, "out of memory (%zu bytes)", n);
	return p;
}

/* An exact-size heap copy, so that AddressSanitizer sees the true end of
 * an input. */
static inline uint8_t *tu_dup(const void *p, size_t n)
{
	uint8_t *d = tu_xmalloc(n);
	if (n)
		memcpy(d, p, n);
	return d;
}

/* ------------------------------------------------------ byte buffers */

typedef struct tu_buf {
	uint8_t *p;
	size_t len, cap;
} tu_buf;

static inline void tu_buf_reserve(tu_buf *b, size_t cap)
{
	if (cap <= b->cap)
		return;
	size_t nc = b->cap ? b->cap : 256;
	while (nc < cap)
		nc *= 2;
	b->p = realloc(b->p, nc);
	cr_assert(b->p, "out of memory");
	b->cap = nc;
}

static inline void tu_buf_put(tu_buf *b, const void *p, size_t n)
{
	tu_buf_reserve(b, b->len + n);
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static inline void tu_buf_str(tu_buf *b, const char *s)
{
	tu_buf_put(b, s, strlen(s));
}

static inline void tu_buf_free(tu_buf *b)
{
	free(b->p);
	*b = (tu_buf){ 0 };
}

/* ------------------------------------------------------ memory sink */

/* A ulp_write_fn target.  With fail_at > 0 the fail_at-th call (1-based)
 * returns fail_rc without writing. */
typedef struct tu_sink {
	tu_buf b;
	unsigned calls;
	unsigned fail_at;
	int fail_rc;
} tu_sink;

static inline int tu_sink_write(void *opaque, const void *buf, size_t len)
{
	tu_sink *s = opaque;
	s->calls++;
	if (s->fail_at && s->calls == s->fail_at)
		return s->fail_rc;
	tu_buf_put(&s->b, buf, len);
	return 0;
}

/* ----------------------------------------------------- memory source */

/* A ulp_read_at_fn / ulp_ref_read_fn over p[0..size).  Reads outside the
 * buffer count in oob and fail with ULP_ERR_IO.  A read that overlaps
 * [fail_lo, fail_hi) returns fail_rc.  Safe to share between threads. */
typedef struct tu_mem {
	const uint8_t *p;
	uint64_t size;
	uint64_t fail_lo, fail_hi;
	int fail_rc;
	unsigned long calls; /* updated atomically */
	unsigned long oob;   /* updated atomically */
} tu_mem;

static inline tu_mem tu_mem_of(const void *p, uint64_t size)
{
	tu_mem m = { 0 };
	m.p = p;
	m.size = size;
	return m;
}

static inline int tu_mem_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	tu_mem *m = opaque;
	__atomic_add_fetch(&m->calls, 1, __ATOMIC_RELAXED);
	if (off > m->size || len > m->size - off) {
		__atomic_add_fetch(&m->oob, 1, __ATOMIC_RELAXED);
		return ULP_ERR_IO;
	}
	if (m->fail_hi > m->fail_lo && off < m->fail_hi &&
	    off + len > m->fail_lo)
		return m->fail_rc;
	if (len)
		memcpy(buf, m->p + off, len);
	return 0;
}

/* ------------------------------------------------------- float bits */

static inline uint64_t tu_wmask(unsigned W)
{
	return W == 64 ? ~0ull : (1ull << W) - 1;
}

/* Order-preserving map of float bits to unsigned integers (negative
 * values complemented, positive ones get the sign bit), written here
 * independently of floatcode.c. */
static inline uint64_t tu_ord(uint64_t u, unsigned W)
{
	uint64_t sb = 1ull << (W - 1);
	return (u & sb) ? (~u & tu_wmask(W)) : (u | sb);
}

static inline uint64_t tu_unord(uint64_t o, unsigned W)
{
	uint64_t sb = 1ull << (W - 1);
	return (o & sb) ? (o & ~sb) : (~o & tu_wmask(W));
}

static inline uint64_t tu_load(const uint8_t *p, size_t i, unsigned W)
{
	uint64_t v = 0;
	memcpy(&v, p + i * (W / 8), W / 8);
	return v;
}

static inline void tu_store(uint8_t *p, size_t i, uint64_t v, unsigned W)
{
	memcpy(p + i * (W / 8), &v, W / 8);
}

/* A finite value of format f shaped like a trained weight: random sign,
 * exponent a little below the bias (geometric), random mantissa. */
static inline uint64_t tu_weight_bits(tu_rng *r, ulp_float_fmt f)
{
	unsigned bias = (1u << (f.ebits - 1)) - 1;
	unsigned drop = 1 + tu_geom(r, 3, bias - 1);
	uint64_t e = bias > drop ? bias - drop : 1;
	uint64_t m = tu_next(r) & ((1ull << f.mbits) - 1);
	uint64_t s = tu_next(r) & 1;
	return s << (f.width - 1) | e << f.mbits | m;
}

/* Move v by a small number of ULPs (0 with probability 1/2, else
 * +-1..3), staying away from wrapping around the ordinal range. */
static inline uint64_t tu_walk_bits(tu_rng *r, uint64_t v, unsigned W)
{
	if (tu_chance(r, 1, 2))
		return v;
	uint64_t o = tu_ord(v, W);
	uint64_t d = 1 + tu_below(r, 3);
	if (tu_chance(r, 1, 2))
		o = o + d <= tu_wmask(W) ? o + d : o - d;
	else
		o = o >= d ? o - d : o + d;
	return tu_unord(o, W);
}

static inline void tu_fill_weights(tu_rng *r, ulp_float_fmt f, uint8_t *p,
                                   size_t n)
{
	for (size_t i = 0; i < n; i++)
		tu_store(p, i, tu_weight_bits(r, f), f.width);
}

static inline void tu_walk_weights(tu_rng *r, ulp_float_fmt f,
                                   const uint8_t *from, uint8_t *to, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tu_store(to, i,
		         tu_walk_bits(r, tu_load(from, i, f.width), f.width),
		         f.width);
}

/* ------------------------------------------------ synthetic files */

/* One tensor of a synthetic file: its name, coding type, byte size and
 * the number of junk bytes in front of it.  dt ULP_DT_GENERIC is an I64
 * tensor. */
typedef struct tu_tspec {
	const char *name;
	ulp_dtype dt;
	uint64_t nbytes;
	uint64_t gap;
} tu_tspec;

typedef struct tu_file {
	uint8_t *data;
	uint64_t size;
	ulp_tensor_map map;
	uint8_t hash[16];
} tu_file;

static inline const char *tu_dtype_file_name(ulp_dtype dt)
{
	switch (dt) {
	case ULP_DT_BF16:
		return "BF16";
	case ULP_DT_F16:
		return "F16";
	case ULP_DT_F32:
		return "F32";
	case ULP_DT_F64:
		return "F64";
	case ULP_DT_F8E4M3:
		return "F8_E4M3";
	case ULP_DT_F8E5M2:
		return "F8_E5M2";
	default:
		return "I64";
	}
}

static inline const ulp_tensor *tu_find(const ulp_tensor_map *m,
                                        const char *name)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (strcmp(m->v[i].name, name) == 0)
			return &m->v[i];
	return NULL;
}

/* Build a safetensors-like file: an 8-byte header length, a JSON-ish
 * header naming every tensor (padded by hdr_pad spaces), then per spec
 * gap junk bytes and the tensor.  With prev, a tensor of the same name and
 * size takes prev's bytes moved by small ULP walks (floats) or with a few
 * bytes changed (other data); everything else is fresh.  The map is
 * hand-built (not parsed), sorted by offset as the codec requires. */
static inline void tu_file_build(tu_file *out, const tu_tspec *specs, size_t n,
                                 const tu_file *prev, tu_rng *r,
                                 unsigned hdr_pad)
{
	tu_buf hdr = { 0 };
	uint64_t *offs = tu_xmalloc(sizeof(uint64_t) * (n + 1));
	char tmp[256];

	/* Offsets relative to the body first, to write them in the
	 * header. */
	uint64_t pos = 0;
	for (size_t i = 0; i < n; i++) {
		pos += specs[i].gap;
		offs[i] = pos;
		pos += specs[i].nbytes;
	}
	tu_buf_str(&hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < n; i++) {
		unsigned es = ulp_dtype_size(specs[i].dt);
		if (specs[i].dt == ULP_DT_GENERIC)
			es = 8;
		snprintf(tmp, sizeof(tmp),
		         ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%" PRIu64
		         "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
		         specs[i].name, tu_dtype_file_name(specs[i].dt),
		         specs[i].nbytes / es, offs[i],
		         offs[i] + specs[i].nbytes);
		tu_buf_str(&hdr, tmp);
	}
	tu_buf_str(&hdr, "}");
	for (unsigned i = 0; i < hdr_pad; i++)
		tu_buf_str(&hdr, " ");
	uint64_t base = 8 + hdr.len;

	out->size = base + pos;
	out->data = tu_xmalloc(out->size);
	for (int k = 0; k < 8; k++)
		out->data[k] = (uint8_t)((uint64_t)hdr.len >> (8 * k));
	memcpy(out->data + 8, hdr.p, hdr.len);
	out->map.format = ULP_FMT_SAFETENSORS;
	out->map.n = n;
	out->map.v = calloc(n ? n : 1, sizeof(ulp_tensor));
	cr_assert(out->map.v);

	for (size_t i = 0; i < n; i++) {
		const tu_tspec *s = &specs[i];
		ulp_tensor *t = &out->map.v[i];
		uint8_t *d = out->data + base + offs[i];
		/* gap junk: text-like bytes */
		for (uint8_t *g = d - s->gap; g < d; g++)
			*g = (uint8_t)('a' + tu_below(r, 26));
		t->name = strdup(s->name);
		cr_assert(t->name);
		snprintf(t->dtype_name, sizeof(t->dtype_name), "%s",
		         tu_dtype_file_name(s->dt));
		t->dtype = s->dt;
		t->offset = base + offs[i];
		t->nbytes = s->nbytes;
		t->ndim = 1;
		t->shape = tu_xmalloc(sizeof(uint64_t));
		t->shape[0] =
			s->nbytes /
			(s->dt == ULP_DT_GENERIC ? 8 : ulp_dtype_size(s->dt));

		const ulp_tensor *pt = prev ? tu_find(&prev->map, s->name)
		                            : NULL;
		if (pt && pt->nbytes != s->nbytes)
			pt = NULL;
		if (!pt) {
			if (s->dt == ULP_DT_GENERIC) {
				/* small int64 values: mostly zero bytes */
				for (uint64_t k = 0; k < s->nbytes; k++)
					d[k] = k % 8 < 2 ? (uint8_t)tu_next(r)
					                 : 0;
			} else {
				ulp_float_fmt f = ulp_dtype_fmt(s->dt);
				size_t ne = s->nbytes / (f.width / 8);
				tu_fill_weights(r, f, d, ne);
				tu_fill(r, d + ne * (f.width / 8),
				        s->nbytes - ne * (f.width / 8));
			}
			continue;
		}
		const uint8_t *pd = prev->data + pt->offset;
		memcpy(d, pd, s->nbytes);
		if (s->dt == ULP_DT_GENERIC) {
			for (int k = 0; k < 3 && s->nbytes; k++)
				d[tu_below(r, s->nbytes)] ^=
					(uint8_t)(1 + tu_below(r, 255));
		} else {
			ulp_float_fmt f = ulp_dtype_fmt(s->dt);
			size_t ne = s->nbytes / (f.width / 8);
			tu_walk_weights(r, f, pd, d, ne);
		}
	}
	ulp_content_hash(ULP_HASH_TREE, out->data, out->size, out->hash);
	free(offs);
	tu_buf_free(&hdr);
}

/* A file of raw bytes with no tensor map. */
static inline void tu_file_raw(tu_file *out, const void *p, uint64_t size)
{
	memset(out, 0, sizeof(*out));
	out->data = tu_dup(p, size);
	out->size = size;
	ulp_content_hash(ULP_HASH_TREE, out->data, size, out->hash);
}

static inline void tu_file_free(tu_file *f)
{
	ulp_tensor_map_free(&f->map);
	free(f->data);
	memset(f, 0, sizeof(*f));
}

/* ------------------------------------------------ encode / decode */

/* A job coding cur (with its map unless raw) against ref (NULL:
 * standalone, else read through ref_src); no sink yet. */
static inline ulp_encode_job tu_job(const tu_file *cur, const tu_file *ref,
                                    tu_mem *ref_src, unsigned nthreads)
{
	ulp_encode_job job;
	memset(&job, 0, sizeof(job));
	job.cur = cur->data;
	job.cur_size = cur->size;
	job.cur_map = cur->map.n ? &cur->map : NULL;
	if (ref) {
		job.has_ref = 1;
		job.ref_size = ref->size;
		job.ref_map = ref->map.n ? &ref->map : NULL;
		job.ref_hash = ref->hash;
		job.ref_read = tu_mem_read;
		job.ref_opaque = ref_src;
	}
	job.nthreads = nthreads;
	return job;
}

/* Encode cur against ref (NULL: standalone) into sink->b.  Returns
 * ulp_encode_file's code. */
static inline int tu_encode(const tu_file *cur, const tu_file *ref,
                            uint32_t chunk_size, unsigned nthreads,
                            tu_sink *sink, ulp_stats *stats, tu_mem *ref_src)
{
	ulp_encode_job job = tu_job(cur, ref, ref_src, nthreads);
	uint8_t hash[16];
	uint64_t osize = 0;
	job.params.chunk_size = chunk_size;
	job.write = tu_sink_write;
	job.write_opaque = sink;
	int rc = ulp_encode_file(&job, stats, hash, &osize);
	if (rc == ULP_OK) {
		TU_ASSERT(memcmp(hash, cur->hash, 16) == 0, "hash_out is not "
		                                            "XXH3-128 of the "
		                                            "file");
		TU_ASSERT(osize == sink->b.len,
		          "object_size %" PRIu64 " but %zu bytes written",
		          osize, sink->b.len);
	}
	return rc;
}

/* Encode cur against ref (may be NULL) and return the object bytes in
 * *obj (owned by the caller); asserts success. */
static inline void tu_encode_ok(const tu_file *cur, const tu_file *ref,
                                uint32_t chunk_size, unsigned nthreads,
                                tu_buf *obj, ulp_stats *stats)
{
	tu_sink sink = { 0 };
	tu_mem rm = ref ? tu_mem_of(ref->data, ref->size) : (tu_mem){ 0 };
	int rc = tu_encode(cur, ref, chunk_size, nthreads, &sink, stats, &rm);
	TU_OK(rc, "ulp_encode_file");
	TU_ASSERT(rm.oob == 0, "encoder read past the reference");
	*obj = sink.b;
}

/* Decode all of obj (opened from bytes o[0..olen)) against ref and
 * compare with want; asserts success. */
static inline void tu_check_object(const uint8_t *o, size_t olen,
                                   const tu_file *want, const tu_file *ref)
{
	uint8_t *copy = tu_dup(o, olen);
	tu_mem om = tu_mem_of(copy, olen);
	tu_mem rm = ref ? tu_mem_of(ref->data, ref->size) : (tu_mem){ 0 };
	ulp_object *obj = NULL;
	TU_OK(ulp_object_open(tu_mem_read, &om, olen, &obj), "open");
	TU_ASSERT(ulp_object_size(obj) == want->size,
	          "size %" PRIu64 ", want %" PRIu64, ulp_object_size(obj),
	          want->size);
	TU_ASSERT(memcmp(ulp_object_file_hash(obj), want->hash, 16) == 0,
	          "file hash differs from the tree hash of the data");
	TU_ASSERT(ulp_object_has_ref(obj) == (ref != NULL), "has_ref");
	if (ref) {
		TU_ASSERT(ulp_object_ref_size(obj) == ref->size, "ref_size");
		TU_ASSERT(memcmp(ulp_object_ref_hash(obj), ref->hash, 16) == 0,
		          "ref_hash");
	}
	ulp_dctx *d = ulp_dctx_new();
	cr_assert(d);
	uint8_t *out = tu_xmalloc(want->size);
	TU_OK(ulp_object_read(d, obj, 0, out, want->size,
	                      ref ? tu_mem_read : NULL, ref ? &rm : NULL),
	      "read all");
	TU_MEMEQ(out, want->data, want->size, "decoded object");
	TU_ASSERT(rm.oob == 0 && om.oob == 0, "decoder read out of bounds");
	free(out);
	ulp_dctx_free(d);
	ulp_object_close(obj);
	free(copy);
}

#endif /* ULP_TEST_UTIL_H */
