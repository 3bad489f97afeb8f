/*
 * test_formats.c - unit tests of the format parsers (src/formats).
 *
 * Safetensors inputs and most zips are built here in memory; real torch.save
 * archives come from tests/data (made by tests/data/make_fixtures.py).
 * Every parser call gets a heap buffer of exactly the input's size so that
 * AddressSanitizer builds catch any read past the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "formats/formats_internal.h"
#include "formats/pickle_scan.h"
#include "ulpfs/ulp.h"

/* The build may point at the fixtures with -DULP_TEST_DATA='"dir"';
 * otherwise they are found in data/ beside this file (see fixture_path). */
#ifndef ULP_TEST_DATA
#define ULP_TEST_DATA NULL
#endif

/* ------------------------------------------------------------- helpers */

typedef struct buf {
	uint8_t *p;
	size_t len, cap;
} buf;

static void b_put(buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		cr_assert(b->p);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void b_str(buf *b, const char *s)
{
	b_put(b, s, strlen(s));
}

static void b_le(buf *b, uint64_t v, int n)
{
	uint8_t t[8];

	for (int i = 0; i < n; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	b_put(b, t, (size_t)n);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* An exact-size heap copy, so ASan sees the true end of the input. */
static uint8_t *dup_exact(const void *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);

	cr_assert(d);
	if (n)
		memcpy(d, p, n);
	return d;
}

static void fixture_path(char *path, size_t cap, const char *name)
{
	const char *dir = ULP_TEST_DATA;
	const char *src = __FILE__, *slash = strrchr(src, '/');

	if (dir) {
		snprintf(path, cap, "%s/%s", dir, name);
		return;
	}
	/* __FILE__ is relative to where the compiler ran, which is also
	 * where make check runs the tests. */
	if (slash)
		snprintf(path, cap, "%.*s/data/%s", (int)(slash - src), src,
		         name);
	else
		snprintf(path, cap, "data/%s", name);
}

static uint8_t *load_fixture(const char *name, size_t *len)
{
	char path[1024];
	FILE *f;
	long n;
	uint8_t *d;

	fixture_path(path, sizeof path, name);
	f = fopen(path, "rb");
	cr_assert(f, "cannot open fixture %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	d = malloc((size_t)n);
	cr_assert(d);
	cr_assert_eq(fread(d, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return d;
}

static int map_is_empty(const ulp_tensor_map *m)
{
	return m->n == 0 && m->v == NULL && m->format == ULP_FMT_UNKNOWN;
}

/* A strict parser must reject p[0..n) with *out empty, and detection must
 * fall back to "unknown". */
typedef int (*parse_fn)(const uint8_t *, uint64_t, ulp_tensor_map *);

static void expect_reject(parse_fn fn, const void *p, size_t n,
                          const char *what)
{
	uint8_t *d = dup_exact(p, n);
	ulp_tensor_map m;
	int rc = fn(d, n, &m);

	cr_expect_eq(rc, ULP_ERR_PARSE, "%s: rc %d", what, rc);
	cr_expect(map_is_empty(&m), "%s: map not empty", what);
	ulp_tensor_map_free(&m);
	rc = ulp_format_parse(d, n, &m);
	cr_expect_eq(rc, ULP_OK, "%s: format_parse rc %d", what, rc);
	cr_expect(map_is_empty(&m), "%s: detected something", what);
	ulp_tensor_map_free(&m);
	free(d);
}

/* Parse with an exact-size copy; return rc and leave the map in *m. */
static int parse_exact(parse_fn fn, const void *p, size_t n, ulp_tensor_map *m)
{
	uint8_t *d = dup_exact(p, n);
	int rc = fn(d, n, m);

	free(d);
	return rc;
}

static const ulp_tensor *find_tensor(const ulp_tensor_map *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].name, name) == 0)
			return &m->v[i];
	return NULL;
}

static void check_map_invariants(const ulp_tensor_map *m, uint64_t size)
{
	for (size_t i = 0; i < m->n; i++) {
		const ulp_tensor *t = &m->v[i];

		cr_assert(t->name);
		cr_assert(t->offset <= size && t->nbytes <= size - t->offset);
		cr_assert((t->ndim == 0) == (t->shape == NULL));
		if (i)
			cr_assert(m->v[i - 1].offset + m->v[i - 1].nbytes <=
			          t->offset);
	}
}

/* ------------------------------------------------------- safetensors */

/* 8-byte header length, the JSON, then dlen bytes of data (0, 1, 2, ...). */
static buf st_build(const char *json, size_t dlen)
{
	buf b = { 0 };

	b_le(&b, strlen(json), 8);
	b_str(&b, json);
	for (size_t i = 0; i < dlen; i++) {
		uint8_t c = (uint8_t)i;

		b_put(&b, &c, 1);
	}
	return b;
}

static void st_reject(const char *json, size_t dlen, const char *what)
{
	buf b = st_build(json, dlen);

	expect_reject(ulp_safetensors_parse, b.p, b.len, what);
	free(b.p);
}

/* Header order differs from offset order on purpose. */
static const char st_valid_json[] =
	"{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
	"\"b.bf16\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]}"
        ","
	"\"a.f32\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
	"\"e.empty\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[22,22]"
        "},"
	"\"c.f64\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[24,32]},"
	"\"d.i64\":{\"dtype\":\"I64\",\"shape\":[1,1],\"data_offsets\":[32,40]}"
        ","
	"\"f.f16\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[40,42]},"
	"\"g.e4\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[42,44]"
        "},"
	"\"h.e5\":{\"dtype\":\"F8_E5M2\",\"shape\":[1],\"data_offsets\":[44,45]"
        "},"
	"\"i.bool\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[45,48]}"
	"}";

Test(safetensors, valid_mixed)
{
	buf b = st_build(st_valid_json, 48);
	uint64_t base = 8 + strlen(st_valid_json);
	ulp_tensor_map m;
	static const struct {
		const char *name, *dt;
		ulp_dtype dtype;
		uint64_t off, nbytes;
		uint32_t ndim;
	} want[] = {
		{ "a.f32", "F32", ULP_DT_F32, 0, 16, 2 },
		{ "b.bf16", "BF16", ULP_DT_BF16, 16, 6, 1 },
		{ "e.empty", "U8", ULP_DT_GENERIC, 22, 0, 2 },
		{ "c.f64", "F64", ULP_DT_F64, 24, 8, 0 },
		{ "d.i64", "I64", ULP_DT_GENERIC, 32, 8, 2 },
		{ "f.f16", "F16", ULP_DT_F16, 40, 2, 1 },
		{ "g.e4", "F8_E4M3", ULP_DT_F8E4M3, 42, 2, 1 },
		{ "h.e5", "F8_E5M2", ULP_DT_F8E5M2, 44, 1, 1 },
		{ "i.bool", "BOOL", ULP_DT_GENERIC, 45, 3, 1 },
	};

	cr_assert_eq(parse_exact(ulp_safetensors_parse, b.p, b.len, &m),
	             ULP_OK);
	cr_assert_eq(m.format, ULP_FMT_SAFETENSORS);
	cr_assert_eq(m.n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < m.n; i++) {
		cr_expect_str_eq(m.v[i].name, want[i].name);
		cr_expect_str_eq(m.v[i].dtype_name, want[i].dt);
		cr_expect_eq(m.v[i].dtype, want[i].dtype);
		cr_expect_eq(m.v[i].offset, base + want[i].off);
		cr_expect_eq(m.v[i].nbytes, want[i].nbytes);
		cr_expect_eq(m.v[i].ndim, want[i].ndim);
	}
	cr_expect_eq(m.v[0].shape[0], 2);
	cr_expect_eq(m.v[0].shape[1], 2);
	cr_expect_eq(m.v[2].shape[0], 0);
	cr_expect_eq(m.v[2].shape[1], 5);
	cr_expect_null(m.v[3].shape);
	check_map_invariants(&m, b.len);
	ulp_tensor_map_free(&m);
	cr_expect(map_is_empty(&m));

	cr_assert_eq(ulp_format_parse(b.p, b.len, &m), ULP_OK);
	cr_expect_eq(m.format, ULP_FMT_SAFETENSORS);
	cr_expect_eq(m.n, sizeof want / sizeof want[0]);
	ulp_tensor_map_free(&m);
	free(b.p);
}

Test(safetensors, every_dtype_size)
{
	static const struct {
		const char *dt;
		unsigned size;
		ulp_dtype dtype;
	} dts[] = {
		{ "F64", 8, ULP_DT_F64 },
		{ "F32", 4, ULP_DT_F32 },
		{ "F16", 2, ULP_DT_F16 },
		{ "BF16", 2, ULP_DT_BF16 },
		{ "I64", 8, ULP_DT_GENERIC },
		{ "I32", 4, ULP_DT_GENERIC },
		{ "I16", 2, ULP_DT_GENERIC },
		{ "I8", 1, ULP_DT_GENERIC },
		{ "U8", 1, ULP_DT_GENERIC },
		{ "U16", 2, ULP_DT_GENERIC },
		{ "U32", 4, ULP_DT_GENERIC },
		{ "U64", 8, ULP_DT_GENERIC },
		{ "BOOL", 1, ULP_DT_GENERIC },
		{ "F8_E4M3", 1, ULP_DT_F8E4M3 },
		{ "F8_E5M2", 1, ULP_DT_F8E5M2 },
	};

	for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
		char json[160];
		ulp_tensor_map m;
		buf b;

		snprintf(json, sizeof json,
		         "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],"
		         "\"data_offsets\":[0,%u]}}",
		         dts[i].dt, 3 * dts[i].size);
		b = st_build(json, 3 * dts[i].size);
		cr_assert_eq(parse_exact(ulp_safetensors_parse, b.p, b.len, &m),
		             ULP_OK, "%s", dts[i].dt);
		cr_expect_eq(m.v[0].dtype, dts[i].dtype, "%s", dts[i].dt);
		cr_expect_eq(m.v[0].nbytes, 3 * dts[i].size);
		ulp_tensor_map_free(&m);
		free(b.p);
		/* One byte short of the dtype's size must fail. */
		snprintf(json, sizeof json,
		         "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],"
		         "\"data_offsets\":[0,%u]}}",
		         dts[i].dt, 3 * dts[i].size - 1);
		st_reject(json, 3 * dts[i].size, dts[i].dt);
	}
}

Test(safetensors, padding_trailing_data_and_empty)
{
	const char *padded = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
			     "\"data_offsets\":[0,4]}}      ";
	ulp_tensor_map m;
	buf b = st_build(padded, 4 + 100); /* trailing bytes are allowed */

	cr_assert_eq(parse_exact(ulp_safetensors_parse, b.p, b.len, &m),
	             ULP_OK);
	cr_expect_eq(m.n, 1);
	cr_expect_eq(m.v[0].offset, 8 + strlen(padded));
	ulp_tensor_map_free(&m);
	free(b.p);

	/* No tensors at all is a valid (empty) file. */
	b = st_build("{}", 0);
	cr_assert_eq(parse_exact(ulp_safetensors_parse, b.p, b.len, &m),
	             ULP_OK);
	cr_expect_eq(m.n, 0);
	cr_expect_eq(m.format, ULP_FMT_SAFETENSORS);
	ulp_tensor_map_free(&m);
	free(b.p);
	b = st_build("{\"__metadata__\":{}}", 0);
	cr_assert_eq(parse_exact(ulp_safetensors_parse, b.p, b.len, &m),
	             ULP_OK);
	cr_expect_eq(m.n, 0);
	ulp_tensor_map_free(&m);
	free(b.p);
}

Test(safetensors, zero_size_tensors_share_offset)
{
	/* Ties are ordered by name whatever the header order. */
	const char *json = "{\"z2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_"
	                   "offsets\":[4,4]},"
			   "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_"
	                   "offsets\":[4,8]},"
			   "\"z1\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_"
	                   "offsets\":[4,4]},"
			   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_"
	                   "offsets\":[0,4]}}";
	ulp_tensor_map m;
	buf b = st_build(json, 8);

	cr_assert_eq(parse_exact(ulp_safetensors_parse, b.p, b.len, &m),
	             ULP_OK);
	cr_assert_eq(m.n, 4);
	cr_expect_str_eq(m.v[0].name, "a");
	cr_expect_str_eq(m.v[1].name, "z1");
	cr_expect_str_eq(m.v[2].name, "z2");
	cr_expect_str_eq(m.v[3].name, "w");
	ulp_tensor_map_free(&m);
	free(b.p);
}

Test(safetensors, hostile_header_length)
{
	const char *json = "{}";
	buf b = st_build(json, 0);
	uint64_t lens[] = {
		0, 1, 3, 4, UINT64_MAX, (uint64_t)1 << 63, (100u << 20) + 1
	};

	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		put_le(b.p, lens[i], 8);
		expect_reject(ulp_safetensors_parse, b.p, b.len, "hlen");
	}
	expect_reject(ulp_safetensors_parse, b.p, 0, "empty");
	expect_reject(ulp_safetensors_parse, b.p, 7, "short");
	put_le(b.p, 2, 8);
	expect_reject(ulp_safetensors_parse, b.p, 9, "json cut");
	free(b.p);
}

