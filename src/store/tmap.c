/*
 * tmap.c - tensor maps and encoder statistics as catalog blobs.
 *
 * A later version is planned against the map of its reference; keeping
 * the map of every version in its row saves decoding the reference just
 * to parse its header.  Little-endian layout:
 *
 *   "UTM1"  u8 format  u32 n
 *   n x { u16 name_len  name  u8 dtype_name_len  dtype_name  u8 dtype
 *         u64 offset  u64 nbytes  u32 ndim  ndim x u64 }
 */
#include "store/tmap.h"

#define MAGIC "UTM1"

typedef struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
} wbuf;

static void put(wbuf *b, const void *p, size_t n)
{
	if (b->err)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q) {
			b->err = -ENOMEM;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void put_le(wbuf *b, uint64_t v, int n)
{
	uint8_t t[8];

	for (int i = 0; i < n; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	put(b, t, (size_t)n);
}

int ulp_tmap_encode(const ulp_tensor_map *map, uint8_t **out, size_t *len)
{
	wbuf b = { 0 };

	*out = NULL;
	*len = 0;
	if (!map || map->n == 0)
		return 0;
	put(&b, MAGIC, 4);
	put_le(&b, (uint64_t)map->format, 1);
	put_le(&b, map->n, 4);
	for (size_t i = 0; i < map->n; i++) {
		const ulp_tensor *t = &map->v[i];
		size_t nl = strlen(t->name), dl = strlen(t->dtype_name);

		if (nl > 0xffff || dl > 0xff || map->n > 0xffffffffu) {
			free(b.p);
			return -EINVAL;
		}
		put_le(&b, nl, 2);
		put(&b, t->name, nl);
		put_le(&b, dl, 1);
		put(&b, t->dtype_name, dl);
		put_le(&b, (uint64_t)t->dtype, 1);
		put_le(&b, t->offset, 8);
		put_le(&b, t->nbytes, 8);
		put_le(&b, t->ndim, 4);
		for (uint32_t k = 0; k < t->ndim; k++)
			put_le(&b, t->shape[k], 8);
	}
	if (b.err) {
		free(b.p);
		return b.err;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

typedef struct rbuf {
	const uint8_t *p;
	size_t len, pos;
	int bad;
} rbuf;

static uint64_t get_le(rbuf *r, int n)
{
	uint64_t v = 0;

	if (r->bad || r->len - r->pos < (size_t)n) {
		r->bad = 1;
		return 0;
	}
	for (int i = 0; i < n; i++)
		v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
	r->pos += (size_t)n;
	return v;
}

static const uint8_t *get(rbuf *r, size_t n)
{
	if (r->bad || r->len - r->pos < n) {
		r->bad = 1;
		return NULL;
	}
	r->pos += n;
	return r->p + r->pos - n;
}

int ulp_tmap_decode(const uint8_t *p, size_t len, ulp_tensor_map *out)
{
	rbuf r = { p, len, 0, 0 };
	const uint8_t *m = get(&r, 4);
	int rc = -EIO;

	memset(out, 0, sizeof *out);
	if (!m || memcmp(m, MAGIC, 4) != 0)
		return -EIO;
	out->format = (ulp_format)get_le(&r, 1);
	uint64_t n = get_le(&r, 4);
	/* Each entry takes at least 24 bytes: a bound before allocating. */
	if (r.bad || n > (len - r.pos) / 24)
		return -EIO;
	out->v = calloc(n ? n : 1, sizeof *out->v);
	if (!out->v)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		ulp_tensor *t = &out->v[i];
		size_t nl = (size_t)get_le(&r, 2);
		const uint8_t *name = get(&r, nl);
		size_t dl = (size_t)get_le(&r, 1);
		const uint8_t *dn = get(&r, dl);

		if (r.bad || dl >= sizeof t->dtype_name)
			goto fail;
		t->name = malloc(nl + 1);
		out->n++;
		if (!t->name) {
			rc = -ENOMEM;
			goto fail;
		}
		memcpy(t->name, name, nl);
		t->name[nl] = '\0';
		memcpy(t->dtype_name, dn, dl);
		t->dtype_name[dl] = '\0';
		t->dtype = (ulp_dtype)get_le(&r, 1);
		t->offset = get_le(&r, 8);
		t->nbytes = get_le(&r, 8);
		t->ndim = (uint32_t)get_le(&r, 4);
		if (r.bad || t->dtype >= ULP_DT_COUNT ||
		    t->ndim > (len - r.pos) / 8)
			goto fail;
		if (t->ndim) {
			t->shape = malloc(t->ndim * sizeof *t->shape);
			if (!t->shape) {
				rc = -ENOMEM;
				goto fail;
			}
			for (uint32_t k = 0; k < t->ndim; k++)
				t->shape[k] = get_le(&r, 8);
		}
	}
	if (r.bad || r.pos != len)
		goto fail;
	return 0;
fail:
	ulp_tensor_map_free(out);
	return rc;
}

/* ------------------------------------------------------------ estats */

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

void ulp_estats_encode(const ulp_stats *s, uint8_t out[ULP_ESTATS_LEN])
{
	uint8_t *p = out;

	for (int d = 0; d < ULP_DT_COUNT; d++, p += 16) {
		put64(p, s->dt[d].bytes_in);
		put64(p + 8, s->dt[d].bytes_out);
	}
	put64(p, s->chunks_copy);
	put64(p + 8, s->chunks_delta);
	put64(p + 16, s->chunks_standalone);
}

int ulp_estats_decode(const void *blob, size_t len, ulp_stats *out)
{
	const uint8_t *p = blob;

	memset(out, 0, sizeof *out);
	if (!p || len != ULP_ESTATS_LEN)
		return 0;
	for (int d = 0; d < ULP_DT_COUNT; d++, p += 16) {
		out->dt[d].bytes_in = get64(p);
		out->dt[d].bytes_out = get64(p + 8);
	}
	out->chunks_copy = get64(p);
	out->chunks_delta = get64(p + 8);
	out->chunks_standalone = get64(p + 16);
	return 1;
}
