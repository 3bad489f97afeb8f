/*
 * tensor_map.c - tensor map lifetime, validation, layout hash and format
 * detection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "formats/formats_internal.h"

/* Mirrors the bound ulp_safetensors_parse() enforces, so detection never
 * sends a file there that could not pass its first check anyway. */
#define SNIFF_MAX_HEADER (100u << 20)

void ulp_tensor_map_free(ulp_tensor_map *map)
{
	if (!map)
		return;
	for (size_t i = 0; i < map->n; i++) {
		free(map->v[i].name);
		free(map->v[i].shape);
	}
	free(map->v);
	map->format = ULP_FMT_UNKNOWN;
	map->n = 0;
	map->v = NULL;
}

int ulp_fmt_map_reserve(ulp_tensor_map *map, size_t cap)
{
	map->n = 0;
	map->v = NULL;
	if (cap == 0)
		return ULP_OK;
	map->v = calloc(cap, sizeof *map->v);
	return map->v ? ULP_OK : ULP_ERR_NOMEM;
}

int ulp_fmt_map_push(ulp_tensor_map *map, const char *name, size_t name_len,
                     const char *dtype_name, ulp_dtype dtype, uint64_t offset,
                     uint64_t nbytes, uint32_t ndim, const uint64_t *shape)
{
	ulp_tensor *t = &map->v[map->n];

	memset(t, 0, sizeof *t);
	t->name = malloc(name_len + 1);
	if (!t->name)
		return ULP_ERR_NOMEM;
	memcpy(t->name, name, name_len);
	t->name[name_len] = '\0';
	/* Counted now so ulp_tensor_map_free() releases the name if the
	 * shape allocation below fails. */
	map->n++;
	if (ndim > 0) {
		t->shape = malloc(ndim * sizeof *t->shape);
		if (!t->shape)
			return ULP_ERR_NOMEM;
		memcpy(t->shape, shape, ndim * sizeof *t->shape);
	}
	t->ndim = ndim;
	snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtype_name);
	t->dtype = dtype;
	t->offset = offset;
	t->nbytes = nbytes;
	return ULP_OK;
}

static int cmp_offset(const void *a, const void *b)
{
	const ulp_tensor *x = a, *y = b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_name_ptr(const void *a, const void *b)
{
	const ulp_tensor *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

static int names_unique(const ulp_tensor_map *map, int *unique)
{
	const ulp_tensor **p;

	*unique = 1;
	if (map->n < 2)
		return ULP_OK;
	p = malloc(map->n * sizeof *p);
	if (!p)
		return ULP_ERR_NOMEM;
	for (size_t i = 0; i < map->n; i++)
		p[i] = &map->v[i];
	qsort(p, map->n, sizeof *p, cmp_name_ptr);
	for (size_t i = 1; i < map->n; i++)
		if (strcmp(p[i - 1]->name, p[i]->name) == 0)
			*unique = 0;
	free(p);
	return ULP_OK;
}

int ulp_fmt_map_finalize(ulp_tensor_map *map, uint64_t file_size)
{
	int unique, rc;

	if (map->n == 0)
		return ULP_OK;
	qsort(map->v, map->n, sizeof *map->v, cmp_offset);
	for (size_t i = 0; i < map->n; i++) {
		const ulp_tensor *t = &map->v[i];

		if (!ulp_fmt_in_range(t->offset, t->nbytes, file_size))
			return ULP_ERR_PARSE;
		/* A zero-byte tensor strictly inside another is rejected too:
		 * consumers walk the map assuming ends never go backwards. */
		if (i > 0 &&
		    map->v[i - 1].offset + map->v[i - 1].nbytes > t->offset)
			return ULP_ERR_PARSE;
	}
	rc = names_unique(map, &unique);
	if (rc != ULP_OK)
		return rc;
	return unique ? ULP_OK : ULP_ERR_PARSE;
}

static void hash_u64(XXH3_state_t *st, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	XXH3_64bits_update(st, b, sizeof b);
}

/* Each field is length-prefixed so that no two different layouts feed the
 * hash the same byte stream (e.g. names "ab"+"c" vs "a"+"bc"). */
static void hash_str(XXH3_state_t *st, const char *s)
{
	size_t len = strlen(s);

	hash_u64(st, len);
	XXH3_64bits_update(st, s, len);
}

uint64_t ulp_tensor_map_layout_hash(const ulp_tensor_map *map)
{
	XXH3_state_t st;

	if (!map || map->n == 0)
		return 0;
	XXH3_64bits_reset(&st);
	hash_u64(&st, map->n);
	for (size_t i = 0; i < map->n; i++) {
		const ulp_tensor *t = &map->v[i];

		hash_str(&st, t->name);
		hash_str(&st, t->dtype_name);
		hash_u64(&st, t->ndim);
		for (uint32_t d = 0; d < t->ndim; d++)
			hash_u64(&st, t->shape[d]);
	}
	return XXH3_64bits_digest(&st);
}

static int looks_like_safetensors(const uint8_t *data, uint64_t size)
{
	uint64_t n;

	if (size < 9)
		return 0;
	n = ulp_fmt_le64(data);
	return n >= 2 && n <= SNIFF_MAX_HEADER && n <= size - 8 &&
	       data[8] == '{';
}

static int looks_like_zip(const uint8_t *data, uint64_t size)
{
	return size >= 4 && memcmp(data, "PK\x03\x04", 4) == 0;
}

int ulp_format_parse(const uint8_t *data, uint64_t size, ulp_tensor_map *out)
{
	int rc = ULP_ERR_PARSE;

	if (!out || (!data && size > 0))
		return ULP_ERR_ARG;
	memset(out, 0, sizeof *out);
	if (looks_like_safetensors(data, size))
		rc = ulp_safetensors_parse(data, size, out);
	else if (looks_like_zip(data, size))
		rc = ulp_torchzip_parse(data, size, out);
	/* A DCP data file starts with its first archive, which ends before
	 * the file does: the single-archive parser rejects it. */
	if (rc == ULP_ERR_PARSE && looks_like_zip(data, size))
		rc = ulp_distcp_parse(data, size, out);
	if (rc == ULP_OK)
		return ULP_OK;
	/* The strict parsers leave *out empty on failure; freeing again keeps
	 * the promise even if one of them ever does not. */
	ulp_tensor_map_free(out);
	return rc == ULP_ERR_NOMEM ? rc : ULP_OK;
}