Test(safetensors, hostile_json)
{
	static const struct {
		const char *json, *what;
		size_t dlen;
	} cases[] = {
		{ "not json at all", "non-json", 0 },
		{ "[1,2,3]", "array top", 0 },
		{ "\"str\"", "string top", 0 },
		{ "{\"a\":1} x", "trailing garbage", 0 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]", "unterminated",
		  4 },
		{ "{\"a\":5}", "tensor not object", 0 },
		{ "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", "no dtype",
		  4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
		  "no shape", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "no offsets",
		  4 },
		{ "{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}",
		  "dtype not string", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]"
		  "}}",
		  "shape not array", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":["
		  "0,4]}}",
		  "negative dim", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":["
		  "0,4]}}",
		  "float dim", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":["
		  "0,4]}}",
		  "exp dim", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_"
		  "offsets\":[0,4]}}",
		  "string dim", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":"
		  "[0,4]}}",
		  "null dim", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":["
		  "0,4]}}",
		  "nested dim", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,"
		  "1,1,1,"
		  "1,1,1],\"data_offsets\":[0,4]}}",
		  "17 dims", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
		  "\"data_offsets\":[0,4]}}",
		  "dim beyond int64", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
		  "\"data_offsets\":[0,0]}}",
		  "numel overflow", 4 },
		{ "{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952,1],"
		  "\"data_offsets\":[0,0]}}",
		  "bytes overflow", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
		  "\"data_offsets\":[0,0]}}",
		  "bytes wrap to 0", 4 },
		{ "{\"a\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,"
		  "1]}}",
		  "unknown dtype", 4 },
		{ "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,"
		  "4]}}",
		  "lower-case dtype", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,"
		  "0]}}",
		  "reversed", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]"
		  "}}",
		  "one offset", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,"
		  "4,8]}}",
		  "three offsets", 8 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-"
		  "4,0]}}",
		  "negative offset", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0."
		  "0,4]}}",
		  "float offset", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":["
		  "\"0\",4]}}",
		  "string offset", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,"
		  "8]}}",
		  "past end", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
		  "[18446744073709551612,18446744073709551616]}}",
		  "huge offsets", 4 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
		  "4]}}",
		  "size != numel*dtype", 8 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
		  "8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,"
		  "8]}}",
		  "overlap", 8 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
		  "8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
		  "8]}}",
		  "same range", 8 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
		  "8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,"
		  "4]}}",
		  "empty inside another", 8 },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,"
		  "4]},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,"
		  "8]}}",
		  "duplicate key", 8 },
		{ "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],"
		  "\"data_offsets\":[0,4]}}",
		  "duplicate field", 4 },
		{ "{\"__metadata__\":{\"k\":1}}", "metadata int", 0 },
		{ "{\"__metadata__\":[\"k\"]}", "metadata array", 0 },
		{ "{\"__metadata__\":{\"k\":{\"n\":\"v\"}}}", "metadata nested",
		  0 },
		{ "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],"
		  "\"data_offsets\":[0,4]}}",
		  "NUL in key", 4 },
		{ "{\"a\":{\"dtype\":\"F32\\u0000\",\"shape\":[1],"
		  "\"data_offsets\":[0,4]}}",
		  "NUL in dtype", 4 },
		{ "{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],"
		  "\"data_offsets\":[0,4]}}",
		  "bad utf-8", 4 },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		st_reject(cases[i].json, cases[i].dlen, cases[i].what);
}

Test(safetensors, deep_nesting)
{
	size_t depth = 100000;
	char *json = malloc(2 * depth + 64);
	size_t n = 0;

	cr_assert(json);
	n += (size_t)sprintf(json, "{\"__metadata__\":");
	for (size_t i = 0; i < depth; i++)
		json[n++] = '[';
	for (size_t i = 0; i < depth; i++)
		json[n++] = ']';
	json[n++] = '}';
	json[n] = '\0';
	st_reject(json, 0, "deep nesting");
	free(json);
}

Test(safetensors, truncated_everywhere)
{
	buf b = st_build(st_valid_json, 48);

	for (size_t n = 0; n < b.len; n++) {
		ulp_tensor_map m;
		int rc = parse_exact(ulp_safetensors_parse, b.p, n, &m);

		cr_assert_eq(rc, ULP_ERR_PARSE, "len %zu", n);
		cr_assert(map_is_empty(&m));
	}
	free(b.p);
}

