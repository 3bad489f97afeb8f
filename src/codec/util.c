/*
 * util.c - error strings, dtype facts, buffers, hashes and statistics.
 */
#include <stdlib.h>

#include "hash.h"
#include "codec_internal.h"

const char *ulp_strerror(int err)
{
	switch (err) {
	case ULP_OK:
		return "success";
	case ULP_ERR_NOMEM:
		return "out of memory";
	case ULP_ERR_CORRUPT:
		return "corrupt or truncated object";
	case ULP_ERR_VERSION:
		return "object format not supported by this version";
	case ULP_ERR_IO:
		return "I/O error";
	case ULP_ERR_ARG:
		return "invalid argument";
	case ULP_ERR_REF:
		return "reference does not match the object";
	case ULP_ERR_PARSE:
		return "malformed file format";
	case ULP_ERR_SIDE:
		return "side reference (another file's version) missing or "
		       "not the one the object was coded against";
	}
	return "unknown error";
}

ulp_float_fmt ulp_dtype_fmt(ulp_dtype dt)
{
	switch (dt) {
	case ULP_DT_BF16:
		return (ulp_float_fmt){ 16, 8, 7 };
	case ULP_DT_F16:
		return (ulp_float_fmt){ 16, 5, 10 };
	case ULP_DT_F32:
		return (ulp_float_fmt){ 32, 8, 23 };
	case ULP_DT_F64:
		return (ulp_float_fmt){ 64, 11, 52 };
	case ULP_DT_F8E4M3:
		return (ulp_float_fmt){ 8, 4, 3 };
	case ULP_DT_F8E5M2:
		return (ulp_float_fmt){ 8, 5, 2 };
	default:
		return (ulp_float_fmt){ 0, 0, 0 };
	}
}

unsigned ulp_dtype_size(ulp_dtype dt)
{
	unsigned w = ulp_dtype_fmt(dt).width;
	return w ? w / 8 : 1;
}

const char *ulp_dtype_name(ulp_dtype dt)
{
	static const char *const names[ULP_DT_COUNT] = {
		"generic", "bf16", "f16", "f32", "f64", "f8e4m3", "f8e5m2"
	};
	return (unsigned)dt < ULP_DT_COUNT ? names[dt] : "?";
}

int ulp_buf_reserve(ulp_buf *b, size_t cap)
{
	if (cap <= b->cap)
		return ULP_OK;
	size_t ncap = b->cap ? b->cap : 4096;
	while (ncap < cap)
		ncap = ncap / 2 * 3;
	uint8_t *p = realloc(b->p, ncap);
	if (!p)
		return ULP_ERR_NOMEM;
	b->p = p;
	b->cap = ncap;
	return ULP_OK;
}

void ulp_buf_free(ulp_buf *b)
{
	free(b->p);
	*b = (ulp_buf){ 0 };
}

size_t ulp_buf_open_gap(ulp_buf *out, uint64_t bound)
{
	uint8_t vi[ULP_VARINT_MAX];
	size_t gap = ulp_varint_put(vi, bound);
	if (ulp_buf_reserve(out, out->len + gap))
		return 0;
	out->len += gap;
	return gap;
}

int ulp_buf_close_gap(ulp_buf *out, size_t start, size_t gap)
{
	uint64_t len = out->len - start - gap;
	uint8_t vi[ULP_VARINT_MAX];
	size_t vn = ulp_varint_put(vi, len);
	if (vn < gap && len >= ULP_GAP_PAD_MIN) {
		ulp_varint_put_padded(out->p + start, len, gap);
		return ULP_OK;
	}
	/* a piece past its bound needs room: slower, still right */
	if (vn > gap && ulp_buf_reserve(out, out->len + vn - gap))
		return ULP_ERR_NOMEM;
	if (vn != gap)
		memmove(out->p + start + vn, out->p + start + gap, len);
	memcpy(out->p + start, vi, vn);
	out->len = start + vn + len;
	return ULP_OK;
}

void ulp_params_resolve(const ulp_params *in, ulp_params *out)
{
	ulp_params p = in ? *in : (ulp_params){ 0 };
	if (!p.chunk_size)
		p.chunk_size = ULP_CHUNK_SIZE_DEFAULT;
	if (p.chunk_size < ULP_CHUNK_SIZE_MIN)
		p.chunk_size = ULP_CHUNK_SIZE_MIN;
	if (p.chunk_size > ULP_CHUNK_SIZE_MAX)
		p.chunk_size = ULP_CHUNK_SIZE_MAX;
	*out = p;
}

void ulp_hash128(const void *data, size_t len, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
	memcpy(out, c.digest, 16);
}

void ulp_hash128_hex(const uint8_t h[16], char out[33])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 15];
	}
	out[32] = 0;
}

void ulp_stats_add(ulp_stats *acc, const ulp_stats *s)
{
	for (int d = 0; d < ULP_DT_COUNT; d++) {
		ulp_dtype_stats *a = &acc->dt[d];
		const ulp_dtype_stats *b = &s->dt[d];
		a->elems += b->elems;
		a->delta_elems += b->delta_elems;
		a->ref_elems += b->ref_elems;
		a->side_elems += b->side_elems;
		a->side_bytes += b->side_bytes;
		a->bytes_in += b->bytes_in;
		a->bytes_out += b->bytes_out;
		a->model_bits += b->model_bits;
		a->delta_noctx_bits += b->delta_noctx_bits;
		a->delta_ctx_bits += b->delta_ctx_bits;
		a->delta_prevk_bits += b->delta_prevk_bits;
	}
	acc->chunks_copy += s->chunks_copy;
	acc->chunks_delta += s->chunks_delta;
	acc->chunks_standalone += s->chunks_standalone;
	acc->chunks_side += s->chunks_side;
}
