/*
 * torchzip.c - strict parser for torch.save zip archives.
 *
 * The zip is read by hand because the map needs the absolute file offset of
 * each stored record's bytes, which zip libraries do not expose.  Only what
 * torch writes is accepted: a single-disk archive, unencrypted, with the
 * tensor storages stored (method 0) under <prefix>/data/<key> and the
 * pickle, also stored, at <prefix>/data.pkl.
 */
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"
#include "formats/pickle_scan.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

#define EOCD_LEN 22u
#define EOCD64_LEN 56u
#define LOC64_LEN 20u
#define CENTRAL_LEN 46u
#define LOCAL_LEN 30u
/* The EOCD's comment is at most 65535 bytes long. */
#define EOCD_SEARCH (EOCD_LEN + 65535u)

#define ZIP_FLAG_ENCRYPTED 0x0001u
#define ZIP_FLAG_STRONG_ENC 0x0040u

typedef struct zdir {
	uint64_t cd_off, cd_size, count;
	uint64_t limit; /* where the central directory ends */
} zdir;

typedef struct zentry {
	const uint8_t *name;
	size_t name_len;
	uint16_t method;
	uint64_t csize, usize, lho, data_off;
} zentry;

typedef struct torch_type {
	const char *name;
	unsigned size;
	ulp_dtype dtype;
} torch_type;

/* Storage classes torch has pickled, by name without "Storage". */
static const torch_type torch_types[] = {
	{ "Float", 4, ULP_DT_F32 },
	{ "Double", 8, ULP_DT_F64 },
	{ "Half", 2, ULP_DT_F16 },
	{ "BFloat16", 2, ULP_DT_BF16 },
	{ "Float8_e4m3fn", 1, ULP_DT_F8E4M3 },
	{ "Float8_e5m2", 1, ULP_DT_F8E5M2 },
	{ "Long", 8, ULP_DT_GENERIC },
	{ "Int", 4, ULP_DT_GENERIC },
	{ "Short", 2, ULP_DT_GENERIC },
	{ "Char", 1, ULP_DT_GENERIC },
	{ "Byte", 1, ULP_DT_GENERIC },
	{ "Bool", 1, ULP_DT_GENERIC },
	{ "UInt16", 2, ULP_DT_GENERIC },
	{ "UInt32", 4, ULP_DT_GENERIC },
	{ "UInt64", 8, ULP_DT_GENERIC },
	{ "ComplexHalf", 4, ULP_DT_GENERIC },
	{ "ComplexFloat", 8, ULP_DT_GENERIC },
	{ "ComplexDouble", 16, ULP_DT_GENERIC },
	{ "QInt8", 1, ULP_DT_GENERIC },
	{ "QUInt8", 1, ULP_DT_GENERIC },
	{ "QInt32", 4, ULP_DT_GENERIC },
	{ "QUInt4x2", 1, ULP_DT_GENERIC },
	{ "QUInt2x4", 1, ULP_DT_GENERIC },
	{ "Untyped", 1, ULP_DT_GENERIC },
};

static const torch_type *torch_type_find(const char *name)
{
	for (size_t i = 0; i < sizeof torch_types / sizeof torch_types[0]; i++)
		if (strcmp(torch_types[i].name, name) == 0)
			return &torch_types[i];
	return NULL;
}

/* ------------------------------------------------------ end of directory */

/* The last EOCD signature whose comment ends exactly at end of file: a
 * signature-like byte run inside the comment cannot match that. */
static int find_eocd(const uint8_t *d, uint64_t size, uint64_t *pos)
{
	uint64_t lo;

	if (size < EOCD_LEN)
		return ULP_ERR_PARSE;
	lo = size > EOCD_SEARCH ? size - EOCD_SEARCH : 0;
	for (uint64_t p = size - EOCD_LEN + 1; p-- > lo;) {
		if (ulp_fmt_le32(d + p) == SIG_EOCD &&
		    p + EOCD_LEN + ulp_fmt_le16(d + p + 20) == size) {
			*pos = p;
			return ULP_OK;
		}
	}
	return ULP_ERR_PARSE;
}