Test(safetensors, byte_flips_never_crash)
{
	buf b = st_build(st_valid_json, 48);
	size_t hdr = 8 + strlen(st_valid_json);

	for (size_t i = 0; i < hdr; i++) {
		for (unsigned x = 1; x < 256; x <<= 1) {
			uint8_t *d = dup_exact(b.p, b.len);
			ulp_tensor_map m;
			int rc;

			d[i] ^= (uint8_t)x;
			rc = ulp_safetensors_parse(d, b.len, &m);
			cr_assert(rc == ULP_OK || rc == ULP_ERR_PARSE);
			check_map_invariants(&m, b.len);
			ulp_tensor_map_free(&m);
			cr_assert_eq(ulp_format_parse(d, b.len, &m), ULP_OK);
			ulp_tensor_map_free(&m);
			free(d);
		}
	}
	free(b.p);
}

/* ------------------------------------------------------ pickle scanner */

/* A protocol 2 pickle of a list holding one persistent id per storage, as
 * torch.save writes them (GLOBAL + BINUNICODE, memoized). */
typedef struct pstor {
	const char *key, *type; /* type: "FloatStorage", ... */
	int32_t numel;
} pstor;

static buf pkl_build(const pstor *s, size_t n)
{
	buf b = { 0 };

	b_str(&b, "\x80\x02]q");
	b_le(&b, 0, 1);
	b_str(&b, "(");
	for (size_t i = 0; i < n; i++) {
		b_str(&b, "(X");
		b_le(&b, 7, 4);
		b_str(&b, "storagectorch\n");
		b_str(&b, s[i].type);
		b_str(&b, "\nX");
		b_le(&b, strlen(s[i].key), 4);
		b_str(&b, s[i].key);
		b_str(&b, "X");
		b_le(&b, 3, 4);
		b_str(&b, "cpuJ");
		b_le(&b, (uint32_t)s[i].numel, 4);
		b_str(&b, "tQ");
	}
	b_str(&b, "e.");
	return b;
}

/* Scan an exact-size copy.  The copy is gone on return, so callers look at
 * rc, n and types only, never at keys. */
static int scan(const void *p, size_t n, ulp_pickle_scan *sc)
{
	uint8_t *d = dup_exact(p, n);
	int rc = ulp_pickle_scan_storages(d, n, sc);

	free(d);
	return rc;
}

#define LIT(s) s, sizeof(s) - 1

Test(pickle, torch_fixture_pickle)
{
	pstor st[] = { { "0", "FloatStorage", 6 },
		       { "1", "BFloat16Storage", 3 },
		       { "2", "LongStorage", 1 } };
	buf b = pkl_build(st, 3);
	ulp_pickle_scan sc;

	cr_assert_eq(ulp_pickle_scan_storages(b.p, b.len, &sc), ULP_OK);
	cr_assert_eq(sc.n, 3);
	cr_expect_str_eq(sc.v[0].type, "Float");
	cr_expect_str_eq(sc.v[1].type, "BFloat16");
	cr_expect_str_eq(sc.v[2].type, "Long");
	cr_expect(sc.v[1].key_len == 1 && sc.v[1].key[0] == '1');
	cr_expect(sc.v[0].has_numel && sc.v[0].numel == 6);
	ulp_pickle_scan_free(&sc);

	/* Every truncation fails; none reads past the end. */
	for (size_t n = 0; n < b.len; n++)
		cr_assert_eq(scan(b.p, n, &sc), ULP_ERR_PARSE, "len %zu", n);
	free(b.p);
}

/* Every opcode of protocols 0-5 with a valid argument, each result popped,
 * then one persistent id built from memoized SHORT_BINUNICODE strings, a
 * STACK_GLOBAL, a BINSTRING key and a LONG1 numel.  Checked against
 * CPython's pickletools and unpickler when written. */
static const char kitchen_sink[] = "\x80\x04"
				   "\x95\x09\x00\x00\x00\x00\x00\x00\x00"
				   "K\x01K\x02K\x03"
				   "000"
				   "N0"
				   "F1.5\x0a"
				   "0"
				   "I42\x0a"
				   "0"
				   "I01\x0a"
				   "0"
				   "L12L\x0a"
				   "0"
				   "J\xff\xff\xff\xff"
				   "0"
				   "K\x07"
				   "0"
				   "M\x01\x02"
				   "0"
				   "\x8a\x02\x01\x02"
				   "0"
				   "\x8b\x03\x00\x00\x00\x01\x02\x03"
				   "0"
				   "S'abc'\x0a"
				   "0"
				   "T\x03\x00\x00\x00"
				   "abc0"
				   "U\x03"
				   "abc0"
				   "B\x02\x00\x00\x00xy0"
				   "C\x02xy0"
				   "\x8e\x02\x00\x00\x00\x00\x00\x00\x00xy0"
				   "\x96\x02\x00\x00\x00\x00\x00\x00\x00xy0"
				   "Vabc\x0a"
				   "0"
				   "\x8c\x03"
				   "abc0"
				   "X\x03\x00\x00\x00"
				   "abc0"
				   "\x8d\x03\x00\x00\x00\x00\x00\x00\x00"
				   "abc0"
				   "G@\x04\x00\x00\x00\x00\x00\x00"
				   "0"
				   "N0\x88"
				   "0\x89"
				   "0]0)0}0\x8f"
				   "0"
				   "]K\x01"
				   "a0"
				   "](K\x01K\x02"
				   "e0"
				   "(K\x01l0"
				   "(K\x01t0"
				   "K\x01\x85"
				   "0"
				   "K\x01K\x02\x86"
				   "0"
				   "K\x01K\x02K\x03\x87"
				   "0"
				   "(K\x01K\x02"
				   "d0"
				   "}K\x01K\x02s0"
				   "}(K\x01K\x02u0"
				   "\x8f(K\x01\x90"
				   "0"
				   "(K\x01\x91"
				   "0"
				   "cmod\x0aname\x0a"
				   "0"
				   "(K\x01imod\x0aname\x0a"
				   "0"
				   "\x8c\x01m\x8c\x01n\x93"
				   "0"
				   "(cmod\x0aname\x0aK\x01o0"
				   "cmod\x0aname\x0a)R0"
				   "cmod\x0aname\x0a)R}b0"
				   "cmod\x0aname\x0a)\x81"
				   "0"
				   "cmod\x0aname\x0a)}\x92"
				   "0"
				   "Pabc\x0a"
				   "0"
				   "\x97"
				   "0"
				   "N\x98"
				   "0"
				   "\x82\x01"
				   "0"
				   "\x83\x01\x00"
				   "0"
				   "\x84\x01\x00\x00\x00"
				   "0"
				   "(1"
				   "(0"
				   "K\x01"
				   "200"
				   "K\x01p20\x0a"
				   "0g20\x0a"
				   "0"
				   "K\x01q\x15"
				   "0h\x15"
				   "0"
				   "K\x01r\x16\x00\x00\x00"
				   "0j\x16\x00\x00\x00"
				   "0"
				   "K\x01\x94"
				   "0"
				   "(\x8c\x07storage\x94\x8c\x05torch\x8c\x0c"
				   "FloatStorage\x93\x94"
				   "T\x02\x00\x00\x00"
				   "78U\x03"
				   "cpu\x8a\x02\x00\x01tQ"
				   ".";

Test(pickle, every_opcode_skipped_correctly)
{
	ulp_pickle_scan sc;
	uint8_t *d = dup_exact(LIT(kitchen_sink));

	cr_assert_eq(ulp_pickle_scan_storages(d, sizeof kitchen_sink - 1, &sc),
	             ULP_OK);
	cr_assert_eq(sc.n, 1);
	cr_expect_eq(sc.v[0].key_len, 2);
	cr_expect_eq(memcmp(sc.v[0].key, "78", 2), 0);
	cr_expect_str_eq(sc.v[0].type, "Float");
	cr_expect(sc.v[0].has_numel);
	cr_expect_eq(sc.v[0].numel, 256);
	ulp_pickle_scan_free(&sc);
	free(d);

	for (size_t n = 0; n < sizeof kitchen_sink - 1; n++) {
		int rc = scan(kitchen_sink, n, &sc);

		cr_assert(rc == ULP_ERR_PARSE, "len %zu rc %d", n, rc);
	}
}

Test(pickle, memo_and_shared_storage)
{
	/* A second reference to storage "0" fetches everything from the
	 * memo, as torch writes a shared storage; text GET/PUT too. */
	static const char p[] = "\x80\x02]q\x00("
				"(X\x07\x00\x00\x00storageq\x01"
				"ctorch\nHalfStorage\nq\x02"
				"X\x01\x00\x00\x00"
				"0q\x03X\x03\x00\x00\x00"
				"cpuq\x04K\x05tQ"
				"(h\x01h\x02h\x03h\x04K\x05tQ"
				"(g1\nj\x02\x00\x00\x00X\x01\x00\x00\x00"
				"1p9\nh\x04K\x02tQ"
				"(g1\ng2\ng9\nh\x04\x8a\x00tQ"
				"e.";
	ulp_pickle_scan sc;

	cr_assert_eq(ulp_pickle_scan_storages((const uint8_t *)p, sizeof p - 1,
	                                      &sc),
	             ULP_OK);
	cr_assert_eq(sc.n, 4);
	for (size_t i = 0; i < 4; i++)
		cr_expect_str_eq(sc.v[i].type, "Half");
	cr_expect_eq(sc.v[1].key[0], '0');
	cr_expect_eq(sc.v[2].key[0], '1');
	cr_expect_eq(sc.v[3].numel, 0);
	ulp_pickle_scan_free(&sc);
}

