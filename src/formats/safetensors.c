/*
 * safetensors.c - strict parser for the safetensors format: an 8-byte
 * little-endian header length N, N bytes of JSON, then the tensor data the
 * header's data_offsets point into.
 */
#include <string.h>

#include <jansson.h>

#include "formats/formats_internal.h"

/* The reference implementation refuses larger headers; a bigger one is
 * either hostile or not safetensors. */
#define ST_MAX_HEADER (100u << 20)
#define ST_MAX_DIMS 16

typedef struct st_dtype {
	const char *name;
	unsigned size;
	ulp_dtype dtype;
} st_dtype;

static const st_dtype st_dtypes[] = {
	{ "F64", 8, ULP_DT_F64 },        { "F32", 4, ULP_DT_F32 },
	{ "F16", 2, ULP_DT_F16 },        { "BF16", 2, ULP_DT_BF16 },
	{ "F8_E4M3", 1, ULP_DT_F8E4M3 }, { "F8_E5M2", 1, ULP_DT_F8E5M2 },
	{ "I64", 8, ULP_DT_GENERIC },    { "I32", 4, ULP_DT_GENERIC },
	{ "I16", 2, ULP_DT_GENERIC },    { "I8", 1, ULP_DT_GENERIC },
	{ "U64", 8, ULP_DT_GENERIC },    { "U32", 4, ULP_DT_GENERIC },
	{ "U16", 2, ULP_DT_GENERIC },    { "U8", 1, ULP_DT_GENERIC },
	{ "BOOL", 1, ULP_DT_GENERIC },
};

static const st_dtype *st_dtype_find(const char *name)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
		if (strcmp(st_dtypes[i].name, name) == 0)
			return &st_dtypes[i];
	return NULL;
}

/* A JSON integer >= 0.  jansson already rejects integers beyond long long,
 * and reals (1.0, 1e3) are not integers, so neither can sneak through. */
static int st_uint(const json_t *j, uint64_t *out)
{
	json_int_t v;

	if (!json_is_integer(j))
		return 0;
	v = json_integer_value(j);
	if (v < 0)
		return 0;
	*out = (uint64_t)v;
	return 1;
}

static int st_metadata_ok(const json_t *meta)
{
	const char *k;
	json_t *v;

	if (!json_is_object(meta))
		return 0;
	json_object_foreach((json_t *)meta, k, v)
	{
		if (!json_is_string(v))
			return 0;
	}
	return 1;
}

/* Validate one tensor entry and append it to the map.  Offsets are checked
 * against the data area here; ordering and overlap are checked once the
 * whole map is sorted. */
static int st_tensor(ulp_tensor_map *map, const char *name, const json_t *j,
                     uint64_t data_start, uint64_t data_size)
{
	const json_t *jdt, *jshape, *joff;
	const st_dtype *dt;
	uint64_t shape[ST_MAX_DIMS], numel = 1, begin, end, nbytes;
	size_t ndim;

	if (!json_is_object(j))
		return ULP_ERR_PARSE;
	jdt = json_object_get(j, "dtype");
	jshape = json_object_get(j, "shape");
	joff = json_object_get(j, "data_offsets");
	if (!json_is_string(jdt) || !json_is_array(jshape) ||
	    !json_is_array(joff))
		return ULP_ERR_PARSE;
	dt = st_dtype_find(json_string_value(jdt));
	if (!dt)
		return ULP_ERR_PARSE;

	ndim = json_array_size(jshape);
	if (ndim > ST_MAX_DIMS)
		return ULP_ERR_PARSE;
	for (size_t d = 0; d < ndim; d++) {
		if (!st_uint(json_array_get(jshape, d), &shape[d]))
			return ULP_ERR_PARSE;
		if (shape[d] != 0 && numel > UINT64_MAX / shape[d])
			return ULP_ERR_PARSE;
		numel *= shape[d];
	}
	if (numel > UINT64_MAX / dt->size)
		return ULP_ERR_PARSE;
	nbytes = numel * dt->size;

	if (json_array_size(joff) != 2 ||
	    !st_uint(json_array_get(joff, 0), &begin) ||
	    !st_uint(json_array_get(joff, 1), &end) || begin > end ||
	    end > data_size || end - begin != nbytes)
		return ULP_ERR_PARSE;

	return ulp_fmt_map_push(map, name, strlen(name), dt->name, dt->dtype,
	                        data_start + begin, nbytes, (uint32_t)ndim,
	                        shape);
}

static int st_parse_header(const json_t *root, uint64_t data_start,
                           uint64_t data_size, ulp_tensor_map *out)
{
	const char *key;
	json_t *val;
	int rc;

	if (!json_is_object(root))
		return ULP_ERR_PARSE;
	rc = ulp_fmt_map_reserve(out, json_object_size(root));
	if (rc != ULP_OK)
		return rc;
	json_object_foreach((json_t *)root, key, val)
	{
		if (strcmp(key, "__metadata__") == 0) {
			if (!st_metadata_ok(val))
				return ULP_ERR_PARSE;
			continue;
		}
		rc = st_tensor(out, key, val, data_start, data_size);
		if (rc != ULP_OK)
			return rc;
	}
	return ULP_OK;
}

int ulp_safetensors_parse(const uint8_t *data, uint64_t size,
                          ulp_tensor_map *out)
{
	json_error_t err;
	json_t *root;
	uint64_t hlen;
	int rc;

	if (!out || (!data && size > 0))
		return ULP_ERR_ARG;
	memset(out, 0, sizeof *out);
	if (size < 8)
		return ULP_ERR_PARSE;
	hlen = ulp_fmt_le64(data);
	if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > size - 8)
		return ULP_ERR_PARSE;

	/* Duplicate keys would make the file mean different things to
	 * different readers.  Embedded NULs stay rejected (no
	 * JSON_ALLOW_NUL), so every key is a proper C string. */
	root = json_loadb((const char *)data + 8, (size_t)hlen,
	                  JSON_REJECT_DUPLICATES, &err);
	if (!root)
		return json_error_code(&err) == json_error_out_of_memory
		               ? ULP_ERR_NOMEM
		               : ULP_ERR_PARSE;
	rc = st_parse_header(root, 8 + hlen, size - 8 - hlen, out);
	json_decref(root);
	if (rc == ULP_OK)
		rc = ulp_fmt_map_finalize(out, size);
	if (rc != ULP_OK) {
		ulp_tensor_map_free(out);
		return rc;
	}
	out->format = ULP_FMT_SAFETENSORS;
	return ULP_OK;
}