/* A 16- or 32-bit EOCD field either holds the value or, saturated, defers
 * to the ZIP64 record. */
static int field_agrees(uint64_t narrow, uint64_t sat, uint64_t wide)
{
	return narrow == sat || narrow == wide;
}

static int read_zip64_eocd(const uint8_t *d, uint64_t eocd, zdir *z)
{
	uint64_t loc = eocd - LOC64_LEN, off, rec;
	const uint8_t *e = d + eocd, *r;

	if (ulp_fmt_le32(d + loc + 4) != 0 || ulp_fmt_le32(d + loc + 16) > 1)
		return ULP_ERR_PARSE; /* multi-disk */
	off = ulp_fmt_le64(d + loc + 8);
	if (!ulp_fmt_in_range(off, EOCD64_LEN, loc))
		return ULP_ERR_PARSE;
	r = d + off;
	rec = ulp_fmt_le64(r + 4);
	if (ulp_fmt_le32(r) != SIG_EOCD64 || rec < EOCD64_LEN - 12 ||
	    !ulp_fmt_in_range(off + 12, rec, loc) || off + 12 + rec != loc)
		return ULP_ERR_PARSE;
	if (ulp_fmt_le32(r + 16) != 0 || ulp_fmt_le32(r + 20) != 0 ||
	    ulp_fmt_le64(r + 24) != ulp_fmt_le64(r + 32))
		return ULP_ERR_PARSE;
	z->count = ulp_fmt_le64(r + 32);
	z->cd_size = ulp_fmt_le64(r + 40);
	z->cd_off = ulp_fmt_le64(r + 48);
	z->limit = off;
	if (!field_agrees(ulp_fmt_le16(e + 10), 0xFFFF, z->count) ||
	    !field_agrees(ulp_fmt_le32(e + 12), 0xFFFFFFFF, z->cd_size) ||
	    !field_agrees(ulp_fmt_le32(e + 16), 0xFFFFFFFF, z->cd_off))
		return ULP_ERR_PARSE;
	return ULP_OK;
}

static int read_dir(const uint8_t *d, uint64_t size, zdir *z)
{
	uint64_t eocd;
	const uint8_t *e;
	int rc = find_eocd(d, size, &eocd);

	if (rc != ULP_OK)
		return rc;
	e = d + eocd;
	if (ulp_fmt_le16(e + 4) != 0 || ulp_fmt_le16(e + 6) != 0 ||
	    ulp_fmt_le16(e + 8) != ulp_fmt_le16(e + 10))
		return ULP_ERR_PARSE; /* multi-disk */
	if (eocd >= LOC64_LEN &&
	    ulp_fmt_le32(d + eocd - LOC64_LEN) == SIG_LOC64) {
		rc = read_zip64_eocd(d, eocd, z);
		if (rc != ULP_OK)
			return rc;
	} else {
		z->count = ulp_fmt_le16(e + 10);
		z->cd_size = ulp_fmt_le32(e + 12);
		z->cd_off = ulp_fmt_le32(e + 16);
		z->limit = eocd;
	}
	/* torch writes the end records right after the directory; an
	 * archive behind other bytes (one of a DCP file's) would otherwise
	 * pass with its offsets read as the file's. */
	if (!ulp_fmt_in_range(z->cd_off, z->cd_size, z->limit) ||
	    z->cd_off + z->cd_size != z->limit ||
	    z->count > z->cd_size / CENTRAL_LEN)
		return ULP_ERR_PARSE;
	return ULP_OK;
}

/* --------------------------------------------------- central directory */

/* Replace the saturated 32-bit fields of an entry by the ZIP64 extra
 * field's values, which appear in this fixed order, only for the fields
 * that are saturated. */