Test(pickle, non_storage_tuples_ignored)
{
	static const struct {
		const char *p;
		size_t n;
	} ok[] = {
		/* 4-tuple */
		{ LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
		      "X\x01\x00\x00\x00"
		      "0X\x03\x00\x00\x00"
		      "cputQ.") },
		/* wrong module */
		{ LIT("\x80\x02(X\x07\x00\x00\x00storagecnumpy\nFloatStorage\n"
		      "X\x01\x00\x00\x00"
		      "0NK\x01tQ.") },
		/* class name not ending in Storage */
		{ LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nTensor\n"
		      "X\x01\x00\x00\x00"
		      "0NK\x01tQ.") },
		/* first item is not 'storage' */
		{ LIT("\x80\x02(X\x07\x00\x00\x00storxgectorch\nFloatStorage\n"
		      "X\x01\x00\x00\x00"
		      "0NK\x01tQ.") },
		/* key is bytes, not str */
		{ LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
		      "C\x01"
		      "0NK\x01tQ.") },
		/* a storage tuple that is never persisted */
		{ LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
		      "X\x01\x00\x00\x00"
		      "0NK\x01t.") },
		/* protocol 0 PERSID */
		{ LIT("Pstorage\n.") },
	};

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		ulp_pickle_scan sc;

		cr_assert_eq(scan(ok[i].p, ok[i].n, &sc), ULP_OK, "case %zu",
		             i);
		cr_expect_eq(sc.n, 0, "case %zu", i);
		ulp_pickle_scan_free(&sc);
	}
}

Test(pickle, hostile)
{
	static const struct {
		const char *p;
		size_t n;
		const char *what;
	} bad[] = {
		{ LIT(""), "empty" },
		{ LIT("\x80\x02N"), "no STOP" },
		{ LIT("."), "STOP on empty stack" },
		{ LIT("\x80\x02\xff."), "opcode 0xff" },
		{ LIT("\x80\x02NA."), "opcode A" },
		{ LIT("\x80\x02NZ."), "opcode Z" },
		{ LIT("\x80\x06N."), "protocol 6" },
		{ LIT("\x80"), "PROTO without arg" },
		{ LIT("\x80\x02X\xff\xff\xff\xff"), "BINUNICODE huge" },
		{ LIT("\x80\x02X\x05\x00\x00\x00"
		      "abc."),
		  "BINUNICODE short" },
		{ LIT("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\x7f."), "BINUNI"
		                                                        "CODE8 "
		                                                        "hug"
		                                                        "e" },
		{ LIT("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\xff."), "BINUNI"
		                                                        "CODE8 "
		                                                        "2^64-"
		                                                        "1" },
		{ LIT("\x80\x02\x8e\x00\x00\x00\x00\x00\x00\x00\x80."), "BINBYT"
		                                                        "ES8 "
		                                                        "hug"
		                                                        "e" },
		{ LIT("\x80\x02T\xff\xff\xff\xff."), "BINSTRING negative" },
		{ LIT("\x80\x02\x8b\xfe\xff\xff\xff."), "LONG4 negative" },
		{ LIT("\x80\x02\x8a\x09\x01\x02."), "LONG1 short" },
		{ LIT("\x80\x02U\x05"
		      "ab."),
		  "SHORT_BINSTRING short" },
		{ LIT("\x80\x02J\x01\x02."), "BININT short" },
		{ LIT("\x80\x02G\x01\x02\x03."), "BINFLOAT short" },
		{ LIT("\x80\x02"
		      "ctorch\nFloatStorage"),
		  "GLOBAL no newline" },
		{ LIT("\x80\x02"
		      "F1.5"),
		  "FLOAT no newline" },
		{ LIT("\x80\x02S'abc\n."), "STRING unquoted" },
		{ LIT("\x80\x02Sabc\n."), "STRING no quotes" },
		{ LIT("\x80\x02h\x05."), "BINGET missing" },
		{ LIT("\x80\x02j\x05\x00\x00\x00."), "LONG_BINGET missing" },
		{ LIT("\x80\x02N\x94\x94h\x02."), "BINGET past MEMOIZE" },
		{ LIT("\x80\x02g7\n."), "GET missing" },
		{ LIT("\x80\x02Ng-1\n."), "GET negative" },
		{ LIT("\x80\x02Np1x\n."), "PUT not a number" },
		{ LIT("\x80\x02q\x01N."), "BINPUT on empty stack" },
		{ LIT("\x80\x02\x94N."), "MEMOIZE on empty stack" },
		{ LIT("\x80\x02R."), "REDUCE underflow" },
		{ LIT("\x80\x02NR."), "REDUCE one item" },
		{ LIT("\x80\x02]N(a."), "APPEND across MARK" },
		{ LIT("\x80\x02t."), "TUPLE without MARK" },
		{ LIT("\x80\x02N(."), "STOP right after a MARK" },
		{ LIT("\x80\x02(KKu."), "SETITEMS into nothing" },
		{ LIT("\x80\x02}(K\x01u."), "SETITEMS odd" },
		{ LIT("\x80\x02(K\x01"
		      "d."),
		  "DICT odd" },
		{ LIT("\x80\x02(o."), "OBJ without class" },
		{ LIT("\x80\x02\x85."), "TUPLE1 underflow" },
		{ LIT("\x80\x02NN\x87."), "TUPLE3 underflow" },
		{ LIT("\x80\x02Q."), "BINPERSID underflow" },
		{ LIT("\x80\x02"
		      "1."),
		  "POP_MARK without MARK" },
		{ LIT("\x80\x02"
		      "0."),
		  "POP on empty" },
		{ LIT("\x80\x02"
		      "2."),
		  "DUP on empty" },
		{ LIT("\x80\x02K\x01\x93."), "STACK_GLOBAL underflow" },
		{ LIT("\x80\x02K\x01K\x02\x93."), "STACK_GLOBAL ints" },
		{ LIT("\x80\x02\x95\x10\x00\x00\x00\x00\x00\x00\x00N."), "FRAME"
		                                                         " past"
		                                                         " en"
		                                                         "d" },
		{ LIT("\x80\x02\x98."), "READONLY_BUFFER empty" },
		{ LIT("\x80\x02\x84\x01\x00."), "EXT4 short" },
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ulp_pickle_scan sc;
		int rc = scan(bad[i].p, bad[i].n, &sc);

		cr_expect_eq(rc, ULP_ERR_PARSE, "%s: rc %d", bad[i].what, rc);
		cr_expect(sc.n == 0 && sc.v == NULL, "%s", bad[i].what);
	}
}

/* n copies of op after a prefix, then suffix. */
static buf repeat(const char *prefix, char op, size_t n, const char *suffix)
{
	buf b = { 0 };

	b_str(&b, prefix);
	b.cap = b.len + n + strlen(suffix) + 1;
	b.p = realloc(b.p, b.cap);
	cr_assert(b.p);
	memset(b.p + b.len, op, n);
	b.len += n;
	b_str(&b, suffix);
	return b;
}

Test(pickle, bounds)
{
	ulp_pickle_scan sc;
	buf b;
	size_t depth = 1000;

	/* Moderate nesting is fine: 1000 MARKs closed by 1000 TUPLEs. */
	b = repeat("\x80\x02", '(', depth, "");
	for (size_t i = 0; i < depth; i++)
		b_str(&b, "t");
	b_str(&b, ".");
	cr_expect_eq(scan(b.p, b.len, &sc), ULP_OK);
	ulp_pickle_scan_free(&sc);
	free(b.p);

	b = repeat("\x80\x02", '(', 1000000, "N.");
	cr_expect_eq(scan(b.p, b.len, &sc), ULP_ERR_PARSE, "deep MARKs");
	free(b.p);

	b = repeat("\x80\x02N", '2', 2000000, ".");
	cr_expect_eq(scan(b.p, b.len, &sc), ULP_ERR_PARSE, "stack bound");
	free(b.p);

	b = repeat("\x80\x02N", '\x94', 3000000, ".");
	cr_expect_eq(scan(b.p, b.len, &sc), ULP_ERR_PARSE, "memo bound");
	free(b.p);

	/* Sparse memo indices cost memory per entry, not per index. */
	b = (buf){ 0 };
	b_str(&b, "\x80\x02Nr");
	b_le(&b, 0xFFFFFFF0u, 4);
	b_str(&b, "j");
	b_le(&b, 0xFFFFFFF0u, 4);
	b_str(&b, ".");
	cr_expect_eq(scan(b.p, b.len, &sc), ULP_OK, "sparse memo");
	ulp_pickle_scan_free(&sc);
	free(b.p);
}

