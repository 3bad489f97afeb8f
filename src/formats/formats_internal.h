/*
 * formats_internal.h - helpers shared by the safetensors and torch zip
 * parsers: little-endian readers, checked arithmetic and the final
 * sort-and-validate step every tensor map goes through.
 */
#ifndef ULPFS_FORMATS_INTERNAL_H
#define ULPFS_FORMATS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ulpfs/ulp.h"

/* Readers take a byte pointer the caller has already bounds-checked;
 * assembling bytes keeps them independent of host endianness and
 * alignment. */
static inline uint16_t ulp_fmt_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t ulp_fmt_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t ulp_fmt_le64(const uint8_t *p)
{
	return (uint64_t)ulp_fmt_le32(p) | (uint64_t)ulp_fmt_le32(p + 4) << 32;
}

/* Whether [off, off + len) lies inside [0, size), without overflowing. */
static inline int ulp_fmt_in_range(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Allocate room for cap tensors in an empty map (cap may be 0). */
int ulp_fmt_map_reserve(ulp_tensor_map *map, size_t cap);

/* Fill the next slot of a map reserved with ulp_fmt_map_reserve() (the
 * caller guarantees room).  name is copied (name_len bytes, no NUL needed);
 * dtype_name must fit in ulp_tensor.dtype_name; shape (ndim entries) is
 * copied.  Returns ULP_OK or ULP_ERR_NOMEM. */
int ulp_fmt_map_push(ulp_tensor_map *map, const char *name, size_t name_len,
                     const char *dtype_name, ulp_dtype dtype, uint64_t offset,
                     uint64_t nbytes, uint32_t ndim, const uint64_t *shape);

/* Sort a filled map by offset and check the invariants ulp.h promises:
 * every tensor inside [0, file_size), no two overlapping, names unique.
 * Ties (zero-byte tensors at one offset) are ordered by name so the layout
 * hash does not depend on header order.  Returns ULP_OK, ULP_ERR_PARSE or
 * ULP_ERR_NOMEM; the map is left for the caller to free on failure. */
int ulp_fmt_map_finalize(ulp_tensor_map *map, uint64_t file_size);

#endif /* ULPFS_FORMATS_INTERNAL_H */