static int apply_zip64_extra(const uint8_t *x, size_t xlen, zentry *ze,
                             int need_usize, int need_csize, int need_lho,
                             int need_disk)
{
	size_t want = 8 * (size_t)(need_usize + need_csize + need_lho) +
	              4 * (size_t)need_disk;

	while (xlen >= 4) {
		uint16_t id = ulp_fmt_le16(x), len = ulp_fmt_le16(x + 2);
		const uint8_t *v = x + 4;

		if (len > xlen - 4)
			return ULP_ERR_PARSE;
		if (id == 0x0001) {
			if (len < want)
				return ULP_ERR_PARSE;
			if (need_usize) {
				ze->usize = ulp_fmt_le64(v);
				v += 8;
			}
			if (need_csize) {
				ze->csize = ulp_fmt_le64(v);
				v += 8;
			}
			if (need_lho)
				ze->lho = ulp_fmt_le64(v);
			v += 8 * need_lho;
			if (need_disk && ulp_fmt_le32(v) != 0)
				return ULP_ERR_PARSE;
			return ULP_OK;
		}
		x += 4 + len;
		xlen -= 4 + (size_t)len;
	}
	return want ? ULP_ERR_PARSE : ULP_OK;
}

static int read_central(const uint8_t *d, uint64_t *pos, uint64_t end,
                        zentry *ze)
{
	const uint8_t *c;
	size_t nlen, xlen, clen;
	uint16_t flags, disk;
	int rc;

	if (!ulp_fmt_in_range(*pos, CENTRAL_LEN, end))
		return ULP_ERR_PARSE;
	c = d + *pos;
	if (ulp_fmt_le32(c) != SIG_CENTRAL)
		return ULP_ERR_PARSE;
	flags = ulp_fmt_le16(c + 8);
	nlen = ulp_fmt_le16(c + 28);
	xlen = ulp_fmt_le16(c + 30);
	clen = ulp_fmt_le16(c + 32);
	disk = ulp_fmt_le16(c + 34);
	if (!ulp_fmt_in_range(*pos, CENTRAL_LEN + nlen + xlen + clen, end))
		return ULP_ERR_PARSE;
	if (flags & (ZIP_FLAG_ENCRYPTED | ZIP_FLAG_STRONG_ENC))
		return ULP_ERR_PARSE;
	/* Names become C strings in the map. */
	if (memchr(c + CENTRAL_LEN, '\0', nlen))
		return ULP_ERR_PARSE;
	ze->method = ulp_fmt_le16(c + 10);
	ze->csize = ulp_fmt_le32(c + 20);
	ze->usize = ulp_fmt_le32(c + 24);
	ze->lho = ulp_fmt_le32(c + 42);
	ze->name = c + CENTRAL_LEN;
	ze->name_len = nlen;
	rc = apply_zip64_extra(c + CENTRAL_LEN + nlen, xlen, ze,
	                       ze->usize == 0xFFFFFFFF, ze->csize == 0xFFFFFFFF,
	                       ze->lho == 0xFFFFFFFF, disk == 0xFFFF);
	if (rc != ULP_OK)
		return rc;
	if (disk != 0 && disk != 0xFFFF)
		return ULP_ERR_PARSE;
	*pos += CENTRAL_LEN + nlen + xlen + clen;
	return ULP_OK;
}

/* Locate an entry's bytes through its local header, which must agree with
 * the central directory on name and method.  Everything an entry owns lies
 * before the central directory. */
static int read_local(const uint8_t *d, uint64_t cd_off, zentry *ze)
{
	const uint8_t *l;
	size_t nlen, xlen;

	if (!ulp_fmt_in_range(ze->lho, LOCAL_LEN, cd_off))
		return ULP_ERR_PARSE;
	l = d + ze->lho;
	nlen = ulp_fmt_le16(l + 26);
	xlen = ulp_fmt_le16(l + 28);
	if (ulp_fmt_le32(l) != SIG_LOCAL || ulp_fmt_le16(l + 8) != ze->method ||
	    nlen != ze->name_len ||
	    !ulp_fmt_in_range(ze->lho, LOCAL_LEN + nlen + xlen, cd_off) ||
	    memcmp(l + LOCAL_LEN, ze->name, nlen) != 0)
		return ULP_ERR_PARSE;
	ze->data_off = ze->lho + LOCAL_LEN + nlen + xlen;
	if (!ulp_fmt_in_range(ze->data_off, ze->csize, cd_off))
		return ULP_ERR_PARSE;
	if (ze->method == 0 && ze->csize != ze->usize)
		return ULP_ERR_PARSE;
	return ULP_OK;
}