Test(pickle, random_streams_never_crash)
{
	uint64_t x = 0x9E3779B97F4A7C15ull;
	size_t base = sizeof kitchen_sink - 1;

	/* Mutations of a valid stream reach deep into the opcode table. */
	for (int iter = 0; iter < 20000; iter++) {
		uint8_t *d = dup_exact(LIT(kitchen_sink));
		ulp_pickle_scan sc;
		int rc;

		for (int k = 0; k < 3; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			d[x % base] = (uint8_t)(x >> 40);
		}
		rc = ulp_pickle_scan_storages(d, base, &sc);
		cr_assert(rc == ULP_OK || rc == ULP_ERR_PARSE);
		ulp_pickle_scan_free(&sc);
		free(d);
	}
}

/* ---------------------------------------------------------- zip builder */

typedef struct zb_entry {
	const char *name;
	const void *data; /* NULL: len bytes left as the output holds them */
	uint64_t len;
	uint16_t method, flags;
} zb_entry;

typedef struct zb_out {
	uint8_t *p; /* NULL: only measure */
	uint64_t pos;
} zb_out;

static void zw(zb_out *o, uint64_t v, int n)
{
	if (o->p)
		put_le(o->p + o->pos, v, n);
	o->pos += (uint64_t)n;
}

static void zw_bytes(zb_out *o, const void *p, uint64_t n)
{
	if (o->p && p)
		memcpy(o->p + o->pos, p, n);
	o->pos += n;
}

/* Local headers and data in order, then the central directory and end
 * records.  zip64: every size and offset goes through ZIP64 extra fields,
 * EOCD64 and its locator, as writers do for archives past 4 GiB. */
static uint64_t zb_write(const zb_entry *e, size_t n, int zip64,
                         const char *comment, uint8_t *out)
{
	zb_out o = { out, 0 };
	uint64_t lho[64], cd_off, cd_size, z64;
	uint32_t sat = zip64 ? 0xFFFFFFFFu : 0;

	cr_assert(n <= 64);
	for (size_t i = 0; i < n; i++) {
		lho[i] = o.pos;
		zw(&o, 0x04034b50, 4);
		zw(&o, zip64 ? 45 : 20, 2);
		zw(&o, e[i].flags, 2);
		zw(&o, e[i].method, 2);
		zw(&o, 0, 4); /* time, date */
		zw(&o, 0, 4); /* crc: not checked by the parser */
		zw(&o, zip64 ? sat : e[i].len, 4);
		zw(&o, zip64 ? sat : e[i].len, 4);
		zw(&o, strlen(e[i].name), 2);
		zw(&o, 0, 2);
		zw_bytes(&o, e[i].name, strlen(e[i].name));
		zw_bytes(&o, e[i].data, e[i].len);
	}
	cd_off = o.pos;
	for (size_t i = 0; i < n; i++) {
		zw(&o, 0x02014b50, 4);
		zw(&o, zip64 ? 45 : 20, 2);
		zw(&o, zip64 ? 45 : 20, 2);
		zw(&o, e[i].flags, 2);
		zw(&o, e[i].method, 2);
		zw(&o, 0, 4);
		zw(&o, 0, 4);
		zw(&o, zip64 ? sat : e[i].len, 4);
		zw(&o, zip64 ? sat : e[i].len, 4);
		zw(&o, strlen(e[i].name), 2);
		zw(&o, zip64 ? 28 : 0, 2);
		zw(&o, 0, 2); /* comment */
		zw(&o, 0, 2); /* disk */
		zw(&o, 0, 2);
		zw(&o, 0, 4);
		zw(&o, zip64 ? sat : lho[i], 4);
		zw_bytes(&o, e[i].name, strlen(e[i].name));
		if (zip64) {
			zw(&o, 1, 2);
			zw(&o, 24, 2);
			zw(&o, e[i].len, 8);
			zw(&o, e[i].len, 8);
			zw(&o, lho[i], 8);
		}
	}
	cd_size = o.pos - cd_off;
	if (zip64) {
		z64 = o.pos;
		zw(&o, 0x06064b50, 4);
		zw(&o, 44, 8);
		zw(&o, 45, 2);
		zw(&o, 45, 2);
		zw(&o, 0, 4);
		zw(&o, 0, 4);
		zw(&o, n, 8);
		zw(&o, n, 8);
		zw(&o, cd_size, 8);
		zw(&o, cd_off, 8);
		zw(&o, 0x07064b50, 4);
		zw(&o, 0, 4);
		zw(&o, z64, 8);
		zw(&o, 1, 4);
	}
	zw(&o, 0x06054b50, 4);
	zw(&o, 0, 2);
	zw(&o, 0, 2);
	zw(&o, zip64 ? 0xFFFF : n, 2);
	zw(&o, zip64 ? 0xFFFF : n, 2);
	zw(&o, zip64 ? sat : cd_size, 4);
	zw(&o, zip64 ? sat : cd_off, 4);
	zw(&o, comment ? strlen(comment) : 0, 2);
	if (comment)
		zw_bytes(&o, comment, strlen(comment));
	return o.pos;
}

static buf zb_build(const zb_entry *e, size_t n, int zip64, const char *comment)
{
	buf b = { 0 };

	b.len = b.cap = zb_write(e, n, zip64, comment, NULL);
	b.p = calloc(1, b.len);
	cr_assert(b.p);
	zb_write(e, n, zip64, comment, b.p);
	return b;
}

static const uint8_t zdata[64] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

static const pstor tz_storages[] = {
	{ "0", "FloatStorage", 4 },
	{ "1", "BFloat16Storage", 3 },
	{ "2", "LongStorage", 2 },
};

/* A torch-like archive: data.pkl, three storages, version. */
static buf tz_build(int zip64, const char *comment)
{
	buf pkl = pkl_build(tz_storages, 3);
	zb_entry e[] = {
		{ "archive/data.pkl", pkl.p, pkl.len, 0, 0 },
		{ "archive/data/0", zdata, 16, 0, 0 },
		{ "archive/data/1", zdata, 6, 0, 0 },
		{ "archive/data/2", zdata, 16, 0, 0 },
		{ "archive/version", "3\n", 2, 0, 0 },
	};
	buf b = zb_build(e, 5, zip64, comment);

	free(pkl.p);
	return b;
}

static void check_tz_map(const ulp_tensor_map *m, uint64_t size)
{
	cr_assert_eq(m->format, ULP_FMT_TORCHZIP);
	cr_assert_eq(m->n, 3);
	cr_expect_str_eq(m->v[0].name, "archive/data/0");
	cr_expect_str_eq(m->v[0].dtype_name, "Float");
	cr_expect_eq(m->v[0].dtype, ULP_DT_F32);
	cr_expect_eq(m->v[0].ndim, 1);
	cr_expect_eq(m->v[0].shape[0], 4);
	cr_expect_str_eq(m->v[1].dtype_name, "BFloat16");
	cr_expect_eq(m->v[1].dtype, ULP_DT_BF16);
	cr_expect_eq(m->v[1].shape[0], 3);
	cr_expect_str_eq(m->v[2].dtype_name, "Long");
	cr_expect_eq(m->v[2].dtype, ULP_DT_GENERIC);
	cr_expect_eq(m->v[2].shape[0], 2);
	check_map_invariants(m, size);
}

static uint64_t find_sig_back(const uint8_t *p, size_t n, uint32_t sig)
{
	for (size_t i = n - 4 + 1; i-- > 0;)
		if (ulp_fmt_le32(p + i) == sig)
			return i;
	cr_assert_fail("signature %08x not found", sig);
	return 0;
}

/* ----------------------------------------------------------- torch zips */

