/*
 * tmap.h - blobs kept per version in the catalog: tensor maps (tmap.c) and
 * encoder statistics (both tmap.c).
 */
#ifndef ULP_STORE_TMAP_H
#define ULP_STORE_TMAP_H

#include "store/store_core.h"

/* ------------------------------------------------------------ tensor maps
 * (tmap.c): the map of every version is kept in the catalog so that a
 * later version can be planned against it without decoding it. */

int ulp_tmap_encode(const ulp_tensor_map *map, uint8_t **out, size_t *len);
int ulp_tmap_decode(const uint8_t *p, size_t len, ulp_tensor_map *out);

/* ------------------------------------------------------------ usage
 * (tmap.c): encoder statistics kept per version (versions.estats). */

#define ULP_ESTATS_LEN (8 * (2 * ULP_DT_COUNT + 3))
/* The fields stats reports (bytes in/out per dtype, chunks per path) in
 * a fixed little-endian layout of ULP_ESTATS_LEN bytes. */
void ulp_estats_encode(const ulp_stats *s, uint8_t out[ULP_ESTATS_LEN]);
int ulp_estats_decode(const void *p, size_t len, ulp_stats *out);

#endif /* ULP_STORE_TMAP_H */