static int cmp_lho(const void *a, const void *b)
{
	const zentry *x = a, *y = b;

	return x->lho < y->lho ? -1 : x->lho > y->lho;
}

/* Records (local header through data) must not share bytes: overlapping
 * entries are a known way to make one archive mean two things. */
static int check_disjoint(zentry *v, size_t n)
{
	zentry *s = malloc(n * sizeof *s);
	int rc = ULP_OK;

	if (!s)
		return ULP_ERR_NOMEM;
	memcpy(s, v, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_lho);
	for (size_t i = 1; i < n; i++)
		if (s[i - 1].data_off + s[i - 1].csize > s[i].lho)
			rc = ULP_ERR_PARSE;
	free(s);
	return rc;
}

static int read_entries(const uint8_t *d, const zdir *z, zentry **out)
{
	uint64_t pos = z->cd_off, end = z->cd_off + z->cd_size;
	zentry *v;
	int rc = ULP_OK;

	*out = NULL;
	if (z->count == 0)
		return ULP_ERR_PARSE; /* torch archives are never empty */
	v = calloc((size_t)z->count, sizeof *v);
	if (!v)
		return ULP_ERR_NOMEM;
	for (uint64_t i = 0; i < z->count && rc == ULP_OK; i++) {
		rc = read_central(d, &pos, end, &v[i]);
		if (rc == ULP_OK)
			rc = read_local(d, z->cd_off, &v[i]);
	}
	if (rc == ULP_OK && pos != end)
		rc = ULP_ERR_PARSE;
	if (rc == ULP_OK)
		rc = check_disjoint(v, (size_t)z->count);
	if (rc != ULP_OK) {
		free(v);
		return rc;
	}
	*out = v;
	return ULP_OK;
}

/* ------------------------------------------------------------- the map */