Test(torchzip, fixture_state)
{
	size_t len;
	uint8_t *d = load_fixture("tiny_state.pt", &len);
	ulp_tensor_map m;
	const ulp_tensor *t;
	float f;
	int64_t l;
	static const struct {
		const char *name, *dt;
		ulp_dtype dtype;
		uint64_t numel;
	} want[] = {
		{ "tiny_state/data/0", "Float", ULP_DT_F32, 24 },
		{ "tiny_state/data/1", "BFloat16", ULP_DT_BF16, 15 },
		{ "tiny_state/data/2", "Half", ULP_DT_F16, 7 },
		{ "tiny_state/data/3", "Double", ULP_DT_F64, 6 },
		{ "tiny_state/data/4", "Long", ULP_DT_GENERIC, 5 },
		{ "tiny_state/data/5", "Float", ULP_DT_F32, 1 },
		{ "tiny_state/data/6", "Float", ULP_DT_F32, 0 },
		{ "tiny_state/data/7", "Bool", ULP_DT_GENERIC, 3 },
	};

	cr_assert_eq(ulp_torchzip_parse(d, len, &m), ULP_OK);
	cr_assert_eq(m.format, ULP_FMT_TORCHZIP);
	/* w_f32 and its view share storage 0: one record. */
	cr_assert_eq(m.n, 8);
	for (size_t i = 0; i < m.n; i++) {
		cr_expect_str_eq(m.v[i].name, want[i].name);
		cr_expect_str_eq(m.v[i].dtype_name, want[i].dt);
		cr_expect_eq(m.v[i].dtype, want[i].dtype);
		cr_expect_eq(m.v[i].ndim, 1);
		cr_expect_eq(m.v[i].shape[0], want[i].numel);
	}
	check_map_invariants(&m, len);
	/* The offsets reach the real bytes: torch.tensor(1.5),
	 * arange(5) and [True, False, True]. */
	t = find_tensor(&m, "tiny_state/data/5");
	memcpy(&f, d + t->offset, 4);
	cr_expect_eq(f, 1.5f);
	t = find_tensor(&m, "tiny_state/data/4");
	for (int i = 0; i < 5; i++) {
		memcpy(&l, d + t->offset + 8 * i, 8);
		cr_expect_eq(l, i);
	}
	t = find_tensor(&m, "tiny_state/data/7");
	cr_expect(memcmp(d + t->offset, "\1\0\1", 3) == 0);
	ulp_tensor_map_free(&m);

	cr_assert_eq(ulp_format_parse(d, len, &m), ULP_OK);
	cr_expect_eq(m.format, ULP_FMT_TORCHZIP);
	cr_expect_eq(m.n, 8);
	ulp_tensor_map_free(&m);
	free(d);
}

Test(torchzip, fixture_optim_and_protocol5)
{
	size_t len;
	uint8_t *d = load_fixture("tiny_optim.pt", &len);
	ulp_tensor_map m;
	uint64_t total = 0;

	cr_assert_eq(ulp_torchzip_parse(d, len, &m), ULP_OK);
	cr_assert_eq(m.n, 12);
	for (size_t i = 0; i < m.n; i++) {
		cr_expect_eq(strncmp(m.v[i].name, "archive/data/", 13), 0);
		cr_expect_eq(m.v[i].dtype, ULP_DT_F32);
		total += m.v[i].shape[0];
	}
	/* Linear(4,3) + Linear(3,2): 23 parameters; AdamW keeps two moments
	 * of each plus a one-element step per parameter tensor. */
	cr_expect_eq(total, 2 * 23 + 4);
	check_map_invariants(&m, len);
	ulp_tensor_map_free(&m);
	free(d);

	d = load_fixture("tiny_p5.pt", &len);
	cr_assert_eq(ulp_torchzip_parse(d, len, &m), ULP_OK);
	cr_assert_eq(m.n, 2);
	cr_expect_str_eq(m.v[0].dtype_name, "Half");
	cr_expect_eq(m.v[0].dtype, ULP_DT_F16);
	cr_expect_eq(m.v[0].shape[0], 3);
	cr_expect_str_eq(m.v[1].dtype_name, "Int");
	cr_expect_eq(m.v[1].dtype, ULP_DT_GENERIC);
	cr_expect_eq(m.v[1].shape[0], 4);
	ulp_tensor_map_free(&m);
	free(d);
}

Test(torchzip, fixture_truncated_everywhere)
{
	static const char *const files[] = { "tiny_state.pt", "tiny_optim.pt" };

	for (size_t f = 0; f < 2; f++) {
		size_t len;
		uint8_t *d = load_fixture(files[f], &len);

		for (size_t n = 0; n < len; n++) {
			ulp_tensor_map m;
			int rc = parse_exact(ulp_torchzip_parse, d, n, &m);

			cr_assert(rc == ULP_ERR_PARSE || rc == ULP_OK,
			          "%s len %zu rc %d", files[f], n, rc);
			if (rc == ULP_OK)
				check_map_invariants(&m, n);
			else
				cr_assert(map_is_empty(&m));
			ulp_tensor_map_free(&m);
			rc = parse_exact(ulp_format_parse, d, n, &m);
			cr_assert_eq(rc, ULP_OK);
			ulp_tensor_map_free(&m);
		}
		/* Bytes cut from the front shift every offset. */
		for (size_t k = 1; k < 64; k++)
			expect_reject(ulp_torchzip_parse, d + k, len - k,
			              "front cut");
		free(d);
	}
}

Test(torchzip, fixture_byte_flips)
{
	size_t len;
	uint8_t *d = load_fixture("tiny_state.pt", &len);

	for (size_t i = 0; i < len; i++) {
		for (int k = 0; k < 2; k++) {
			uint8_t *c = dup_exact(d, len);
			ulp_tensor_map m;
			int rc;

			c[i] ^= k ? 0xFF : 0x01;
			rc = ulp_torchzip_parse(c, len, &m);
			cr_assert(rc == ULP_OK || rc == ULP_ERR_PARSE);
			check_map_invariants(&m, len);
			ulp_tensor_map_free(&m);
			cr_assert_eq(ulp_format_parse(c, len, &m), ULP_OK);
			ulp_tensor_map_free(&m);
			free(c);
		}
	}
	free(d);
}

Test(torchzip, eocd_fields)
{
	size_t len;
	uint8_t *d = load_fixture("tiny_state.pt", &len);
	uint64_t e = find_sig_back(d, len, 0x06054b50);
	static const struct {
		unsigned off, width;
		int64_t delta;
		const char *what;
	} flips[] = {
		{ 0, 4, 1, "signature" },
		{ 4, 2, 1, "disk number" },
		{ 6, 2, 1, "cd disk" },
		{ 8, 2, 1, "entries on disk" },
		{ 10, 2, 1, "entries +1" },
		{ 10, 2, -1, "entries -1" },
		{ 8, 2, 0x10000 - 10, "entries 0" },
		{ 12, 4, 1, "cd size +1" },
		{ 12, 4, -1, "cd size -1" },
		{ 16, 4, 1, "cd offset +1" },
		{ 16, 4, -1, "cd offset -1" },
		{ 16, 4, 0x80000000, "cd offset huge" },
		{ 12, 4, 0x80000000, "cd size huge" },
		{ 20, 2, 1, "comment length" },
	};

	cr_assert_eq(e, len - 22);
	for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
		uint8_t *c = dup_exact(d, len);
		uint64_t v = 0;

		for (unsigned b = 0; b < flips[i].width; b++)
			v |= (uint64_t)c[e + flips[i].off + b] << (8 * b);
		put_le(c + e + flips[i].off, v + (uint64_t)flips[i].delta,
		       (int)flips[i].width);
		if (flips[i].off == 8 && flips[i].delta != 1)
			put_le(c + e + 10, v + (uint64_t)flips[i].delta, 2);
		expect_reject(ulp_torchzip_parse, c, len, flips[i].what);
		free(c);
	}
	free(d);
}

Test(torchzip, central_entry_fields)
{
	size_t len;
	uint8_t *d = load_fixture("tiny_state.pt", &len);
	uint64_t e = find_sig_back(d, len, 0x06054b50);
	uint64_t cd = ulp_fmt_le32(d + e + 16);
	uint64_t cd2 = cd + 46 + ulp_fmt_le16(d + cd + 28) +
	               ulp_fmt_le16(d + cd + 30) + ulp_fmt_le16(d + cd + 32);
	static const struct {
		unsigned off, width;
		uint64_t value;
		const char *what;
	} sets[] = {
		{ 0, 4, 0x02014b51, "signature" },
		{ 8, 2, 1, "encrypted" },
		{ 10, 2, 8, "method vs local header" },
		{ 20, 4, 0x7FFFFFFF, "csize past end" },
		{ 24, 4, 0x7FFFFFFF, "usize != csize" },
		{ 20, 4, 0xFFFFFFFF, "csize zip64 without extra" },
		{ 28, 2, 0xFFFF, "name length past directory" },
		{ 30, 2, 0x1000, "extra length past directory" },
		{ 34, 2, 1, "disk start" },
		{ 42, 4, 0x7FFFFFFF, "local header past end" },
		{ 42, 4, 1, "local header misplaced" },
		{ 46, 1, 'X', "name differs from local header" },
	};

	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		for (int which = 0; which < 2; which++) {
			uint8_t *c = dup_exact(d, len);

			put_le(c + (which ? cd2 : cd) + sets[i].off,
			       sets[i].value, (int)sets[i].width);
			expect_reject(ulp_torchzip_parse, c, len, sets[i].what);
			free(c);
		}
	}
	free(d);
}

Test(torchzip, built_plain_zip64_and_comment)
{
	buf a = tz_build(0, NULL), b = tz_build(1, NULL);
	buf c = tz_build(0, "a comment with PK\x05\x06 inside it");
	ulp_tensor_map ma, mb, mc;

	cr_assert_eq(parse_exact(ulp_torchzip_parse, a.p, a.len, &ma), ULP_OK);
	check_tz_map(&ma, a.len);
	cr_assert_eq(parse_exact(ulp_torchzip_parse, b.p, b.len, &mb), ULP_OK);
	check_tz_map(&mb, b.len);
	cr_assert_eq(parse_exact(ulp_torchzip_parse, c.p, c.len, &mc), ULP_OK);
	check_tz_map(&mc, c.len);
	/* Local headers carry no extra fields either way: same offsets. */
	for (size_t i = 0; i < 3; i++) {
		cr_expect_eq(ma.v[i].offset, mb.v[i].offset);
		cr_expect_eq(ma.v[i].offset, mc.v[i].offset);
	}
	cr_expect_eq(ulp_tensor_map_layout_hash(&ma),
	             ulp_tensor_map_layout_hash(&mb));
	ulp_tensor_map_free(&ma);
	ulp_tensor_map_free(&mb);
	ulp_tensor_map_free(&mc);

	for (size_t n = 0; n < b.len; n++) {
		int rc = parse_exact(ulp_torchzip_parse, b.p, n, &mb);

		cr_assert(rc == ULP_ERR_PARSE || rc == ULP_OK, "len %zu", n);
		ulp_tensor_map_free(&mb);
	}
	free(a.p);
	free(b.p);
	free(c.p);
}

Test(torchzip, zip64_records)
{
	buf b = tz_build(1, NULL);
	uint64_t loc = b.len - 22 - 20, z64 = ulp_fmt_le64(b.p + loc + 8);
	uint64_t cd = ulp_fmt_le64(b.p + z64 + 48);
	static const struct {
		int rec; /* 0: locator, 1: EOCD64, 2: first central entry */
		unsigned off, width;
		uint64_t value;
		const char *what;
	} sets[] = {
		{ 0, 4, 4, 1, "locator disk" },
		{ 0, 8, 8, 0xFFFFFFFFFFFFull, "locator offset huge" },
		{ 0, 8, 8, 1, "locator offset wrong" },
		{ 0, 16, 4, 2, "two disks" },
		{ 1, 0, 4, 0x06064b51, "EOCD64 signature" },
		{ 1, 4, 8, 10, "EOCD64 record too short" },
		{ 1, 4, 8, 0xFFFFFFFFFFFFFFF0ull, "EOCD64 record size huge" },
		{ 1, 24, 8, 4, "EOCD64 entries on disk" },
		{ 1, 32, 8, 4, "EOCD64 total entries" },
		{ 1, 32, 8, 0x0100000000000000ull, "EOCD64 count huge" },
		{ 1, 40, 8, 0x0100000000000000ull, "EOCD64 cd size huge" },
		{ 1, 48, 8, 0xFFFFFFFFFFFFFFFFull, "EOCD64 cd offset huge" },
		{ 1, 48, 8, 1, "EOCD64 cd offset wrong" },
		{ 2, 46 + 16 + 2, 2, 16, "extra too short for 3 fields" },
		{ 2, 46 + 16, 2, 0x0009, "no zip64 extra" },
		{ 2, 46 + 16 + 4 + 16, 8, 0xFFFFFFFFFFull,
		  "extra offset huge" },
		{ 2, 46 + 16 + 4, 8, 0xFFFFFFFFFFull, "extra size huge" },
	};

	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		uint8_t *c = dup_exact(b.p, b.len);
		uint64_t at = sets[i].rec == 0   ? loc
		              : sets[i].rec == 1 ? z64
		                                 : cd;

		put_le(c + at + sets[i].off, sets[i].value, (int)sets[i].width);
		expect_reject(ulp_torchzip_parse, c, b.len, sets[i].what);
		free(c);
	}
	/* A non-saturated EOCD field must agree with EOCD64. */
	{
		uint8_t *c = dup_exact(b.p, b.len);

		put_le(c + b.len - 22 + 10, 4, 2);
		put_le(c + b.len - 22 + 8, 4, 2);
		expect_reject(ulp_torchzip_parse, c, b.len, "EOCD disagrees");
		free(c);
	}
	free(b.p);
}

static void tz_case(const zb_entry *e, size_t n, int want_rc, const char *what,
                    ulp_tensor_map *m)
{
	buf b = zb_build(e, n, 0, NULL);
	int rc = parse_exact(ulp_torchzip_parse, b.p, b.len, m);

	cr_expect_eq(rc, want_rc, "%s: rc %d", what, rc);
	if (rc != ULP_OK)
		expect_reject(ulp_torchzip_parse, b.p, b.len, what);
	free(b.p);
}

Test(torchzip, archive_structure)
{
	buf pkl = pkl_build(tz_storages, 3);
	pstor clash[] = { { "0", "FloatStorage", 4 },
		          { "0", "HalfStorage", 8 } };
	pstor wrongn[] = { { "0", "FloatStorage", 5 } };
	buf pclash = pkl_build(clash, 2), pwrong = pkl_build(wrongn, 1);
	ulp_tensor_map m;
	const ulp_tensor *t;

#define PKL(name, b) { name, (b).p, (b).len, 0, 0 }
#define REC(name, n)                 \
	{                            \
		name, zdata, n, 0, 0 \
	}
	zb_entry no_pkl[] = { REC("archive/data/0", 16) };
	zb_entry deflated_pkl[] = { { "archive/data.pkl", pkl.p, pkl.len, 8,
		                      0 },
		                    REC("archive/data/0", 16) };
	zb_entry two_pkl[] = { PKL("archive/data.pkl", pkl),
		               PKL("archive/data.pkl", pkl) };
	zb_entry top_file[] = { REC("version", 2),
		                PKL("archive/data.pkl", pkl) };
	zb_entry other_prefix[] = { PKL("archive/data.pkl", pkl),
		                    REC("other/data/0", 16) };
	zb_entry dup_rec[] = { PKL("archive/data.pkl", pkl),
		               REC("archive/data/0", 16),
		               REC("archive/data/0", 16) };
	zb_entry clash_pkl[] = { PKL("a/data.pkl", pclash),
		                 REC("a/data/0", 16) };
	zb_entry wrong_numel[] = { PKL("a/data.pkl", pwrong),
		                   REC("a/data/0", 16) };
	zb_entry ragged[] = { PKL("a/data.pkl", pkl), REC("a/data/0", 15) };
	zb_entry encrypted[] = { PKL("archive/data.pkl", pkl),
		                 { "archive/data/0", zdata, 16, 0, 1 } };
	zb_entry bad_pkl[] = { { "archive/data.pkl", "\x80\x02\xff.", 4, 0, 0 },
		               REC("archive/data/0", 16) };
	zb_entry mixed[] = {
		PKL("stem/data.pkl", pkl),
		REC("stem/data/0", 16),
		{ "stem/data/1", zdata, 6, 8, 0 }, /* deflated: not a storage */
		REC("stem/data/9", 5),             /* not in the pickle */
		REC("stem/data/x/y", 4),           /* nested: not a storage */
		REC("stem/data/", 4),              /* empty key */
		REC("stem/extra/2", 4),
	};

	tz_case(no_pkl, 1, ULP_ERR_PARSE, "no data.pkl", &m);
	tz_case(deflated_pkl, 2, ULP_ERR_PARSE, "deflated data.pkl", &m);
	tz_case(two_pkl, 2, ULP_ERR_PARSE, "two data.pkl", &m);
	tz_case(top_file, 2, ULP_ERR_PARSE, "first entry at top level", &m);
	tz_case(dup_rec, 3, ULP_ERR_PARSE, "duplicate record", &m);
	tz_case(clash_pkl, 2, ULP_ERR_PARSE, "storage types clash", &m);
	tz_case(wrong_numel, 2, ULP_ERR_PARSE, "numel != record size", &m);
	tz_case(ragged, 2, ULP_ERR_PARSE, "record not whole elements", &m);
	tz_case(encrypted, 2, ULP_ERR_PARSE, "encrypted", &m);
	tz_case(bad_pkl, 2, ULP_ERR_PARSE, "hostile pickle", &m);

	tz_case(other_prefix, 2, ULP_OK, "other prefix", &m);
	cr_expect_eq(m.n, 0);
	cr_expect_eq(m.format, ULP_FMT_TORCHZIP);
	ulp_tensor_map_free(&m);

	tz_case(mixed, sizeof mixed / sizeof mixed[0], ULP_OK, "mixed", &m);
	cr_assert_eq(m.n, 2);
	t = find_tensor(&m, "stem/data/0");
	cr_assert(t);
	cr_expect_eq(t->dtype, ULP_DT_F32);
	t = find_tensor(&m, "stem/data/9");
	cr_assert(t);
	cr_expect_eq(t->dtype, ULP_DT_GENERIC);
	cr_expect_str_eq(t->dtype_name, "");
	cr_expect_eq(t->ndim, 0);
	cr_expect_null(t->shape);
	cr_expect_eq(t->nbytes, 5);
	ulp_tensor_map_free(&m);
#undef PKL
#undef REC
	free(pkl.p);
	free(pclash.p);
	free(pwrong.p);
}