static int cmp_storage_key(const void *a, const void *b)
{
	const ulp_pickle_storage *x = a, *y = b;
	size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

/* Sort the pickle's storages by key; a key persisted twice (a storage
 * shared by several tensors) must say the same thing each time, which
 * torch.save itself enforces. */
static int index_storages(ulp_pickle_scan *sc)
{
	if (sc->n == 0)
		return ULP_OK;
	qsort(sc->v, sc->n, sizeof *sc->v, cmp_storage_key);
	for (size_t i = 1; i < sc->n; i++) {
		const ulp_pickle_storage *a = &sc->v[i - 1], *b = &sc->v[i];

		if (cmp_storage_key(a, b) == 0 &&
		    (strcmp(a->type, b->type) != 0 ||
		     a->has_numel != b->has_numel ||
		     (a->has_numel && a->numel != b->numel)))
			return ULP_ERR_PARSE;
	}
	return ULP_OK;
}

static const ulp_pickle_storage *
lookup_storage(const ulp_pickle_scan *sc, const uint8_t *key, size_t key_len)
{
	ulp_pickle_storage k = { .key = key, .key_len = key_len };

	if (sc->n == 0)
		return NULL;
	return bsearch(&k, sc->v, sc->n, sizeof *sc->v, cmp_storage_key);
}

typedef struct prefix {
	const uint8_t *p;
	size_t len; /* including the '/' */
} prefix;

static int name_is(const zentry *ze, const prefix *pf, const char *rest)
{
	size_t rl = strlen(rest);

	return ze->name_len == pf->len + rl &&
	       memcmp(ze->name, pf->p, pf->len) == 0 &&
	       memcmp(ze->name + pf->len, rest, rl) == 0;
}

/* The key of a <prefix>/data/<key> record, or NULL. */
static const uint8_t *storage_key(const zentry *ze, const prefix *pf,
                                  size_t *key_len)
{
	const size_t dl = strlen("data/");
	const uint8_t *k;

	if (ze->name_len <= pf->len + dl ||
	    memcmp(ze->name, pf->p, pf->len) != 0 ||
	    memcmp(ze->name + pf->len, "data/", dl) != 0)
		return NULL;
	k = ze->name + pf->len + dl;
	*key_len = ze->name_len - pf->len - dl;
	return memchr(k, '/', *key_len) ? NULL : k;
}

static int add_storage(ulp_tensor_map *map, const zentry *ze,
                       const ulp_pickle_storage *st)
{
	const torch_type *tt = st ? torch_type_find(st->type) : NULL;
	uint64_t elems;

	if (!tt)
		return ulp_fmt_map_push(map, (const char *)ze->name,
		                        ze->name_len, st ? st->type : "",
		                        ULP_DT_GENERIC, ze->data_off, ze->csize,
		                        0, NULL);
	if (ze->csize % tt->size != 0)
		return ULP_ERR_PARSE;
	elems = ze->csize / tt->size;
	if (st->has_numel && (st->numel < 0 || (uint64_t)st->numel != elems))
		return ULP_ERR_PARSE;
	return ulp_fmt_map_push(map, (const char *)ze->name, ze->name_len,
	                        st->type, tt->dtype, ze->data_off, ze->csize, 1,
	                        &elems);
}

static int build_map(const uint8_t *d, const zentry *v, size_t n,
                     ulp_tensor_map *out)
{
	const zentry *pkl = NULL;
	ulp_pickle_scan sc = { 0 };
	prefix pf;
	const uint8_t *slash;
	size_t nstor = 0, klen;
	int rc;

	/* torch's reader takes the top directory from the first entry. */
	slash = memchr(v[0].name, '/', v[0].name_len);
	if (!slash || slash == v[0].name)
		return ULP_ERR_PARSE;
	pf.p = v[0].name;
	pf.len = (size_t)(slash - v[0].name) + 1;

	for (size_t i = 0; i < n; i++) {
		if (name_is(&v[i], &pf, "data.pkl")) {
			if (pkl)
				return ULP_ERR_PARSE;
			pkl = &v[i];
		} else if (v[i].method == 0 && storage_key(&v[i], &pf, &klen)) {
			nstor++;
		}
	}
	if (!pkl || pkl->method != 0)
		return ULP_ERR_PARSE;

	rc = ulp_pickle_scan_storages(d + pkl->data_off, (size_t)pkl->csize,
	                              &sc);
	if (rc == ULP_OK)
		rc = index_storages(&sc);
	if (rc == ULP_OK)
		rc = ulp_fmt_map_reserve(out, nstor);
	for (size_t i = 0; i < n && rc == ULP_OK; i++) {
		const uint8_t *key;

		if (v[i].method != 0 || &v[i] == pkl)
			continue;
		key = storage_key(&v[i], &pf, &klen);
		if (key)
			rc = add_storage(out, &v[i],
			                 lookup_storage(&sc, key, klen));
	}
	ulp_pickle_scan_free(&sc);
	return rc;
}

int ulp_torchzip_parse(const uint8_t *data, uint64_t size, ulp_tensor_map *out)
{
	zdir z;
	zentry *v = NULL;
	int rc;

	if (!out || (!data && size > 0))
		return ULP_ERR_ARG;
	memset(out, 0, sizeof *out);
	rc = read_dir(data, size, &z);
	if (rc == ULP_OK)
		rc = read_entries(data, &z, &v);
	if (rc == ULP_OK)
		rc = build_map(data, v, (size_t)z.count, out);
	if (rc == ULP_OK)
		rc = ulp_fmt_map_finalize(out, size);
	free(v);
	if (rc != ULP_OK) {
		ulp_tensor_map_free(out);
		return rc;
	}
	out->format = ULP_FMT_TORCHZIP;
	return ULP_OK;
}