Test(torchzip, overlapping_records)
{
	buf b = tz_build(0, NULL);
	uint64_t cd = ulp_fmt_le32(b.p + b.len - 22 + 16);
	uint32_t first = ulp_fmt_le32(b.p + cd + 20);

	/* data.pkl claims 10 more bytes, reaching into the next header. */
	put_le(b.p + cd + 20, first + 10, 4);
	put_le(b.p + cd + 24, first + 10, 4);
	expect_reject(ulp_torchzip_parse, b.p, b.len, "overlap");
	free(b.p);
}

Test(torchzip, directory_accounts_for_every_byte)
{
	buf b = tz_build(0, NULL);
	uint8_t *c = malloc(b.len + 4);
	size_t eocd = b.len - 22;

	/* Four stray bytes inside the directory's claimed size. */
	cr_assert(c);
	memcpy(c, b.p, eocd);
	memcpy(c + eocd, "\0\0\0\0", 4);
	memcpy(c + eocd + 4, b.p + eocd, 22);
	put_le(c + eocd + 4 + 12, ulp_fmt_le32(b.p + eocd + 12) + 4, 4);
	expect_reject(ulp_torchzip_parse, c, b.len + 4, "directory slack");
	free(c);
	free(b.p);
}

Test(torchzip, not_torch)
{
	zb_entry e[] = { { "hello.txt", "hello\n", 6, 0, 0 } };
	buf b = zb_build(e, 1, 0, NULL);

	expect_reject(ulp_torchzip_parse, b.p, b.len, "plain zip");
	free(b.p);
	expect_reject(ulp_torchzip_parse, "PK\x03\x04", 4, "magic only");
	expect_reject(ulp_torchzip_parse, "PK\x05\x06", 4, "short EOCD");
	expect_reject(ulp_torchzip_parse, "", 0, "empty");
	/* An empty but well-formed zip. */
	expect_reject(ulp_torchzip_parse,
	              "PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22,
	              "empty zip");
}

/* Sizes and offsets past 4 GiB, in a sparse mapping nobody touches except
 * at the headers. */
Test(torchzip, zip64_beyond_4gib)
{
	const uint64_t big = (4ull << 30) + 4096;
	pstor st[] = { { "0", "FloatStorage", (int32_t)(big / 4) },
		       { "1", "HalfStorage", 2 } };
	buf pkl = pkl_build(st, 2);
	zb_entry e[] = {
		{ "archive/data.pkl", pkl.p, pkl.len, 0, 0 },
		{ "archive/data/0", NULL, big, 0, 0 },
		{ "archive/data/1", zdata, 4, 0, 0 },
	};
	uint64_t size = zb_write(e, 3, 1, NULL, NULL);
	uint8_t *d = mmap(NULL, size, PROT_READ | PROT_WRITE,
	                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ulp_tensor_map m;

	if (d == MAP_FAILED) {
		free(pkl.p);
		cr_skip_test("cannot map %llu bytes", (unsigned long long)size);
	}
	zb_write(e, 3, 1, NULL, d);
	cr_assert_eq(ulp_torchzip_parse(d, size, &m), ULP_OK);
	cr_assert_eq(m.n, 2);
	cr_expect_eq(m.v[0].nbytes, big);
	cr_expect_eq(m.v[0].shape[0], big / 4);
	cr_expect_eq(m.v[1].dtype, ULP_DT_F16);
	cr_expect_gt(m.v[1].offset, big);
	cr_expect_eq(memcmp(d + m.v[1].offset, zdata, 4), 0);
	ulp_tensor_map_free(&m);
	munmap(d, size);
	free(pkl.p);
}

/* ------------------------------------------------ detection and hashing */

Test(format, detection_never_fails)
{
	static const struct {
		const char *p;
		size_t n;
	} junk[] = {
		{ LIT("") },
		{ LIT("x") },
		{ LIT("\x02\0\0\0\0\0\0\0{}") }, /* safetensors, empty */
		{ LIT("\x02\0\0\0\0\0\0\0[]") }, /* not '{' */
		{ LIT("\x03\0\0\0\0\0\0\0{} ") },
		{ LIT("\xff\xff\xff\xff\xff\xff\xff\xff{}") },
		{ LIT("PK\x03\x04 not really a zip at all") },
		{ LIT("\x80\x02}q\x00.") }, /* legacy torch pickle */
		{ LIT("GGUF\x03\0\0\0") },
	};
	ulp_tensor_map m;
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
		cr_assert_eq(parse_exact(ulp_format_parse, junk[i].p, junk[i].n,
		                         &m),
		             ULP_OK);
		cr_expect_eq(m.n, 0, "case %zu", i);
		ulp_tensor_map_free(&m);
	}
	cr_assert_eq(ulp_format_parse(NULL, 0, &m), ULP_OK);
	cr_expect(map_is_empty(&m));
	for (int i = 0; i < 200; i++) {
		uint8_t r[512];

		for (size_t k = 0; k < sizeof r; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			r[k] = (uint8_t)x;
		}
		if (i & 1)
			memcpy(r, "PK\x03\x04", 4);
		cr_assert_eq(parse_exact(ulp_format_parse, r, sizeof r, &m),
		             ULP_OK);
		cr_expect(map_is_empty(&m));
	}
}

static uint64_t st_hash(const char *json, size_t dlen)
{
	buf b = st_build(json, dlen);
	ulp_tensor_map m;
	uint64_t h;

	cr_assert_eq(ulp_safetensors_parse(b.p, b.len, &m), ULP_OK, "%s", json);
	h = ulp_tensor_map_layout_hash(&m);
	ulp_tensor_map_free(&m);
	free(b.p);
	return h;
}

Test(format, layout_hash)
{
	uint64_t base = st_hash("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
	                        "\"data_offsets\":[0,24]},"
	                        "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],"
	                        "\"data_offsets\":[24,32]}}",
	                        32);
	ulp_tensor_map empty = { 0 };
	size_t len;
	uint8_t *d;
	ulp_tensor_map m1, m2;

	cr_expect_neq(base, 0);
	/* Same layout: other offsets, gaps, padding, metadata.  (Order
	 * matters: the hash follows the map, which is in offset order.) */
	cr_expect_eq(base, st_hash("{\"__metadata__\":{\"step\":\"7\"},"
	                           "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],"
	                           "\"data_offsets\":[32,40]},"
	                           "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
	                           "\"data_offsets\":[4,28]}}  ",
	                           48));
	cr_expect_neq(base,
	              st_hash("{\"a\":{\"dtype\":\"F32\",\"shape\":[3,2],"
	                      "\"data_offsets\":[0,24]},"
	                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_"
	                      "offsets\":[24,32]}}",
	                      32),
	              "shape");
	cr_expect_neq(base,
	              st_hash("{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_"
	                      "offsets\":[0,24]},"
	                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_"
	                      "offsets\":[24,32]}}",
	                      32),
	              "rank");
	cr_expect_neq(base,
	              st_hash("{\"a\":{\"dtype\":\"I32\",\"shape\":[2,3],"
	                      "\"data_offsets\":[0,24]},"
	                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_"
	                      "offsets\":[24,32]}}",
	                      32),
	              "dtype");
	cr_expect_neq(base,
	              st_hash("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
	                      "\"data_offsets\":[0,24]},"
	                      "\"c\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_"
	                      "offsets\":[24,32]}}",
	                      32),
	              "name");
	cr_expect_neq(base,
	              st_hash("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
	                      "\"data_offsets\":[0,24]}}",
	                      32),
	              "fewer tensors");

	cr_expect_eq(ulp_tensor_map_layout_hash(&empty), 0);
	cr_expect_eq(ulp_tensor_map_layout_hash(NULL), 0);

	d = load_fixture("tiny_state.pt", &len);
	cr_assert_eq(ulp_format_parse(d, len, &m1), ULP_OK);
	cr_assert_eq(ulp_format_parse(d, len, &m2), ULP_OK);
	cr_expect_neq(ulp_tensor_map_layout_hash(&m1), 0);
	cr_expect_eq(ulp_tensor_map_layout_hash(&m1),
	             ulp_tensor_map_layout_hash(&m2));
	ulp_tensor_map_free(&m2);
	free(d);
	d = load_fixture("tiny_optim.pt", &len);
	cr_assert_eq(ulp_format_parse(d, len, &m2), ULP_OK);
	cr_expect_neq(ulp_tensor_map_layout_hash(&m1),
	              ulp_tensor_map_layout_hash(&m2));
	ulp_tensor_map_free(&m1);
	ulp_tensor_map_free(&m2);
	free(d);
}
